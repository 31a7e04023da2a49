"""Alignment conversion to a new tree (Kaldi convert-ali) and model initialisation from tree
statistics (Kaldi gmm-init-model).

``convert_alignments`` keeps each utterance's phone sequence and, inside each phone, the HMM
state and transition index of every frame; only the pdfs (and so the transition-ids) change,
recomputed under the new tree from each phone's context window.  It is vectorised: the events of
all frames are mapped through the new tree at once, then (phone, hmm-state, forward-pdf,
self-loop-pdf) tuples are looked up in the new transition model.

``init_model_from_tree_stats`` gives every leaf one Gaussian from the pooled stats of the events
that map to it (mean = sum/count, variance floored at ``var_floor``), as gmm-init-model.
"""
from __future__ import annotations

import itertools
import logging
from typing import Iterable, Iterator, Mapping

import numpy as np

from pynnet.hmm.tree import TransitionTables, TreeStats, group_rows, leaf_stats, split_to_phones
from pynnet.hmm.tree_io import ContextDependencyTree, as_tree
from pynnet.io.errors import PynnetError

log = logging.getLogger(__name__)


class AlignmentConverter:
    """Converts alignments from ``old_tm`` to ``new_tm``/``new_tree`` (same topology per phone).

    ``convert_many`` works on a batch of utterances at once: the tree is walked once per distinct
    (pdf-class, context window) of the batch and transition states are found by binary search."""

    def __init__(self, old_tm, new_tm, new_tree, phone_map: np.ndarray | None = None):
        self.old = old_tm if isinstance(old_tm, TransitionTables) else TransitionTables(old_tm)
        self.new = new_tm if isinstance(new_tm, TransitionTables) else TransitionTables(new_tm)
        self.tree: ContextDependencyTree = as_tree(new_tree)
        self.phone_map = phone_map
        tup = np.array([[int(x) for x in t] for t in self.new.tuples], dtype=np.int64).reshape(-1, 4)
        self._radix = (int(tup[:, 1].max(initial=0)) + 1, int(tup[:, 2].max(initial=0)) + 2,
                       int(tup[:, 3].max(initial=0)) + 2)
        codes = self._code(tup[:, 0], tup[:, 1], tup[:, 2], tup[:, 3])
        order = np.argsort(codes)
        self._codes, self._ts = codes[order], order + 1  # transition states are 1-based
        self._state2id = np.asarray(self.new.state2id, dtype=np.int64)
        # per new (phone, hmm_state): pdf-classes from the new topology (-2: no such state)
        new_topo = new_tm.topo if not isinstance(new_tm, TransitionTables) else None
        old_topo = old_tm.topo if not isinstance(old_tm, TransitionTables) else None
        if new_topo is None:
            raise PynnetError("AlignmentConverter needs the new TransitionModel (for its topology)")
        phones = list(new_topo.phones)
        max_states = max(len(new_topo.topology_for_phone(ph)) for ph in phones)
        self.fwd_class = np.full((max(phones) + 1, max_states), -2, np.int64)
        self.loop_class = np.full((max(phones) + 1, max_states), -2, np.int64)
        old_phones = set(old_topo.phones) if old_topo is not None else set()
        for ph in phones:
            entry = new_topo.topology_for_phone(ph)
            if ph in old_phones:
                old_entry = old_topo.topology_for_phone(ph)
                if len(old_entry) != len(entry) or any(
                        [t[0] for t in a.transitions] != [t[0] for t in b.transitions]
                        for a, b in zip(old_entry, entry)):
                    raise PynnetError(f"phone {ph} has different topologies in the old and new models")
            for hs, st in enumerate(entry):
                self.fwd_class[ph, hs] = st.forward_pdf_class
                self.loop_class[ph, hs] = st.self_loop_pdf_class

    def _code(self, phone, hs, fpdf, lpdf):
        r1, r2, r3 = self._radix
        return ((np.asarray(phone, np.int64) * r1 + hs) * r2 + (fpdf + 1)) * r3 + (lpdf + 1)

    def convert(self, ali: np.ndarray) -> np.ndarray | None:
        """New transition-ids for one alignment, or None if it is not a sequence of whole phones."""
        return self.convert_many([ali])[0]

    def convert_many(self, alis: list[np.ndarray]) -> list[np.ndarray | None]:
        n, p = self.tree.context_width, self.tree.central_position
        out: list[np.ndarray | None] = [None] * len(alis)
        parts_win, parts_ali, lens, which = [], [], [], []
        for i, ali in enumerate(alis):
            ali = np.asarray(ali, dtype=np.int64)
            if ali.size == 0:
                out[i] = ali.astype(np.int32)
                continue
            ok, starts, ends = split_to_phones(self.old, ali)
            if not ok:
                continue
            seq = self.old.phone[ali[starts]].astype(np.int64)
            if self.phone_map is not None:  # Kaldi maps every position, the central phone too
                if seq.max() >= self.phone_map.size or np.any(self.phone_map[seq] <= 0):
                    raise PynnetError(f"phone(s) {sorted(set(seq.tolist()))} not all in the phone map")
                seq = self.phone_map[seq]
            nph = seq.size
            padded = np.concatenate((np.zeros(p, np.int64), seq, np.zeros(n - 1 - p, np.int64)))
            windows = np.empty((nph, n), np.int64)
            for j in range(n):
                windows[:, j] = padded[j:j + nph]
            parts_win.append(windows[np.repeat(np.arange(nph), ends - starts)])
            parts_ali.append(ali)
            lens.append(ali.size)
            which.append(i)
        if not parts_ali:
            return out
        ali = np.concatenate(parts_ali)
        win = np.concatenate(parts_win)
        phone = win[:, p]
        hs = self.old.hmm_state[ali].astype(np.int64)
        tidx = self.old.trans_index[ali]
        if phone.max() >= self.fwd_class.shape[0] or hs.max() >= self.fwd_class.shape[1]:
            raise PynnetError("alignments contain phones or HMM states the new model does not have")
        fc, lc = self.fwd_class[phone, hs], self.loop_class[phone, hs]
        if np.any(fc == -2):
            bad = np.flatnonzero(fc == -2)[0]
            raise PynnetError(f"phone {phone[bad]} state {hs[bad]} is not in the new model's topology")
        fpdf = self._map(np.column_stack([fc, win]))
        lpdf = np.where(lc >= 0, self._map(np.column_stack([np.maximum(lc, 0), win])), -1)
        if np.any(fpdf < 0) or np.any((lc >= 0) & (lpdf < 0)):
            bad = np.flatnonzero((fpdf < 0) | ((lc >= 0) & (lpdf < 0)))[0]
            raise PynnetError(f"the new tree has no pdf for phone window {win[bad].tolist()}, "
                              f"pdf-class {fc[bad]}")
        codes = self._code(phone, hs, fpdf, lpdf)
        pos = np.searchsorted(self._codes, codes)
        pos = np.minimum(pos, self._codes.size - 1)
        missing = self._codes[pos] != codes
        if missing.any():
            b = np.flatnonzero(missing)[0]
            raise PynnetError(f"transition state (phone {phone[b]}, hmm-state {hs[b]}, pdfs {fpdf[b]}/{lpdf[b]}) "
                              "is not in the new model; was it built from this tree?")
        tids = (self._state2id[self._ts[pos]] + tidx).astype(np.int32)
        for i, piece in zip(which, np.split(tids, np.cumsum(lens)[:-1])):
            out[i] = piece
        return out

    def _map(self, events: np.ndarray) -> np.ndarray:
        """Tree lookup of (pdf-class, window) rows, walking the tree once per distinct row."""
        uniq, inv = group_rows(events)
        keys = [-1] + list(range(self.tree.context_width))
        return self.tree.to_pdf.map_events(keys, uniq)[inv]


