"""State-level lattices (Kaldi's ``Lattice`` type) held as numpy arrays, their Kaldi text ark
format, and best paths over a grid of LM weights x word-insertion penalties.

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
import io
import os
import re
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
    finals = _FINAL_LINE.findall(text)
    body = _FINAL_LINE.sub("", text)
    if "_" in body:
        return None
    stripped = body.strip()
    n_lines = stripped.count("\n") + 1 if stripped else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (garbage makes fromstring stop early: caught by the size check)
        vals = np.fromstring(body.replace(",", " "), dtype=np.float64, sep=" ") if n_lines else np.zeros(0)
    if vals.size != 6 * n_lines:
        return None
    arcs = vals.reshape(-1, 6)
    ints = arcs[:, :4]
    if not np.all(ints == np.floor(ints)) or (ints.size and ints.min() < 0):
        return None
    fs = np.array([int(f[0]) for f in finals], np.int32)
    fw = np.array([_weight(f[1]) if f[1] else (0.0, 0.0) for f in finals], np.float64).reshape(-1, 2)
    head = split_key(text.lstrip(FIELD_SEPS + "\r\n"))[0]
    if not head:
        return None
    first = _int(head)
    ns = 1 + int(max([first] + ([int(ints[:, :2].max())] if ints.size else []) + fs.tolist()))
    ii = ints.astype(np.int64)
    return Lattice(ns, first if start is None else start, ii[:, 0].astype(np.int32), ii[:, 1].astype(np.int32),
                   ii[:, 2].astype(np.int32), ii[:, 3].astype(np.int32), arcs[:, 4].copy(), arcs[:, 5].copy(),
                   fs, fw[:, 0].copy(), fw[:, 1].copy())


def _parse_slow(text: str, start: int | None = None, where: str = "lattice",
                first_line: int = 1) -> Lattice:
    """Parse AT&T text of a lattice (kaldifst ``Lattice.to_str()`` or a Kaldi text entry).
    Arc lines: ``src dst ilabel olabel g,a``; final lines: ``state [g,a]``.  Also accepts
    CompactLattice lines ``src dst word g,a,tid_tid_...`` (the transition-ids are dropped;
    ilabel = olabel = word).  The first arc's (or final's) state is the start state, as in
    FstPrinter output, unless ``start`` is given."""
    src, dst, il, ol, gc, ac = [], [], [], [], [], []
    fs, fg, fa = [], [], []
    first = None
    # Kaldi's lattice reader: lines end at "\n" only, fields are split at spaces and tabs
    for n, line in enumerate(text.split("\n"), 1):
        f = split_fields(line.rstrip("\r"))
        if not f:
            continue
        try:
            if len(f) >= 4:
                s, d = _int(f[0]), _int(f[1])
                if len(f) == 5:
                    i, o = _int(f[2]), _int(f[3])
                    w = f[4]
                elif len(f) == 4 and "," in f[3]:   # CompactLattice arc
                    i = o = _int(f[2])
                    w = f[3]
                else:                               # Lattice arc with weight One
                    i, o, w = _int(f[2]), _int(f[3]), "0,0"
                g, a = _weight(w)
                src.append(s); dst.append(d); il.append(i); ol.append(o); gc.append(g); ac.append(a)
            elif len(f) in (1, 2):
                s = _int(f[0])
                g, a = _weight(f[1]) if len(f) == 2 else (0.0, 0.0)
                fs.append(s); fg.append(g); fa.append(a)
            else:
                raise ValueError
        except ValueError:
            fail(f"bad lattice line '{' '.join(f)}'", where, first_line + n - 1)
        if first is None:
            first = _int(f[0])
    if first is None:
        fail("empty lattice", where)
    ns = 1 + max([first] + src + dst + fs)
    return Lattice(ns, first if start is None else start,
                   np.asarray(src, np.int32), np.asarray(dst, np.int32), np.asarray(il, np.int32),
                   np.asarray(ol, np.int32), np.asarray(gc, np.float64), np.asarray(ac, np.float64),
                   np.asarray(fs, np.int32), np.asarray(fg, np.float64), np.asarray(fa, np.float64))


def _int(x: str) -> int:
    i = ascii_int(x)
    if i is None:
        raise ValueError(x)
    return i


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


def read_lattice_ark(spec: str) -> Iterator[tuple[str, Lattice]]:
    """Read text lattices from ``lat.1.gz`` / ``ark:gunzip -c lat.1.gz|`` / ``ark:lat.txt``."""
    f, proc, name = _open_read(spec)
    try:
        # lines end at "\n" only (as Kaldi reads them); "\r\n" is tolerated below
        stream = io.TextIOWrapper(f, encoding="utf-8", newline="\n")
        key, buf, start_line = None, [], 0
        for n, line in enumerate(stream, 1):
            if key is None:
                key, rest = split_key(line.rstrip("\r\n"))
                if not key:
                    continue
                if key.startswith("\0B") or "\0" in line:
                    fail("binary lattices are not supported; write them with ark,t", name, n)
                start_line = n
                if rest:
                    fail(f"expected a lattice after the key '{key}' on its own line", name, n)
                continue
            if not line.strip(FIELD_SEPS + "\r\n"):
                yield key, from_fst_text("".join(buf), where=name, first_line=start_line + 1)
                key, buf = None, []
            else:
                buf.append(line)
        if key is not None:
            fail(f"lattice for '{key}' is not terminated by an empty line (truncated file?)",
                 name, start_line)
    except UnicodeDecodeError:
        fail("not a text lattice archive (binary or corrupt)", name)
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


def best_paths(lat: Lattice, lm_weights: Sequence[float], word_ins_penalties: Sequence[float]
               ) -> dict[tuple[float, float], list[int]]:
    """Best word sequence for every (LMWT, WIP) pair: minimises
    ``graph + acoustic/LMWT + WIP*words``.  A lattice with no complete path gives []."""
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
    out: dict[tuple[float, float], list[int]] = {}
    if lat.final_state.size == 0:
        return {g: [] for g in grid}
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
            out[key] = []
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


__all__ = ["Lattice", "from_fst_text", "from_kaldifst", "kaldi_text_entry", "read_lattice_ark", "best_paths", "path_cost"]
