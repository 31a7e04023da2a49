"""Kaldi alignments: ``ali.JOB.gz`` (gzipped binary ark of int32 vectors of transition ids).

Also the views other stages need: pdf ids and phone ids per frame (vectorised lookups through
the TransitionModel) and Kaldi's SplitToPhones.
"""
from __future__ import annotations

import glob
import gzip
import os
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from pynnet.io.atomic import DeterministicGzip, atomic_path
from pynnet.io.errors import PynnetError, fail
from pynnet.io.tables import ascii_int

__all__ = ["read_alignments", "read_alignments_by_file", "write_alignments", "alignment_files", "TransitionTables",
           "tids_to_pdfs", "tids_to_phones", "split_to_phones", "phone_lengths"]


def alignment_files(src: str | os.PathLike | Iterable[str]) -> list[str]:
    """``exp/x`` -> its ali.N.gz in job order; a file or a list of files stays as given."""
    if isinstance(src, (str, os.PathLike)):
        src = os.fspath(src)
        # Kaldi rspecifiers as users write them: "ark:ali.1.gz" (read directly, gzip detected by
        # name) or "ark:gunzip -c exp/x/ali.*.gz|"
        m = re.fullmatch(r"ark(?:,[a-z]+)*:(?:gunzip -c\s+(.+)\|\s*|([^|]+))", src.strip())
        if m:
            names = (m.group(1) or m.group(2)).split()
            files = [f for n in names for f in (sorted(glob.glob(n)) if any(c in n for c in "*?[") else [n])]
            if not files:
                fail("no alignment files match", src)
            return files
        if os.path.isdir(src):
            files = glob.glob(os.path.join(src, "ali.*.gz"))
            files = [f for f in files if re.fullmatch(r"ali\.\d+\.gz", os.path.basename(f))]
            if not files:
                fail("no ali.*.gz in alignment directory", src)
            nj_file = os.path.join(src, "num_jobs")
            if os.path.isfile(nj_file):
                # every job's file: a killed or failed alignment job must not halve the data silently
                with open(nj_file) as f:
                    nj = ascii_int(f.read().strip())
                if nj is None or nj < 1:
                    fail("expected a positive integer", nj_file)
                for n in range(1, nj + 1):
                    if not os.path.isfile(os.path.join(src, f"ali.{n}.gz")):
                        fail(f"no ali.{n}.gz of the {nj} jobs in num_jobs (an alignment job failed or was "
                             "killed? rerun it)", src)
            return sorted(files, key=lambda f: int(os.path.basename(f).split(".")[1]))
        return [src]
    return [os.fspath(f) for f in src]


_REC = np.dtype([("size", "u1"), ("value", "<i4")])


def _parse_int32_ark(data: bytes, path: str, out: dict[str, np.ndarray]) -> bool:
    """Fast path for binary arks of Kaldi int32 vectors (what gmm-align writes). Returns False
    (nothing added) if the data is not entirely in that form, so the caller can fall back."""
    pos, n = 0, len(data)
    found: dict[str, np.ndarray] = {}
    while pos < n:
        sp = data.find(b" ", pos)
        if sp < 0 or data[sp + 1:sp + 4] != b"\0B\x04":
            return False
        # ASCII whitespace only, as Kaldi's 'is >> key': a key may end in U+00A0
        key = data[pos:sp].strip().decode("utf-8", errors="replace")
        count = int.from_bytes(data[sp + 4:sp + 8], "little", signed=True)
        start = sp + 8
        end = start + 5 * count
        if count < 0 or end > n:
            return False
        rec = np.frombuffer(data, dtype=_REC, count=count, offset=start)
        if count and not np.all(rec["size"] == 4):
            return False
        if key in found or key in out:
            fail(f"duplicate utterance '{key}' in alignments", path)
        found[key] = rec["value"].astype(np.int32)
        pos = end
        while pos < n and data[pos:pos + 1] in (b"\n",):
            pos += 1
    out.update(found)
    return True


