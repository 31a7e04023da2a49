"""State-level lattices (Kaldi's ``Lattice`` type) held as numpy arrays; reading Kaldi lattice
archives (text or binary, Lattice or CompactLattice) and writing the text form; best paths over a
grid of LM weights x word-insertion penalties.

A lattice arc carries (ilabel = transition-id, olabel = word id, graph cost, acoustic cost); costs
are negated log-probabilities and the acoustic cost is *unscaled* (as latgen-faster writes it).
Scoring a grid point (LMWT, WIP) minimises, as ``lattice-scale --inv-acoustic-scale=LMWT |
lattice-add-penalty --word-ins-penalty=WIP | lattice-best-path`` does::

    graph + acoustic / LMWT + WIP * (number of words)

All grid points are solved in one pass over the lattice (a Viterbi pass in topological order,
vectorised over the grid), so scoring 11 x 3 points costs about as much as one.
"""
from __future__ import annotations

import gzip
import os
import re
import struct
import subprocess
import warnings
from dataclasses import dataclass
from typing import IO, Iterator, Sequence

import numpy as np

from pynnet.io.errors import fail
from pynnet.io.tables import FIELD_SEPS, ascii_float, ascii_int, split_fields, split_key


@dataclass
class Lattice:
    """A state-level lattice.  Arrays are parallel over arcs; finals are parallel over final states."""
    num_states: int
    start: int
    src: np.ndarray        # int32 [E]
    dst: np.ndarray        # int32 [E]
    ilabel: np.ndarray     # int32 [E] transition-ids (0 = epsilon)
    olabel: np.ndarray     # int32 [E] word ids (0 = epsilon)
    graph: np.ndarray      # float64 [E] graph (LM + transition + pronunciation) cost
    acoustic: np.ndarray   # float64 [E] acoustic cost (-log-likelihood, unscaled)
    final_state: np.ndarray    # int32 [F]
    final_graph: np.ndarray    # float64 [F]
    final_acoustic: np.ndarray  # float64 [F]

    @property
    def num_arcs(self) -> int:
        return int(self.src.size)

    def scaled(self, acoustic_scale: float = 1.0, graph_scale: float = 1.0) -> "Lattice":
        """A copy with costs multiplied (acoustic_scale=1/acwt undoes decoding's scaling)."""
        return Lattice(self.num_states, self.start, self.src, self.dst, self.ilabel, self.olabel,
                       self.graph * graph_scale, self.acoustic * acoustic_scale, self.final_state,
                       self.final_graph * graph_scale, self.final_acoustic * acoustic_scale)

    # ---------------------------------------------------------------- Kaldi text format
    def to_kaldi_text(self, key: str) -> str:
        """The text-ark entry Kaldi's lattice writers produce: ``key`` newline, one
        ``src dst ilabel olabel graph,acoustic`` line per arc (tab-separated, states in
        order), ``state graph,acoustic`` per final state, then an empty line."""
        out = [key + " \n"]
        order = np.argsort(self.src, kind="stable")
        finals = dict(zip(self.final_state.tolist(),
                          zip(self.final_graph.tolist(), self.final_acoustic.tolist())))
        # Kaldi prints the start state's arcs first (FstPrinter starts at the start state).
        states = [self.start] + [s for s in range(self.num_states) if s != self.start]
        by_src: dict[int, list[int]] = {}
        for a in order.tolist():
            by_src.setdefault(int(self.src[a]), []).append(a)
        for s in states:
            for a in by_src.get(s, ()):
                out.append(f"{s}\t{self.dst[a]}\t{self.ilabel[a]}\t{self.olabel[a]}\t"
                           f"{_g(self.graph[a])},{_g(self.acoustic[a])}\n")
            if s in finals:
                g, ac = finals[s]
                out.append(f"{s}\t{_g(g)},{_g(ac)}\n")
        out.append("\n")
        return "".join(out)


def empty_lattice() -> Lattice:
    """The lattice of an empty FST (no states; Kaldi's text form is the key and an empty line):
    one state, not final, no arcs, so no path (best_paths finds none)."""
    return Lattice(1, 0, *(np.zeros(0, np.int32),) * 4, *(np.zeros(0),) * 2,
                   np.zeros(0, np.int32), np.zeros(0), np.zeros(0))


def _g(x: float) -> str:
    # C++ ostream default formatting (6 significant digits), which FstPrinter uses.
    s = "%.6g" % x
    return "0" if s == "-0" else s


