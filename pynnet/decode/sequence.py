"""The lattice mathematics of nnet1 sequence-discriminative training (Kaldi's
``nnet-train-mpe-sequential`` (sMBR / MPFE) and ``nnet-train-mmi-sequential``), on our state-level
lattices (:class:`pynnet.decode.lattice.Lattice`).

Per utterance, what Kaldi's trainers do and which function here does it::

    if not has_path(lat): skip                      # Kaldi: "Empty lattice of UTT, skipping"
    times, T = state_times(lat)                     # LatticeStateTimes; T != #features: skip
    lat = rescore_acoustics(lat, loglikes, tables.pdf, old_acoustic_scale=0.0)
                                                    # ScaleLattice(old_acoustic_scale) + LatticeAcousticRescore
    derivs, acc = mpe_posteriors(lat, ali, tables, silence_phones, criterion="smbr",
                                 acoustic_scale=kappa, lm_scale=1.0)
    nnet_diff = -derivs                             # Kaldi: nnet_diff.Scale(-1.0)
    # or MMI:
    nnet_diff, stats = mmi_posteriors(lat, ali, tables, acoustic_scale=kappa, lm_scale=1.0,
                                      loglikes=loglikes)   # den - num, already the loss gradient

``loglikes`` is the network's pre-softmax output (minus the log-priors with
``--class-frame-counts``), ``[T, num_pdfs]``.  The scales are applied as Kaldi's
``ScaleLattice(LatticeScale(lm_scale, acoustic_scale))`` does: an arc's log-likelihood is
``-(lm_scale * graph + acoustic_scale * acoustic)``, final weights likewise.

Sign conventions (both as Kaldi's):

- ``mpe_posteriors`` returns ``d E[acc] / d (acoustic_scale * loglikes[t, pdf])``: for every arc
  ``gamma(arc) * (c(arc) - c_avg)`` (LatticeForwardBackwardMpeVariants), summed per frame and pdf
  (PosteriorToPdfMatrix).  The trainer MINIMISES ``-E[acc]``, so it back-propagates ``-derivs``
  (Kaldi's ``nnet_diff.Scale(-1.0)``).  The derivative w.r.t. the unscaled log-likelihoods is
  ``acoustic_scale * derivs``; Kaldi does not apply that factor (it is absorbed by the learning
  rate), and neither should a trainer that wants Kaldi's updates.
- ``mmi_posteriors`` returns ``den - num`` = ``-d MMI / d (acoustic_scale * loglikes)``: the
  gradient of the loss, back-propagated as it is.

Empty lattices (no path from the start state to a final state; Kaldi's ``Start() == -1``):
:func:`has_path` tells; ``mpe_posteriors`` and ``mmi_posteriors`` return None for them (skip the
utterance, as Kaldi does with a warning), ``forward_backward`` returns all-zero posteriors and a
total log-likelihood of -inf, and ``state_times`` / ``rescore_acoustics`` fail in one line.

The passes run over topological levels of the lattice (``_schedule``), vectorised over each
level's arcs; float64 throughout, the derivative matrices float32 (Kaldi's BaseFloat).  The
levels and state times of the last lattice shape are kept (keyed by a digest of src, dst,
ilabel and finals), so the calls above compute them once per utterance: rescoring changes only
weights.  Measured (CPU time per utterance, a shared 2-core machine at load 5, so noisy):
rescore_acoustics + mpe_posteriors took 45-100 ms on a synthetic 300-frame lattice with 16.5k
arcs (574 levels), the topology (``_schedule`` most of it) half or more; 25-50 ms on a 288-frame
decoder lattice (lattice beam 7) with 5.4k arcs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from pynnet.decode.lattice import Lattice, _schedule
from pynnet.hmm.ali_io import TransitionTables
from pynnet.io.errors import fail

MMI_DROP_THRESHOLD = 1e-20   # nnet-train-mmi-sequential: den posterior of the reference pdf below this
_UNREACHED = -(1 << 40)      # time of a state not reachable from the start, while times are computed


@dataclass
class _Levels:
    """One direction's processing plan: the arcs in processing order, level after level; a
    level's arcs (a slice of ``order``) read only states that earlier levels finished, and come
    in groups, one per state they write (the destination forwards, the source backwards)."""
    order: np.ndarray       # arc ids in processing order
    read: np.ndarray        # per position: the state the arc reads (src forwards, dst backwards)
    levels: list[tuple[int, int, np.ndarray, np.ndarray]]   # (begin, end, written states, group starts)


@dataclass
class _Topo:
    """What every pass needs of a lattice's shape (not of its weights)."""
    times: np.ndarray       # int64 [S]: frame of each state; -1 = not reachable from the start
    num_frames: int         # frames of every complete path; -1 = no complete path
    fwd: _Levels            # by the level of the destination, ascending
    bwd: _Levels            # by the level of the source, descending
    start_level: int        # the forward level that writes the start state (arcs into it), or -1
    emitting: np.ndarray    # ids of the arcs with a transition-id whose source is reachable
    frame: np.ndarray       # their frame (the time of their source state)


