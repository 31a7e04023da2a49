"""Diagonal-covariance GMM acoustic models: vectorised statistics, ML update, mix-up, silence boost.

Kaldi's algorithms (gmm-acc-stats-ali, gmm-est, gmm-mixup, gmm-boost-silence) with numpy:
per pdf, the Gaussian posteriors of all frames aligned to it are computed in one batched matrix
product, so a pass over an hour of speech takes seconds.

The parameters are kept as Kaldi keeps them -- weights, inverse variances and means times inverse
variances -- so ``AmGmm.to_khg()`` / ``from_khg`` move to and from kaldi-hmm-gmm's AmDiagGmm
(used for Viterbi alignment and for model files) without changing a bit.
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass

import numpy as np

from pynnet.io.atomic import atomic_path
from pynnet.io.errors import fail

__all__ = ["AmGmm", "GmmAccs", "accumulate", "mle_update", "split_targets", "mixup",
           "boost_silence", "transition_update", "LOG_2PI"]

LOG_2PI = float(np.log(2 * np.pi))


@dataclass
class AmGmm:
    """One diagonal GMM per pdf: ``weights[p]`` (M,), ``inv_vars[p]`` and ``means_invvars[p]`` (M, D)."""
    weights: list[np.ndarray]
    inv_vars: list[np.ndarray]
    means_invvars: list[np.ndarray]

    @property
    def num_pdfs(self) -> int:
        return len(self.weights)

    @property
    def dim(self) -> int:
        return self.inv_vars[0].shape[1] if self.inv_vars else 0

    @property
    def num_gauss(self) -> int:
        return int(sum(w.size for w in self.weights))

    def means(self, p: int) -> np.ndarray:
        return self.means_invvars[p] / self.inv_vars[p]

    def vars(self, p: int) -> np.ndarray:
        return 1.0 / self.inv_vars[p]

    def gconsts(self, p: int) -> np.ndarray:
        """Kaldi's DiagGmm::ComputeGconsts (log weight + normaliser + mean term)."""
        iv, mi, w = self.inv_vars[p], self.means_invvars[p], self.weights[p]
        with np.errstate(divide="ignore"):
            return (np.log(w) - 0.5 * LOG_2PI * iv.shape[1]
                    + 0.5 * np.log(iv).sum(1) - 0.5 * (mi * mi / iv).sum(1))

    def component_loglikes(self, p: int, x: np.ndarray) -> np.ndarray:
        """(N, M) log weight * N(x; mean, var) of every frame under every component of pdf p."""
        return self.gconsts(p) + x @ self.means_invvars[p].T - 0.5 * ((x * x) @ self.inv_vars[p].T)

    @classmethod
    def from_params(cls, weights, means, variances) -> "AmGmm":
        ws, ivs, mis = [], [], []
        for w, m, v in zip(weights, means, variances):
            iv = 1.0 / np.asarray(v, dtype=np.float64)
            ws.append(np.asarray(w, dtype=np.float64))
            ivs.append(iv)
            mis.append(np.asarray(m, dtype=np.float64) * iv)
        return cls(ws, ivs, mis)

    @classmethod
    def from_khg(cls, am) -> "AmGmm":
        st = am.__getstate__()
        n = len(st) // 3
        return cls([np.asarray(st[3 * i], np.float64) for i in range(n)],
                   [np.asarray(st[3 * i + 1], np.float64) for i in range(n)],
                   [np.asarray(st[3 * i + 2], np.float64) for i in range(n)])

    def to_khg(self):
        import kaldi_hmm_gmm as khg

        state = []
        for w, iv, mi in zip(self.weights, self.inv_vars, self.means_invvars):
            state += [w.astype(np.float32), iv.astype(np.float32), mi.astype(np.float32)]
        am = khg.AmDiagGmm.__new__(khg.AmDiagGmm)
        am.__setstate__(tuple(state))
        return am

    def copy(self) -> "AmGmm":
        return AmGmm([w.copy() for w in self.weights], [v.copy() for v in self.inv_vars],
                     [m.copy() for m in self.means_invvars])