_FINAL_LINE = re.compile(r"(?m)^[ \t]*(\d+)(?:[ \t]+([^ \t\n]+))?[ \t]*$\n?", re.ASCII)


def from_fst_text(text: str, start: int | None = None, where: str = "lattice",
                  first_line: int = 1) -> Lattice:
    """Parse AT&T lattice text (see :func:`_parse_slow` for the accepted forms).  Lattice text
    is parsed in C (regex + numpy); anything unusual (CompactLattice arcs, errors) goes through
    the line-by-line parser, which reports bad lines."""
    try:
        lat = _parse_fast(text, start)
        if lat is not None:
            return lat
    except ValueError:
        pass
    return _parse_slow(text, start, where, first_line)


def _parse_fast(text: str, start: int | None) -> Lattice | None:
    """Lattice text whose arc lines are all ``src dst ilabel olabel graph,acoustic`` (and whose
    final weights carry no transition-ids), parsed with numpy; None for anything else."""
    finals = _FINAL_LINE.findall(text)
    if any(f[1].count(",") > 1 for f in finals):   # a CompactLattice final: g,a,tid_tid...
        return None
    body = _FINAL_LINE.sub("", text)
    if "_" in body:
        return None
    stripped = body.strip()
    n_lines = stripped.count("\n") + 1 if stripped else 0
    if n_lines and not _lattice_arc_lines(stripped, n_lines):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (garbage makes fromstring stop early: caught by the size check)
        vals = np.fromstring(body.replace(",", " "), dtype=np.float64, sep=" ") if n_lines else np.zeros(0)
    if vals.size != 6 * n_lines:
        return None
    arcs = vals.reshape(-1, 6)
    ints = arcs[:, :4]
    if not np.all(ints == np.floor(ints)) or (ints.size and (ints.min() < 0 or ints.max() >= _MAX_COUNT)):
        return None
    fs = np.array([_state(f[0]) for f in finals], np.int32)
    fw = np.array([_weight(f[1]) if f[1] else (0.0, 0.0) for f in finals], np.float64).reshape(-1, 2)
    head = split_key(text.lstrip(FIELD_SEPS + "\r\n"))[0]
    if not head:
        return None
    first = _state(head)
    ns = 1 + int(max([first] + ([int(ints[:, :2].max())] if ints.size else []) + fs.tolist()))
    if _too_many_states(ns, n_lines + len(finals)):
        return None
    ii = ints.astype(np.int64)
    return Lattice(ns, first if start is None else start, ii[:, 0].astype(np.int32), ii[:, 1].astype(np.int32),
                   ii[:, 2].astype(np.int32), ii[:, 3].astype(np.int32), arcs[:, 4].copy(), arcs[:, 5].copy(),
                   fs, fw[:, 0].copy(), fw[:, 1].copy())


_NOT_LAYOUT = bytes(c for c in range(256) if c not in b"\t\n ,")   # (deleted: what is left is the layout)
_TAB_ARC, _SPACE_ARC = b"\t\t\t\t,\n", b"    ,\n"


def _lattice_arc_lines(arcs: str, n_lines: int) -> bool:
    """Whether each of the ``n_lines`` lines of ``arcs`` (no leading or trailing whitespace) has
    five fields (split at spaces and tabs) and one comma, in its last field: the layout of a
    Lattice arc ``s d i o g,a``.  (A CompactLattice arc ``s d w g,a,tids`` with one transition-id
    has six numbers too: counting the numbers alone took it for a Lattice arc.)  Kaldi's and
    kaldifst's layout, single tabs, is checked in one pass over the bytes; other spacing with
    numpy over the separator positions."""
    raw = arcs.encode()
    layout = raw.translate(None, _NOT_LAYOUT) + b"\n"
    if layout == _TAB_ARC * n_lines or layout == _SPACE_ARC * n_lines:
        return True
    b = np.frombuffer(raw, np.uint8)
    sep = (b == 32) | (b == 9) | (b == 10)
    field_start = np.flatnonzero(~sep & np.concatenate(([True], sep[:-1])))
    line_end = np.append(np.flatnonzero(b == 10), b.size)
    if line_end.size != n_lines:
        return False
    fields = np.bincount(np.searchsorted(line_end, field_start), minlength=n_lines)
    commas = np.flatnonzero(b == 44)
    if not (np.all(fields == 5) and commas.size == n_lines):
        return False
    # one comma per line, after the line's fifth field starts
    return bool(np.all(np.searchsorted(line_end, commas) == np.arange(n_lines))
                and np.all(commas > field_start[4::5]))


