"""LDA, MLLT and fMLLR (pynnet.hmm.adapt) on synthetic data with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from pynnet.hmm.adapt import (FmllrAccs, LdaAccs, MlltAccs, apply_transform, compose_transforms,
                              fmllr_auxf, mllt_auxf, transform_means)
from pynnet.hmm.gmm import AmGmm
from pynnet.io.errors import PynnetError


def _one_line_error(fn, *args, match: str | None = None, **kw) -> str:
    with pytest.raises(PynnetError, match=match) as e:
        fn(*args, **kw)
    assert "\n" not in str(e.value)
    return str(e.value)


def _random_am(rng, num_pdfs: int, num_gauss: int, dim: int, spread: float = 3.0) -> AmGmm:
    return AmGmm.from_params([rng.dirichlet(np.ones(num_gauss) * 5) for _ in range(num_pdfs)],
                             [rng.normal(0, spread, (num_gauss, dim)) for _ in range(num_pdfs)],
                             [rng.uniform(0.3, 2.0, (num_gauss, dim)) for _ in range(num_pdfs)])


def _sample(rng, am: AmGmm, frames_per_pdf: int) -> tuple[np.ndarray, np.ndarray]:
    """Frames drawn from every pdf's GMM and their pdf labels."""
    xs, labels = [], []
    for p in range(am.num_pdfs):
        g = rng.choice(am.weights[p].size, size=frames_per_pdf, p=am.weights[p])
        xs.append(am.means(p)[g] + rng.normal(size=(frames_per_pdf, am.dim)) * np.sqrt(am.vars(p)[g]))
        labels.append(np.full(frames_per_pdf, p))
    return np.concatenate(xs), np.concatenate(labels)


def _textbook_posteriors(am: AmGmm, p: int, x: np.ndarray) -> tuple[np.ndarray, float]:
    """One frame's Gaussian posteriors within pdf p and its log-likelihood, from the density formula."""
    mu, var = am.means(p), am.vars(p)
    ll = np.log(am.weights[p]) - 0.5 * np.sum(np.log(2 * np.pi * var) + (x - mu) ** 2 / var, axis=1)
    tot = np.log(np.exp(ll - ll.max()).sum()) + ll.max()
    return np.exp(ll - tot), tot