_last: tuple[tuple, _Topo] | None = None     # the last lattice shape seen, and its _Topo


def _topology(lat: Lattice) -> _Topo:
    """The lattice's _Topo, computed once per lattice shape: rescoring keeps the shape, so
    ``rescore_acoustics`` and the posterior functions after it share one (the key is a digest
    of the arrays' contents, so arrays changed in place are not mistaken for the old ones)."""
    global _last
    h = hashlib.blake2b(digest_size=16)
    for a in (lat.src, lat.dst, lat.ilabel, lat.final_state):
        h.update(str(a.dtype).encode() + b"%d:" % a.size)
        h.update(np.ascontiguousarray(a).tobytes())
    key = (lat.num_states, lat.start, h.digest())
    last = _last
    if last is not None and last[0] == key:
        return last[1]
    topo = _build_topology(lat)
    _last = (key, topo)
    return topo


def _levels(order: np.ndarray, level: np.ndarray, head: np.ndarray, read: np.ndarray) -> _Levels:
    """A _Levels from arcs already sorted by (level, head): ``level`` and ``head`` per arc."""
    lv, hd = level[order], head[order]
    level_cut = np.flatnonzero(np.diff(lv)) + 1
    group_cut = np.flatnonzero((np.diff(hd) != 0) | (np.diff(lv) != 0)) + 1
    bounds = np.concatenate(([0], level_cut, [order.size])) if order.size else np.zeros(1, np.int64)
    groups = np.concatenate(([0], group_cut))
    where = np.searchsorted(groups, bounds)
    levels = []
    for k in range(bounds.size - 1):
        a, b = int(bounds[k]), int(bounds[k + 1])
        starts = groups[where[k]:where[k + 1]]
        levels.append((a, b, hd[starts], starts - a))
    return _Levels(order, read[order], levels)


def _build_topology(lat: Lattice) -> _Topo:
    """Levels (``_schedule``; errors on a cycle), state times (errors if two paths reach a state
    after different numbers of frames, or complete paths differ in length), frames."""
    S = lat.num_states
    none = np.zeros(0, np.int64)
    if not 0 <= lat.start < S:
        empty = _Levels(none, none, [])
        return _Topo(np.full(max(S, 0), -1, np.int64), -1, empty, empty, -1, none, none)
    blocks = _schedule(lat).blocks
    level = np.zeros(S, np.int64)
    for k, (_, udst, _) in enumerate(blocks):
        level[udst] = k + 1
    order = np.concatenate([b for b, _, _ in blocks]) if blocks else none
    fwd = _levels(order, level[lat.dst], lat.dst, lat.src)
    src_level = level[lat.src]
    bwd = _levels(np.lexsort((lat.src, src_level))[::-1], src_level, lat.src, lat.dst)
    start_level = int(level[lat.start]) - 1
    # times: forwards, the latest frame any predecessor gives (unreachable states stay negative)
    times = np.full(S, _UNREACHED, np.int64)
    times[lat.start] = 0
    step = (lat.ilabel[fwd.order] != 0).astype(np.int64)
    for k, (a, b, heads, starts) in enumerate(fwd.levels):
        t = np.maximum.reduceat(times[fwd.read[a:b]] + step[a:b], starts)
        times[heads] = np.maximum(times[heads], t) if k == start_level else t
    times[times < 0] = -1
    # every arc from a reachable state must land at its source's time (+1 with a transition-id)
    arc_t = times[lat.src]
    lands = arc_t + (lat.ilabel != 0)
    bad = np.flatnonzero((arc_t >= 0) & (times[lat.dst] != lands))
    if bad.size:
        d, x, y = int(lat.dst[bad[0]]), int(lands[bad[0]]), int(times[lat.dst[bad[0]]])
        fail(f"lattice paths have different lengths: state {d} is reached after {min(x, y)} "
             f"and after {max(x, y)} frames")
    fs = lat.final_state[times[lat.final_state] >= 0]
    num_frames = -1
    if fs.size:
        num_frames = int(times.max())
        short = fs[times[fs] != num_frames]
        if short.size:
            fail(f"lattice paths have different lengths: final state {short[0]} is at frame "
                 f"{times[short[0]]}, the lattice reaches frame {num_frames}")
    emitting = np.flatnonzero((lat.ilabel != 0) & (arc_t >= 0))
    return _Topo(times, num_frames, fwd, bwd, start_level, emitting, arc_t[emitting])