def _parse_slow(text: str, start: int | None = None, where: str = "lattice",
                first_line: int = 1) -> Lattice:
    """Parse AT&T text of a lattice (kaldifst ``Lattice.to_str()`` or a Kaldi text entry).
    Arc lines: ``src dst ilabel olabel g,a``; final lines: ``state [g,a]``.  Also accepts
    CompactLattice lines ``src dst word g,a,tid_tid_...`` and ``state g,a,tid_...``, expanded
    into chains of transition-id arcs as Kaldi's ConvertLattice does.  The first arc's (or
    final's) state is the start state, as in FstPrinter output, unless ``start`` is given.
    No lines (an empty FST): :func:`empty_lattice`."""
    src, dst, il, ol, gc, ac = [], [], [], [], [], []
    fs, fg, fa = [], [], []
    arc_tids: dict[int, list[int]] = {}     # CompactLattice strings, by arc / final index
    final_tids: dict[int, list[int]] = {}
    first = None
    top, top_line, num_lines = -1, 0, 0
    # Kaldi's lattice reader: lines end at "\n" only, fields are split at spaces and tabs
    for n, line in enumerate(text.split("\n"), 1):
        f = split_fields(line.rstrip("\r"))
        if not f:
            continue
        num_lines += 1
        try:
            if len(f) >= 4:
                s, d = _state(f[0]), _state(f[1])
                if len(f) == 5:
                    i, o = _int(f[2]), _int(f[3])
                    w = f[4]
                elif len(f) == 4 and "," in f[3]:   # CompactLattice arc
                    i = o = _int(f[2])
                    w = f[3]
                    arc_tids[len(src)] = _tids(w)
                else:                               # Lattice arc with weight One
                    i, o, w = _int(f[2]), _int(f[3]), "0,0"
                g, a = _weight(w)
                src.append(s); dst.append(d); il.append(i); ol.append(o); gc.append(g); ac.append(a)
            elif len(f) in (1, 2):
                s = d = _state(f[0])
                g, a = _weight(f[1]) if len(f) == 2 else (0.0, 0.0)
                if len(f) == 2 and f[1].count(",") == 2:
                    final_tids[len(fs)] = _tids(f[1])
                fs.append(s); fg.append(g); fa.append(a)
            else:
                raise ValueError
        except ValueError:
            fail(f"bad lattice line '{' '.join(f)}'", where, first_line + n - 1)
        if first is None:
            first = s
        if max(s, d) > top:
            top, top_line = max(s, d), first_line + n - 1
    if first is None:       # an empty FST (Kaldi writes "key \n\n"): no path, as in binary
        return empty_lattice()
    ns = 1 + top
    if _too_many_states(ns, num_lines):
        fail(f"state {top} in a lattice of {num_lines} lines: state ids must be about as many as "
             "the lines (a corrupt lattice?)", where, top_line)
    if arc_tids or final_tids:
        for k in range(len(src)):
            arc_tids.setdefault(k, [])      # a CompactLattice's 5-field lines are not arcs
        return _from_compact(ns, first if start is None else start, src, dst, ol, gc, ac,
                             [arc_tids[k] for k in range(len(src))], fs, fg, fa,
                             [final_tids.get(k, []) for k in range(len(fs))])
    return Lattice(ns, first if start is None else start,
                   np.asarray(src, np.int32), np.asarray(dst, np.int32), np.asarray(il, np.int32),
                   np.asarray(ol, np.int32), np.asarray(gc, np.float64), np.asarray(ac, np.float64),
                   np.asarray(fs, np.int32), np.asarray(fg, np.float64), np.asarray(fa, np.float64))


def _tids(w: str) -> list[int]:
    """The transition-ids of a CompactLattice weight ``g,a,tid_tid_...`` (may be empty)."""
    parts = w.split(",")
    if len(parts) != 3:
        raise ValueError(w)
    return [_int(t) for t in parts[2].split("_")] if parts[2] else []


