"""Phonetic decision trees, as Kaldi builds them (acc-tree-stats, sum-tree-stats, build-tree).

Tree statistics (``TreeStats``): for every distinct *event* seen in the alignments -- the
pdf-class of the frame (key -1) and the phones of the context window (keys 0..N-1, 0 = no
phone at an utterance edge) -- the count, sum and sum of squares of the feature vectors
(diagonal-Gaussian sufficient statistics, Kaldi's GaussClusterable).  When the central phone
is context-independent (``--ci-phones``, normally the silence phones) the context keys are
*absent* from its events (as Kaldi: the tree can then never ask about them).

Events are held as an int32 matrix ``events`` (E, 1+N): column 0 the pdf-class, column 1+j the
phone at window position j, -1 where a key is absent.  Accumulation is vectorised: per
utterance the event of every frame is built with array indexing, rows are encoded into one
int64 and grouped with ``np.unique``; sums use ``np.add.reduceat`` over the sorted frames.

Stats file (our default format): a numpy ``.npz`` with ``format='pynnet-treeacc-1'``,
``context_width``, ``central_position``, ``events`` (int32 E x 1+N), ``counts`` (float64 E),
``sums`` and ``sumsq`` (float64 E x D).  Kaldi's own ``treeacc`` (``BTS`` of ``EV`` events and
``GCL`` GaussClusterables, binary or text) is also read (detected from the content) and written
(``save(..., kaldi=True)``), so stats can go to or come from Kaldi's build-tree.

Tree building (``build_tree``) follows Kaldi's BuildTree: a stub map from phones/roots.int
(one leaf per shared root, one per pdf-class for a not-shared root), greedy splitting of the
leaf with the best likelihood gain over all roots (questions from ``Questions``), stopping at
``max_leaves`` or when the best gain is below ``thresh``, then bottom-up merging of leaves
within each root whose merge costs less than ``cluster_thresh`` (default: the smallest split
made), and renumbering leaves 0..num_pdfs-1.
"""
from __future__ import annotations

import heapq
import logging
import math
import os
import struct
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from pynnet.hmm.tree_io import (PDF_CLASS_KEY, ConstantEventMap, ContextDependencyTree, EventMap,
                                SplitEventMap, TableEventMap, deep_recursion)
from pynnet.hmm.lang import _read_lines
from pynnet.io.atomic import atomic_write
from pynnet.io.errors import PynnetError, fail
from pynnet.io.progress import progress_kwargs
from pynnet.io.tables import ascii_int

log = logging.getLogger(__name__)

LOG_2PI = math.log(2.0 * math.pi)
STATS_FORMAT = "pynnet-treeacc-1"


# ----------------------------------------------------------------------------------------------
# Diagonal-Gaussian objective (Kaldi GaussClusterable::Objf), vectorised over rows
def gauss_objf(count: np.ndarray, sums: np.ndarray, sumsq: np.ndarray, var_floor: float) -> np.ndarray:
    """Log-likelihood of the data under its own ML diagonal Gaussian (variance floored).

    count (...,), sums/sumsq (..., D).  Rows with count <= 0 give 0.
    """
    count = np.asarray(count, dtype=np.float64)
    pos = count > 0
    c = np.where(pos, count, 1.0)[..., None]
    mean = sums / c
    var = sumsq / c - mean * mean
    fvar = np.maximum(var, var_floor)
    dim = sums.shape[-1]
    per_frame = -0.5 * (np.log(fvar).sum(-1) + dim * LOG_2PI + (var / fvar).sum(-1))
    return np.where(pos, per_frame * count, 0.0)