def _read_one(path: str, out: dict[str, np.ndarray]) -> None:
    import io

    import kaldiio

    if not os.path.isfile(path):
        fail("no such alignment file", path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        fail(f"cannot read alignments: {e}", path)
    if _parse_int32_ark(data, path, out):
        return
    try:  # anything else Kaldi writes (text arks ...) through kaldiio
        for key, vec in kaldiio.load_ark(io.BytesIO(data)):
            vec = np.asarray(vec)
            if vec.ndim != 1 or not np.issubdtype(vec.dtype, np.integer):
                fail(f"utterance '{key}' is not an integer vector (dtype {vec.dtype}, shape {vec.shape})",
                     path)
            if key in out:
                fail(f"duplicate utterance '{key}' in alignments", path)
            out[key] = vec.astype(np.int32, copy=False)
    except PynnetError:
        raise
    except Exception as e:  # kaldiio raises assorted errors on malformed data
        fail(f"cannot read alignments: {e}", path)


def _int32_record(key: str, vec: np.ndarray) -> bytes:
    vec = np.ascontiguousarray(vec, dtype=np.int32).ravel()
    rec = np.empty(vec.size, dtype=_REC)
    rec["size"] = 4
    rec["value"] = vec
    return key.encode() + b" \0B\x04" + np.int32(vec.size).tobytes() + rec.tobytes()


def read_alignments(src: str | os.PathLike | Iterable[str]) -> dict[str, np.ndarray]:
    """Read alignments (transition ids) from an alignment dir (``ali.*.gz``) or file(s)."""
    out: dict[str, np.ndarray] = {}
    for _, part in read_alignments_by_file(src):
        out.update(part)
    return out


def read_alignments_by_file(src: str | os.PathLike | Iterable[str]) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(file, {utt: transition ids}) per alignment file: a caller that keeps something smaller
    (pdf ids) holds one file's transition ids at a time. An utterance in two files is an error."""
    seen: set[str] = set()
    for f in alignment_files(src):
        part: dict[str, np.ndarray] = {}
        _read_one(f, part)
        for key in part:
            if key in seen:
                fail(f"duplicate utterance '{key}' in alignments", f)
        seen.update(part)
        yield f, part


def write_alignments(path: str | os.PathLike, alis: dict[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
                     compress: bool | None = None) -> int:
    """Write a Kaldi int32-vector ark atomically (gzipped if the name ends in .gz). Returns the count."""
    path = os.fspath(path)
    if compress is None:
        compress = path.endswith(".gz")
    items = alis.items() if isinstance(alis, dict) else alis
    n = 0
    with atomic_path(path) as tmp:
        opener = (lambda p: DeterministicGzip(p, compresslevel=1)) if compress else (lambda p: open(p, "wb"))
        with opener(tmp) as f:
            for key, vec in items:
                if not key or " " in key:
                    raise PynnetError(f"bad utterance id '{key}'")
                # Kaldi's BasicVectorHolder<int32> binary form (what gmm-align-compiled writes)
                f.write(_int32_record(key, vec))
                n += 1
    return n


@dataclass
class TransitionTables:
    """Per-transition-id lookup arrays of a TransitionModel (index 0 unused)."""
    pdf: np.ndarray        # transition id -> pdf id
    phone: np.ndarray      # transition id -> phone
    tstate: np.ndarray     # transition id -> transition state
    hmm_state: np.ndarray  # transition id -> HMM state of its transition state
    self_loop: np.ndarray  # bool: transition id is a self-loop
    final: np.ndarray      # bool: transition goes to the phone's final (non-emitting) state
    first_state_emitting: np.ndarray  # per phone: topology state 0 has a pdf

    @classmethod
    def from_model(cls, tm) -> "TransitionTables":
        from pynnet.hmm.model_io import topology_from_khg

        st = tm.__getstate__()
        topo = topology_from_khg(st[1])
        tuples = [x.__getstate__() for x in st[0]]
        state2id, id2state = st[2], np.asarray(st[3], dtype=np.int32)
        n = len(id2state)
        pdf = np.asarray(tm.transition_id_to_pdf_array(), dtype=np.int32)[:n]
        phone = np.zeros(n, np.int32)
        hmm = np.zeros(n, np.int32)
        loop = np.zeros(n, bool)
        final = np.zeros(n, bool)
        for ts, (p, s, _f, _sl) in enumerate(tuples, 1):
            entry = topo.entries[topo.phone2idx[p]]
            for k, tid in enumerate(range(state2id[ts], state2id[ts + 1])):
                dst = entry[s][2][k][0]
                phone[tid], hmm[tid] = p, s
                loop[tid] = dst == s
                final[tid] = dst == len(entry) - 1
        first = np.zeros(len(topo.phone2idx), bool)
        for p, idx in enumerate(topo.phone2idx):
            if idx >= 0:
                first[p] = topo.entries[idx][0][0] != -1
        return cls(pdf, phone, id2state, hmm, loop, final, first)

    def check(self, ali: np.ndarray, what: str = "alignment") -> None:
        if ali.size and (ali.min() < 1 or ali.max() >= self.pdf.size):
            raise PynnetError(f"{what}: transition id out of range 1..{self.pdf.size - 1} "
                              f"(alignment from a different model?)")


def _tables(tm_or_tables) -> TransitionTables:
    return tm_or_tables if isinstance(tm_or_tables, TransitionTables) else TransitionTables.from_model(tm_or_tables)


def tids_to_pdfs(tm, ali: np.ndarray) -> np.ndarray:
    """Transition ids -> pdf ids (as ali-to-pdf)."""
    t = _tables(tm)
    t.check(ali)
    return t.pdf[ali]


def tids_to_phones(tm, ali: np.ndarray) -> np.ndarray:
    """Transition ids -> phone id per frame (as ali-to-phones --per-frame)."""
    t = _tables(tm)
    t.check(ali)
    return t.phone[ali]


def _is_reordered(t: TransitionTables, ali: np.ndarray) -> bool:
    ts = t.tstate[ali]
    loop = t.self_loop[ali]
    change = np.flatnonzero((ts[:-1] != ts[1:]) & (loop[:-1] | loop[1:]))
    if change.size:  # the first state change next to a self-loop tells the order
        return bool(loop[change[0]])
    if ali.size == 0:
        return False
    if t.self_loop[ali[0]]:
        return False
    return bool(t.self_loop[ali[-1]])


def split_to_phones(tm, ali: np.ndarray) -> tuple[bool, list[np.ndarray]]:
    """Kaldi's SplitToPhones: split a transition-id sequence into per-phone pieces.

    Returns (ok, pieces); ok is False when the sequence is not a plausible alignment (a phone
    ends without its final transition or does not start in its first state)."""
    t = _tables(tm)
    ali = np.asarray(ali, dtype=np.int32)
    t.check(ali)
    n = ali.size
    if n == 0:
        return True, []
    reordered = _is_reordered(t, ali)
    fin = t.final[ali]
    ph = t.phone[ali]
    ts = t.tstate[ali]
    loop = t.self_loop[ali]
    # Candidate positions: finals, phone changes, the last frame.
    cand = np.flatnonzero(fin | np.r_[ph[:-1] != ph[1:], True])
    ends: list[int] = []
    ok = True
    i_min = 0
    for i in cand.tolist():
        if i < i_min:
            continue
        if fin[i]:
            if reordered:
                while i + 1 < n and loop[i + 1]:
                    if ts[i] != ts[i + 1]:
                        ok = False
                        break
                    i += 1
            ends.append(i + 1)
            i_min = i + 1
        elif i + 1 == n:
            ok = False
            ends.append(i + 1)
        else:  # phone changed without a final transition
            ok = False
            ends.append(i + 1)
            i_min = i + 1
    pieces = []
    cur = 0
    for e in ends:
        if e <= cur:
            continue
        first = ali[cur]
        if t.first_state_emitting[t.phone[first]] and t.hmm_state[first] != 0:
            ok = False
        pieces.append(ali[cur:e])
        cur = e
    return ok, pieces


def phone_lengths(tm, ali: np.ndarray) -> list[tuple[int, int]]:
    """(phone, number of frames) per phone of an alignment (ali-to-phones --write-lengths)."""
    t = _tables(tm)
    ok, pieces = split_to_phones(t, ali)
    if not ok:
        raise PynnetError("alignment is not a valid phone sequence for this model")
    return [(int(t.phone[p[0]]), int(p.size)) for p in pieces]