def _from_compact(num_states: int, start: int, src: Sequence[int], dst: Sequence[int],
                  word: Sequence[int], graph: Sequence[float], acoustic: Sequence[float],
                  tids: Sequence[Sequence[int]], final_state: Sequence[int],
                  final_graph: Sequence[float], final_acoustic: Sequence[float],
                  final_tids: Sequence[Sequence[int]]) -> Lattice:
    """A CompactLattice (word arcs whose weights carry transition-id strings) as a state-level
    Lattice, as Kaldi's ConvertLattice makes it: an arc with n transition-ids becomes a chain of
    n arcs through new states, the first carrying the word and the weight; a final weight with a
    string becomes a chain ending in a new final state."""
    S, E = num_states, len(src)
    n = np.array([len(t) for t in tids], np.int64)
    m = np.maximum(n, 1)                            # arcs per compact arc
    flat = np.fromiter((x for t in tids for x in t), np.int64, count=int(n.sum()))
    total = int(m.sum())
    first = np.cumsum(m) - m
    pos = np.arange(total) - np.repeat(first, m)    # index inside each chain
    owner = np.repeat(np.arange(E), m)
    is_first, is_last = pos == 0, pos == np.repeat(m, m) - 1
    # arc e's chain passes through new states base[e] + 1 .. base[e] + m[e] - 1
    base = S - 1 + np.repeat(first - np.arange(E), m)
    a_src = np.where(is_first, np.asarray(src, np.int64)[owner], base + pos)
    a_dst = np.where(is_last, np.asarray(dst, np.int64)[owner], base + pos + 1)
    il = np.zeros(total, np.int64)
    has = np.repeat(n > 0, m)
    il[has] = flat
    ol = np.where(is_first, np.asarray(word, np.int64)[owner], 0)
    g = np.where(is_first, np.asarray(graph, np.float64)[owner], 0.0)
    a = np.where(is_first, np.asarray(acoustic, np.float64)[owner], 0.0)
    next_state = S + total - E
    lists = [a_src.tolist(), a_dst.tolist(), il.tolist(), ol.tolist(), g.tolist(), a.tolist()]
    fs, fg, fa = [], [], []
    for s, wg, wa, t in zip(final_state, final_graph, final_acoustic, final_tids):
        if not t:
            fs.append(s); fg.append(wg); fa.append(wa)
            continue
        cur = s
        for k, tid in enumerate(t):
            for col, v in zip(lists, (cur, next_state, tid, 0, wg if k == 0 else 0.0,
                                      wa if k == 0 else 0.0)):
                col.append(v)
            cur, next_state = next_state, next_state + 1
        fs.append(cur); fg.append(0.0); fa.append(0.0)
    return Lattice(next_state, start, np.asarray(lists[0], np.int32), np.asarray(lists[1], np.int32),
                   np.asarray(lists[2], np.int32), np.asarray(lists[3], np.int32),
                   np.asarray(lists[4], np.float64), np.asarray(lists[5], np.float64),
                   np.asarray(fs, np.int32), np.asarray(fg, np.float64), np.asarray(fa, np.float64))


def _int(x: str) -> int:
    """A label or state id: a 32-bit integer, as Kaldi's."""
    i = ascii_int(x)
    if i is None or not -_MAX_COUNT <= i < _MAX_COUNT:
        raise ValueError(x)
    return i


def _state(x: str) -> int:
    i = _int(x)
    if i < 0:
        raise ValueError(x)
    return i


def _too_many_states(num_states: int, num_lines: int) -> bool:
    """Whether state ids run far past what the lines of a lattice can use: every state is
    created up to the largest id (as OpenFst's text reader does), so one stray id like
    2000000000 would take gigabytes; a lattice's states are about as many as its lines."""
    return num_states > 2 * num_lines + 1024


def _weight(w: str) -> tuple[float, float]:
    parts = w.split(",")
    g, a = (ascii_float(parts[0]), ascii_float(parts[1])) if len(parts) >= 2 else (None, None)
    if g is None or a is None:
        raise ValueError(w)
    return g, a


def kaldi_text_entry(key: str, fst_text: str) -> str:
    """A Kaldi text-ark lattice entry from AT&T text (e.g. kaldifst's to_str): ``key``, newline,
    the lines with tab separators, an empty line."""
    body = re.sub(r"[ \t]+", "\t", fst_text.strip("\n"))
    return f"{key} \n{body}\n\n"


def from_kaldifst(lat) -> Lattice:
    """Convert a ``kaldifst.Lattice`` (e.g. from a decoder's get_raw_lattice) to a Lattice."""
    return from_fst_text(lat.to_str(), start=int(lat.start))