def convert_alignments(old_tm, new_tm, new_tree, alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
                       phone_map: np.ndarray | None = None, batch_size: int = 500
                       ) -> Iterator[tuple[str, np.ndarray]]:
    """Kaldi convert-ali: yield (utt, new alignment); utterances that fail are skipped with a warning."""
    conv = AlignmentConverter(old_tm, new_tm, new_tree, phone_map)
    pairs = iter(alignments.items() if isinstance(alignments, Mapping) else alignments)
    while True:
        batch = list(itertools.islice(pairs, batch_size))
        if not batch:
            return
        for (utt, _), new in zip(batch, conv.convert_many([a for _, a in batch])):
            if new is None:
                log.warning("could not convert alignment of %s (not a sequence of whole phones)", utt)
                continue
            yield utt, new


def init_model_from_tree_stats(tree, topo, stats: TreeStats, *, var_floor: float = 0.01, old_tm=None,
                               old_tree=None, old_am=None):
    """Kaldi gmm-init-model: returns (TransitionModel, AmDiagGmm, occs).

    One Gaussian per pdf from the pooled stats of the events mapped to it.  A pdf with no stats
    (a phone never seen in training) gets the global mean/variance, with a warning.  With
    ``old_tree`` and ``old_am`` (Kaldi's optional <old-tree> <old-model>), each new pdf instead
    copies the whole GMM of the old pdf that most of its data maps to (Kaldi InitAmGmmFromOld).
    With ``old_tm`` the transition probabilities are copied for every (phone, hmm-state,
    transition) the old model has."""
    import kaldi_hmm_gmm as khg
    t = as_tree(tree)
    ctx = t.to_kaldi()
    tm = khg.TransitionModel(ctx, topo)
    num_pdfs = tm.num_pdfs
    if t.num_pdfs != num_pdfs:
        raise PynnetError(f"tree has {t.num_pdfs} leaves but the transition model {num_pdfs} pdfs")
    cnt, s, sq, unmapped = leaf_stats(stats, t.to_pdf, num_pdfs)
    if unmapped:
        log.warning("%d stats events (of %d) map to no pdf of the tree", unmapped, stats.num_events)
    if stats.num_events == 0 or cnt.sum() <= 0:
        raise PynnetError("no statistics to initialise the model from")
    gc, gs, gsq = cnt.sum(), s.sum(0), sq.sum(0)
    gmean = gs / gc
    gvar = np.maximum(gsq / gc - gmean * gmean, var_floor)
    dim = stats.dim
    empty = np.flatnonzero(cnt <= 0)
    if empty.size:
        log.warning("%d pdf(s) have no stats (e.g. pdf %d); initialising them from the global mean/variance",
                    empty.size, int(empty[0]))
    am = khg.AmDiagGmm()
    source = None
    if old_tree is not None and old_am is not None:
        source = _old_pdf_sources(stats, t, as_tree(old_tree), num_pdfs, old_am.num_pdfs)
    for pdf in range(num_pdfs):
        if source is not None and source[pdf] >= 0:
            am.add_pdf(khg.DiagGmm(old_am.get_pdf(int(source[pdf]))))
            continue
        if cnt[pdf] > 0:
            mean = s[pdf] / cnt[pdf]
            var = np.maximum(sq[pdf] / cnt[pdf] - mean * mean, var_floor)
        else:
            mean, var = gmean, gvar
        g = khg.DiagGmm(1, dim)
        g.set_weights(np.ones(1, np.float32))
        g.set_invvars_and_means((1.0 / var).astype(np.float32)[None, :], mean.astype(np.float32)[None, :])
        g.compute_gconsts()
        am.add_pdf(g)
    if old_tm is not None:
        tm = copy_transition_probs(old_tm, tm)
    return tm, am, cnt