# --------------------------------------------------------------------------- statistics
@dataclass
class GmmAccs:
    """Sufficient statistics of an AmGmm: per pdf per Gaussian occupancy, sum x, sum x^2;
    transition-id counts; total log-likelihood and frames (for the per-frame figure)."""
    occ: list[np.ndarray]
    x1: list[np.ndarray]
    x2: list[np.ndarray]
    trans: np.ndarray
    tot_like: float = 0.0
    num_frames: int = 0

    @classmethod
    def zeros(cls, am: AmGmm, num_tids: int) -> "GmmAccs":
        d = am.dim
        return cls([np.zeros(w.size) for w in am.weights],
                   [np.zeros((w.size, d)) for w in am.weights],
                   [np.zeros((w.size, d)) for w in am.weights],
                   np.zeros(num_tids + 1))

    def add(self, other: "GmmAccs", path: str = "<acc>") -> None:
        if len(other.occ) != len(self.occ) or other.trans.size != self.trans.size or any(
                a.shape != b.shape for a, b in zip(self.x1, other.x1)):
            fail("accumulators do not match (from a different model?)", path)
        for i in range(len(self.occ)):
            self.occ[i] += other.occ[i]
            self.x1[i] += other.x1[i]
            self.x2[i] += other.x2[i]
        self.trans += other.trans
        self.tot_like += other.tot_like
        self.num_frames += other.num_frames

    def pdf_occs(self) -> np.ndarray:
        return np.array([o.sum() for o in self.occ])

    def write(self, path: str) -> None:
        sizes = np.array([o.size for o in self.occ], dtype=np.int64)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, sizes=sizes, occ=np.concatenate(self.occ), x1=np.concatenate(self.x1),
                         x2=np.concatenate(self.x2), trans=self.trans,
                         tot=np.array([self.tot_like, self.num_frames], dtype=np.float64))

    @classmethod
    def read(cls, path: str) -> "GmmAccs":
        if not os.path.isfile(path):
            fail("no such accumulator file", path)
        try:
            with np.load(path) as z:
                sizes = z["sizes"]
                cut = np.cumsum(sizes)[:-1]
                tot = z["tot"]
                return cls(np.split(z["occ"], cut), np.split(z["x1"], cut), np.split(z["x2"], cut),
                           z["trans"], float(tot[0]), int(tot[1]))
        except (ValueError, KeyError, OSError) as e:
            fail(f"not a pynnet GMM accumulator file ({e})", path)


def accumulate(am: AmGmm, feats: np.ndarray, tids: np.ndarray, tid2pdf: np.ndarray,
               accs: GmmAccs, chunk: int = 20000, post_feats: np.ndarray | None = None) -> float:
    """Add the statistics of frames ``feats`` (N, D) aligned to transition ids ``tids`` (N,).

    All frames of one call are grouped by pdf; each pdf's Gaussian posteriors come from one
    batched computation.  Pass many utterances at once (a whole job) for speed.
    ``post_feats``: compute the Gaussian posteriors from these features instead (Kaldi's
    gmm-acc-stats-twofeats: a SAT system's alignment model gets speaker-independent statistics
    with the speaker-adapted posteriors).  Returns the total log-likelihood of the frames."""
    feats = np.asarray(feats, dtype=np.float64)
    pfeats = feats if post_feats is None else np.asarray(post_feats, dtype=np.float64)
    tids = np.asarray(tids)
    pdfs = tid2pdf[tids]
    if tids.size and tids.max() >= accs.trans.size:
        fail(f"transition id {int(tids.max())} out of range for the model (alignments from another model?)")
    accs.trans += np.bincount(tids, minlength=accs.trans.size)
    order = np.argsort(pdfs, kind="stable")
    sorted_pdfs = pdfs[order]
    starts = np.searchsorted(sorted_pdfs, np.arange(am.num_pdfs + 1))
    tot = 0.0
    for p in np.flatnonzero(np.diff(starts)):
        idx = order[starts[p]:starts[p + 1]]
        gc = am.gconsts(p)
        for c0 in range(0, idx.size, chunk):
            x = feats[idx[c0:c0 + chunk]]
            x2 = x * x
            if post_feats is None:
                ll = gc + x @ am.means_invvars[p].T - 0.5 * (x2 @ am.inv_vars[p].T)
            else:
                px = pfeats[idx[c0:c0 + chunk]]
                ll = gc + px @ am.means_invvars[p].T - 0.5 * ((px * px) @ am.inv_vars[p].T)
            mx = ll.max(1, keepdims=True)
            post = np.exp(ll - mx)
            s = post.sum(1, keepdims=True)
            tot += float((np.log(s) + mx).sum())
            post /= s
            accs.occ[p] += post.sum(0)
            accs.x1[p] += post.T @ x
            accs.x2[p] += post.T @ x2
    accs.tot_like += tot
    accs.num_frames += int(tids.size)
    return tot