# ------------------------------------------------------------------------------ ark I/O
def _open_read(spec: str) -> tuple[IO[bytes], subprocess.Popen | None, str]:
    target = spec.split(":", 1)[1] if spec.split(":", 1)[0].split(",")[0] == "ark" else spec
    target = target.strip()
    if target.endswith("|"):
        proc = subprocess.Popen(target[:-1], shell=True, stdout=subprocess.PIPE)
        return proc.stdout, proc, target
    if not os.path.exists(target):
        fail("no such file", target)
    raw = open(target, "rb")
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw), None, target
    raw.seek(0)
    return raw, None, target


class _Bytes:
    """Buffered reading of a binary stream (file, gzip or pipe) with lookahead, for archives that
    mix text and binary entries."""
    CHUNK = 1 << 20

    def __init__(self, f: IO[bytes]):
        self.f, self.buf, self.pos, self.eof = f, b"", 0, False

    def more(self) -> bool:
        if self.eof:
            return False
        data = self.f.read(self.CHUNK)
        if not data:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def need(self, n: int) -> bool:
        while len(self.buf) - self.pos < n:
            if not self.more():
                return False
        return True

    def take(self, n: int) -> bytes:
        if not self.need(n):
            raise EOFError
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: struct.Struct) -> tuple:
        if not self.need(fmt.size):
            raise EOFError
        out = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return out

    def find(self, pattern: re.Pattern) -> re.Match | None:
        """The first match at or after the current position, reading more until there is one.
        (The patterns used here end at a line end at the latest, so a search resumes at the last
        line start after more data arrives.)"""
        scan = self.pos
        while True:
            m = pattern.search(self.buf, scan)
            if m is not None:
                return m
            resume = max(scan, self.buf.rfind(b"\n", scan) + 1) - self.pos
            if not self.more():
                return None
            scan = resume                           # more() moved the buffer: pos is now 0


_SPACE = b" \t\n\r\f\v"
_KEY_END = re.compile(rb"[ \t\n\r\f\v]")
_BLANK_LINE = re.compile(rb"(?m)^[ \t\r]*\n")
_NEWLINE = re.compile(rb"\n")
_FST_MAGIC = 2125659606
_I32, _I64, _U64 = struct.Struct("<i"), struct.Struct("<q"), struct.Struct("<Q")
_LAT_WEIGHT = struct.Struct("<ff")
_LAT_ARCS = np.dtype([("i", "<i4"), ("o", "<i4"), ("g", "<f4"), ("a", "<f4"), ("n", "<i4")])
_CLAT_ARC_HEAD = struct.Struct("<iiffi")   # ilabel, olabel, graph, acoustic, string length
_MAX_COUNT = 1 << 31


def _read_fst_string(b: _Bytes) -> bytes:
    (n,) = b.unpack(_I32)
    if not 0 <= n <= 256:
        raise ValueError("bad FST header")
    return b.take(n)


def _read_binary_lattice(b: _Bytes, where: str) -> Lattice:
    """One OpenFst binary VectorFst of Kaldi's ``lattice4`` (Lattice) or ``compactlattice44``
    (CompactLattice, expanded as ConvertLattice does) arc type, as Kaldi writes it in a
    lattice archive (right after the key and its space, without Kaldi's binary marker)."""
    (magic,) = b.unpack(_I32)
    if magic != _FST_MAGIC:
        raise ValueError("no FST magic number")
    fst_type = _read_fst_string(b).decode("latin-1")
    arc_type = _read_fst_string(b).decode("latin-1")
    if fst_type != "vector" or arc_type not in ("lattice4", "compactlattice44"):
        # (ascii(): a corrupt type string may hold line ends, and the error is one line)
        fail(f"unsupported binary FST ({ascii(fst_type)[1:-1]}, arc type {ascii(arc_type)[1:-1]}): expected a "
             "Kaldi Lattice or CompactLattice (lattice4 / compactlattice44)", where)
    b.unpack(_I32)                                  # version
    (flags,) = b.unpack(_I32)
    b.unpack(_U64)                                  # properties
    start, num_states = b.unpack(_I64)[0], b.unpack(_I64)[0]
    b.unpack(_I64)                                  # number of arcs (not always filled in)
    if flags & 3:
        fail("binary lattice with symbol tables (Kaldi writes none)", where)
    if not 0 <= num_states < _MAX_COUNT or (num_states and not 0 <= start < num_states):
        raise ValueError("bad FST header")
    if num_states == 0:                             # an empty lattice: no path
        return empty_lattice()
    if arc_type == "lattice4":
        return _read_lattice4_states(b, num_states, start)
    src, dst, word, gc, ac, tids = [], [], [], [], [], []
    fs, fg, fa, ftids = [], [], [], []
    for s in range(num_states):
        g, a = b.unpack(_LAT_WEIGHT)
        (n,) = b.unpack(_I32)
        if not 0 <= n < _MAX_COUNT:
            raise ValueError("bad string length")
        t = list(struct.unpack(f"<{n}i", b.take(4 * n)))
        if g != np.inf:                             # Zero (inf, inf): not final
            fs.append(s); fg.append(g); fa.append(a); ftids.append(t)
        (narcs,) = b.unpack(_I64)
        if not 0 <= narcs < _MAX_COUNT:
            raise ValueError("bad number of arcs")
        for _ in range(narcs):
            i, o, g, a, n = b.unpack(_CLAT_ARC_HEAD)
            if not 0 <= n < _MAX_COUNT:
                raise ValueError("bad string length")
            t = list(struct.unpack(f"<{n}i", b.take(4 * n)))
            (d,) = b.unpack(_I32)
            src.append(s); dst.append(d); word.append(o); gc.append(g); ac.append(a); tids.append(t)
    if dst and not 0 <= min(dst) <= max(dst) < num_states:
        raise ValueError("an arc to a state that does not exist")
    return _from_compact(num_states, start, src, dst, word, gc, ac, tids, fs, fg, fa, ftids)