# ----------------------------------------------------------------------------------------------
# Statistics
@dataclass
class TreeStats:
    context_width: int
    central_position: int
    events: np.ndarray  # (E, 1+N) int32
    counts: np.ndarray  # (E,) float64
    sums: np.ndarray    # (E, D) float64
    sumsq: np.ndarray   # (E, D) float64

    @property
    def keys(self) -> list[int]:
        """Event key of each column of ``events``."""
        return [PDF_CLASS_KEY] + list(range(self.context_width))

    @property
    def dim(self) -> int:
        return self.sums.shape[1]

    @property
    def num_events(self) -> int:
        return self.events.shape[0]

    def total_count(self) -> float:
        return float(self.counts.sum())

    def subset(self, mask: np.ndarray) -> "TreeStats":
        return TreeStats(self.context_width, self.central_position, self.events[mask], self.counts[mask],
                         self.sums[mask], self.sumsq[mask])

    @staticmethod
    def empty(context_width: int, central_position: int, dim: int) -> "TreeStats":
        return TreeStats(context_width, central_position, np.zeros((0, 1 + context_width), np.int32),
                         np.zeros(0), np.zeros((0, dim)), np.zeros((0, dim)))

    def save(self, path: str | os.PathLike, kaldi: bool = False, binary: bool = True) -> None:
        """Write our .npz (default) or, with ``kaldi=True``, Kaldi's treeacc format."""
        if kaldi:
            with atomic_write(path, "wb") as f:
                f.write(self.to_kaldi_bytes(binary))
            return
        with atomic_write(path, "wb") as f:
            np.savez(f, format=np.array(STATS_FORMAT), context_width=self.context_width,
                     central_position=self.central_position, events=self.events.astype(np.int32),
                     counts=self.counts, sums=self.sums, sumsq=self.sumsq)

    def to_kaldi_bytes(self, binary: bool = True, var_floor: float = 0.01) -> bytes:
        """Kaldi's treeacc serialisation (BuildTreeStats of GaussClusterable), ``\\0B`` header included."""
        parts: list[bytes] = [b"\0B"] if binary else []
        keys = self.keys
        if binary:
            parts.append(b"BTS \xfc" + struct.pack("<I", self.num_events))
        else:
            parts.append(f"BTS {self.num_events} ".encode())
        d = self.dim
        for ev, c, s, sq in zip(self.events, self.counts, self.sums, self.sumsq):
            pairs = [(k, int(v)) for k, v in zip(keys, ev) if v >= 0]
            if binary:
                parts.append(b"EV \xfc" + struct.pack("<I", len(pairs))
                             + b"".join(struct.pack("<bibi", 4, k, 4, v) for k, v in pairs))
                parts.append(b"TGCL \x08" + struct.pack("<d", c) + b"\x08" + struct.pack("<d", var_floor)
                             + b"DM \x04" + struct.pack("<i", 2) + b"\x04" + struct.pack("<i", d)
                             + np.ascontiguousarray(np.vstack([s, sq]), dtype="<f8").tobytes())
            else:
                parts.append(("EV %d %s\n" % (len(pairs), "".join(f"{k} {v} " for k, v in pairs))).encode())
                rows = "".join("\n  " + " ".join(repr(float(x)) for x in r) + " " for r in (s, sq))
                parts.append(f"T GCL {float(c)!r} {var_floor!r}  [{rows}]\n".encode())
        if not binary:
            parts.append(b"\n")
        return b"".join(parts)

    @staticmethod
    def from_kaldi_bytes(data: bytes, path: str = "<bytes>", context_width: int | None = None,
                         central_position: int | None = None) -> "TreeStats":
        """Parse a Kaldi treeacc (from Kaldi's acc-tree-stats / sum-tree-stats).  Kaldi does not
        store N/P: N defaults to the largest key + 1 and P to N // 2 (Kaldi's defaults 3/1)."""
        from pynnet.hmm.model_io import KaldiInput
        binary = data.startswith(b"\0B")
        r = KaldiInput(data, path, 2 if binary else 0, binary)

        def basic(size_expected: tuple[int, ...], fmt: str, text_type):
            if binary:
                size = struct.unpack("b", data[r.pos:r.pos + 1])[0]
                if size not in size_expected:
                    r.error(f"unexpected size byte {size}")
                width = abs(size)
                f = fmt if size == size_expected[0] else {"<d": "<f"}.get(fmt, fmt)
                v = struct.unpack(f, data[r.pos + 1:r.pos + 1 + width])[0]
                r.pos += 1 + width
                return v
            tok = r.token()
            try:
                return text_type(tok)
            except ValueError:
                r.error(f"expected a number, got '{tok}'")

        r.expect("BTS")
        n = basic((-4,), "<I", int)
        events, counts, stats = [], [], []
        for _ in range(n):
            r.expect("EV")
            k = basic((-4,), "<I", int)
            ev = {}
            for _ in range(k):
                key = basic((4,), "<i", int)
                ev[key] = basic((4,), "<i", int)
            if binary:
                flag = chr(data[r.pos])
                r.pos += 1
            else:
                flag = r.token()
            if flag not in ("T", "F"):
                r.error(f"expected T or F, got '{flag}'")
            if flag == "F":
                continue
            r.expect("GCL")
            c = basic((8, 4), "<d", float)
            basic((8, 4), "<d", float)  # var floor: build-tree takes it as an option
            m = _double_matrix(r, data, binary)
            if m.shape[0] != 2:
                r.error("GaussClusterable stats must have 2 rows")
            events.append(ev)
            counts.append(c)
            stats.append(m)
        maxkey = max((max(e) for e in events if e), default=0)
        nw = context_width if context_width is not None else maxkey + 1
        pp = central_position if central_position is not None else nw // 2
        if maxkey >= nw:
            fail(f"stats have key {maxkey} but context width is {nw}", path)
        ev_arr = np.full((len(events), 1 + nw), -1, np.int32)
        for i, e in enumerate(events):
            for key, v in e.items():
                ev_arr[i, key + 1] = v
        dim = stats[0].shape[1] if stats else 0
        st = np.array(stats, dtype=np.float64).reshape(len(stats), 2, dim)
        return reduce_stats(nw, pp, ev_arr, np.array(counts, np.float64), st[:, 0], st[:, 1])

    @staticmethod
    def load(path: str | os.PathLike, context_width: int | None = None,
             central_position: int | None = None) -> "TreeStats":
        """Read our .npz stats or a Kaldi treeacc (binary or text), detected from the content."""
        path = os.fspath(path)
        if not os.path.exists(path):
            fail("no such file", path)
        with open(path, "rb") as f:
            head = f.read(8)
        if head.startswith(b"\0BBTS") or head.lstrip().startswith(b"BTS"):
            with open(path, "rb") as f:
                data = f.read()
            return TreeStats.from_kaldi_bytes(data, path, context_width, central_position)
        try:
            z = np.load(path, allow_pickle=False)
            if str(z["format"]) != STATS_FORMAT:
                fail(f"not a tree-stats file (format {str(z['format'])!r})", path)
            st = TreeStats(int(z["context_width"]), int(z["central_position"]), z["events"].astype(np.int32),
                           z["counts"].astype(np.float64), z["sums"].astype(np.float64),
                           z["sumsq"].astype(np.float64))
        except PynnetError:
            raise
        except Exception as e:  # zipfile/KeyError/ValueError: not our file
            fail(f"not a pynnet tree-stats file ({type(e).__name__}: {e})", path)
        e = st.events.shape[0]
        if (st.events.ndim != 2 or st.events.shape[1] != 1 + st.context_width or st.counts.shape != (e,)
                or st.sums.shape[0] != e or st.sumsq.shape != st.sums.shape):
            fail("inconsistent array shapes in tree-stats file", path)
        return st