# --------------------------------------------------------------------------- update
@dataclass
class UpdateStats:
    objf_impr: float = 0.0
    count: float = 0.0
    floored: int = 0
    removed: int = 0


def mle_update(am: AmGmm, accs: GmmAccs, min_gaussian_occupancy: float = 10.0,
               min_gaussian_weight: float = 1e-5, min_variance: float = 0.001,
               remove_low_count: bool = True) -> UpdateStats:
    """Kaldi's MleDiagGmmUpdate for every pdf (means, variances, weights), in place.

    Gaussians with occupancy <= min_gaussian_occupancy or weight <= min_gaussian_weight are
    removed (one is always kept, unchanged); variances are floored at min_variance.
    ``remove_low_count=False`` (gmm-est --remove-low-count-gaussians=false, for a SAT system's
    alignment model, which must match the final model Gaussian for Gaussian) keeps them, unchanged."""
    if not remove_low_count:
        return _update_keeping_all(am, accs, min_gaussian_occupancy, min_gaussian_weight, min_variance)
    st = UpdateStats()
    for p in range(am.num_pdfs):
        occ = accs.occ[p]
        tot = occ.sum()
        st.count += tot
        old_like = _expected_loglike(am, p, accs) if tot > 0 else 0.0
        prob = occ / tot if tot > 0 else np.zeros_like(occ)
        keep = (occ > min_gaussian_occupancy) & (prob > min_gaussian_weight)
        if keep.any():
            mean = accs.x1[p][keep] / occ[keep, None]
            var = accs.x2[p][keep] / occ[keep, None] - mean * mean
            st.floored += int((var < min_variance).sum())
            var = np.maximum(var, min_variance)
            w = prob[keep]
            am.weights[p] = w / w.sum()
            am.inv_vars[p] = 1.0 / var
            am.means_invvars[p] = mean / var
            st.removed += int((~keep).sum())
        else:  # no Gaussian has enough data: keep the best-supported one as it was
            j = int(np.argmax(occ)) if occ.size else 0
            st.removed += occ.size - 1
            am.weights[p] = np.ones(1)
            am.inv_vars[p] = am.inv_vars[p][j:j + 1]
            am.means_invvars[p] = am.means_invvars[p][j:j + 1]
            keep = np.zeros_like(occ, bool)
            keep[j] = True
        if tot > 0:
            st.objf_impr += _expected_loglike(am, p, accs, keep) - old_like
    return st


def _update_keeping_all(am: AmGmm, accs: GmmAccs, min_occ: float, min_weight: float,
                        min_variance: float) -> UpdateStats:
    """mle_update without removal: a Gaussian below the occupancy/weight thresholds keeps its
    mean and variance (its weight is still re-estimated, floored at ``min_weight``)."""
    st = UpdateStats()
    for p in range(am.num_pdfs):
        occ = accs.occ[p]
        tot = occ.sum()
        st.count += tot
        if tot <= 0:
            continue
        old_like = _expected_loglike(am, p, accs)
        prob = occ / tot
        upd = (occ > min_occ) & (prob > min_weight)
        if upd.any():
            mean = accs.x1[p][upd] / occ[upd, None]
            var = accs.x2[p][upd] / occ[upd, None] - mean * mean
            st.floored += int((var < min_variance).sum())
            var = np.maximum(var, min_variance)
            am.inv_vars[p][upd] = 1.0 / var
            am.means_invvars[p][upd] = mean / var
        w = np.maximum(prob, min_weight)
        am.weights[p] = w / w.sum()
        st.objf_impr += _expected_loglike(am, p, accs) - old_like
    return st


def _expected_loglike(am: AmGmm, p: int, accs: GmmAccs, keep: np.ndarray | None = None) -> float:
    """Auxiliary function sum_m occ_m * E[log w_m N(x; m)] under the stats (for the objf figure)."""
    occ, x1, x2 = accs.occ[p], accs.x1[p], accs.x2[p]
    if keep is not None:
        occ, x1, x2 = occ[keep], x1[keep], x2[keep]
    if occ.size != am.weights[p].size:
        return 0.0
    gc = am.gconsts(p)
    gc = np.where(np.isfinite(gc), gc, 0.0)
    return float((occ * gc).sum() + (x1 * am.means_invvars[p]).sum() - 0.5 * (x2 * am.inv_vars[p]).sum())