def _read_lattice4_states(b: _Bytes, num_states: int, start: int) -> Lattice:
    """The states of a binary Lattice (fixed-size records: final weight, arc count, arcs): one
    pass over the states for their byte offsets, then all final weights and arcs gathered at once."""
    offs_list, narcs_list = [], []      # (lists: a corrupt state count must not allocate first)
    rel, read_count = 0, _I64.unpack_from
    for _ in range(num_states):
        if not b.need(rel + 16):
            raise EOFError
        n = read_count(b.buf, b.pos + rel + 8)[0]
        if not 0 <= n < _MAX_COUNT:
            raise ValueError("bad number of arcs")
        offs_list.append(rel)
        narcs_list.append(n)
        rel += 16 + _LAT_ARCS.itemsize * n
    if not b.need(rel):
        raise EOFError
    offs, narcs = np.array(offs_list, np.int64), np.array(narcs_list, np.int64)
    raw = np.frombuffer(b.buf, np.uint8, rel, b.pos)
    b.pos += rel
    final = raw[offs[:, None] + np.arange(8)].copy().view("<f4")      # [S, 2]
    size = _LAT_ARCS.itemsize
    first = np.cumsum(narcs) - narcs
    at = np.repeat(offs + 16 - size * first, narcs) + size * np.arange(int(narcs.sum()))
    rec = raw[at[:, None] + np.arange(size)].copy().view(_LAT_ARCS)[:, 0]
    if rec.size and not 0 <= rec["n"].min() <= rec["n"].max() < num_states:
        raise ValueError("an arc to a state that does not exist")
    is_final = final[:, 0] != np.inf                # Zero (inf, inf): not final
    return Lattice(num_states, start, np.repeat(np.arange(num_states, dtype=np.int32), narcs),
                   rec["n"].astype(np.int32), rec["i"].astype(np.int32), rec["o"].astype(np.int32),
                   rec["g"].astype(np.float64), rec["a"].astype(np.float64),
                   np.flatnonzero(is_final).astype(np.int32), final[is_final, 0].astype(np.float64),
                   final[is_final, 1].astype(np.float64))