def has_path(lat: Lattice) -> bool:
    """Whether the lattice has a complete path (start state to a final state); Kaldi's trainers
    skip an utterance whose lattice is empty, with a warning."""
    return _topology(lat).num_frames >= 0


def state_times(lat: Lattice) -> tuple[np.ndarray, int]:
    """Kaldi's LatticeStateTimes: the frame of each state (the number of arcs with a
    transition-id, ilabel != 0, on any path from the start state to it; -1 for states not
    reachable from the start) and the number of frames of the lattice.  One-line errors: a
    cyclic lattice, paths reaching a state (or the end) after different numbers of frames, an
    empty lattice (check :func:`has_path` first to skip those)."""
    topo = _topology(lat)
    _need_path(topo)
    return topo.times.copy(), topo.num_frames


def _need_path(topo: _Topo) -> None:
    if topo.num_frames < 0:
        fail("empty lattice: no path from the start state to a final state")


def _check_tids(tids: np.ndarray, n: int, what: str) -> None:
    if tids.size and (tids.min() < 0 or tids.max() >= n):
        bad = tids[(tids < 0) | (tids >= n)][0]
        fail(f"{what} has transition-id {bad}, the model has 1..{n - 1} (from another model?)")


def rescore_acoustics(lat: Lattice, loglikes: np.ndarray, tid2pdf: np.ndarray, *,
                      old_acoustic_scale: float = 0.0) -> Lattice:
    """The lattice with new acoustic costs, as nnet1's trainers make it: every acoustic cost
    (arcs and final weights) times ``old_acoustic_scale`` (Kaldi's --old-acoustic-scale, default
    0: the decoder's scores are discarded), then ``-loglikes[time(src), pdf(ilabel)]`` added to
    each arc with a transition-id (LatticeAcousticRescore).  ``tid2pdf``: transition-id -> pdf
    (``TransitionTables.pdf``).  Errors (one line): the number of rows of ``loglikes`` is not
    the lattice's number of frames, transition-ids or pdfs out of range, an empty lattice."""
    topo = _topology(lat)
    _need_path(topo)
    loglikes = np.asarray(loglikes)
    T = topo.num_frames
    if loglikes.ndim != 2 or loglikes.shape[0] != T:
        fail(f"log-likelihoods have {loglikes.shape[0] if loglikes.ndim else 0} frames, the "
             f"lattice {T} (lattice/feature mismatch)")
    tid2pdf = np.asarray(tid2pdf)
    _check_tids(lat.ilabel, tid2pdf.size, "lattice")
    pdf = tid2pdf[lat.ilabel[topo.emitting]]
    if pdf.size and pdf.max() >= loglikes.shape[1]:
        fail(f"lattice has pdf {pdf.max()}, the log-likelihoods have {loglikes.shape[1]} "
             "columns (network and model do not match)")
    acoustic = lat.acoustic * old_acoustic_scale
    acoustic[topo.emitting] -= loglikes[topo.frame, pdf]
    return Lattice(lat.num_states, lat.start, lat.src, lat.dst, lat.ilabel, lat.olabel, lat.graph,
                   acoustic, lat.final_state, lat.final_graph, lat.final_acoustic * old_acoustic_scale)


# ------------------------------------------------------------------------------ forward-backward
@dataclass
class _Fb:
    topo: _Topo
    w: np.ndarray           # [E] scaled arc log-likelihood
    final_w: np.ndarray     # [F] scaled final log-likelihood
    alpha: np.ndarray       # [S]
    beta: np.ndarray        # [S]
    total: float
    gamma: np.ndarray       # [E] arc posteriors