def _double_matrix(r, data: bytes, binary: bool) -> np.ndarray:
    """A Kaldi matrix (FM/DM binary, or text ``[ rows ]``) at full precision."""
    if binary:
        tok = r.token()
        if tok not in ("FM", "DM"):
            r.error(f"expected a matrix (FM/DM), got {tok[:20]}")
        rows, cols = r.int32(), r.int32()
        width = 4 if tok == "FM" else 8
        nbytes = rows * cols * width
        if rows < 0 or cols < 0 or r.pos + nbytes > len(data):
            r.error("truncated matrix")
        a = np.frombuffer(data, dtype="<f4" if tok == "FM" else "<f8", count=rows * cols, offset=r.pos)
        r.pos += nbytes
        return a.reshape(rows, cols).astype(np.float64)
    r.expect("[")
    rows: list[list[float]] = [[]]
    d, n = data, len(data)
    while True:
        while r.pos < n and d[r.pos] in b" \t\r":
            r.pos += 1
        if r.pos >= n:
            r.error("unterminated matrix")
        if d[r.pos] == 0x0A:  # newline: next row
            r.pos += 1
            if rows[-1]:
                rows.append([])
            continue
        tok = r.token()
        if tok == "]":
            break
        try:
            rows[-1].append(float(tok))
        except ValueError:
            r.error(f"expected a number in a matrix, got '{tok}'")
    rows = [x for x in rows if x]
    if len({len(x) for x in rows}) > 1:
        r.error("matrix rows of different lengths")
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(rows[0]) if rows else 0)


def _encode_rows(events: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]] | None:
    """Encode int rows (values >= -1) into one int64 each (mixed radix), or None if too wide."""
    if events.shape[0] == 0:
        return np.zeros(0, np.int64), lambda k: np.zeros((0, events.shape[1]), np.int32)
    base = int(events.max()) + 2
    ncol = events.shape[1]
    if ncol * math.log2(max(base, 2)) >= 62:
        return None
    code = np.zeros(events.shape[0], np.int64)
    for j in range(ncol):
        code = code * base + (events[:, j].astype(np.int64) + 1)

    def decode(codes: np.ndarray) -> np.ndarray:
        out = np.empty((codes.shape[0], ncol), np.int32)
        c = codes.copy()
        for j in range(ncol - 1, -1, -1):
            out[:, j] = (c % base) - 1
            c //= base
        return out

    return code, decode