def read_lattice_ark(spec: str) -> Iterator[tuple[str, Lattice]]:
    """Read lattices from ``lat.1.gz`` / ``ark:gunzip -c lat.1.gz|`` / ``ark:lat.txt``: Kaldi's
    text entries (Lattice or CompactLattice) and binary ones (what latgen-faster writes:
    CompactLattice; or Lattice), in any mix, told apart as Kaldi's lattice holders do (a binary
    lattice starts with the FST magic number right after the key's space)."""
    f, proc, name = _open_read(spec)
    b = _Bytes(f)
    line: int | None = 1        # line numbers, while the archive is text
    try:
        while True:
            while True:         # skip whitespace up to the key
                if not b.need(1):
                    return
                c = b.buf[b.pos]
                if c not in _SPACE:
                    break
                if line is not None and c == 10:
                    line += 1
                b.pos += 1
            m = b.find(_KEY_END)
            end = m.start() if m is not None else len(b.buf)
            key = b.buf[b.pos:end].decode("utf-8")
            b.pos = end
            where = f"{name}:{line}" if line is not None else f"{name} (lattice '{key}')"
            if b.need(2) and b.buf[b.pos] in b" \t" and b.buf[b.pos + 1] == 0xD6:
                b.pos += 1
                try:
                    lat = _read_binary_lattice(b, name)
                except (ValueError, EOFError, struct.error) as e:
                    what = "truncated" if isinstance(e, EOFError) else f"corrupt ({e})"
                    fail(f"binary lattice for '{key}' is {what}", name)
                line = None
                yield key, lat
                continue
            # text: the key alone on its line, then lattice lines up to an empty one
            m = b.find(_NEWLINE)
            rest = b.buf[b.pos:m.start() if m is not None else len(b.buf)]
            if b"\0" in key.encode() or b"\0" in rest:
                fail(f"entry '{key.split(chr(0))[0]}' is binary but no Kaldi lattice "
                     "(no FST magic number after the key)", where)
            if rest.strip(_SPACE):
                fail(f"expected a lattice after the key '{key}' on its own line", where)
            if m is None:
                fail(f"lattice for '{key}' is not terminated by an empty line (truncated file?)", where)
            b.pos = m.end()
            m = b.find(_BLANK_LINE)
            if m is None and b.buf[b.pos:] and not b.buf.endswith(b"\n"):
                b.buf += b"\n"  # (the last line of a file may lack its newline)
                m = b.find(_BLANK_LINE)
            if m is None:
                fail(f"lattice for '{key}' is not terminated by an empty line (truncated file?)", where)
            body = b.buf[b.pos:m.start()]
            b.pos = m.end()
            if b"\0" in body:
                fail(f"lattice for '{key}' is not text (binary or corrupt)", where)
            if line is not None:
                yield key, from_fst_text(body.decode("utf-8"), where=name, first_line=line + 1)
                line += 2 + body.count(b"\n")
            else:
                yield key, from_fst_text(body.decode("utf-8"), where=where)
    except UnicodeDecodeError:
        fail("not a lattice archive (binary or corrupt)", name)
    except (OSError, EOFError) as e:
        fail(f"cannot read: {e}", name)
    finally:
        f.close()
        if proc is not None and proc.wait() != 0:
            fail(f"command failed with status {proc.returncode}", name)


# ------------------------------------------------------------------------------ grid best path
@dataclass
class _Plan:
    """Per-lattice precomputation shared by all grid points: the Viterbi schedule."""
    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # (arc ids, dst per group, group starts)


def _schedule(lat: Lattice) -> _Plan:
    """Group arcs by the longest-path depth of their destination (a topological level), so one
    level's arcs only read costs of states already final.  Errors on a cyclic lattice."""
    S, E = lat.num_states, lat.num_arcs
    level = np.zeros(S, np.int64)
    if E:
        # Kahn's algorithm one wavefront at a time (vectorised): a state's level is set when
        # its last predecessor is done, i.e. level = longest path (in arcs) from a source.
        order = np.argsort(lat.src, kind="stable")
        dst_sorted = lat.dst[order].astype(np.int64)
        offs = np.searchsorted(lat.src[order], np.arange(S + 1))
        indeg = np.bincount(lat.dst, minlength=S).astype(np.int64)
        wave = np.flatnonzero(indeg == 0)
        seen, lev = 0, 0
        while wave.size:
            level[wave] = lev
            seen += wave.size
            starts, counts = offs[wave], offs[wave + 1] - offs[wave]
            total = int(counts.sum())
            if total == 0:
                break
            first = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
            succ = dst_sorted[first + np.arange(total)]
            u, c = np.unique(succ, return_counts=True)
            indeg[u] -= c
            wave = u[indeg[u] == 0]
            lev += 1
        if seen != S:
            fail("lattice has a cycle (not a decoder lattice?)")
    blocks = []
    if E:
        key = level[lat.dst] * S + lat.dst
        arcs = np.argsort(key, kind="stable")
        lv = level[lat.dst[arcs]]
        cuts = np.flatnonzero(np.diff(lv)) + 1
        for blk in np.split(arcs, cuts):
            d = lat.dst[blk]
            starts = np.concatenate(([0], np.flatnonzero(np.diff(d)) + 1))
            blocks.append((blk, d[starts], starts))
    return _Plan(blocks)