def split_targets(state_occs: np.ndarray, target: int, power: float = 0.2,
                  min_count: float = 20.0) -> np.ndarray:
    """Kaldi's GetSplitTargets: Gaussians per pdf in proportion to occupancy^power, each Gaussian
    keeping at least ``min_count`` frames; the pdf with the largest occ^power per Gaussian gains next."""
    state_occs = np.asarray(state_occs, dtype=np.float64)
    n = state_occs.size
    comps = np.ones(n, dtype=np.int64)
    occ_pow = np.power(np.maximum(state_occs, 0.0), power)
    heap = [(-occ_pow[i] / (1 + 1e-10), i) for i in range(n)]
    heapq.heapify(heap)
    num = n
    while num < target and heap:
        negkey, i = heap[0]
        if occ_pow[i] == 0:
            break
        if (comps[i] + 1) * min_count >= state_occs[i]:
            heapq.heappop(heap)  # min-count reached: this pdf may not split further
            continue
        comps[i] += 1
        num += 1
        heapq.heapreplace(heap, (-occ_pow[i] / (comps[i] + 1e-10), i))
    return comps


def mixup(am: AmGmm, state_occs: np.ndarray, target: int, power: float = 0.2,
          min_count: float = 20.0, perturb_factor: float = 0.01, seed: int = 0) -> int:
    """Kaldi's SplitByCount / DiagGmm::Split: grow each pdf to its split target by repeatedly
    halving the heaviest Gaussian and perturbing the two means by +-perturb_factor * stddev * N(0,1).
    Returns the number of Gaussians after mixing up."""
    if target <= am.num_gauss:
        return am.num_gauss
    rng = np.random.default_rng(seed)
    targets = split_targets(state_occs, target, power, min_count)
    for p in range(am.num_pdfs):
        w, iv, mi = list(am.weights[p]), list(am.inv_vars[p]), list(am.means_invvars[p])
        while len(w) < targets[p]:
            j = int(np.argmax(w))
            w[j] /= 2
            r = rng.standard_normal(iv[j].size) * np.sqrt(iv[j])
            w.append(w[j])
            iv.append(iv[j].copy())
            mi.append(mi[j] + perturb_factor * r)
            mi[j] = mi[j] - perturb_factor * r
        am.weights[p], am.inv_vars[p], am.means_invvars[p] = np.array(w), np.array(iv), np.array(mi)
    return am.num_gauss


def boost_silence(am: AmGmm, silence_pdfs, boost: float) -> AmGmm:
    """gmm-boost-silence: multiply the weights of silence pdfs' Gaussians by ``boost`` (no
    renormalisation: it scales those pdfs' likelihoods).  Returns a boosted copy."""
    out = am.copy()
    if boost != 1.0:
        for p in silence_pdfs:
            out.weights[p] = out.weights[p] * boost
    return out


# --------------------------------------------------------------------------- transitions
def transition_update(tm, counts: np.ndarray, floor: float = 0.01, mincount: float = 5.0):
    """Kaldi's TransitionModel::MleUpdate, vectorised: per transition state with >= mincount
    counts, new probs = counts / total, floored and renormalised 3 times.
    Returns (new TransitionModel, objf improvement, total count)."""
    from pynnet.hmm.model_io import transition_model_with_log_probs

    st = tm.__getstate__()
    state2id = np.asarray(st[2], dtype=np.int64)
    id2state = np.asarray(st[3], dtype=np.int64)
    old = np.asarray(st[6], dtype=np.float64)
    nt = id2state.size
    counts = np.asarray(counts, dtype=np.float64)[:nt]
    counts = np.r_[counts, np.zeros(nt - counts.size)]
    starts = state2id[1:-1]
    ntrans = np.diff(state2id[1:])
    tot = np.add.reduceat(counts[1:], starts - 1) if starts.size else np.zeros(0)
    upd_state = (ntrans > 1) & (tot >= mincount)
    count_sum = float(tot[ntrans > 1].sum())
    tid_state = id2state[1:] - 1
    upd = upd_state[tid_state]
    new = np.exp(old[1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        new = np.where(upd, counts[1:] / tot[tid_state], new)
    for _ in range(3):
        s = np.add.reduceat(new, starts - 1)
        new = np.where(upd, np.maximum(new / s[tid_state], floor), new)
    new_log = old.copy()
    new_log[1:] = np.where(upd, np.log(new), old[1:])
    impr = float((counts[1:] * (new_log[1:] - old[1:]))[upd].sum())
    new_log32 = new_log.astype(np.float32)
    return transition_model_with_log_probs(tm, new_log32), impr, count_sum