def group_rows(events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique_rows, inverse) for an int matrix, fast path via int64 row codes."""
    enc = _encode_rows(events)
    if enc is None:
        uniq, inv = np.unique(events, axis=0, return_inverse=True)
        return uniq.astype(np.int32), inv.reshape(-1)
    code, decode = enc
    ucode, inv = np.unique(code, return_inverse=True)
    return decode(ucode), inv.reshape(-1)


def segment_sum(inv: np.ndarray, nseg: int, x: np.ndarray) -> np.ndarray:
    """Sum rows of x (n, D) into nseg groups given by inv (n,), via a sort and add.reduceat."""
    out = np.zeros((nseg, x.shape[1]), dtype=np.float64)
    if x.shape[0] == 0:
        return out
    order = np.argsort(inv, kind="stable")
    sinv = inv[order]
    starts = np.flatnonzero(np.r_[True, sinv[1:] != sinv[:-1]])
    out[sinv[starts]] = np.add.reduceat(x[order].astype(np.float64, copy=False), starts, axis=0)
    return out


def reduce_stats(context_width: int, central_position: int, events: np.ndarray, counts: np.ndarray,
                 sums: np.ndarray, sumsq: np.ndarray) -> TreeStats:
    """Merge rows with identical events."""
    uniq, inv = group_rows(events)
    n = uniq.shape[0]
    return TreeStats(context_width, central_position, uniq,
                     np.bincount(inv, weights=counts, minlength=n).astype(np.float64),
                     segment_sum(inv, n, sums), segment_sum(inv, n, sumsq))


def sum_tree_stats(stats: Sequence[TreeStats]) -> TreeStats:
    """Kaldi sum-tree-stats: add up stats from several jobs."""
    stats = [s for s in stats]
    if not stats:
        raise PynnetError("sum_tree_stats: nothing to sum")
    n, p, d = stats[0].context_width, stats[0].central_position, stats[0].dim
    for s in stats[1:]:
        if (s.context_width, s.central_position) != (n, p):
            raise PynnetError(f"cannot sum tree stats with context {s.context_width}/{s.central_position} "
                              f"and {n}/{p}")
        if s.dim != d and s.num_events and stats[0].num_events:
            raise PynnetError(f"cannot sum tree stats of feature dimension {s.dim} and {d}")
    nonempty = [s for s in stats if s.num_events] or stats[:1]
    return reduce_stats(n, p, np.concatenate([s.events for s in nonempty]),
                        np.concatenate([s.counts for s in nonempty]),
                        np.concatenate([s.sums for s in nonempty]), np.concatenate([s.sumsq for s in nonempty]))


# ----------------------------------------------------------------------------------------------
# Transition-id tables and splitting alignments into phones
class TransitionTables:
    """Per-transition-id arrays from a kaldi_hmm_gmm.TransitionModel (index 0 unused)."""

    def __init__(self, tm):
        topo = tm.topo
        tuples = [t.__getstate__() for t in tm.tuples]  # (phone, hmm_state, forward_pdf, self_loop_pdf)
        state2id = list(tm.state2id)
        id2state = np.asarray(tm.id2state, dtype=np.int64)
        ntid = len(id2state) - 1
        self.num_tids = ntid
        self.trans_state = id2state
        self.phone = np.zeros(ntid + 1, np.int32)
        self.hmm_state = np.zeros(ntid + 1, np.int32)
        self.pdf_class = np.full(ntid + 1, -1, np.int32)
        self.is_self_loop = np.zeros(ntid + 1, bool)
        self.is_final = np.zeros(ntid + 1, bool)
        self.trans_index = np.zeros(ntid + 1, np.int32)
        self.pdf = np.full(ntid + 1, -1, np.int32)
        self.tuples = tuples
        self.state2id = state2id
        entries: dict[int, list] = {}
        for tid in range(1, ntid + 1):
            ts = int(id2state[tid])
            phone, hs, fpdf, spdf = tuples[ts - 1]
            if phone not in entries:
                entries[phone] = topo.topology_for_phone(phone)
            entry = entries[phone]
            tidx = tid - state2id[ts]
            dst = entry[hs].transitions[tidx][0]
            loop = dst == hs
            self.phone[tid] = phone
            self.hmm_state[tid] = hs
            self.trans_index[tid] = tidx
            self.is_self_loop[tid] = loop
            self.is_final[tid] = dst + 1 == len(entry)
            self.pdf_class[tid] = entry[hs].self_loop_pdf_class if loop else entry[hs].forward_pdf_class
            self.pdf[tid] = spdf if loop else fpdf
        # Whether each phone's entry state emits (Kaldi's SplitToPhones sanity check).
        self.first_state_emits = {p: e[0].forward_pdf_class != -1 for p, e in entries.items()}
        self.first_emits_arr = np.ones(max(entries, default=0) + 1, bool)
        for ph, em in self.first_state_emits.items():
            self.first_emits_arr[ph] = em
        self.phones = sorted(entries)


def split_to_phones(tt: TransitionTables, ali: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
    """Kaldi SplitToPhones, vectorised: (ok, phone start frames, phone end frames (exclusive)).

    Handles both normal and reordered alignments (self-loops after the forward transition).
    ``ok`` is False if the alignment is not a plausible sequence of whole phones.
    """
    ali = np.asarray(ali, dtype=np.int64)
    t = ali.shape[0]
    if t == 0:
        return True, np.zeros(0, np.int64), np.zeros(0, np.int64)
    if ali.min() < 1 or ali.max() > tt.num_tids:
        return False, np.zeros(0, np.int64), np.zeros(0, np.int64)
    ts = tt.trans_state[ali]
    loop = tt.is_self_loop[ali]
    final = tt.is_final[ali]
    # Reordered (Kaldi IsReordered) iff, at the first change of transition-state next to a
    # self-loop, the self-loop comes last in the old state (forward transition first).
    change = np.flatnonzero(ts[1:] != ts[:-1])
    near_loop = change[loop[change] | loop[change + 1]]
    if near_loop.size:
        reordered = bool(loop[near_loop[0]])
    else:
        reordered = bool(loop[-1] and not loop[0])
    ok = True
    if not reordered:
        ends = np.flatnonzero(final) + 1
    else:
        heads = np.flatnonzero(~loop)  # each forward transition starts a run; its self-loops follow
        if heads.size == 0 or heads[0] != 0:
            ok = False
        run_ends = np.append(heads[1:], t)
        ends = run_ends[final[heads]] if heads.size else np.zeros(0, np.int64)
    if ends.size == 0 or ends[-1] != t:
        ok = False
        ends = np.append(ends, t)
    starts = np.concatenate(([0], ends[:-1]))
    # every segment must be one phone, starting in its entry state when that state emits
    phone = tt.phone[ali]
    seg = np.repeat(np.arange(starts.size), ends - starts)
    if np.any(phone != phone[starts][seg]):
        ok = False
    sp = phone[starts]
    if np.any(tt.first_emits_arr[sp] & (tt.hmm_state[ali[starts]] != 0)):
        ok = False
    return ok, starts, ends


# ----------------------------------------------------------------------------------------------
# Accumulation (Kaldi acc-tree-stats)
def utterance_events(tt: TransitionTables, ali: np.ndarray, context_width: int = 3, central_position: int = 1,
                     ci_phones: Iterable[int] = (), phone_map: np.ndarray | None = None
                     ) -> np.ndarray | None:
    """The (T, 1+N) event matrix of one utterance, or None if its alignment is bad."""
    ok, starts, ends = split_to_phones(tt, ali)
    if not ok:
        return None
    ali = np.asarray(ali, dtype=np.int64)
    n, p = context_width, central_position
    seq = tt.phone[ali[starts]].astype(np.int64)
    if phone_map is not None:
        if seq.max(initial=0) >= len(phone_map) or np.any(phone_map[seq] < 0):
            raise PynnetError("phone missing from --phone-map")
        seq = phone_map[seq].astype(np.int64)
    nph = seq.size
    padded = np.concatenate((np.zeros(p, np.int64), seq, np.zeros(n - 1 - p, np.int64)))
    # windows[i, j] = phone at position j of the window centred on phone i (0 outside the utterance)
    windows = np.empty((nph, n), np.int64)
    for j in range(n):
        windows[:, j] = padded[j:j + nph]
    if isinstance(ci_phones, np.ndarray) and ci_phones.dtype == bool:
        ci_lookup = ci_phones  # precomputed boolean lookup by phone id
    else:
        ci = [int(x) for x in ci_phones]
        ci_lookup = np.zeros(max(ci, default=0) + 1, bool)
        ci_lookup[ci] = True
    if ci_lookup.any():
        is_ci = ci_lookup[np.minimum(seq, ci_lookup.size - 1)] & (seq < ci_lookup.size)
        if is_ci.any():
            central = windows[is_ci, p]
            windows[is_ci] = -1  # context keys absent: the tree must not ask about them
            windows[is_ci, p] = central
    seg = np.repeat(np.arange(nph), ends - starts)
    ev = np.empty((ali.shape[0], 1 + n), np.int32)
    ev[:, 0] = tt.pdf_class[ali]
    ev[:, 1:] = windows[seg]
    return ev


def accumulate_tree_stats(trans_model, items: Iterable[tuple[str, np.ndarray, np.ndarray | None]], *,
                          context_width: int = 3, central_position: int = 1, ci_phones: Iterable[int] = (),
                          phone_map: np.ndarray | None = None, chunk_frames: int = 100_000,
                          progress: bool = False) -> tuple[TreeStats, dict[str, int]]:
    """Accumulate tree stats from ``(utt, alignment, features-or-None)`` items.

    Returns (stats, counts) with counts {'done', 'no_ali', 'no_feats', 'bad_length', 'bad_ali'}; bad
    utterances are skipped with a warning, as Kaldi's acc-tree-stats does.
    """
    if not 0 <= central_position < context_width:
        raise PynnetError(f"bad --context-width {context_width} / --central-position {central_position}")
    tt = trans_model if isinstance(trans_model, TransitionTables) else TransitionTables(trans_model)
    ci_list = sorted(set(int(x) for x in ci_phones))
    ci = np.zeros(max(ci_list, default=0) + 1, bool)
    ci[ci_list] = True
    counts = {"done": 0, "no_ali": 0, "no_feats": 0, "bad_length": 0, "bad_ali": 0}
    warned = [0]

    def warn(msg: str, *args) -> None:
        warned[0] += 1
        if warned[0] <= 10:
            log.warning(msg, *args)
        elif warned[0] == 11:
            log.warning("(further warnings about individual utterances suppressed)")

    acc: TreeStats | None = None
    pend_ev: list[np.ndarray] = []
    pend_x: list[np.ndarray] = []
    pend_frames = 0
    dim = None

    def flush():
        nonlocal acc, pend_ev, pend_x, pend_frames
        if not pend_ev:
            return
        ev = np.concatenate(pend_ev)
        x = np.concatenate(pend_x).astype(np.float64)
        part = reduce_stats(context_width, central_position, ev, np.ones(ev.shape[0]), x, x * x)
        acc = part if acc is None else sum_tree_stats([acc, part])
        pend_ev, pend_x, pend_frames = [], [], 0

    it: Iterable = items
    if progress:
        from tqdm import tqdm
        it = tqdm(items, desc="acc-tree-stats", unit="utt", **progress_kwargs())
    for utt, ali, feats in it:
        if ali is None:
            warn("no alignment for utterance %s", utt)
            counts["no_ali"] += 1
            continue
        if feats is None:
            warn("no features for utterance %s", utt)
            counts["no_feats"] += 1
            continue
        feats = np.asarray(feats)
        ali = np.asarray(ali)
        if ali.ndim != 1:
            raise PynnetError(f"utterance {utt}: alignment is not a vector")
        if feats.ndim != 2 or feats.shape[0] != ali.shape[0]:
            warn("alignment of %s has %d frames but its features have %d", utt, ali.shape[0],
                        feats.shape[0] if feats.ndim else 0)
            counts["bad_length"] += 1
            continue
        if dim is None:
            dim = feats.shape[1]
        elif feats.shape[1] != dim:
            raise PynnetError(f"utterance {utt}: feature dimension {feats.shape[1]}, expected {dim}")
        ev = utterance_events(tt, ali, context_width, central_position, ci, phone_map)
        if ev is None:
            warn("alignment of %s is not a sequence of whole phones; not using it", utt)
            counts["bad_ali"] += 1
            continue
        pend_ev.append(ev)
        pend_x.append(feats)
        pend_frames += ev.shape[0]
        counts["done"] += 1
        if pend_frames >= chunk_frames:
            flush()
    flush()
    if acc is None:
        acc = TreeStats.empty(context_width, central_position, dim or 0)
    return acc, counts


# ----------------------------------------------------------------------------------------------
# Roots, topology helpers
@dataclass
class Root:
    phones: list[int]
    shared: bool
    split: bool


def read_roots(path: str | os.PathLike) -> list[Root]:
    """phones/roots.int: ``shared|not-shared split|not-split phone...`` per line."""
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such file", path)
    roots: list[Root] = []
    seen: set[int] = set()
    for n, fields in _read_lines(path):
        if not fields:
            continue
        if len(fields) < 3 or fields[0] not in ("shared", "not-shared") or fields[1] not in ("split", "not-split"):
            fail("expected 'shared|not-shared split|not-split <phone-id>...'", path, n)
        ids = [ascii_int(x) for x in fields[2:]]
        if None in ids:
            fail("phones must be integer ids (use roots.int, not roots.txt)", path, n)
        phones = sorted(ids)
        if any(p <= 0 for p in phones):
            fail("phone ids must be positive", path, n)
        dup = seen.intersection(phones) or (len(set(phones)) != len(phones))
        if dup:
            fail(f"phone(s) listed twice: {sorted(seen.intersection(phones)) or phones}", path, n)
        seen.update(phones)
        shared, split = fields[0] == "shared", fields[1] == "split"
        if split and not shared:
            fail("'not-shared split' is not supported (Kaldi neither)", path, n)
        roots.append(Root(phones, shared, split))
    if not roots:
        fail("no roots", path)
    return roots


def read_int_sets(path: str | os.PathLike, what: str = "phone set") -> list[list[int]]:
    """A file of integer sets, one per line (phones/sets.int, questions.int)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such file", path)
    out: list[list[int]] = []
    for n, fields in _read_lines(path):
        if not fields:
            continue
        s = [ascii_int(x) for x in fields]
        if None in s:
            fail(f"expected integer ids in each {what}: '{' '.join(fields)}'", path, n)
        if len(set(s)) != len(s):
            fail(f"{what} contains a phone twice", path, n)
        out.append(sorted(s))
    return out


