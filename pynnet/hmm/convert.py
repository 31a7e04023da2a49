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

import logging
from typing import Iterable, Iterator, Mapping

import numpy as np

from pynnet.hmm.tree import TransitionTables, TreeStats, leaf_stats, split_to_phones
from pynnet.hmm.tree_io import ContextDependencyTree, as_tree
from pynnet.io.errors import PynnetError

log = logging.getLogger(__name__)


class AlignmentConverter:
    """Converts alignments from ``old_tm`` to ``new_tm``/``new_tree`` (same topology per phone)."""

    def __init__(self, old_tm, new_tm, new_tree, phone_map: np.ndarray | None = None):
        self.old = old_tm if isinstance(old_tm, TransitionTables) else TransitionTables(old_tm)
        self.new = new_tm if isinstance(new_tm, TransitionTables) else TransitionTables(new_tm)
        self.tree: ContextDependencyTree = as_tree(new_tree)
        self.phone_map = phone_map
        ts_of = {}
        for ts, tup in enumerate(self.new.tuples, 1):
            ts_of[tuple(int(x) for x in tup)] = ts
        self.ts_of = ts_of
        # per new (phone, hmm_state): pdf-classes from the new topology
        self.fwd_class: dict[tuple[int, int], int] = {}
        self.loop_class: dict[tuple[int, int], int] = {}
        new_topo = new_tm.topo if not isinstance(new_tm, TransitionTables) else None
        old_topo = old_tm.topo if not isinstance(old_tm, TransitionTables) else None
        if new_topo is not None:
            for ph in new_topo.phones:
                entry = new_topo.topology_for_phone(ph)
                if old_topo is not None and ph in set(old_topo.phones):
                    old_entry = old_topo.topology_for_phone(ph)
                    if len(old_entry) != len(entry) or any(
                            [t[0] for t in a.transitions] != [t[0] for t in b.transitions]
                            for a, b in zip(old_entry, entry)):
                        raise PynnetError(f"phone {ph} has different topologies in the old and new models")
                for hs, st in enumerate(entry):
                    self.fwd_class[(ph, hs)] = st.forward_pdf_class
                    self.loop_class[(ph, hs)] = st.self_loop_pdf_class

    def convert(self, ali: np.ndarray) -> np.ndarray | None:
        """New transition-ids for one alignment, or None if it cannot be converted."""
        ali = np.asarray(ali, dtype=np.int64)
        if ali.size == 0:
            return ali.astype(np.int32)
        ok, starts, ends = split_to_phones(self.old, ali)
        if not ok:
            return None
        n, p = self.tree.context_width, self.tree.central_position
        seq = self.old.phone[ali[starts]].astype(np.int64)
        ctx_seq = seq if self.phone_map is None else self.phone_map[seq]
        nph = seq.size
        padded = np.r_[np.zeros(p, np.int64), ctx_seq, np.zeros(n - 1 - p, np.int64)]
        windows = np.stack([padded[j:j + nph] for j in range(n)], axis=1)
        windows[:, p] = seq  # the central phone is never mapped
        seg = np.repeat(np.arange(nph), ends - starts)
        phone = seq[seg]
        hs = self.old.hmm_state[ali]
        tidx = self.old.trans_index[ali]
        # pdf-classes of the (phone, hmm-state) in the new topology
        ph_hs = np.stack([phone, hs], 1)
        uniq, inv = np.unique(ph_hs, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        try:
            fc = np.array([self.fwd_class[(int(a), int(b))] for a, b in uniq])[inv]
            lc = np.array([self.loop_class[(int(a), int(b))] for a, b in uniq])[inv]
        except KeyError as e:
            raise PynnetError(f"phone/state {e.args[0]} not in the new model's topology") from None
        keys = [-1] + list(range(n))
        win = windows[seg]
        fpdf = self.tree.to_pdf.map_events(keys, np.column_stack([fc, win]))
        lpdf = np.where(lc >= 0, self.tree.to_pdf.map_events(keys, np.column_stack([np.maximum(lc, 0), win])), -1)
        if np.any(fpdf < 0) or np.any((lc >= 0) & (lpdf < 0)):
            bad = np.flatnonzero((fpdf < 0) | ((lc >= 0) & (lpdf < 0)))[0]
            raise PynnetError(f"the new tree has no pdf for phone window {win[bad].tolist()}, "
                              f"pdf-class {fc[bad]}")
        tup = np.stack([phone, hs, fpdf, lpdf], 1)
        tu, tinv = np.unique(tup, axis=0, return_inverse=True)
        tinv = tinv.reshape(-1)
        try:
            ts = np.array([self.ts_of[tuple(int(x) for x in row)] for row in tu])[tinv]
        except KeyError as e:
            raise PynnetError(f"transition state {e.args[0]} (phone, hmm-state, pdfs) is not in the new model; "
                              "was it built from this tree?") from None
        state2id = np.asarray(self.new.state2id, dtype=np.int64)
        return (state2id[ts] + tidx).astype(np.int32)


def convert_alignments(old_tm, new_tm, new_tree, alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
                       phone_map: np.ndarray | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """Kaldi convert-ali: yield (utt, new alignment); utterances that fail are skipped with a warning."""
    conv = AlignmentConverter(old_tm, new_tm, new_tree, phone_map)
    pairs = alignments.items() if isinstance(alignments, Mapping) else alignments
    for utt, ali in pairs:
        new = conv.convert(ali)
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