def best_paths(lat: Lattice, lm_weights: Sequence[float], word_ins_penalties: Sequence[float],
               none_if_no_path: bool = False) -> dict[tuple[float, float], list[int] | None]:
    """Best word sequence for every (LMWT, WIP) pair: minimises
    ``graph + acoustic/LMWT + WIP*words``.  Where the lattice has no complete path of finite cost
    (an empty lattice, no final state reachable): [], or None with ``none_if_no_path`` (where
    lattice-best-path fails: "Best-path failed")."""
    grid = [(float(l), float(p)) for l in lm_weights for p in word_ins_penalties]
    if not grid:
        return {}
    inv = np.array([1.0 / l for l, _ in grid])
    pen = np.array([p for _, p in grid])
    G = len(grid)
    S = lat.num_states
    is_word = (lat.olabel != 0).astype(np.float64)
    W = lat.graph[:, None] + lat.acoustic[:, None] * inv[None, :] + is_word[:, None] * pen[None, :]
    cost = np.full((S, G), np.inf)
    cost[lat.start] = 0.0
    back = np.full((S, G), -1, np.int64)
    for blk, udst, starts in _schedule(lat).blocks:
        cand = cost[lat.src[blk]] + W[blk]
        mins = np.minimum.reduceat(cand, starts, axis=0)
        counts = np.diff(np.append(starts, blk.size))
        is_min = cand == np.repeat(mins, counts, axis=0)
        pos = np.where(is_min, np.arange(blk.size)[:, None], blk.size)
        first = np.minimum.reduceat(pos, starts, axis=0)
        first = np.minimum(first, blk.size - 1)
        better = mins < cost[udst]  # the start state may have incoming arcs only in odd lattices
        cost[udst] = np.where(better, mins, cost[udst])
        back[udst] = np.where(better, blk[first], back[udst])
    out: dict[tuple[float, float], list[int] | None] = {}
    if lat.final_state.size == 0:
        return {g: None if none_if_no_path else [] for g in grid}
    tot = (cost[lat.final_state] + lat.final_graph[:, None]
           + lat.final_acoustic[:, None] * inv[None, :])
    best_final = np.argmin(tot, axis=0)
    ok = np.isfinite(tot[best_final, np.arange(G)])
    cur = lat.final_state[best_final].astype(np.int64)
    cols = np.arange(G)
    words_rev: list[np.ndarray] = []
    active = ok & (cur != lat.start)
    steps = 0
    while active.any():
        a = back[cur, cols]
        a_safe = np.where(active, a, 0)
        words_rev.append(np.where(active, lat.olabel[a_safe], 0))
        cur = np.where(active, lat.src[a_safe], cur)
        active &= cur != lat.start
        steps += 1
        if steps > S + 1:
            fail("lattice back-pointers do not reach the start state (internal error)")
    seqs = np.stack(words_rev[::-1], axis=0) if words_rev else np.zeros((0, G), np.int64)
    for g, key in enumerate(grid):
        if not ok[g]:
            out[key] = None if none_if_no_path else []
            continue
        col = seqs[:, g]
        out[key] = [int(w) for w in col[col != 0]]
    return out


def path_cost(lat: Lattice, lm_weight: float, word_ins_penalty: float, words: Sequence[int]) -> float:
    """Cost of the cheapest path with word sequence ``words`` (brute force over the DAG; for tests
    and debugging of small lattices)."""
    target = list(words)
    best: dict[int, dict[int, float]] = {lat.start: {0: 0.0}}  # state -> words matched -> cost
    for blk, _, _ in _schedule(lat).blocks:
        for a in blk.tolist():
            s, d, o = int(lat.src[a]), int(lat.dst[a]), int(lat.olabel[a])
            if s not in best:
                continue
            w = lat.graph[a] + lat.acoustic[a] / lm_weight + (word_ins_penalty if o else 0.0)
            into = best.setdefault(d, {})
            for k, c in best[s].items():
                if o == 0:
                    nk = k
                elif k < len(target) and target[k] == o:
                    nk = k + 1
                else:
                    continue
                if c + w < into.get(nk, np.inf):
                    into[nk] = c + w
    res = np.inf
    for s, g, ac in zip(lat.final_state.tolist(), lat.final_graph.tolist(), lat.final_acoustic.tolist()):
        c = best.get(s, {}).get(len(target))
        if c is not None:
            res = min(res, c + g + ac / lm_weight)
    return float(res)


__all__ = ["Lattice", "empty_lattice", "from_fst_text", "from_kaldifst", "kaldi_text_entry", "read_lattice_ark", "best_paths", "path_cost"]