def load_topology(path: str | os.PathLike):
    """Read a Kaldi text topology file (lang/topo) into a kaldi_hmm_gmm.HmmTopology."""
    import kaldi_hmm_gmm as khg
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such file", path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if "<Topology>" not in text:
        fail("not a Kaldi text topology (no <Topology>)", path)
    topo = khg.HmmTopology()
    try:
        topo.read(text)
    except Exception as e:  # the binding raises RuntimeError on a malformed topology
        fail(f"bad topology: {str(e).strip().splitlines()[-1] if str(e).strip() else e}", path)
    return topo


def phone_to_num_pdf_classes(topo) -> dict[int, int]:
    return {int(p): int(topo.num_pdf_classes(p)) for p in topo.phones}


# ----------------------------------------------------------------------------------------------
# Tree building (Kaldi BuildTree)
def get_stub_map(central_position: int, roots: Sequence[Root], num_pdf_classes: Mapping[int, int],
                 next_leaf: list[int]) -> EventMap:
    """Kaldi GetStubMap: the initial map, one leaf per shared root (or per pdf-class)."""
    if len(roots) == 1:
        r = roots[0]
        if r.shared:
            leaf = next_leaf[0]
            next_leaf[0] += 1
            return ConstantEventMap(leaf)
        lens = [num_pdf_classes[p] for p in r.phones]
        if len(set(lens)) > 1:
            log.warning("phones %s share a root but have different numbers of pdf-classes", r.phones)
        table = []
        for _ in range(max(lens)):
            table.append(ConstantEventMap(next_leaf[0]))
            next_leaf[0] += 1
        return TableEventMap(PDF_CLASS_KEY, table)
    max_set = max(len(r.phones) for r in roots)
    highest = max(max(r.phones) for r in roots)
    if max_set == 1 and len(roots) <= 2 * highest:
        table: list[EventMap | None] = [None] * (highest + 1)
        for r in roots:
            table[r.phones[0]] = get_stub_map(central_position, [r], num_pdf_classes, next_leaf)
        return TableEventMap(central_position, table)
    half = len(roots) // 2
    m1 = get_stub_map(central_position, roots[:half], num_pdf_classes, next_leaf)
    m2 = get_stub_map(central_position, roots[half:], num_pdf_classes, next_leaf)
    yes = sorted(p for r in roots[:half] for p in r.phones)
    return SplitEventMap(central_position, yes, m1, m2)