def _forward_backward(lat: Lattice, topo: _Topo, acoustic_scale: float, lm_scale: float) -> _Fb:
    w = -(lm_scale * lat.graph + acoustic_scale * lat.acoustic)
    final_w = -(lm_scale * lat.final_graph + acoustic_scale * lat.final_acoustic)
    S = lat.num_states
    alpha = np.full(S, -np.inf)
    beta = np.full(S, -np.inf)
    if topo.num_frames < 0:
        return _Fb(topo, w, final_w, alpha, beta, -np.inf, np.zeros(lat.num_arcs))
    alpha[lat.start] = 0.0
    fwd, w_f = topo.fwd, w[topo.fwd.order]
    for k, (a, b, heads, starts) in enumerate(fwd.levels):
        red = np.logaddexp.reduceat(alpha[fwd.read[a:b]] + w_f[a:b], starts)
        alpha[heads] = np.logaddexp(alpha[heads], red) if k == topo.start_level else red
    beta[lat.final_state] = final_w
    bwd, w_b = topo.bwd, w[topo.bwd.order]
    for a, b, heads, starts in bwd.levels:
        red = np.logaddexp.reduceat(beta[bwd.read[a:b]] + w_b[a:b], starts)
        beta[heads] = np.logaddexp(beta[heads], red)
    total = float(np.logaddexp.reduce(alpha[lat.final_state] + final_w))
    gamma = np.exp(alpha[lat.src] + w + beta[lat.dst] - total)
    return _Fb(topo, w, final_w, alpha, beta, total, gamma)


def forward_backward(lat: Lattice, acoustic_scale: float = 1.0, lm_scale: float = 1.0
                     ) -> tuple[np.ndarray, float]:
    """Arc posteriors ``[E]`` (epsilon arcs included) and the total log-likelihood
    ``log sum_paths exp(-(lm_scale*graph + acoustic_scale*acoustic))`` over complete paths
    (Kaldi's LatticeForwardBackward after ScaleLattice; its Posterior is these posteriors summed
    per (frame of the arc's source state, transition-id) over arcs with a transition-id).
    Arcs off every complete path get 0; an empty lattice gives zeros and -inf."""
    fb = _forward_backward(lat, _topology(lat), acoustic_scale, lm_scale)
    return fb.gamma, fb.total