def _old_pdf_sources(stats: TreeStats, new_tree: ContextDependencyTree, old_tree: ContextDependencyTree,
                     num_pdfs: int, old_num_pdfs: int) -> np.ndarray:
    """For each new pdf, the old pdf with the largest count among the events mapping to it (-1: none)."""
    if old_tree.context_width > stats.context_width:
        raise PynnetError(f"old tree has context width {old_tree.context_width}, the stats only "
                          f"{stats.context_width}")
    new_leaf = new_tree.to_pdf.map_events(stats.keys, stats.events)
    # the old tree sees the window positions it knows, aligned on the central phone
    shift = stats.central_position - old_tree.central_position
    cols = [0] + [1 + shift + j for j in range(old_tree.context_width)]
    if min(cols[1:]) < 1 or max(cols) > stats.context_width:
        raise PynnetError("old tree's context window does not fit in the stats' window")
    old_leaf = old_tree.to_pdf.map_events(old_tree_keys(old_tree), stats.events[:, cols])
    ok = (new_leaf >= 0) & (old_leaf >= 0) & (old_leaf < old_num_pdfs)
    joint = np.zeros((num_pdfs, old_num_pdfs))
    np.add.at(joint, (new_leaf[ok], old_leaf[ok]), stats.counts[ok])
    return np.where(joint.sum(1) > 0, joint.argmax(1), -1)


def old_tree_keys(tree: ContextDependencyTree) -> list[int]:
    return [-1] + list(range(tree.context_width))


def copy_transition_probs(old_tm, new_tm):
    """A copy of new_tm whose log-probs are taken from old_tm where (phone, hmm-state, trans-index)
    matches (averaging over the old transition states of that phone/state)."""
    old = TransitionTables(old_tm)
    new = TransitionTables(new_tm)
    old_lp = np.asarray(old_tm.log_probs, dtype=np.float64)
    acc: dict[tuple[int, int, int], list[float]] = {}
    for tid in range(1, old.num_tids + 1):
        acc.setdefault((int(old.phone[tid]), int(old.hmm_state[tid]), int(old.trans_index[tid])), []).append(
            float(np.exp(old_lp[tid])))
    state = list(new_tm.__getstate__())
    lp = np.asarray(state[6], dtype=np.float64).copy()
    for tid in range(1, new.num_tids + 1):
        k = (int(new.phone[tid]), int(new.hmm_state[tid]), int(new.trans_index[tid]))
        if k in acc:
            lp[tid] = np.log(max(np.mean(acc[k]), 1e-20))
    # renormalise each transition state and recompute the non-self-loop log-probs (Kaldi
    # ComputeDerivedOfProbs): log(1 - p_selfloop) per transition state
    ts = new.trans_state
    nts = len(new.tuples)
    tot = np.zeros(nts + 1)
    np.add.at(tot, ts[1:], np.exp(lp[1:]))
    lp[1:] -= np.log(tot[ts[1:]])
    nsl = np.zeros(nts + 1)
    for tid in range(1, new.num_tids + 1):
        if new.is_self_loop[tid]:
            nsl[ts[tid]] = np.log(max(1.0 - np.exp(lp[tid]), 1e-20))
    state[6] = lp.astype(np.float32).tolist()
    state[7] = nsl.astype(np.float32).tolist()
    import kaldi_hmm_gmm as khg
    out = khg.TransitionModel.__new__(khg.TransitionModel)
    out.__setstate__(tuple(state))
    return out