def replace_leaves(m: EventMap, subtrees: Mapping[int, EventMap]) -> EventMap:
    """Copy of m with each leaf a replaced by subtrees[a] (if present) -- Kaldi EventMap::Copy."""
    if isinstance(m, ConstantEventMap):
        return subtrees.get(m.answer, m)
    if isinstance(m, TableEventMap):
        return TableEventMap(m.key, [None if c is None else replace_leaves(c, subtrees) for c in m.table])
    assert isinstance(m, SplitEventMap)
    return SplitEventMap(m.key, m.yes_set, replace_leaves(m.yes, subtrees), replace_leaves(m.no, subtrees))


class _Node:
    __slots__ = ("rows", "leaf", "gain", "key", "yes_set", "yes", "no")

    def __init__(self, rows: np.ndarray, leaf: int):
        self.rows, self.leaf = rows, leaf
        self.gain, self.key, self.yes_set = 0.0, None, None
        self.yes = self.no = None

    def to_map(self) -> EventMap:
        if self.yes is None:
            return ConstantEventMap(self.leaf)
        return SplitEventMap(self.key, self.yes_set, self.yes.to_map(), self.no.to_map())


class _Splitter:
    """Finds the best question for a set of stats rows (FindBestSplitForKey over all keys)."""

    def __init__(self, stats: TreeStats, questions, var_floor: float):
        self.st = stats
        self.var_floor = var_floor
        self.keyinfo = []  # (key, column, membership matrix (nq, maxval+1), question list)
        for key in questions.keys():
            qs = [q for q in questions.questions_of(key) if len(q)]
            if not qs:
                continue
            if not -1 <= key < stats.context_width:
                raise PynnetError(f"questions for key {key}, but the stats have keys -1..{stats.context_width - 1}")
            maxval = max(max(q) for q in qs)
            mem = np.zeros((len(qs), maxval + 1))
            for i, q in enumerate(qs):
                mem[i, list(q)] = 1.0
            self.keyinfo.append((key, key + 1, mem, qs))

    def _packed(self) -> np.ndarray:
        if not hasattr(self, "_pk"):
            st = self.st
            self._pk = np.hstack([st.counts[:, None], st.sums, st.sumsq])
        return self._pk

    def best_split(self, rows: np.ndarray) -> tuple[float, int | None, tuple[int, ...] | None]:
        st = self.st
        if rows.size <= 1:
            return 0.0, None, None
        d = st.dim
        x = self._packed()[rows]          # (n, 1 + 2D): count | sums | sums of squares
        tot = x.sum(0)
        base = float(_objf_packed(tot[None, :], d, self.var_floor)[0])
        best = (0.0, None, None)
        n = rows.size
        for key, col, mem, qs in self.keyinfo:
            v = st.events[rows, col]
            if v.min() < 0:  # key not always defined: cannot split on it (Kaldi)
                continue
            present = np.bincount(v)
            uniq = np.flatnonzero(present)
            if uniq.size < 2:
                continue
            lookup = np.zeros(present.size, np.int64)
            lookup[uniq] = np.arange(uniq.size)
            onehot = np.zeros((uniq.size, n))
            onehot[lookup[v], np.arange(n)] = 1.0
            per_value = onehot @ x           # (V, 1 + 2D)
            m = np.zeros((mem.shape[0], uniq.size))
            inside = uniq < mem.shape[1]
            m[:, inside] = mem[:, uniq[inside]]
            yes = m @ per_value               # (nq, 1 + 2D)
            no = tot - yes
            nq = yes.shape[0]
            both = _objf_packed(np.vstack([yes, no]), d, self.var_floor)
            gain = both[:nq] + both[nq:] - base
            # a question that sends everything one way is no split (avoid round-off "gains")
            gain[(yes[:, 0] <= 1e-10 * tot[0]) | (no[:, 0] <= 1e-10 * tot[0])] = 0.0
            i = int(np.argmax(gain))
            if gain[i] > best[0]:
                best = (float(gain[i]), key, tuple(qs[i]))
        return best


