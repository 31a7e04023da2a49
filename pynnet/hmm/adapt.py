"""Feature-space transforms for GMM systems: LDA, MLLT (semi-tied covariance) and fMLLR.

Kaldi's acc-lda / est-lda, gmm-acc-mllt / est-mllt, gmm-est-fmllr(-gpost), transform-feats,
compose-transforms and gmm-transform-means, written from the published algorithms with numpy in
float64.  Statistics are vectorised as in ``gmm.accumulate``: the posterior triples (frame, pdf,
weight) are grouped by pdf and each pdf's Gaussian posteriors come from one batched product; the
per-dimension second-order sums of MLLT and fMLLR are one large matrix product over the upper
triangles of the frames' outer products (Kaldi's per-frame trick for fMLLR), so a pass over an hour
of speech takes seconds and memory stays O(D^3 + chunk * (D^2 + M)).

Transforms are Kaldi's matrices, applied to feature column vectors: (d_out, d_in) is linear,
y = M x; (d_out, d_in + 1) is affine, y = M[:, :-1] x + M[:, -1].  Features are rows (N, D).
"""
from __future__ import annotations

import os
import zipfile
import zlib
from dataclasses import dataclass, fields

import numpy as np

from pynnet.hmm.gmm import AmGmm
from pynnet.io.atomic import atomic_path
from pynnet.io.errors import PynnetError, fail

__all__ = ["LdaAccs", "MlltAccs", "FmllrAccs", "fmllr_auxf", "mllt_auxf", "apply_transform",
           "compose_transforms", "transform_means", "FMLLR_TYPES"]

FMLLR_TYPES = ("none", "offset", "diag", "full")    # from the smallest update to the largest
_CHUNK = 2048


# --------------------------------------------------------------------------- accumulator files
class _Accs:
    """add / write / read shared by the three accumulators (npz files, float64, tagged by kind)."""
    _kind = ""

    def _arrays(self) -> dict[str, np.ndarray]:
        return {f.name: np.asarray(getattr(self, f.name), dtype=np.float64) for f in fields(self)}

    def add(self, other, path: str = "<acc>") -> None:
        """Sum another job's statistics into these (Kaldi's est-* summing several accs)."""
        a = self._arrays()
        b = other._arrays() if type(other) is type(self) else None
        if b is None or any(a[k].shape != b[k].shape for k in a):
            fail(f"{self._kind} accumulators do not match (another dimension or number of classes)", path)
        for k in a:
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def write(self, path: str) -> None:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, kind=np.array(self._kind), **self._arrays())

    @classmethod
    def read(cls, path: str):
        if not os.path.isfile(path):
            fail("no such accumulator file", path)
        try:
            z = np.load(path)
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ValueError("a single array, not an npz archive")
            with z:
                kind = str(z["kind"])
                if kind != cls._kind:
                    fail(f"holds {kind} accumulators, not {cls._kind}", path)
                vals = {f.name: np.asarray(z[f.name], dtype=np.float64) for f in fields(cls)}
        except (ValueError, KeyError, OSError, EOFError, AttributeError, zipfile.BadZipFile, zlib.error) as e:
            fail(f"not a pynnet {cls._kind} accumulator file ({' '.join(str(e).split())})", path)
        obj = cls(**{k: float(v) if v.ndim == 0 else v for k, v in vals.items()})
        if not obj._consistent():
            fail(f"corrupt {cls._kind} accumulator file (inconsistent array shapes)", path)
        return obj


def _feats(feats, dim: int) -> np.ndarray:
    feats = np.asarray(feats)
    if feats.ndim != 2 or feats.shape[1] != dim:
        fail(f"features of shape {feats.shape} do not match the accumulators' dimension {dim}")
    return feats