# --------------------------------------------------------------------------- statistics
def test_mllt_and_fmllr_stats_match_kaldis_per_frame_formulas():
    rng = np.random.default_rng(0)
    d = 3
    am = _random_am(rng, 3, 2, d, spread=1.0)
    other = _random_am(rng, 3, 2, d, spread=1.0)    # the "alignment model" for Gaussian posteriors
    feats = rng.normal(0, 1.5, (25, d)).astype(np.float32)
    # posterior triples: repeated frames, two pdfs on one frame, weights not 1, some 0
    frames = np.r_[np.arange(25), rng.integers(0, 25, 15)]
    pdfs = rng.integers(0, 3, frames.size)
    weights = rng.uniform(0.2, 1.0, frames.size)
    weights[[3, 30]] = 0.0
    mllt, fmllr, fgpost = MlltAccs.zeros(d), FmllrAccs.zeros(d), FmllrAccs.zeros(d)
    like_m = mllt.accumulate(am, feats, frames, pdfs, weights, chunk=4)
    like_f = fmllr.accumulate(am, feats, frames, pdfs, weights, chunk=4)
    like_g = fgpost.accumulate(am, feats, frames, pdfs, weights, gpost_am=other, chunk=5)
    # Kaldi, frame by frame (MlltAccs::AccumulateFromPosteriors, FmllrDiagGmmAccs single-frame stats)
    g_m = np.zeros((d, d, d))
    beta = like = like_other = 0.0
    k_f, g_f = np.zeros((d, d + 1)), np.zeros((d, d + 1, d + 1))
    k_g, g_g = np.zeros((d, d + 1)), np.zeros((d, d + 1, d + 1))
    for t, p, w in zip(frames, pdfs, weights):
        x = feats[t].astype(np.float64)
        xt = np.r_[x, 1.0]
        post, ll = _textbook_posteriors(am, p, x[None])
        post_o, ll_o = _textbook_posteriors(other, p, x[None])
        beta, like, like_other = beta + w, like + w * ll, like_other + w * ll_o
        for g in range(2):
            diff = x - am.means(p)[g]
            for i in range(d):
                g_m[i] += w * post[g] * am.inv_vars[p][g, i] * np.outer(diff, diff)
        for pst, k_acc, g_acc in ((post, k_f, g_f), (post_o, k_g, g_g)):
            a = (w * pst) @ am.means_invvars[p]
            b = (w * pst) @ am.inv_vars[p]
            k_acc += np.outer(a, xt)
            g_acc += b[:, None, None] * np.outer(xt, xt)
    np.testing.assert_allclose(mllt.G, g_m, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose([mllt.beta, fmllr.beta, fgpost.beta], beta, rtol=1e-12)
    np.testing.assert_allclose([like_m, like_f, like_g], [like, like, like_other], rtol=1e-9)
    np.testing.assert_allclose(fmllr.K, k_f, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fmllr.G, g_f, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fgpost.K, k_g, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(fgpost.G, g_g, rtol=1e-9, atol=1e-9)
    assert not np.allclose(fgpost.K, fmllr.K)         # the alignment model's posteriors were used
    bad = _random_am(rng, 3, 3, d)
    _one_line_error(FmllrAccs.zeros(d).accumulate, am, feats, frames, pdfs, weights, gpost_am=bad,
                    match="Gaussian-posterior model")
    _one_line_error(mllt.accumulate, am, feats, frames, pdfs + 3, weights, match="pdf [345] out of range for a model with 3 pdfs")
    _one_line_error(mllt.accumulate, am, feats, frames + 25, pdfs, weights, match="frame index")
    _one_line_error(mllt.accumulate, am, feats[:, :2], frames, pdfs, weights, match="dimension")
    _one_line_error(mllt.accumulate, am, feats, frames[:-1], pdfs, weights, match="differ in length")


# --------------------------------------------------------------------------- LDA
def _lda_data(rng, n_per_class=2000):
    d, c = 4, 4
    means = rng.normal(0, 2.0, (c, d))
    mix = rng.normal(size=(d, d))                   # shared, non-diagonal within-class covariance
    labels = np.repeat(np.arange(c), n_per_class)
    x = means[labels] + rng.normal(size=(labels.size, d)) @ mix.T
    return x, labels


def test_lda_solves_the_generalised_eigenproblem_and_whitens_within_class():
    rng = np.random.default_rng(1)
    x, labels = _lda_data(rng)
    w = rng.uniform(0.5, 2.0, labels.size)
    w[::7] = 0.0                                     # silence: weight 0 drops the frame
    accs = LdaAccs.zeros(4, 4)
    accs.accumulate(x, labels, w)
    keep = w != 0
    np.testing.assert_allclose(accs.counts, np.bincount(labels[keep], w[keep]))
    np.testing.assert_allclose(accs.scatter, (x[keep] * w[keep, None]).T @ x[keep], rtol=1e-10)
    lda, full = accs.estimate(3)
    assert lda.shape == (3, 4) and full.shape == (4, 4)
    np.testing.assert_array_equal(lda, full[:3])

    # reference: weighted within/between covariances from the data, W^-1/2 by eigh
    n = w.sum()
    mean = (w @ x) / n
    cls = [labels == k for k in range(4)]
    cmeans = np.array([(w[m] @ x[m]) / w[m].sum() for m in cls])
    within = sum(((x[m] - cmeans[k]) * w[m, None]).T @ (x[m] - cmeans[k]) for k, m in enumerate(cls)) / n
    between = sum(w[m].sum() / n * np.outer(cmeans[k] - mean, cmeans[k] - mean) for k, m in enumerate(cls))
    lw, vw = np.linalg.eigh(within)
    w_isqrt = vw @ np.diag(lw ** -0.5) @ vw.T
    ev, u = np.linalg.eigh(w_isqrt @ between @ w_isqrt)
    ref = (u[:, ::-1].T @ w_isqrt)                   # rows by descending eigenvalue
    sign = np.sign((full * ref).sum(1))
    np.testing.assert_allclose(full, sign[:, None] * ref, atol=1e-8)
    np.testing.assert_allclose(accs.eigenvalues, ev[::-1], atol=1e-10)
    assert (np.diff(accs.eigenvalues) <= 0).all() and accs.eigenvalues[3] < 1e-10   # 4 classes: rank 3
    np.testing.assert_allclose(full @ within @ full.T, np.eye(4), atol=1e-9)
    np.testing.assert_allclose(full @ between @ full.T, np.diag(accs.eigenvalues), atol=1e-9)

    # the projected frames: unit within-class, diagonal between-class covariance
    y = apply_transform(x, lda).astype(np.float64)
    assert y.dtype == np.float64 and apply_transform(x, lda).dtype == np.float32
    ycm = np.array([(w[m] @ y[m]) / w[m].sum() for m in cls])
    yw = sum(((y[m] - ycm[k]) * w[m, None]).T @ (y[m] - ycm[k]) for k, m in enumerate(cls)) / n
    np.testing.assert_allclose(yw, np.eye(3), atol=1e-5)

    # within_class_factor f: row i scaled by sqrt((f + d_i) / (1 + d_i)): within-class variance f
    f = 0.25
    lda_f, full_f = accs.estimate(3, within_class_factor=f)
    d = accs.eigenvalues
    np.testing.assert_allclose(full_f, full * np.sqrt((f + d) / (1 + d))[:, None], rtol=1e-12)
    np.testing.assert_allclose(full_f @ (within + between) @ full_f.T, np.diag(f + d), atol=1e-9)
    np.testing.assert_allclose(lda_f, full_f[:3])


def test_lda_bad_cases_are_one_line_errors():
    rng = np.random.default_rng(2)
    x, labels = _lda_data(rng, 200)
    accs = LdaAccs.zeros(4, 4)
    accs.accumulate(x, labels)
    _one_line_error(accs.estimate, 5, match="between 1 and the feature dimension 4")
    _one_line_error(accs.estimate, 0, match="between 1")
    _one_line_error(LdaAccs.zeros(4, 4).estimate, 2, match="no LDA statistics")
    _one_line_error(accs.accumulate, x, labels + 1, match="class id 4 out of range")
    _one_line_error(accs.accumulate, x[:, :3], labels, match="dimension 4")
    x2 = x.copy()
    x2[:, 3] = 2 * x2[:, 0] + 1                     # linearly dependent dimension
    sing = LdaAccs.zeros(4, 4)
    sing.accumulate(x2, labels)
    _one_line_error(sing.estimate, 2, match="within-class covariance is singular")
    const = LdaAccs.zeros(4, 4)
    const.accumulate(np.c_[x[:, :3], np.ones(len(x))], labels)
    _one_line_error(const.estimate, 2, match="singular")


# --------------------------------------------------------------------------- MLLT
def _semi_tied_data(rng, d=4, num_classes=6, n=3000):
    """Gaussians whose covariances are diagonal in one rotated space: x = Q z, z ~ N(m_k, diag(v_k))."""
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    v = np.exp(rng.uniform(np.log(0.1), np.log(10.0), (num_classes, d)))
    m = rng.normal(0, 3.0, (num_classes, d))
    labels = np.repeat(np.arange(num_classes), n)
    z = m[labels] + rng.normal(size=(labels.size, d)) * np.sqrt(v[labels])
    return z @ q.T, labels, q


def _ml_model(y, labels, num_classes):
    """One diagonal Gaussian per class, ML from the labelled frames (Kaldi's gmm-est)."""
    return AmGmm.from_params([np.ones(1)] * num_classes,
                             [y[labels == k].mean(0, keepdims=True) for k in range(num_classes)],
                             [y[labels == k].var(0, keepdims=True) for k in range(num_classes)])


def _max_offdiag_corr(y, labels, num_classes):
    worst = 0.0
    for k in range(num_classes):
        c = np.corrcoef(y[labels == k].T)
        worst = max(worst, np.abs(c - np.diag(np.diag(c))).max())
    return worst


def test_mllt_objective_never_decreases_and_recovers_the_rotation():
    rng = np.random.default_rng(3)
    x, labels, q = _semi_tied_data(rng)
    n, k = labels.size, 6
    assert _max_offdiag_corr(x, labels, k) > 0.3    # not diagonal to start with
    total = np.eye(4)
    for it in range(4):                              # Kaldi's train_lda_mllt: MLLT, transform, re-estimate
        y = x @ total.T
        am = _ml_model(y, labels, k)
        accs = MlltAccs.zeros(4)
        accs.accumulate(am, y, np.arange(n), labels, np.ones(n))
        assert accs.beta == n
        if it == 0:                                  # the iterations of one update: never down, and up
            objfs = [mllt_auxf(accs, np.eye(4))] + [mllt_auxf(accs, accs.update(i)[0]) for i in range(1, 12)]
            assert all(b >= a - 1e-9 * abs(a) for a, b in zip(objfs, objfs[1:]))
            assert objfs[-1] > objfs[0] + 0.05 * n
            a = accs.update()[0]       # converged: the gradient beta A^-T - [G_i a_i]_i vanishes
            grad = n * np.linalg.inv(a).T - np.einsum("ijk,ik->ij", accs.G, a)
            assert np.abs(grad).max() < 1e-6 * n
        a, impr, beta = accs.update()
        assert beta == n and impr >= 0
        np.testing.assert_allclose(impr, (mllt_auxf(accs, a) - mllt_auxf(accs, np.eye(4))) / n)
        # the transformed model's means are the means of the transformed data
        np.testing.assert_allclose(transform_means(am, a).means(2),
                                   (y[labels == 2] @ a.T).mean(0, keepdims=True), atol=1e-9)
        total = compose_transforms(a, total)
    assert impr < 1e-3                               # converged
    # as diagonal as in the true space (where the correlations are sampling noise, ~0.05 at most)
    assert _max_offdiag_corr(x @ total.T, labels, k) < _max_offdiag_corr(x @ q, labels, k) + 0.01
    # rows of the transform are rows of Q^T up to scale, sign and order
    tn = total / np.linalg.norm(total, axis=1, keepdims=True)
    cos = np.abs(tn @ q)
    assert (cos.max(1) > 0.999).all() and sorted(cos.argmax(1)) == [0, 1, 2, 3]
    _one_line_error(MlltAccs.zeros(3).update, match="no MLLT statistics")


# --------------------------------------------------------------------------- fMLLR
def _speaker(rng, a, b, n_per_pdf=1500, num_gauss=1, am=None):
    """Frames of a known GMM (single-Gaussian pdfs: the alignment gives exact posteriors) seen
    through a speaker's distortion y = A x + b."""
    am = am or _random_am(rng, 8, num_gauss, 4)
    x, labels = _sample(rng, am, n_per_pdf)
    return am, x @ a.T + b, labels


def _fmllr_accs(am, y, labels, gpost_am=None):
    accs = FmllrAccs.zeros(am.dim)
    accs.accumulate(am, y, np.arange(len(labels)), labels, np.ones(len(labels)), gpost_am=gpost_am)
    return accs


def _fmllr_gradient(accs, w):
    """d auxf / d W = beta [A^-T 0] + K - [G_i w_i]_i: zero at the optimum (of the free entries)."""
    d = accs.dim
    return (accs.beta * np.c_[np.linalg.inv(w[:, :d]).T, np.zeros(d)] + accs.K
            - np.einsum("ijk,ik->ij", accs.G, w))


def _inverse(a, b):
    ainv = np.linalg.inv(a)
    return np.c_[ainv, -ainv @ b]


def test_full_fmllr_recovers_the_inverse_distortion_and_auxf_never_decreases():
    rng = np.random.default_rng(4)
    a = np.eye(4) + 0.3 * rng.normal(size=(4, 4))
    b = rng.normal(0, 1.0, 4)
    am, y, labels = _speaker(rng, a, b)
    accs = _fmllr_accs(am, y, labels)
    w, impr, beta, used = accs.estimate()
    assert used == "full" and beta == labels.size
    truth = _inverse(a, b)
    np.testing.assert_allclose(w, truth, atol=0.06)  # 12000 frames: typically within 0.02-0.04
    # the ML estimate is at least as good as the truth and much better than no transform
    assert fmllr_auxf(accs, w) >= fmllr_auxf(accs, truth)
    assert np.abs(_fmllr_gradient(accs, w)).max() < 1e-8 * beta      # a stationary point
    np.testing.assert_allclose(impr, (fmllr_auxf(accs, w) - fmllr_auxf(accs, np.eye(4, 5))) / beta)
    assert impr > 0.5
    auxfs = [fmllr_auxf(accs, accs.estimate(num_iters=i)[0]) for i in range(6)]
    assert all(q >= p - 1e-9 * abs(p) for p, q in zip(auxfs, auxfs[1:]))
    # the adapted frames fit the model: apply_transform(y, W) is x again
    x_hat = apply_transform(y, w)
    np.testing.assert_allclose(x_hat.mean(0), (y @ truth[:, :4].T + truth[:, 4]).mean(0), atol=0.05)
    # never worse than the start: from the optimum, each type keeps it or improves it
    # (the best diagonal transform is worse than this start: "diag" gives way to "offset")
    for typ, want in (("full", "full"), ("offset", "offset"), ("diag", "offset")):
        w2, impr2, _, used2 = accs.estimate(typ, start=w)
        assert used2 == want and impr2 >= -1e-12
        assert fmllr_auxf(accs, w2) >= fmllr_auxf(accs, w) - 1e-9 * abs(fmllr_auxf(accs, w))
    rot = np.c_[np.linalg.qr(rng.normal(size=(4, 4)))[0], np.zeros(4)]   # a poor non-diagonal start
    w3, _, _, used3 = accs.estimate("diag", start=rot)
    assert used3 == "diag" and fmllr_auxf(accs, w3) > fmllr_auxf(accs, rot)


def test_diag_and_offset_fmllr_recover_diag_and_offset_distortions():
    rng = np.random.default_rng(5)
    a = np.diag([1.5, 0.7, 1.2, 0.9])
    b = np.array([1.0, -2.0, 0.5, 0.0])
    am, y, labels = _speaker(rng, a, b)
    accs = _fmllr_accs(am, y, labels)
    w, impr, beta, used = accs.estimate("diag")
    assert used == "diag" and impr > 0.1
    np.testing.assert_array_equal(w[:, :4], np.diag(np.diag(w[:, :4])))
    grad = _fmllr_gradient(accs, w)
    assert np.abs(np.r_[np.diag(grad), grad[:, 4]]).max() < 1e-8 * beta    # optimal diagonal and offset
    np.testing.assert_allclose(w, _inverse(a, b), atol=0.04)
    am, y, labels = _speaker(rng, np.eye(4), b, am=am)
    accs = _fmllr_accs(am, y, labels)
    w, impr, beta, used = accs.estimate("offset")
    assert used == "offset" and impr > 0.1
    assert np.abs(_fmllr_gradient(accs, w)[:, 4]).max() < 1e-8 * beta
    np.testing.assert_array_equal(w[:, :4], np.eye(4))
    np.testing.assert_allclose(w[:, 4], -b, atol=0.04)


def test_gpost_model_gives_the_posteriors_of_a_shifted_speaker():
    """gmm-est-fmllr-gpost: Gaussian posteriors from an alignment model that fits the speaker's
    frames (here: the model with shifted means), statistics with the model being adapted."""
    rng = np.random.default_rng(6)
    b = np.array([3.0, -3.0, 2.0, 3.0])
    am, y, labels = _speaker(rng, np.eye(4), b, n_per_pdf=1000, num_gauss=3)
    shifted = transform_means(am, np.c_[np.eye(4), b])
    w_g, _, _, used = _fmllr_accs(am, y, labels, gpost_am=shifted).estimate()
    w_plain = _fmllr_accs(am, y, labels).estimate()[0]
    assert used == "full"
    np.testing.assert_allclose(w_g, _inverse(np.eye(4), b), atol=0.06)
    assert np.abs(w_g - _inverse(np.eye(4), b)).max() < np.abs(w_plain - _inverse(np.eye(4), b)).max()


def test_fmllr_below_min_count_falls_back_to_smaller_updates():
    rng = np.random.default_rng(7)
    a = np.diag([1.3, 0.8, 1.1, 1.0])
    am, y, labels = _speaker(rng, a, np.ones(4), n_per_pdf=40)
    order = rng.permutation(labels.size)
    # min_count 500: "diag" above 100 frames, "offset" above 10, else none
    for n, want in ((320, "full"), (300, "diag"), (120, "diag"), (90, "offset"), (12, "offset"), (8, "none")):
        sel = order[:n]
        accs = _fmllr_accs(am, y[sel], labels[sel])
        w, impr, beta, used = accs.estimate(min_count=250.0 if want == "full" else 500.0)
        assert beta == n and used == want, (n, used)
        if want == "none":
            np.testing.assert_array_equal(w, np.eye(4, 5))
            assert impr == 0.0
        else:
            assert impr > 0
    # a smaller requested type is never upgraded; "none" keeps the start
    accs = _fmllr_accs(am, y, labels)
    assert accs.estimate("offset", min_count=100)[3] == "offset"
    start = np.c_[np.eye(4) * 2, np.ones(4)]
    w, impr, _, used = accs.estimate("none", start=start)
    assert used == "none" and impr == 0 and (w == start).all()
    w, impr, beta, used = FmllrAccs.zeros(4).estimate()       # no data at all: identity
    assert (w == np.eye(4, 5)).all() and impr == 0.0 and beta == 0.0 and used == "none"
    _one_line_error(accs.estimate, "fancy", match="unknown fMLLR update type")
    _one_line_error(accs.estimate, start=np.eye(4), match="start transform")


# --------------------------------------------------------------------------- applying, composing
def test_compose_transforms_is_apply_b_then_a():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(20, 5))
    b_lin, b_aff = rng.normal(size=(4, 5)), rng.normal(size=(4, 6))
    a_lin, a_aff = rng.normal(size=(3, 4)), rng.normal(size=(3, 5))
    for a, b, aff, shape in ((a_lin, b_lin, False, (3, 5)), (a_lin, b_aff, False, (3, 6)),
                             (a_aff, b_lin, False, (3, 6)), (a_aff, b_aff, True, (3, 6))):
        c = compose_transforms(a, b, b_is_affine=aff)
        assert c.shape == shape
        np.testing.assert_allclose(apply_transform(x, c), apply_transform(apply_transform(x, b), a),
                                   rtol=1e-5, atol=1e-5)
    # by hand: affine after affine
    np.testing.assert_allclose(compose_transforms(np.array([[2.0, 1.0]]), np.array([[3.0, 4.0]]), True),
                               [[6.0, 9.0]])                # 2 (3x + 4) + 1
    _one_line_error(compose_transforms, a_lin, rng.normal(size=(6, 5)), match="cannot compose")
    _one_line_error(apply_transform, x, rng.normal(size=(3, 7)), match="does not fit 5-dimensional")
    np.testing.assert_allclose(apply_transform(x, np.c_[np.eye(5), np.arange(5)]), x + np.arange(5),
                               rtol=1e-6)


def test_transform_means_agrees_with_transforming_the_data():
    rng = np.random.default_rng(9)
    am = _random_am(rng, 2, 3, 4)
    x, labels = _sample(rng, am, 50)
    gauss = rng.integers(0, 3, labels.size)
    # a model whose means are the sample means of its frames, per (pdf, Gaussian)
    means = [np.array([x[(labels == p) & (gauss == g)].mean(0) for g in range(3)]) for p in range(2)]
    model = AmGmm.from_params(am.weights, means, [am.vars(p) for p in range(2)])
    mat = np.c_[rng.normal(size=(4, 4)), rng.normal(size=4)]
    y = apply_transform(x, mat).astype(np.float64)
    moved = transform_means(model, mat)
    for p in range(2):
        want = np.array([y[(labels == p) & (gauss == g)].mean(0) for g in range(3)])
        np.testing.assert_allclose(moved.means(p), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(moved.vars(p), model.vars(p))
        np.testing.assert_array_equal(moved.weights[p], model.weights[p])
    np.testing.assert_allclose(transform_means(model, mat[:, :4]).means(1), means[1] @ mat[:, :4].T)
    _one_line_error(transform_means, model, np.eye(3), match="does not fit a model of dimension 4")


# --------------------------------------------------------------------------- accumulator files
def _three_accs(rng, half: slice):
    am = _random_am(rng, 3, 2, 3)
    x, labels = _sample(np.random.default_rng(10), am, 100)
    x, labels = x[half], labels[half]
    lda, mllt, fmllr = LdaAccs.zeros(3, 3), MlltAccs.zeros(3), FmllrAccs.zeros(3)
    lda.accumulate(x, labels)
    n = len(labels)
    mllt.accumulate(am, x, np.arange(n), labels, np.ones(n))
    fmllr.accumulate(am, x, np.arange(n), labels, np.ones(n))
    return lda, mllt, fmllr


@pytest.mark.parametrize("which", [0, 1, 2])
def test_accumulators_add_and_round_trip_and_corrupt_files_are_one_line_errors(tmp_path, which):
    cls = (LdaAccs, MlltAccs, FmllrAccs)[which]
    whole = _three_accs(np.random.default_rng(11), slice(None))[which]
    first = _three_accs(np.random.default_rng(11), slice(0, 120))[which]
    second = _three_accs(np.random.default_rng(11), slice(120, None))[which]
    first.add(second)
    for name, val in whole._arrays().items():
        np.testing.assert_allclose(first._arrays()[name], val, rtol=1e-10, atol=1e-10)
    path = tmp_path / "1.acc"
    whole.write(str(path))
    back = cls.read(str(path))
    for name, val in whole._arrays().items():
        np.testing.assert_array_equal(back._arrays()[name], val)
    other_kind = (MlltAccs, FmllrAccs, LdaAccs)[which]
    msg = _one_line_error(other_kind.read, str(path), match="accumulators, not")
    assert str(path) in msg
    small = LdaAccs.zeros(2, 3) if which == 0 else cls.zeros(2)
    _one_line_error(whole.add, small, "2.acc", match="2.acc: .*do not match")
    _one_line_error(cls.read, str(tmp_path / "missing.acc"), match="no such accumulator file")
    data = path.read_bytes()
    for i, bad in enumerate((b"garbage\n" * 10, data[: len(data) // 2], data[:40] + b"\0" * 40 + data[80:])):
        p = tmp_path / f"bad{i}.acc"
        p.write_bytes(bad)
        msg = _one_line_error(cls.read, str(p))
        assert msg.startswith(f"{p}: ")