def _objf_packed(x: np.ndarray, dim: int, var_floor: float) -> np.ndarray:
    """gauss_objf for packed rows [count | sums | sums of squares]."""
    return gauss_objf(x[:, 0], x[:, 1:1 + dim], x[:, 1 + dim:], var_floor)


@dataclass
class BuildTreeInfo:
    num_leaves_stub: int
    num_splits: int
    num_leaves_split: int
    num_removed: int
    num_pdfs: int
    like_impr: float         # total log-likelihood improvement from splitting
    cluster_change: float    # (negative) change from clustering
    cluster_thresh: float
    total_count: float

    def summary(self) -> str:
        per = self.total_count if self.total_count > 0 else 1.0
        return (f"stub leaves {self.num_leaves_stub}; {self.num_splits} splits -> {self.num_leaves_split} leaves, "
                f"like-impr {self.like_impr / per:.4f} per frame over {self.total_count:.0f} frames; "
                f"clustering (thresh {self.cluster_thresh:.1f}) removed {self.num_removed} leaves, "
                f"objf change {self.cluster_change / per:.4f} per frame; {self.num_pdfs} pdfs")


def _cluster_bottom_up(c: np.ndarray, s: np.ndarray, sq: np.ndarray, thresh: float, var_floor: float
                       ) -> tuple[np.ndarray, float]:
    """Kaldi ClusterBottomUp: merge the closest pair (smallest objf loss) while loss <= thresh.

    Returns (assignment of each item to a representative item index, total objf change)."""
    k = c.shape[0]
    assign = np.arange(k)
    if k < 2:
        return assign, 0.0
    c, s, sq = c.astype(np.float64).copy(), s.astype(np.float64).copy(), sq.astype(np.float64).copy()
    own = gauss_objf(c, s, sq, var_floor)
    active = np.ones(k, bool)

    def row_dist(i: int) -> np.ndarray:
        d = own[i] + own - gauss_objf(c[i] + c, s[i] + s, sq[i] + sq, var_floor)
        d[~active] = np.inf
        d[i] = np.inf
        return d

    dist = np.vstack([row_dist(i) for i in range(k)])
    rowarg = dist.argmin(1)
    rowmin = dist[np.arange(k), rowarg]
    change = 0.0
    while True:
        i = int(np.argmin(rowmin))
        if not np.isfinite(rowmin[i]) or rowmin[i] > thresh:
            break
        j = int(rowarg[i])
        a, b = min(i, j), max(i, j)  # keep the lower index as representative
        change -= float(dist[i, j])
        c[a] += c[b]
        s[a] += s[b]
        sq[a] += sq[b]
        own[a] = gauss_objf(c[a:a + 1], s[a:a + 1], sq[a:a + 1], var_floor)[0]
        active[b] = False
        assign[assign == b] = a
        dist[b, :] = np.inf
        dist[:, b] = np.inf
        da = row_dist(a)
        dist[a, :] = da
        dist[:, a] = da
        # rows whose nearest neighbour was a or b need a full rescan; others may now prefer a
        stale = np.flatnonzero(active & ((rowarg == a) | (rowarg == b)))
        stale = np.union1d(stale, [a])
        rowmin[b] = np.inf
        better = active & (dist[:, a] < rowmin)
        rowmin[better] = dist[better, a]
        rowarg[better] = a
        if stale.size:
            rowarg[stale] = dist[stale].argmin(1)
            rowmin[stale] = dist[stale, rowarg[stale]]
    return assign, change