def _pdf_chunks(am: AmGmm, feats, frames, pdfs, weights, dim: int, chunk: int):
    """Check the posterior triples; yield (pdf, x (n, D) float64, weights (n,)), grouped by pdf."""
    feats = _feats(feats, dim)
    if am.dim != dim:
        fail(f"the model has dimension {am.dim} but the accumulators {dim}")
    frames, pdfs = np.asarray(frames, dtype=np.int64), np.asarray(pdfs, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    if not (frames.ndim == pdfs.ndim == weights.ndim == 1 and frames.size == pdfs.size == weights.size):
        fail(f"posterior triples differ in length: frames {frames.shape}, pdfs {pdfs.shape}, "
             f"weights {weights.shape}")
    keep = weights != 0
    frames, pdfs, weights = frames[keep], pdfs[keep], weights[keep]
    bad = frames[(frames < 0) | (frames >= feats.shape[0])]
    if bad.size:
        fail(f"frame index {int(bad[0])} out of range for {feats.shape[0]} frames")
    bad = pdfs[(pdfs < 0) | (pdfs >= am.num_pdfs)]
    if bad.size:
        fail(f"pdf {int(bad[0])} out of range for a model with {am.num_pdfs} pdfs "
             "(alignments from another model?)")
    order = np.argsort(pdfs, kind="stable")
    sp = pdfs[order]
    cuts = np.flatnonzero(np.diff(sp)) + 1
    for s, e in zip(np.r_[0, cuts], np.r_[cuts, sp.size]):
        for c0 in range(s, e, chunk):
            sel = order[c0:min(c0 + chunk, e)]
            yield int(sp[s]), np.asarray(feats[frames[sel]], dtype=np.float64), weights[sel]


def _posteriors(am: AmGmm, p: int, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """(n, M) Gaussian posteriors within pdf p times the frame weights; weighted total log-likelihood."""
    ll = am.component_loglikes(p, x)
    mx = ll.max(1, keepdims=True)
    post = np.exp(ll - mx)
    s = post.sum(1, keepdims=True)
    like = float(w @ (np.log(s[:, 0]) + mx[:, 0]))
    post *= w[:, None] / s
    return post, like


class _Outer:
    """sum_t b[t, i] z_t z_t^T for every i: the upper triangles of the frames' outer products,
    built row by row into a (triangle, frames) buffer, then one matrix product with b."""

    def __init__(self, e: int, d: int, chunk: int):
        self.e, self.d, self.chunk = e, d, max(chunk, 1)
        self.acc = np.zeros((e * (e + 1) // 2, d))
        self.buf = np.empty((0, 0))
        self.zs, self.bs, self.n = [], [], 0

    def add(self, z: np.ndarray, b: np.ndarray) -> None:
        self.zs.append(z)
        self.bs.append(b)
        self.n += z.shape[0]
        if self.n >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if not self.zs:
            return
        zt, b = np.concatenate(self.zs).T.copy(), np.concatenate(self.bs)
        self.zs, self.bs, self.n = [], [], 0
        if self.buf.shape[1] < zt.shape[1]:
            self.buf = np.empty((self.acc.shape[0], zt.shape[1]))
        buf, pos = self.buf[:, :zt.shape[1]], 0
        for i in range(self.e):
            np.multiply(zt[i:], zt[i], out=buf[pos:pos + self.e - i])
            pos += self.e - i
        self.acc += buf @ b

    def result(self) -> np.ndarray:
        """(d, e, e) symmetric matrices."""
        self.flush()
        iu = np.triu_indices(self.e)      # row-major: the order flush() fills
        out = np.zeros((self.d, self.e, self.e))
        out[:, iu[0], iu[1]] = self.acc.T
        out[:, iu[1], iu[0]] = self.acc.T
        return out


# --------------------------------------------------------------------------- LDA
@dataclass
class LdaAccs(_Accs):
    """Kaldi's acc-lda / est-lda (LdaEstimate): per-class weighted counts and sums, and the total
    weighted scatter sum w x x^T, from which LDA needs nothing more."""
    counts: np.ndarray   # (C,)
    sums: np.ndarray     # (C, D)
    scatter: np.ndarray  # (D, D)
    _kind = "LDA"

    @classmethod
    def zeros(cls, num_classes: int, dim: int) -> "LdaAccs":
        return cls(np.zeros(num_classes), np.zeros((num_classes, dim)), np.zeros((dim, dim)))

    @property
    def num_classes(self) -> int:
        return self.counts.size

    @property
    def dim(self) -> int:
        return self.scatter.shape[0]

    def _consistent(self) -> bool:
        c, d = self.counts.size, self.scatter.shape[0] if self.scatter.ndim == 2 else -1
        return self.counts.ndim == 1 and self.sums.shape == (c, d) and self.scatter.shape == (d, d)

    def accumulate(self, feats, classes, weights=None, chunk: int = 65536) -> None:
        """feats (N, D), classes (N,) (pdf ids), weights (N,) (weight 0 drops a frame: silence)."""
        feats = _feats(feats, self.dim)
        classes = np.asarray(classes, dtype=np.int64)
        w = np.ones(feats.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
        if classes.shape != (feats.shape[0],) or w.shape != classes.shape:
            fail(f"{feats.shape[0]} frames but {classes.size} class ids and {w.size} weights")
        keep = np.flatnonzero(w != 0)
        bad = classes[keep][(classes[keep] < 0) | (classes[keep] >= self.num_classes)]
        if bad.size:
            fail(f"class id {int(bad[0])} out of range for {self.num_classes} classes")
        for c0 in range(0, keep.size, chunk):
            sel = keep[c0:c0 + chunk]
            x, c, wc = np.asarray(feats[sel], dtype=np.float64), classes[sel], w[sel]
            wx = x * wc[:, None]
            self.counts += np.bincount(c, wc, minlength=self.num_classes)
            order = np.argsort(c, kind="stable")
            sc = c[order]
            starts = np.r_[0, np.flatnonzero(np.diff(sc)) + 1]
            self.sums[sc[starts]] += np.add.reduceat(wx[order], starts, axis=0)
            self.scatter += wx.T @ x

    def estimate(self, dim: int, within_class_factor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """LdaEstimate::Estimate: returns (lda_mat (dim, D), full_mat (D, D)).

        Total covariance T and between-class covariance B (classes with no data skipped), within
        W = T - B = L L^T; the eigenvectors u of L^-1 B L^-T, by descending eigenvalue d, give the
        rows u^T L^-1: the projected data have unit within-class and diagonal between-class
        covariance.  within_class_factor f != 1 scales row i by sqrt((f + d_i) / (1 + d_i)), which
        makes the within-class variance f (Kaldi's option for neural-net inputs).  Unlike Kaldi
        without --allow-large-dim, dim may reach the number of classes (rows past C-1 then have
        eigenvalue 0).  Each row's sign makes its largest entry positive (deterministic output)."""
        d_in = self.dim
        if not 1 <= dim <= d_in:
            raise PynnetError(f"LDA dimension {dim} must be between 1 and the feature dimension {d_in}")
        if within_class_factor < 0:
            raise PynnetError(f"LDA within-class factor must be >= 0, not {within_class_factor}")
        n = float(self.counts.sum())
        if not n > 0:
            raise PynnetError("no LDA statistics (no frames, or all had weight 0)")
        mean = self.sums.sum(0) / n
        total = self.scatter / n - np.outer(mean, mean)
        used = self.counts != 0
        cmeans = self.sums[used] / self.counts[used, None]
        between = (cmeans.T * (self.counts[used] / n)) @ cmeans - np.outer(mean, mean)
        within = total - between
        within = 0.5 * (within + within.T)
        ev = np.linalg.eigvalsh(within)
        if not ev[0] > 1e-10 * max(ev[-1], 1e-300):
            raise PynnetError("LDA: the within-class covariance is singular (a constant or linearly "
                              "dependent feature dimension, or too few frames per class)")
        linv = np.linalg.inv(np.linalg.cholesky(within))
        s = linv @ between @ linv.T
        d, u = np.linalg.eigh(0.5 * (s + s.T))
        order = np.argsort(-d, kind="stable")
        d, u = np.maximum(d[order], 0.0), u[:, order]
        u *= np.where(u[np.argmax(np.abs(u), 0), np.arange(d_in)] < 0, -1.0, 1.0)
        full = u.T @ linv
        if within_class_factor != 1.0:
            full *= np.sqrt((within_class_factor + d) / (1.0 + d))[:, None]
        self.eigenvalues = d   # for the log line (Kaldi prints its "LDA singular values")
        return full[:dim].copy(), full


# --------------------------------------------------------------------------- MLLT
@dataclass
class MlltAccs(_Accs):
    """Kaldi's gmm-acc-mllt / est-mllt: G_i = sum post * inv_var_i * (x - mu)(x - mu)^T, beta = sum post."""
    beta: float
    G: np.ndarray   # (D, D, D)
    _kind = "MLLT"

    @classmethod
    def zeros(cls, dim: int) -> "MlltAccs":
        return cls(0.0, np.zeros((dim, dim, dim)))

    @property
    def dim(self) -> int:
        return self.G.shape[0]

    def _consistent(self) -> bool:
        return self.G.ndim == 3 and self.G.shape[0] == self.G.shape[1] == self.G.shape[2]

    def accumulate(self, am: AmGmm, feats, frames, pdfs, weights, chunk: int = _CHUNK) -> float:
        """Posterior triples (frame index into feats, pdf, weight; an alignment: frames = arange(N));
        Gaussian posteriors within the pdf's GMM times the weight.  Returns the weighted total
        log-likelihood.  (x - mu)(x - mu)^T is expanded: sum b_ti x x^T over frames (b = post @
        inv_vars) in one product, the mean terms per Gaussian from its count and sum of x."""
        d = self.dim
        outer = _Outer(d, d, chunk)
        iu = np.triu_indices(d)
        tot, cur, occ, s1 = 0.0, -1, 0.0, 0.0
        for p, x, w in _pdf_chunks(am, feats, frames, pdfs, weights, d, chunk):
            if p != cur:
                _mllt_mean_terms(am, cur, occ, s1, iu, outer)
                cur, occ, s1 = p, 0.0, 0.0
            post, like = _posteriors(am, p, x, w)
            tot += like
            outer.add(x, post @ am.inv_vars[p])
            occ, s1 = occ + post.sum(0), s1 + post.T @ x
            self.beta += float(w.sum())
        _mllt_mean_terms(am, cur, occ, s1, iu, outer)
        self.G += outer.result()
        return tot

    def update(self, num_iters: int = 100) -> tuple[np.ndarray, float, float]:
        """MlltAccs::Update (Gales 1999, semi-tied covariances) from the identity: each row in turn
        a_i = c_i G_i^-1 sqrt(beta / (c_i G_i^-1 c_i^T)), c_i the cofactor row (row i of A^-T), the
        exact maximiser of the objective over that row.  Returns (A (D, D), objective improvement
        per frame, beta).  (Kaldi runs 200 iterations; the change after 100 is negligible.)"""
        d, beta = self.dim, self.beta
        if not beta > 0:
            raise PynnetError("no MLLT statistics (no frames, or all had weight 0)")
        g = 0.5 * (self.G + self.G.transpose(0, 2, 1))
        try:
            np.linalg.cholesky(g)
            ginv = np.linalg.inv(g)
        except np.linalg.LinAlgError:
            raise PynnetError("MLLT statistics are singular (a constant or linearly dependent feature "
                              "dimension, or too little data)") from None
        a = np.eye(d)
        for _ in range(num_iters):
            for i in range(d):
                c = np.linalg.inv(a)[:, i]   # row i of A^-T: the cofactors divided by det A
                before = -0.5 * a[i] @ g[i] @ a[i]      # + beta log|a_i . c| = 0 (a_i . c = 1)
                gc = ginv[i] @ c
                row = gc * np.sqrt(beta / (c @ gc))
                after = beta * np.log(abs(row @ c)) - 0.5 * row @ g[i] @ row
                if after >= before:
                    a[i] = row
        impr = mllt_auxf(self, a) - mllt_auxf(self, np.eye(d))
        return a, impr / beta, beta


def _mllt_mean_terms(am: AmGmm, p: int, occ, s1, iu, outer: _Outer) -> None:
    """Add pdf p's sum_g inv_var_gi (occ_g mu mu^T - s1_g mu^T - mu s1_g^T) to the upper triangles."""
    if p >= 0:
        mu = am.means(p)
        q = (occ[:, None] * mu - s1)[:, iu[0]] * mu[:, iu[1]] - mu[:, iu[0]] * s1[:, iu[1]]
        outer.acc += q.T @ am.inv_vars[p]


def mllt_auxf(accs: MlltAccs, A: np.ndarray) -> float:
    """The MLLT objective beta log|det A| - 0.5 sum_i a_i G_i a_i^T (for logs and tests)."""
    sign, logdet = np.linalg.slogdet(A)
    if sign == 0:
        return -np.inf
    return float(accs.beta * logdet - 0.5 * np.einsum("ij,ijk,ik->", A, accs.G, A))


# --------------------------------------------------------------------------- fMLLR
class _Unusable(Exception):
    """This update type cannot be computed from these statistics (try a smaller one)."""


@dataclass
class FmllrAccs(_Accs):
    """Kaldi's FmllrDiagGmmAccs (gmm-est-fmllr, gmm-est-fmllr-gpost), one speaker's statistics:
    beta = sum g, K = sum g (mu / var) xt^T (D, D+1), G_i = sum g / var_i xt xt^T, xt = [x; 1]."""
    beta: float
    K: np.ndarray   # (D, D+1)
    G: np.ndarray   # (D, D+1, D+1)
    _kind = "fMLLR"

    @classmethod
    def zeros(cls, dim: int) -> "FmllrAccs":
        return cls(0.0, np.zeros((dim, dim + 1)), np.zeros((dim, dim + 1, dim + 1)))

    @property
    def dim(self) -> int:
        return self.K.shape[0]

    def _consistent(self) -> bool:
        d = self.K.shape[0] if self.K.ndim == 2 else -1
        return self.K.shape == (d, d + 1) and self.G.shape == (d, d + 1, d + 1)

    def accumulate(self, am: AmGmm, feats, frames, pdfs, weights, gpost_am: AmGmm | None = None,
                   chunk: int = _CHUNK) -> float:
        """Posterior triples as MlltAccs.accumulate.  The Gaussian posteriors come from gpost_am when
        given (gmm-post-to-gpost with the SAT alignment model: same pdfs and Gaussians per pdf),
        else from am; the statistics use am's means and variances.  Returns the weighted total
        log-likelihood under the model that gave the posteriors."""
        d = self.dim
        post_am = am if gpost_am is None else gpost_am
        if gpost_am is not None and (gpost_am.num_pdfs != am.num_pdfs or gpost_am.dim != am.dim or any(
                a.size != b.size for a, b in zip(am.weights, gpost_am.weights))):
            fail("the Gaussian-posterior model does not match the adapted model "
                 "(pdfs, Gaussians per pdf or dimension differ)")
        outer = _Outer(d + 1, d, chunk)
        tot = 0.0
        for p, x, w in _pdf_chunks(am, feats, frames, pdfs, weights, d, chunk):
            post, like = _posteriors(post_am, p, x, w)
            tot += like
            xt = np.hstack([x, np.ones((x.shape[0], 1))])
            self.K += (post @ am.means_invvars[p]).T @ xt
            outer.add(xt, post @ am.inv_vars[p])
            self.beta += float(w.sum())
        self.G += outer.result()
        return tot

    def estimate(self, update_type: str = "full", min_count: float = 500.0, num_iters: int = 40,
                 start: np.ndarray | None = None) -> tuple[np.ndarray, float, float, str]:
        """FmllrDiagGmmAccs::Update: returns (W (D, D+1), auxf improvement per frame, beta, the
        update type used).

        "full": ComputeFmllrMatrixDiagGmmFull (Gales 1998), num_iters passes of row updates
        w_i = (alpha p_i + k_i) G_i^-1, p_i the cofactor row extended by 0, alpha the root of
        e1 alpha^2 + e2 alpha - beta = 0 that maximises the row's auxf.  "diag": the best diagonal A
        and offset, in closed form (it does not depend on start; Kaldi requires a diagonal start, we
        take it when it beats start).  "offset": the best offset for start's A (Kaldi's needs A = I;
        the same formula for any A).  "none": start unchanged.  start defaults to [I 0].

        Counts: Kaldi keeps start unless beta > min_count.  We fall back to a smaller update:
        the requested type if beta > min_count, at most "diag" if beta > min_count / 5 (100 frames
        at the default), at most "offset" if beta > min_count / 50 (10 frames), else "none".  A type
        whose statistics are degenerate (G_i not positive definite), or whose estimate is worse
        than start, gives way to the next smaller one, so the auxf never decreases (to rounding)."""
        d, beta = self.dim, float(self.beta)
        if update_type not in FMLLR_TYPES:
            raise PynnetError(f"unknown fMLLR update type {update_type!r}: must be one of "
                              + "|".join(reversed(FMLLR_TYPES)))
        w0 = np.eye(d, d + 1) if start is None else np.array(start, dtype=np.float64)
        if w0.shape != (d, d + 1):
            raise PynnetError(f"the fMLLR start transform is {w0.shape}; it must be ({d}, {d + 1})")
        allowed = 3 if beta > min_count else 2 if beta > min_count / 5 else 1 if beta > min_count / 50 else 0
        level = min(FMLLR_TYPES.index(update_type), allowed)
        g = 0.5 * (self.G + self.G.transpose(0, 2, 1))
        old = fmllr_auxf(self, w0)
        for lv in range(level, 0, -1):
            try:
                with np.errstate(divide="raise", invalid="raise", over="raise"):
                    w = (_fmllr_offset, _fmllr_diag, _fmllr_full)[lv - 1](g, self.K, beta, w0, num_iters)
            except (_Unusable, np.linalg.LinAlgError, FloatingPointError):
                continue
            new = fmllr_auxf(self, w)
            if np.isfinite(new) and new >= old - 1e-10 * abs(old):
                return w, (new - old) / beta, beta, FMLLR_TYPES[lv]
        return w0, 0.0, beta, "none"


def _fmllr_full(g, k, beta, w0, num_iters):
    d = k.shape[0]
    np.linalg.cholesky(g)       # raises LinAlgError unless every G_i is positive definite
    ginv = np.linalg.inv(g)
    w = w0.copy()
    p = np.zeros(d + 1)
    for _ in range(num_iters):
        for i in range(d):
            p[:d] = np.linalg.inv(w[:, :d])[:, i]     # row i of A^-T (cofactors / det A)
            gp = ginv[i] @ p
            e1, e2 = p @ gp, k[i] @ gp
            disc = np.sqrt(e2 * e2 + 4.0 * e1 * beta)
            alpha = max(((-e2 + disc) / (2 * e1), (-e2 - disc) / (2 * e1)),
                        key=lambda a: beta * np.log(abs(a * e1 + e2)) - 0.5 * a * a * e1)
            w[i] = ginv[i] @ (alpha * p + k[i])
    return w


def _fmllr_diag(g, k, beta, w0, num_iters):
    d = k.shape[0]
    i = np.arange(d)
    g_iii, g_idd, g_idi = g[i, i, i], g[i, d, d], g[i, d, i]
    if not (g_idd > 0).all():
        raise _Unusable("no data")
    a = g_idi * g_idi / g_idd - g_iii
    b = k[i, i] - g_idi * k[i, d] / g_idd
    if not (a < 0).all():
        raise _Unusable("degenerate")
    s = (-b - np.sqrt(b * b - 4 * a * beta)) / (2 * a)
    w = np.zeros_like(w0)
    w[i, i] = s
    w[:, d] = (k[i, d] - s * g_idi) / g_idd
    return w


def _fmllr_offset(g, k, beta, w0, num_iters):
    d = k.shape[0]
    if not (g[:, d, d] > 0).all():
        raise _Unusable("no data")
    w = w0.copy()
    w[:, d] = (k[:, d] - np.einsum("ij,ij->i", w0[:, :d], g[:, :d, d])) / g[:, d, d]
    return w


def fmllr_auxf(accs: FmllrAccs, W: np.ndarray) -> float:
    """beta log|det A| + tr(W K^T) - 0.5 sum_i w_i G_i w_i^T (Kaldi's FmllrAuxFuncDiagGmm)."""
    W = np.asarray(W, dtype=np.float64)
    d = accs.dim
    if W.shape != (d, d + 1):
        raise PynnetError(f"fMLLR transform is {W.shape}; it must be ({d}, {d + 1})")
    sign, logdet = np.linalg.slogdet(W[:, :d])
    if sign == 0 and accs.beta != 0:
        return -np.inf
    ldt = accs.beta * logdet if accs.beta != 0 else 0.0
    return float(ldt + (W * accs.K).sum() - 0.5 * np.einsum("ij,ijk,ik->", W, accs.G, W))


# --------------------------------------------------------------------------- applying transforms
def _matrix(m, what: str) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    if m.ndim != 2 or 0 in m.shape:
        raise PynnetError(f"{what} must be a non-empty matrix, not of shape {m.shape}")
    return m


def apply_transform(feats: np.ndarray, mat: np.ndarray) -> np.ndarray:
    """transform-feats: mat (d_out, D) linear or (d_out, D+1) affine on feats (N, D); float32 out."""
    feats = np.asarray(feats)
    mat = _matrix(mat, "the transform")
    if feats.ndim != 2:
        raise PynnetError(f"features must be a matrix (frames x dims), not of shape {feats.shape}")
    d = feats.shape[1]
    if mat.shape[1] == d:
        out = feats @ mat.T
    elif mat.shape[1] == d + 1:
        out = feats @ mat[:, :d].T + mat[:, d]
    else:
        raise PynnetError(f"transform of shape {mat.shape} does not fit {d}-dimensional features "
                          f"(needs {d} columns, or {d + 1} for an affine transform)")
    return out.astype(np.float32)


def compose_transforms(a: np.ndarray, b: np.ndarray, b_is_affine: bool = False) -> np.ndarray:
    """compose-transforms: the transform "apply b, then a", the matrix product a b.

    If a's columns equal b's rows, c = a b (affine if b is).  If a has one column more (a is affine),
    b is extended to a square-ish matrix first: with b_is_affine, by a last row [0 ... 0 1] (b's last
    column is its offset); without, by a zero column and that row (b linear).  As in Kaldi, a linear b
    whose input dimension is one more than its output cannot be told from an affine b: pass
    b_is_affine=True when composing two affine transforms of the same dimension."""
    a, b = _matrix(a, "transform a"), _matrix(b, "transform b")
    if a.shape[1] == b.shape[0]:
        return a @ b
    if a.shape[1] == b.shape[0] + 1:
        r, c = b.shape
        if b_is_affine:
            ext = np.zeros((r + 1, c))
            ext[:r] = b
            ext[r, c - 1] = 1.0
        else:
            ext = np.zeros((r + 1, c + 1))
            ext[:r, :c] = b
            ext[r, c] = 1.0
        return a @ ext
    raise PynnetError(f"cannot compose transforms: a is {a.shape} and b is {b.shape} "
                      f"(a's columns must be b's rows, or one more if a is affine)")


def transform_means(am: AmGmm, mat: np.ndarray) -> AmGmm:
    """gmm-transform-means: every mean mu -> A mu (+ b when mat is (D, D+1)); variances and weights
    unchanged (after MLLT the diagonal variances are those of the new space).  Returns a new AmGmm."""
    mat = _matrix(mat, "the transform")
    d = am.dim
    if mat.shape not in ((d, d), (d, d + 1)):
        raise PynnetError(f"transform of shape {mat.shape} does not fit a model of dimension {d} "
                          f"(needs ({d}, {d}) or ({d}, {d + 1}))")
    off = mat[:, d] if mat.shape[1] == d + 1 else 0.0
    mis = [(am.means(p) @ mat[:, :d].T + off) * am.inv_vars[p] for p in range(am.num_pdfs)]
    return AmGmm([w.copy() for w in am.weights], [v.copy() for v in am.inv_vars], mis)