def lattice_posteriors(lat: Lattice, acoustic_scale: float = 1.0
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kaldi's lattice-to-post --acoustic-scale: (frames, transition-ids, posteriors) of the
    arcs with a transition-id (not summed over arcs with the same frame and transition-id; the
    sums are the same).  An empty lattice gives empty arrays."""
    topo = _topology(lat)
    if topo.num_frames < 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    fb = _forward_backward(lat, topo, acoustic_scale, 1.0)
    return topo.frame.astype(np.int64), lat.ilabel[topo.emitting].astype(np.int64), fb.gamma[topo.emitting]


def _pdf_matrix(lat: Lattice, topo: _Topo, tables: TransitionTables, values: np.ndarray,
                num_pdfs: int | None) -> np.ndarray:
    """Kaldi's PosteriorToPdfMatrix: per-arc values summed per (frame, pdf) over arcs with a
    transition-id, ``[T, num_pdfs]`` float32."""
    P = _num_pdfs(tables, num_pdfs)
    T = topo.num_frames
    pdf = tables.pdf[lat.ilabel[topo.emitting]].astype(np.int64)
    if pdf.size and pdf.max() >= P:
        fail(f"lattice has pdf {pdf.max()}, but num_pdfs is {P}")
    idx = topo.frame * P + pdf
    return np.bincount(idx, weights=values[topo.emitting], minlength=T * P).reshape(T, P).astype(np.float32)


def _num_pdfs(tables: TransitionTables, num_pdfs: int | None) -> int:
    return int(num_pdfs) if num_pdfs is not None else int(tables.pdf[1:].max()) + 1


def _checked_ref(lat: Lattice, topo: _Topo, ref_tids: np.ndarray, tables: TransitionTables) -> np.ndarray:
    ref = np.asarray(ref_tids, np.int64).reshape(-1)
    if ref.size != topo.num_frames:
        fail(f"reference alignment has {ref.size} frames, the lattice {topo.num_frames}")
    n = tables.pdf.size
    _check_tids(lat.ilabel, n, "lattice")
    if ref.size and (ref.min() < 1 or ref.max() >= n):
        bad = ref[(ref < 1) | (ref >= n)][0]
        fail(f"reference alignment has transition-id {bad}, the model has 1..{n - 1} (from another model?)")
    return ref


# ------------------------------------------------------------------------------ MPE / sMBR
def _frame_accuracies(lat: Lattice, topo: _Topo, ref: np.ndarray, tables: TransitionTables,
                      silence_phones: Iterable[int], criterion: str,
                      one_silence_class: bool) -> np.ndarray:
    """Per-arc frame accuracy ``[E]`` (0 or 1) of LatticeForwardBackwardMpeVariants, against
    the reference transition-id of the arc's frame: "smbr" compares pdfs, "mpfe" phones.  Old
    behaviour (``one_silence_class=False``): correct = same and the arc's phone not silence;
    ``one_silence_class=True``: correct = same, or both silence.  Epsilon arcs (and arcs not
    reachable from the start) are 0."""
    if criterion not in ("smbr", "mpfe"):
        fail(f"unknown criterion '{criterion}' (smbr or mpfe)")
    acc = np.zeros(lat.num_arcs)
    tid, ref = lat.ilabel[topo.emitting], ref[topo.frame]
    labels = tables.pdf if criterion == "smbr" else tables.phone
    same = labels[tid] == labels[ref]
    sil = np.asarray(sorted(set(int(p) for p in silence_phones)), np.int64)
    phone_sil = np.isin(tables.phone[tid], sil)
    if one_silence_class:
        correct = same | (phone_sil & np.isin(tables.phone[ref], sil))
    else:
        correct = same & ~phone_sil
    acc[topo.emitting] = correct
    return acc


def _mpe_arcs(lat: Lattice, fb: _Fb, acc: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-arc ``gamma * (c(arc) - c_avg)`` and ``c_avg`` (expected accuracy): Kaldi's second
    forward and backward passes (alpha_smbr, beta_smbr), where ``c(arc)`` = the expected accuracy
    of the complete paths through the arc."""
    topo, w, src, dst = fb.topo, fb.w, lat.src, lat.dst
    with np.errstate(invalid="ignore"):     # -inf - -inf: states on no complete path -> 0
        fwd_share = np.nan_to_num(np.exp(fb.alpha[src] + w - fb.alpha[dst]), nan=0.0)
        bwd_share = np.nan_to_num(np.exp(fb.beta[dst] + w - fb.beta[src]), nan=0.0)
    # (each state is written by one group of one level; the start state's own 0 plus its
    # incoming shares, all 0, is 0 too: plain assignment is right everywhere)
    fwd, bwd = topo.fwd, topo.bwd
    a_acc = np.zeros(lat.num_states)        # expected accuracy of the partial paths into a state
    share, acc_f = fwd_share[fwd.order], acc[fwd.order]
    for a, b, heads, starts in fwd.levels:
        a_acc[heads] = np.add.reduceat(share[a:b] * (a_acc[fwd.read[a:b]] + acc_f[a:b]), starts)
    b_acc = np.zeros(lat.num_states)        # ... of the partial paths from a state to the end
    share, acc_b = bwd_share[bwd.order], acc[bwd.order]
    for a, b, heads, starts in bwd.levels:
        b_acc[heads] = np.add.reduceat(share[a:b] * (b_acc[bwd.read[a:b]] + acc_b[a:b]), starts)
    fs = lat.final_state
    avg = float(np.sum(np.exp(fb.alpha[fs] + fb.final_w - fb.total) * a_acc[fs]))
    return fb.gamma * (a_acc[src] + acc + b_acc[dst] - avg), avg


def mpe_posteriors(lat: Lattice, ref_tids: np.ndarray, tables: TransitionTables,
                   silence_phones: Iterable[int], *, criterion: str = "smbr",
                   one_silence_class: bool = False, acoustic_scale: float = 1.0,
                   lm_scale: float = 1.0, num_pdfs: int | None = None
                   ) -> tuple[np.ndarray, float] | None:
    """Kaldi's LatticeForwardBackwardMpeVariants + PosteriorToPdfMatrix (nnet-train-mpe-sequential
    --do-smbr=true: "smbr", false: "mpfe"; --one-silence-class; --silence-phones).

    ``lat`` is the rescored lattice (:func:`rescore_acoustics`); ``ref_tids`` the reference
    alignment (transition-ids, one per frame).  Returns ``(derivs, expected_acc)``:
    ``derivs[t, pdf]`` (float32, ``[T, num_pdfs]``, num_pdfs default ``max(tables.pdf) + 1``) =
    ``d E[acc] / d (acoustic_scale * loglikes[t, pdf])`` = the sum over the arcs of frame t with
    that pdf of ``gamma(arc) * (c(arc) - c_avg)``; the trainer back-propagates ``-derivs``
    (Kaldi's ``nnet_diff.Scale(-1.0)``).  ``expected_acc`` = E[frame accuracy] over the lattice's
    paths (Kaldi's utt_frame_acc; it logs ``expected_acc / T``).  None for an empty lattice."""
    topo = _topology(lat)
    if topo.num_frames < 0:
        return None
    ref = _checked_ref(lat, topo, ref_tids, tables)
    acc = _frame_accuracies(lat, topo, ref, tables, silence_phones, criterion, one_silence_class)
    fb = _forward_backward(lat, topo, acoustic_scale, lm_scale)
    arc_derivs, avg = _mpe_arcs(lat, fb, acc)
    return _pdf_matrix(lat, topo, tables, arc_derivs, num_pdfs), avg


# ------------------------------------------------------------------------------ MMI
@dataclass
class MmiStats:
    """What nnet-train-mmi-sequential reports of an utterance."""
    num_frames: int
    lattice_loglike: float      # total scaled log-likelihood of the den lattice (Kaldi's lat_like)
    post_on_ali: float          # sum over frames of the den posterior of the reference pdf
    dropped_frames: np.ndarray  # frames whose reference pdf has den posterior < 1e-20 (zeroed
                                # when drop_frames; Kaldi: "Dropped" / "Would drop")
    objective: float | None     # acoustic_scale * sum_t loglikes[t, ref pdf] - lattice_loglike
                                # (Kaldi's mmi_obj; None without loglikes)


def mmi_posteriors(lat: Lattice, ref_tids: np.ndarray, tables: TransitionTables, *,
                   acoustic_scale: float = 1.0, lm_scale: float = 1.0, drop_frames: bool = True,
                   loglikes: np.ndarray | None = None, num_pdfs: int | None = None
                   ) -> tuple[np.ndarray, MmiStats] | None:
    """nnet-train-mmi-sequential's derivative: den posteriors per (frame, pdf) of the rescored
    lattice minus the reference alignment's pdfs (one-hot), float32 ``[T, num_pdfs]``; that is
    ``-d MMI / d (acoustic_scale * loglikes)``, the loss gradient, back-propagated as it is.
    With ``drop_frames`` (Kaldi's default), frames whose reference pdf has den posterior below
    1e-20 (the reference path left the lattice: wrong transcript, search error) get a zero row.
    ``loglikes`` (the matrix the lattice was rescored with) only serves the reported objective.
    None for an empty lattice."""
    topo = _topology(lat)
    if topo.num_frames < 0:
        return None
    ref = _checked_ref(lat, topo, ref_tids, tables)
    fb = _forward_backward(lat, topo, acoustic_scale, lm_scale)
    diff = _pdf_matrix(lat, topo, tables, fb.gamma, num_pdfs)
    T = topo.num_frames
    rows, ref_pdf = np.arange(T), tables.pdf[ref].astype(np.int64)
    if ref_pdf.size and ref_pdf.max() >= diff.shape[1]:
        fail(f"reference alignment has pdf {ref_pdf.max()}, but num_pdfs is {diff.shape[1]}")
    on_ali = diff[rows, ref_pdf]
    dropped = np.flatnonzero(on_ali < MMI_DROP_THRESHOLD)
    diff[rows, ref_pdf] -= 1.0
    if drop_frames:
        diff[dropped] = 0.0
    objective = None
    if loglikes is not None:
        ll = np.asarray(loglikes, np.float64)
        if ll.ndim != 2 or ll.shape[0] != T or ll.shape[1] <= (ref_pdf.max() if T else -1):
            fail(f"log-likelihoods are {'x'.join(map(str, ll.shape))}, the lattice has {T} "
                 f"frames and reference pdfs up to {ref_pdf.max() if T else '-'}")
        objective = acoustic_scale * float(ll[rows, ref_pdf].sum()) - fb.total
    return diff, MmiStats(T, fb.total, float(on_ali.astype(np.float64).sum()), dropped, objective)


def frame_intervals(frames: Sequence[int]) -> str:
    """Runs of consecutive frames as nnet-train-mmi-sequential prints the dropped ones:
    ``"3..5frm 9..9frm"``."""
    f = np.asarray(frames, np.int64)
    if not f.size:
        return ""
    cut = np.flatnonzero(np.diff(f) != 1) + 1
    return " ".join(f"{r[0]}..{r[-1]}frm" for r in np.split(f, cut))


__all__ = ["has_path", "state_times", "rescore_acoustics", "forward_backward", "mpe_posteriors", "mmi_posteriors", "MmiStats", "frame_intervals", "MMI_DROP_THRESHOLD"]