def build_tree(stats: TreeStats, roots: Sequence[Root], questions, num_pdf_classes: Mapping[int, int], *,
               thresh: float = 300.0, max_leaves: int = 0, cluster_thresh: float = -1.0,
               var_floor: float = 0.01, progress: bool = False) -> tuple[ContextDependencyTree, BuildTreeInfo]:
    """Kaldi BuildTree: returns (tree, info).  See the module docstring."""
    if thresh <= 0 and max_leaves <= 0:
        raise PynnetError("build_tree: need thresh > 0 or max_leaves > 0")
    if stats.num_events == 0:
        raise PynnetError("build_tree: no statistics")
    n, p = stats.context_width, stats.central_position
    for r in roots:
        for ph in r.phones:
            if ph not in num_pdf_classes:
                raise PynnetError(f"phone {ph} of roots is not in the topology")
    next_leaf = [0]
    stub = get_stub_map(p, roots, num_pdf_classes, next_leaf)
    num_stub = next_leaf[0]
    keys = stats.keys
    stub_leaf = stub.map_events(keys, stats.events)
    unmapped = stub_leaf < 0
    if unmapped.any():
        bad = sorted(set(stats.events[unmapped, 1 + p].tolist()))
        log.warning("stats for phones %s map to no root (not in roots.int); ignoring them", bad[:20])
    nonsplit = sorted(ph for r in roots if not r.split for ph in r.phones)
    splittable = ~unmapped & ~np.isin(stats.events[:, 1 + p], nonsplit)

    splitter = _Splitter(stats, questions, var_floor)
    nodes = []
    heap: list[tuple[float, int, _Node]] = []
    counter = 0
    for leaf in range(num_stub):
        node = _Node(np.flatnonzero(splittable & (stub_leaf == leaf)), leaf)
        node.gain, node.key, node.yes_set = splitter.best_split(node.rows)
        nodes.append(node)
        heapq.heappush(heap, (-node.gain, counter, node))
        counter += 1
    num_leaves = num_stub
    like_impr = 0.0
    smallest = 1e20
    num_splits = 0
    pbar = None
    if progress:
        from tqdm import tqdm
        pbar = tqdm(total=max_leaves or None, initial=num_leaves, desc="build-tree", unit="leaf",
                    **progress_kwargs())
    while heap:
        negg, _, node = heap[0]
        gain = -negg
        if not (gain > thresh and (max_leaves <= 0 or num_leaves < max_leaves)):
            break
        heapq.heappop(heap)
        smallest = min(smallest, gain)
        like_impr += gain
        num_splits += 1
        v = stats.events[node.rows, node.key + 1]
        is_yes = np.isin(v, np.array(node.yes_set))
        node.yes = _Node(node.rows[is_yes], node.leaf)
        node.no = _Node(node.rows[~is_yes], num_leaves)
        num_leaves += 1
        node.rows = None
        for child in (node.yes, node.no):
            child.gain, child.key, child.yes_set = splitter.best_split(child.rows)
            heapq.heappush(heap, (-child.gain, counter, child))
            counter += 1
        if pbar is not None:
            pbar.update(1)
    if pbar is not None:
        pbar.close()
    with deep_recursion():
        tree = replace_leaves(stub, {nd.leaf: nd.to_map() for nd in nodes})
    num_split_leaves = num_leaves

    if cluster_thresh < 0:
        cluster_thresh = smallest
    leaf = tree.map_events(keys, stats.events)
    ok = leaf >= 0
    mapping = np.arange(num_leaves)
    num_removed = 0
    change = 0.0
    if cluster_thresh != 0:
        for sl in range(num_stub):
            rows = ok & (stub_leaf == sl)
            if not rows.any():
                continue
            lv, inv = np.unique(leaf[rows], return_inverse=True)
            cnt = np.bincount(inv, weights=stats.counts[rows], minlength=lv.size)
            s = segment_sum(inv, lv.size, stats.sums[rows])
            sq = segment_sum(inv, lv.size, stats.sumsq[rows])
            assign, ch = _cluster_bottom_up(cnt, s, sq, cluster_thresh, var_floor)
            mapping[lv] = lv[assign]
            num_removed += int(lv.size - np.unique(assign).size)
            change += ch
    # renumber: representatives in increasing order -> 0..num_pdfs-1 (Kaldi RenumberEventMap)
    reps = np.unique(mapping[np.unique(np.array(tree.leaves()))])
    renum = np.full(num_leaves, -1)
    renum[reps] = np.arange(reps.size)
    final_map = renum[mapping]
    with deep_recursion():
        tree = tree.map_leaves(final_map.tolist())
    info = BuildTreeInfo(num_stub, num_splits, num_split_leaves, num_removed, int(reps.size), like_impr, change,
                         float(cluster_thresh), stats.total_count())
    return ContextDependencyTree(n, p, tree), info


def objf_given_map(stats: TreeStats, to_pdf: EventMap, var_floor: float = 0.01) -> float:
    """Total log-likelihood of the stats with one Gaussian per leaf (Kaldi ObjfGivenMap)."""
    leaf = to_pdf.map_events(stats.keys, stats.events)
    ok = leaf >= 0
    lv, inv = np.unique(leaf[ok], return_inverse=True)
    cnt = np.bincount(inv, weights=stats.counts[ok], minlength=lv.size)
    return float(gauss_objf(cnt, segment_sum(inv, lv.size, stats.sums[ok]),
                            segment_sum(inv, lv.size, stats.sumsq[ok]), var_floor).sum())


def leaf_stats(stats: TreeStats, to_pdf: EventMap, num_pdfs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Pooled (count, sum, sumsq) per pdf of a tree, plus the number of stats rows it cannot map."""
    leaf = to_pdf.map_events(stats.keys, stats.events)
    ok = (leaf >= 0) & (leaf < num_pdfs)
    li = leaf[ok]
    cnt = np.bincount(li, weights=stats.counts[ok], minlength=num_pdfs).astype(np.float64)
    return cnt, segment_sum(li, num_pdfs, stats.sums[ok]), segment_sum(li, num_pdfs, stats.sumsq[ok]), int((~ok).sum())


def iter_items(alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
               features: Mapping[str, np.ndarray] | Callable[[str], np.ndarray | None]
               ) -> Iterator[tuple[str, np.ndarray, np.ndarray | None]]:
    """Pair alignments with features (a dict or a ``utt -> feats or None`` function)."""
    pairs = alignments.items() if isinstance(alignments, Mapping) else alignments
    get = features.get if isinstance(features, Mapping) else features
    for utt, ali in pairs:
        yield utt, np.asarray(ali), get(utt)
