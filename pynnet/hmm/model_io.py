"""Kaldi GMM acoustic model files (``final.mdl``): TransitionModel followed by AmDiagGmm.

kaldi-hmm-gmm has no model read/write, so we parse and emit Kaldi's serialisation ourselves
(binary ``\\0B`` files and text files) and build the kaldi-hmm-gmm objects through their pickle
state.  Layout written by gmm-init-mono / gmm-est::

    <TransitionModel> <Topology> ... </Topology> <Triples>|<Tuples> N ... </Triples>|</Tuples>
    <LogProbs> FV ... </LogProbs> </TransitionModel>
    <DIMENSION> D <NUMPDFS> P ( <DiagGMM> <GCONSTS> <WEIGHTS> <MEANS_INVVARS> <INV_VARS> </DiagGMM> )*P

Binary basic types: int32/float as one size byte (4) + little-endian value; float vectors
``FV`` + int32 size + raw float32 (``DV`` doubles also read); matrices ``FM``/``DM`` + rows + cols;
integer vectors a size byte + raw int32 count + raw int32s.  Text floats use 7 significant
digits as Kaldi's output streams do.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from pynnet.io.atomic import atomic_write
from pynnet.io.errors import fail

__all__ = ["KaldiInput", "KaldiOutput", "read_model", "read_transition_model", "write_model", "read_model_bytes",
           "model_to_bytes", "Topology", "topology_from_khg", "topology_to_khg",
           "transition_model_from_tuples", "transition_model_with_log_probs"]


# --------------------------------------------------------------------------- low-level I/O
class KaldiInput:
    """A cursor over a Kaldi object stream (binary or text); errors name the file and offset/line."""

    def __init__(self, data: bytes, path: str = "<memory>", pos: int | None = None,
                 binary: bool | None = None, what: str = "a Kaldi model file"):
        self.data = data
        self.path = path
        self.what = what
        if binary is None:
            binary = data[:2] == b"\0B"
            pos = 2 if binary else 0
        self.binary = binary
        self.pos = pos or 0

    # -- error reporting
    def _where(self) -> str:
        if self.binary:
            return f"byte offset {self.pos}"
        return "line %d" % (self.data.count(b"\n", 0, self.pos) + 1)

    def error(self, msg: str) -> "NoReturn":  # noqa: F821
        # (what a corrupt file holds may show in msg, line ends too: the error stays one line)
        msg = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in msg)
        fail(f"{msg} (at {self._where()}; not {self.what}, or truncated/corrupt?)", self.path)

    # -- primitives
    def _skip_ws(self) -> None:
        d, n = self.data, len(self.data)
        while self.pos < n and d[self.pos] in b" \t\n\r":
            self.pos += 1

    def eof(self) -> bool:
        self._skip_ws()
        return self.pos >= len(self.data)

    def _word(self) -> bytes:
        self._skip_ws()
        d, n, start = self.data, len(self.data), self.pos
        while self.pos < n and d[self.pos] not in b" \t\n\r":
            self.pos += 1
        if start == self.pos:
            self.error("unexpected end of file")
        return d[start:self.pos]

    def token(self) -> str:
        if self.binary:
            # A token is written as the token then one space in both modes.
            end = self.data.find(b" ", self.pos)
            if end < 0:
                self.error("unexpected end of file while reading a token")
            tok = self.data[self.pos:end]
            self.pos = end + 1
        else:
            tok = self._word()
        try:
            return tok.decode("ascii")
        except UnicodeDecodeError:
            self.error(f"expected a token, got bytes {tok[:20]!r}")

    def peek_token(self) -> str:
        save = self.pos
        try:
            return self.token()
        finally:
            self.pos = save

    def expect(self, want: str) -> None:
        got = self.token()
        if got != want:
            self.error(f"expected token {want}, got {got[:40]}")

    def int32(self) -> int:
        if self.binary:
            b = self.data[self.pos:self.pos + 5]
            if len(b) < 5:
                self.error("unexpected end of file while reading an integer")
            if b[0] != 4:
                self.error(f"expected a 4-byte integer, size byte is {b[0]}")
            self.pos += 5
            return struct.unpack("<i", b[1:])[0]
        w = self._word()
        try:
            return int(w)
        except ValueError:
            self.error(f"expected an integer, got '{w.decode(errors='replace')[:40]}'")

    def float32(self) -> float:
        if self.binary:
            size = self.data[self.pos] if self.pos < len(self.data) else -1
            if size not in (4, 8):
                self.error("expected a float")
            b = self.data[self.pos + 1:self.pos + 1 + size]
            if len(b) < size:
                self.error("unexpected end of file while reading a float")
            self.pos += 1 + size
            # a double is accepted (Kaldi reads either) and kept as float, as Kaldi's BaseFloat
            return struct.unpack("<f", b)[0] if size == 4 else float(np.float32(struct.unpack("<d", b)[0]))
        w = self._word()
        try:
            return float(np.float32(float(w)))
        except ValueError:
            self.error(f"expected a number, got '{w.decode(errors='replace')[:40]}'")

    def _raw_i32(self) -> int:
        b = self.data[self.pos:self.pos + 4]
        if len(b) < 4:
            self.error("unexpected end of file")
        self.pos += 4
        return struct.unpack("<i", b)[0]

    def _raw_array(self, dtype: str, count: int) -> np.ndarray:
        nbytes = np.dtype(dtype).itemsize * count
        if count < 0 or self.pos + nbytes > len(self.data):
            self.error("unexpected end of file inside an array")
        a = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += nbytes
        return a

    def _text_numbers(self) -> list[bytes]:
        """Read ``[ a b c ]`` (brackets may touch the numbers) and return the number words."""
        self._skip_ws()
        if self.data[self.pos:self.pos + 1] != b"[":
            self.error("expected '['")
        self.pos += 1
        end = self.data.find(b"]", self.pos)
        if end < 0:
            self.error("unterminated '[' ... ']'")
        body = self.data[self.pos:end]
        self.pos = end + 1
        return body.split()

    def int_vector(self) -> list[int]:
        if self.binary:
            if self.pos >= len(self.data) or self.data[self.pos] != 4:
                self.error("expected an int32 vector")
            self.pos += 1
            n = self._raw_i32()
            return self._raw_array("<i4", n).tolist()
        words = self._text_numbers()
        try:
            return [int(w) for w in words]
        except ValueError:
            self.error("expected integers inside [ ]")

    def float_vector(self) -> np.ndarray:
        if self.binary:
            tok = self.token()
            if tok not in ("FV", "DV"):
                self.error(f"expected a vector (FV/DV), got {tok[:20]}")
            n = self.int32()
            a = self._raw_array("<f4" if tok == "FV" else "<f8", n)
            return a.astype(np.float32)
        words = self._text_numbers()
        try:
            return np.array([float(w) for w in words], dtype=np.float32)
        except ValueError:
            self.error("expected numbers inside [ ]")

    def float_matrix(self) -> np.ndarray:
        if self.binary:
            tok = self.token()
            if tok not in ("FM", "DM"):
                self.error(f"expected a matrix (FM/DM), got {tok[:20]}")
            rows, cols = self.int32(), self.int32()
            a = self._raw_array("<f4" if tok == "FM" else "<f8", rows * cols)
            return a.reshape(rows, cols).astype(np.float32)
        self._skip_ws()
        start_line = self._where()
        open_pos = self.pos
        self._text_numbers()  # moves past the closing bracket
        # Rows are the lines between the brackets.
        body = self.data[open_pos + 1:self.pos - 1]
        rows = [ln.split() for ln in body.split(b"\n") if ln.strip()]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        ncol = len(rows[0])
        if any(len(r) != ncol for r in rows):
            self.error(f"matrix starting at {start_line} has rows of different lengths")
        try:
            return np.array([[float(w) for w in r] for r in rows], dtype=np.float32)
        except ValueError:
            self.error("expected numbers inside the matrix")


def _fmt(v: float) -> str:
    """A float as C++ ``ostream << float`` with precision 7 (Kaldi's text streams)."""
    v = float(v)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return "%.7g" % v


class KaldiOutput:
    """Accumulate a Kaldi object stream; ``getvalue()`` gives the bytes (with ``\\0B`` if binary)."""

    def __init__(self, binary: bool):
        self.binary = binary
        self.parts: list[bytes] = [b"\0B"] if binary else []

    def raw(self, s: str | bytes) -> None:
        self.parts.append(s.encode() if isinstance(s, str) else s)

    def nl(self) -> None:
        if not self.binary:
            self.parts.append(b"\n")

    def token(self, tok: str) -> None:
        self.parts.append(tok.encode() + b" ")

    def int32(self, v: int) -> None:
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<i", int(v)))
        else:
            self.parts.append(b"%d " % int(v))

    def float32(self, v: float) -> None:
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<f", float(v)))
        else:
            self.parts.append(_fmt(v).encode() + b" ")

    def int_vector(self, v) -> None:
        v = np.asarray(v, dtype="<i4")
        if self.binary:
            self.parts.append(b"\x04" + struct.pack("<i", v.size) + v.tobytes())
        else:
            self.parts.append(b"[ " + b"".join(b"%d " % x for x in v.tolist()) + b"]\n")

    def float_vector(self, v) -> None:
        v = np.asarray(v, dtype="<f4")
        if self.binary:
            self.token("FV")
            self.int32(v.size)
            self.parts.append(v.tobytes())
        else:
            self.parts.append(b" [ " + "".join(_fmt(x) + " " for x in v.tolist()).encode() + b"]\n")

    def float_matrix(self, m) -> None:
        m = np.asarray(m, dtype="<f4")
        if self.binary:
            self.token("FM")
            self.int32(m.shape[0])
            self.int32(m.shape[1])
            self.parts.append(m.tobytes())
        elif m.shape[1] == 0 or m.shape[0] == 0:
            self.parts.append(b" [ ]\n")
        else:
            rows = ["\n  " + "".join(_fmt(x) + " " for x in r) for r in m.tolist()]
            self.parts.append((" [" + "".join(rows) + "]\n").encode())

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


# --------------------------------------------------------------------------- topology
@dataclass
class Topology:
    """Kaldi HmmTopology as plain data: ``entries[i]`` is a list of states
    ``(forward_pdf_class, self_loop_pdf_class, [(dst, prob), ...])``."""
    phones: list[int]
    phone2idx: list[int]
    entries: list[list[tuple[int, int, list[tuple[int, float]]]]] = field(default_factory=list)

    @property
    def is_hmm(self) -> bool:
        return all(s[0] == s[1] for e in self.entries for s in e)


def topology_from_khg(topo) -> Topology:
    phones, phone2idx, entries = topo.__getstate__()
    ents = []
    for e in entries:
        states = []
        for s in e:
            f, sl, tr = s.__getstate__()
            states.append((int(f), int(sl), [(int(d), float(p)) for d, p in tr]))
        ents.append(states)
    return Topology(list(phones), list(phone2idx), ents)


def topology_to_khg(t: Topology):
    import kaldi_hmm_gmm as khg
    import _kaldi_hmm_gmm as _k

    entries = []
    for e in t.entries:
        states = []
        for f, sl, tr in e:
            s = _k.HmmState.__new__(_k.HmmState)
            s.__setstate__((f, sl, list(tr)))
            states.append(s)
        entries.append(states)
    topo = khg.HmmTopology.__new__(khg.HmmTopology)
    topo.__setstate__((list(t.phones), list(t.phone2idx), entries))
    return topo


def _read_topology(r: KaldiInput) -> Topology:
    r.expect("<Topology>")
    if r.binary:
        phones = r.int_vector()
        phone2idx = r.int_vector()
        n = r.int32()
        is_hmm = True
        if n == -1:
            is_hmm = False
            n = r.int32()
        entries = []
        for _ in range(n):
            ns = r.int32()
            states = []
            for _ in range(ns):
                f = r.int32()
                sl = f if is_hmm else r.int32()
                nt = r.int32()
                tr = [(r.int32(), r.float32()) for _ in range(nt)]
                states.append((f, sl, tr))
            entries.append(states)
        r.expect("</Topology>")
        return Topology(phones, phone2idx, entries)
    phones: list[int] = []
    phone2idx: list[int] = []
    entries = []
    while True:
        tok = r.token()
        if tok == "</Topology>":
            break
        if tok != "<TopologyEntry>":
            r.error(f"expected <TopologyEntry> or </Topology>, got {tok[:40]}")
        r.expect("<ForPhones>")
        these: list[int] = []
        while True:
            w = r.token()
            if w == "</ForPhones>":
                break
            try:
                these.append(int(w))
            except ValueError:
                r.error(f"expected a phone id, got {w[:40]}")
        states = []
        tok = r.token()
        while tok != "</TopologyEntry>":
            if tok != "<State>":
                r.error(f"expected <State> or </TopologyEntry>, got {tok[:40]}")
            idx = r.int32()
            if idx != len(states):
                r.error(f"states must be numbered in order from 0: expected {len(states)}, got {idx}")
            tok = r.token()
            f = sl = -1
            if tok == "<PdfClass>":
                f = sl = r.int32()
                tok = r.token()
            elif tok == "<ForwardPdfClass>":
                f = r.int32()
                r.expect("<SelfLoopPdfClass>")
                sl = r.int32()
                tok = r.token()
            tr = []
            while tok == "<Transition>":
                tr.append((r.int32(), r.float32()))
                tok = r.token()
            if tok != "</State>":
                r.error(f"expected </State>, got {tok[:40]}")
            states.append((f, sl, tr))
            tok = r.token()
        my_index = len(entries)
        entries.append(states)
        for p in these:
            if p <= 0:
                r.error(f"phone ids in <ForPhones> must be positive, got {p}")
            if len(phone2idx) <= p:
                phone2idx.extend([-1] * (p + 1 - len(phone2idx)))
            if phone2idx[p] != -1:
                r.error(f"phone {p} appears in more than one <TopologyEntry>")
            phone2idx[p] = my_index
            phones.append(p)
    phones.sort()
    return Topology(phones, phone2idx, entries)


def _write_topology(w: KaldiOutput, t: Topology) -> None:
    is_hmm = t.is_hmm
    w.token("<Topology>")
    if not w.binary:
        w.raw("\n")
        for i, entry in enumerate(t.entries):
            w.token("<TopologyEntry>")
            w.raw("\n")
            w.token("<ForPhones>")
            w.raw("\n")
            w.raw("".join(f"{p} " for p, idx in enumerate(t.phone2idx) if idx == i))
            w.raw("\n")
            w.token("</ForPhones>")
            w.raw("\n")
            for j, (f, sl, tr) in enumerate(entry):
                w.token("<State>")
                w.int32(j)
                if f != -1:
                    if is_hmm:
                        w.token("<PdfClass>")
                        w.int32(f)
                    else:
                        w.token("<ForwardPdfClass>")
                        w.int32(f)
                        w.token("<SelfLoopPdfClass>")
                        w.int32(sl)
                for d, p in tr:
                    w.token("<Transition>")
                    w.int32(d)
                    w.float32(p)
                w.token("</State>")
                w.raw("\n")
            w.token("</TopologyEntry>")
            w.raw("\n")
    else:
        w.int_vector(t.phones)
        w.int_vector(t.phone2idx)
        if not is_hmm:
            w.int32(-1)
        w.int32(len(t.entries))
        for entry in t.entries:
            w.int32(len(entry))
            for f, sl, tr in entry:
                w.int32(f)
                if not is_hmm:
                    w.int32(sl)
                w.int32(len(tr))
                for d, p in tr:
                    w.int32(d)
                    w.float32(p)
    w.token("</Topology>")
    w.nl()


# --------------------------------------------------------------------------- transition model
def _derived(topo: Topology, tuples: list[tuple[int, int, int, int]]):
    """Kaldi's TransitionModel::ComputeDerived: state2id, id2state, id2pdf_id, num_pdfs."""
    state2id = [0] * (len(tuples) + 2)
    cur = 1
    num_pdfs = 0
    for ts in range(1, len(tuples) + 2):
        state2id[ts] = cur
        if ts <= len(tuples):
            phone, hmm_state, fpdf, slpdf = tuples[ts - 1]
            num_pdfs = max(num_pdfs, 1 + fpdf, 1 + slpdf)
            cur += len(topo.entries[topo.phone2idx[phone]][hmm_state][2])
    id2state = [0] * cur
    id2pdf = [0] * cur
    for ts in range(1, len(tuples) + 1):
        phone, hmm_state, fpdf, slpdf = tuples[ts - 1]
        trans = topo.entries[topo.phone2idx[phone]][hmm_state][2]
        for k, tid in enumerate(range(state2id[ts], state2id[ts + 1])):
            id2state[tid] = ts
            id2pdf[tid] = slpdf if trans[k][0] == hmm_state else fpdf
    return state2id, id2state, id2pdf, num_pdfs


def _non_self_loop_log_probs(topo: Topology, tuples, state2id, log_probs: np.ndarray) -> list[float]:
    """Kaldi's ComputeDerivedOfProbs: log(1 - self-loop prob) per transition state (index 0 unused)."""
    out = [0.0] * (len(tuples) + 1)
    for ts in range(1, len(tuples) + 1):
        phone, hmm_state = tuples[ts - 1][:2]
        trans = topo.entries[topo.phone2idx[phone]][hmm_state][2]
        for k, (dst, _) in enumerate(trans):
            if dst == hmm_state:
                p_self = np.exp(np.float32(log_probs[state2id[ts] + k]), dtype=np.float32)
                p_non = np.float32(1.0) - p_self
                if p_non <= 0:
                    p_non = np.float32(1e-10)
                out[ts] = float(np.log(p_non, dtype=np.float32))
    return out


def transition_model_from_tuples(topo: Topology, tuples: list[tuple[int, int, int, int]],
                                 log_probs, path: str = "<model>"):
    """Build a kaldi-hmm-gmm TransitionModel from its topology, tuples and log-probs."""
    import kaldi_hmm_gmm as khg
    import _kaldi_hmm_gmm as _k

    for i, (phone, hmm_state, f, sl) in enumerate(tuples):
        if phone >= len(topo.phone2idx) or phone <= 0 or topo.phone2idx[phone] < 0:
            fail(f"transition state {i + 1}: phone {phone} is not in the topology", path)
        if not 0 <= hmm_state < len(topo.entries[topo.phone2idx[phone]]):
            fail(f"transition state {i + 1}: HMM state {hmm_state} out of range for phone {phone}", path)
    state2id, id2state, id2pdf, num_pdfs = _derived(topo, tuples)
    log_probs = np.asarray(log_probs, dtype=np.float32)
    if log_probs.size != len(id2state):
        fail(f"<LogProbs> has {log_probs.size} entries, the transition model needs {len(id2state)}", path)
    nsl = _non_self_loop_log_probs(topo, tuples, state2id, log_probs)
    tm = khg.TransitionModel.__new__(khg.TransitionModel)
    tm.__setstate__(([_k.TransitionModelTuple(*t) for t in tuples], topology_to_khg(topo),
                     state2id, id2state, id2pdf, num_pdfs, log_probs.tolist(), nsl))
    return tm


def transition_model_with_log_probs(tm, log_probs):
    """A copy of ``tm`` with new transition log-probs (index 0 unused), derived values recomputed."""
    st = tm.__getstate__()
    topo = topology_from_khg(st[1])
    tuples = [tuple(x.__getstate__()) for x in st[0]]
    log_probs = np.asarray(log_probs, dtype=np.float32)
    nsl = _non_self_loop_log_probs(topo, tuples, st[2], log_probs)
    new = type(tm).__new__(type(tm))
    new.__setstate__((st[0], st[1], st[2], st[3], st[4], st[5], log_probs.tolist(), nsl))
    return new


def _read_transition_model(r: KaldiInput):
    r.expect("<TransitionModel>")
    topo = _read_topology(r)
    tok = r.token()
    if tok not in ("<Triples>", "<Tuples>"):
        r.error(f"expected <Triples> or <Tuples>, got {tok[:40]}")
    n = r.int32()
    if n < 0:
        r.error("negative number of transition states")
    tuples = []
    for _ in range(n):
        p, s, f = r.int32(), r.int32(), r.int32()
        sl = r.int32() if tok == "<Tuples>" else f
        tuples.append((p, s, f, sl))
    end = r.token()
    if end not in ("</Triples>", "</Tuples>"):
        r.error(f"expected </Triples> or </Tuples>, got {end[:40]}")
    r.expect("<LogProbs>")
    log_probs = r.float_vector()
    r.expect("</LogProbs>")
    r.expect("</TransitionModel>")
    return transition_model_from_tuples(topo, tuples, log_probs, r.path)


def _write_transition_model(w: KaldiOutput, tm) -> None:
    st = tm.__getstate__()
    topo = topology_from_khg(st[1])
    tuples = [tuple(x.__getstate__()) for x in st[0]]
    is_hmm = topo.is_hmm
    w.token("<TransitionModel>")
    w.nl()
    _write_topology(w, topo)
    w.token("<Triples>" if is_hmm else "<Tuples>")
    w.int32(len(tuples))
    w.nl()
    for p, s, f, sl in tuples:
        w.int32(p)
        w.int32(s)
        w.int32(f)
        if not is_hmm:
            w.int32(sl)
        w.nl()
    w.token("</Triples>" if is_hmm else "</Tuples>")
    w.nl()
    w.token("<LogProbs>")
    w.nl()
    w.float_vector(st[6])
    w.token("</LogProbs>")
    w.nl()
    w.token("</TransitionModel>")
    w.nl()


# --------------------------------------------------------------------------- GMMs
def _read_am(r: KaldiInput):
    import kaldi_hmm_gmm as khg

    r.expect("<DIMENSION>")
    dim = r.int32()
    r.expect("<NUMPDFS>")
    num_pdfs = r.int32()
    if dim <= 0 or num_pdfs < 0:
        r.error(f"bad <DIMENSION> {dim} or <NUMPDFS> {num_pdfs}")
    state = []
    for pdf in range(num_pdfs):
        tok = r.token()
        if tok not in ("<DiagGMM>", "<DiagGMMBegin>"):
            r.error(f"pdf {pdf}: expected <DiagGMM>, got {tok[:40]}")
        tok = r.token()
        if tok == "<GCONSTS>":  # optional; recomputed from the parameters as Kaldi does
            r.float_vector()
            tok = r.token()
        if tok != "<WEIGHTS>":
            r.error(f"pdf {pdf}: expected <WEIGHTS>, got {tok[:40]}")
        weights = r.float_vector()
        r.expect("<MEANS_INVVARS>")
        mi = r.float_matrix()
        r.expect("<INV_VARS>")
        iv = r.float_matrix()
        tok = r.token()
        if tok not in ("</DiagGMM>", "<DiagGMMEnd>"):
            r.error(f"pdf {pdf}: expected </DiagGMM>, got {tok[:40]}")
        if mi.shape != iv.shape or mi.shape != (weights.size, dim):
            r.error(f"pdf {pdf}: {weights.size} weights, means_invvars {mi.shape}, inv_vars {iv.shape}, "
                    f"but dimension {dim}")
        if np.any(iv <= 0):
            r.error(f"pdf {pdf}: non-positive inverse variance")
        state += [weights, iv, mi]
    am = khg.AmDiagGmm.__new__(khg.AmDiagGmm)
    am.__setstate__(tuple(state))
    return am


def _write_am(w: KaldiOutput, am) -> None:
    st = am.__getstate__()
    num_pdfs = len(st) // 3
    w.token("<DIMENSION>")
    w.int32(am.dim if num_pdfs else 0)
    w.token("<NUMPDFS>")
    w.int32(num_pdfs)
    for i in range(num_pdfs):
        gmm = am.get_pdf(i)
        w.token("<DiagGMM>")
        w.nl()
        w.token("<GCONSTS>")
        w.float_vector(np.asarray(gmm.gconsts))
        w.token("<WEIGHTS>")
        w.float_vector(st[3 * i])
        w.token("<MEANS_INVVARS>")
        w.float_matrix(st[3 * i + 2])
        w.token("<INV_VARS>")
        w.float_matrix(st[3 * i + 1])
        w.token("</DiagGMM>")
        w.nl()


# --------------------------------------------------------------------------- public API
def read_model_bytes(data: bytes, path: str = "<memory>"):
    r = KaldiInput(data, path)
    tm = _read_transition_model(r)
    am = _read_am(r)
    if am.num_pdfs != tm.num_pdfs:
        fail(f"transition model has {tm.num_pdfs} pdfs but the GMM has {am.num_pdfs}", path)
    return tm, am


def _model_file_bytes(path: str | os.PathLike) -> tuple[bytes, str]:
    path = os.fspath(path)
    if path == "-":
        import sys
        return sys.stdin.buffer.read(), "<stdin>"
    if not os.path.isfile(path):
        fail("no such model file", path)
    with open(path, "rb") as f:
        return f.read(), path


def read_model(path: str | os.PathLike):
    """Read a Kaldi GMM model file (binary or text) -> (TransitionModel, AmDiagGmm)."""
    return read_model_bytes(*_model_file_bytes(path))


def read_transition_model(path: str | os.PathLike):
    """The TransitionModel at the start of a Kaldi model file, whatever follows it (a GMM, or the
    network of an nnet2/nnet3/chain final.mdl): all that Kaldi's ali-to-pdf, convert-ali,
    compile-train-graphs, mkgraph.sh and latgen-faster-mapped read of it."""
    data, path = _model_file_bytes(path)
    return _read_transition_model(KaldiInput(data, path))


def read_vector_file(path: str | os.PathLike) -> np.ndarray:
    """A file holding one Kaldi vector, text ``[ 1 2 3 ]`` or binary (e.g. analyze-counts'
    ali_train_pdf.counts, which nnet1 decoding reads with --class-frame-counts)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        fail("no such file", path)
    with open(path, "rb") as f:
        r = KaldiInput(f.read(), path, what="a Kaldi vector file")
    v = r.float_vector()
    if not r.eof():
        r.error("more than one vector")
    return v


def model_to_bytes(trans_model, am_gmm, binary: bool = True) -> bytes:
    w = KaldiOutput(binary)
    _write_transition_model(w, trans_model)
    _write_am(w, am_gmm)
    return w.getvalue()


def write_model(path: str | os.PathLike, trans_model, am_gmm, binary: bool = True) -> None:
    """Write a Kaldi GMM model file atomically (``-`` writes to stdout)."""
    data = model_to_bytes(trans_model, am_gmm, binary)
    path = os.fspath(path)
    if path == "-":
        import sys
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    with atomic_write(path, "wb") as f:
        f.write(data)
