"""NG-SGD: the preconditioner against the explicit Fisher inverse; the online estimate converges to
the data's covariance structure; NG-SGD / SGD / AdaGrad actually train; max-change limits steps."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pynnet.nnet.model import Dnn
from pynnet.nnet.ngsgd import NgConfig, OnlineNaturalGradient
from pynnet.nnet.optim import make_optimizer


def _data(n, d, seed, scales=None):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    s = torch.as_tensor(scales if scales is not None else np.geomspace(10, 0.1, d))
    return (torch.randn(n, d, generator=g, dtype=torch.float64) * s) @ Q.t(), Q, s


def test_precondition_equals_explicit_fisher_inverse():
    D, r, alpha = 12, 4, 4.0
    pre = OnlineNaturalGradient(rank=r, alpha=alpha, update_period=1, num_samples_history=50.0, seed=3)
    for k in range(6):  # let the estimate move away from its initialisation
        M, _, _ = _data(32, D, k)
        pre.precondition(M)
    M, _, _ = _data(32, D, 99)
    # the state used for THIS minibatch is the one before it (the update happens after)
    Fm = pre.fisher()
    beta = pre.beta(D)
    G = Fm + (alpha / D) * torch.trace(Fm) * torch.eye(D, dtype=torch.float64)
    # beta = rho(1+alpha) + alpha/D tr(diag d) is G's smallest eigenvalue (F's is rho, outside R's rows)
    assert math.isclose(beta, float(torch.linalg.eigvalsh(G)[0]), rel_tol=1e-9)
    expected_P = beta * M @ torch.linalg.inv(G)
    P, gamma, rows = pre.precondition(M)
    assert torch.allclose(P, expected_P, rtol=1e-9, atol=1e-9)
    # beta = rho(1+alpha) + alpha/D tr(diag d) is G's smallest eigenvalue (F's is rho, outside R's rows)
    assert math.isclose(beta, float(torch.linalg.eigvalsh(G)[0]), rel_tol=1e-9)
    # gamma restores the Frobenius norm; row norms are those of gamma*P
    assert math.isclose(gamma, float(M.norm() / P.norm()), rel_tol=1e-9)
    assert torch.allclose(rows, (gamma * P).pow(2).sum(1), rtol=1e-8)
    # preconditioning is not the identity: directions with large Fisher eigenvalues are damped
    assert not torch.allclose(P / P.norm(), M / M.norm(), atol=1e-3)


def test_online_estimate_tracks_covariance():
    D, r = 30, 5
    scales = np.r_[np.array([20.0, 15, 10, 8, 6]), np.ones(D - 5)]
    pre = OnlineNaturalGradient(rank=r, update_period=1, num_samples_history=500.0, seed=0)
    for k in range(200):
        M, Q, s = _data(64, D, 1000 + k if k else 1000, scales)
        if k == 0:
            Q0, s0 = Q, s
        g = torch.Generator().manual_seed(k)
        M = (torch.randn(64, D, generator=g, dtype=torch.float64) * s0) @ Q0.t()
        pre.precondition(M)
    # R spans the top-5 eigenvectors of the covariance, d ~ eigenvalue - rho, rho ~ 1
    top = Q0[:, :r]
    proj = pre.R.double() @ top
    sv = torch.linalg.svdvals(proj)
    assert float(sv.min()) > 0.97
    assert 0.7 < pre.rho < 1.3
    expected = np.sort(scales[:r] ** 2 - 1.0)
    got = np.sort(pre.d.numpy())
    assert np.allclose(got, expected, rtol=0.3)
    # rows stay orthonormal
    assert torch.allclose(pre.R.double() @ pre.R.double().t(), torch.eye(r, dtype=torch.float64), atol=1e-6)


def test_estimate_is_scale_equivariant():
    """Scaling the data by s (a power of two: exact in floating point) must scale the estimate by
    s^2 and the output by s. Output derivatives of hidden layers are ~1e-3 and smaller, so a floor
    that is not relative to the data's scale (an absolute 1e-10 on C = eigenvalues of Y Y^T, in
    squared units of d: the code before 2026-11-30 17:00) clips their estimates."""
    D, r, s = 40, 8, 2.0 ** -11
    a = OnlineNaturalGradient(rank=r, update_period=1, num_samples_history=200.0, seed=4)
    b = OnlineNaturalGradient(rank=r, update_period=1, num_samples_history=200.0, seed=4)
    _, Q, scales = _data(1, D, 0, np.r_[np.geomspace(10, 5, r), np.ones(D - r)])
    g = torch.Generator().manual_seed(1)
    for k in range(30):
        M = (torch.randn(64, D, generator=g, dtype=torch.float64) * scales) @ Q.t()
        pa, ga, rows_a = a.precondition(M)
        pb, gb, rows_b = b.precondition(M * s)
    assert float(b.d.min()) < 1e-5  # the regime that was clipped
    # equal up to the initial state (d = rho = 1e-10, not scaled) and rounding
    assert torch.allclose(b.d, a.d * s * s, rtol=1e-4, atol=0)
    assert math.isclose(b.rho, a.rho * s * s, rel_tol=1e-5)
    assert torch.allclose(b.R, a.R, rtol=0, atol=1e-5)
    assert torch.allclose(pb, pa * s, rtol=1e-4, atol=0) and math.isclose(ga, gb, rel_tol=1e-5)
    assert torch.allclose(rows_b, rows_a * s * s, rtol=1e-4, atol=0)


def test_reorthonormalization_float32():
    """R' = T Y in float32 drifts from orthonormal by T's range; one L^-1 GEMM (Cholesky of R R^T)
    restores it to float32 rounding, and rows far from orthonormal take the float64 path."""
    from pynnet.nnet.ngsgd import _reorthonormalized
    g = torch.Generator().manual_seed(0)
    Q = torch.linalg.qr(torch.randn(2048, 80, generator=g, dtype=torch.float64))[0].t()
    eye = torch.eye(80, dtype=torch.float64)
    for drift in (1e-3, 0.3):
        R = (Q + drift / 45 * torch.randn(80, 2048, generator=g, dtype=torch.float64)).float()
        G = R @ R.t()
        error = float((G.double() - eye).abs().max())
        assert error > drift / 10
        R2 = _reorthonormalized(R, G, error)
        assert R2.dtype == torch.float32 and R2.shape == R.shape
        assert float((R2.double() @ R2.double().t() - eye).abs().max()) < 2e-6
        # the same row space, Gram-Schmidt order kept: R2 = L^-1 R, so R2 R^T = L^T (upper)
        coef = R2.double() @ R.double().t()
        assert torch.allclose(coef.tril(-1), torch.zeros_like(coef), atol=1e-5)
        assert torch.allclose(coef.t() @ coef, G.double(), atol=1e-4)


def test_state_dict_roundtrip_is_exact():
    a = OnlineNaturalGradient(rank=3, update_period=2, seed=5)
    M, _, _ = _data(16, 8, 1)
    for _ in range(5):
        a.precondition(M.float())
    b = OnlineNaturalGradient(rank=3, seed=0)
    b.load_state_dict(a.state_dict())
    M2, _, _ = _data(16, 8, 2)
    for _ in range(5):
        pa, ga, _ = a.precondition(M2.float())
        pb, gb, _ = b.precondition(M2.float())
        assert torch.equal(pa, pb) and ga == gb


def _toy_problem(seed=0, n=2048, d=10, k=6):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(k, d, generator=g) * 1.5
    y = torch.randint(0, k, (n,), generator=g)
    x = centers[y] + torch.randn(n, d, generator=g)
    return x, y


@pytest.mark.parametrize("opt_name,lr", [("ngsgd", 0.008), ("sgd", 0.008), ("adagrad", 0.01)])
def test_optimizers_train(opt_name, lr):
    x, y = _toy_problem()
    torch.manual_seed(0)
    model = Dnn(10, [32, 32], 6, "sigmoid", context=0)
    model.init_random(1)
    opt = make_optimizer(opt_name, model, momentum=0.0)

    def full_loss():
        with torch.no_grad():
            return float(F.cross_entropy(model(x), y))

    before = full_loss()
    for epoch in range(4):
        for i in range(0, len(x), 64):
            xb, yb = x[i:i + 64], y[i:i + 64]
            loss = F.cross_entropy(model(xb), yb, reduction="sum")
            loss.backward()
            opt.step(lr)
    after = full_loss()
    assert after < 0.6 * before, (before, after)
    with torch.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean())
    assert acc > 0.8


def test_ngsgd_max_change_limits_the_step():
    x, y = _toy_problem(n=256)
    steps, opts = [], []
    for mc in (1e-4, 0.0):   # the same step with max-change, and without (0 turns it off)
        model = Dnn(10, [16], 6, "sigmoid", context=0)
        model.init_random(0)
        opt = make_optimizer("ngsgd", model, ng_config=NgConfig(max_change_per_sample=mc))
        w0 = [a.wb.detach().clone() for a in model.affines]
        loss = F.cross_entropy(model(x), y, reduction="sum")
        loss.backward()
        opt.step(10.0)
        steps.append([a.wb.detach() - w for a, w in zip(model.affines, w0)])
        opts.append(opt)
    limited, free = steps
    assert opts[1].last_scales == [1.0, 1.0]
    for i, (dl, df) in enumerate(zip(limited, free)):
        # lr * sum_i ||xtilde_i|| ||ytilde_i|| was over max_change * N: the step is scaled to meet
        # the limit exactly, in the same direction
        scale = opts[0].last_scales[i]
        assert 0.0 < scale < 1.0 and math.isclose(10.0 * scale * opts[0]._change[i], 1e-4 * 256, rel_tol=1e-9)
        # (atol: the steps are differences of float32 weights of magnitude ~1, ulp ~1e-7)
        assert float(df.norm()) > 0 and torch.allclose(dl, scale * df, rtol=1e-3, atol=1e-6)
        # and the bound it implies: ||dW|| <= lr*scale*sum_i ||xtilde_i|| ||ytilde_i|| = max_change * N
        assert float(dl.norm()) <= 1e-4 * 256 * (1 + 1e-4)


def test_ngsgd_differs_from_sgd_direction_but_grad_x_is_exact():
    """The input derivative passed down is the true one; only the weight step is preconditioned."""
    x, y = _toy_problem(n=64)
    m1 = Dnn(10, [16], 6, "sigmoid", context=0)
    m1.init_random(0)
    m2 = Dnn(10, [16], 6, "sigmoid", context=0)
    m2.load_state_dict(m1.state_dict())
    make_optimizer("ngsgd", m1)
    xr1 = x.clone().requires_grad_(True)
    xr2 = x.clone().requires_grad_(True)
    F.cross_entropy(m1(xr1), y, reduction="sum").backward()
    F.cross_entropy(m2(xr2), y, reduction="sum").backward()
    assert torch.allclose(xr1.grad, xr2.grad, atol=1e-5)
    g_plain = m2.affines[0].wb.grad
    g_ng = m1.affines[0].grad
    assert g_plain is not None and g_ng is not None
    cos = float((g_plain * g_ng).sum() / g_plain.norm() / g_ng.norm())
    assert 0.0 < cos < 0.999


def test_hooked_plain_gradient_equals_autograd():
    """The in-backward gradient (one GEMM into [W b]) is exactly autograd's, for every layer type."""
    x, y = _toy_problem(n=50)
    for act in ("sigmoid", "relu", "pnorm"):
        m1 = Dnn(10, [12, 12], 6, act, context=0, pnorm_group=3)
        m1.init_random(0)
        m2 = Dnn(10, [12, 12], 6, act, context=0, pnorm_group=3)
        m2.load_state_dict(m1.state_dict())
        make_optimizer("sgd", m1)
        F.cross_entropy(m1(x), y, reduction="sum").backward()
        F.cross_entropy(m2(x), y, reduction="sum").backward()
        for a1, a2 in zip(m1.affines, m2.affines):
            assert a1.wb.grad is None
            assert torch.allclose(a1.grad, a2.wb.grad, rtol=1e-4, atol=1e-5), act


def test_momentum_sgd_matches_formula():
    x, y = _toy_problem(n=32)
    m = Dnn(10, [8], 6, "sigmoid", context=0)
    m.init_random(0)
    opt = make_optimizer("sgd", m, momentum=0.9)
    w0 = m.affines[0].wb.detach().clone()
    F.cross_entropy(m(x), y, reduction="sum").backward()
    g1 = m.affines[0].grad.clone()
    opt.step(0.01)
    w1 = m.affines[0].wb.detach().clone()
    assert torch.allclose(w1, w0 - 0.01 * g1)
    F.cross_entropy(m(x), y, reduction="sum").backward()
    g2 = m.affines[0].grad.clone()
    opt.step(0.01)
    assert torch.allclose(m.affines[0].wb.detach(), w1 + 0.9 * (-0.01 * g1) - 0.01 * g2, atol=1e-6)


@pytest.mark.parametrize("name", ["sgd", "ngsgd"])
def test_fused_update_equals_separate_step(name):
    """Updating inside backward (one GEMM into the weights) = gradient buffer + step."""
    x, y = _toy_problem(n=128)
    m1 = Dnn(10, [16, 16], 6, "sigmoid", context=0)
    m1.init_random(0)
    m2 = Dnn(10, [16, 16], 6, "sigmoid", context=0)
    m2.load_state_dict(m1.state_dict())
    o1, o2 = make_optimizer(name, m1), make_optimizer(name, m2)
    o1.fused_lr = 0.05
    for i in range(0, 128, 32):
        for m, o in ((m1, o1), (m2, o2)):
            F.cross_entropy(m(x[i:i + 32]), y[i:i + 32], reduction="sum").backward()
            o.step(0.05)
    assert m1.affines[0].grad is None   # no gradient buffer in fused mode
    for a1, a2 in zip(m1.affines, m2.affines):
        assert torch.allclose(a1.wb, a2.wb, atol=1e-5)
    w0 = Dnn(10, [16, 16], 6, "sigmoid", context=0)
    w0.init_random(0)
    assert not torch.allclose(m1.affines[0].wb, w0.affines[0].wb, atol=1e-3)


def test_ngsgd_layer_gradient_is_preconditioned_outer_product_over_steps():
    """Over several minibatches, the layer's step is gamma_out P_out^T gamma_in P_in of [x 1] and
    the output derivative, with preconditioners that evolve exactly like standalone ones."""
    import copy
    x, y = _toy_problem(n=256)
    m = Dnn(10, [16], 6, "sigmoid", context=0)
    m.init_random(0)
    opt = make_optimizer("ngsgd", m)
    ref_in, ref_out = copy.deepcopy(opt.pre_in[0]), copy.deepcopy(opt.pre_out[0])
    captured = {}
    layer = m.affines[0]
    hook = layer.grad_hook

    def spy(lay, xx, g):
        captured["x"], captured["g"] = xx.detach().clone(), g.detach().clone()
        hook(lay, xx, g)
    layer.grad_hook = spy
    for i in range(0, 256, 32):
        F.cross_entropy(m(x[i:i + 32]), y[i:i + 32], reduction="sum").backward()
        xa = captured["x"]            # the hook gets [x 1]
        assert xa.shape == (32, 11) and torch.equal(xa[:, -1], torch.ones(32))
        p_in, gi, _ = ref_in.precondition(xa)
        p_out, go, _ = ref_out.precondition(captured["g"])
        expect = gi * go * p_out.t() @ p_in
        assert torch.allclose(layer.grad, expect, rtol=1e-4, atol=1e-5), i
        opt.step(0.001)


def _train_fast_or_layer_by_layer(act, name, dtype, fast):
    """A small sigmoid/ReLU Dnn trained over 4 x 48 frames and a short last minibatch of 8, in
    ``dtype``, with the hand-written stack (``fast``) or layer by layer: (model, optimizer,
    initial [W b]s, logits of each minibatch)."""
    x, y = _toy_problem(n=200)
    m = Dnn(10, [16, 16], 6, act, context=0)
    m.init_random(0)
    m.to(dtype)
    m.fast_stack = fast
    w0 = [a.wb.detach().clone() for a in m.affines]
    o = make_optimizer(name, m)
    o.fused_lr = 0.05
    outs = []
    for i in range(0, 200, 48):          # 4 x 48 frames, then 8
        out = m(x[i:i + 48].to(dtype))
        assert ("FastStack" in type(out.grad_fn).__name__) == fast
        F.cross_entropy(out, y[i:i + 48], reduction="sum").backward()
        o.step(0.05)
        outs.append(out.detach())
    return m, o, w0, outs


def _max_diff(a, b):
    return max(float((p.double() - q.double()).abs().max()) for p, q in zip(a, b))


@pytest.mark.parametrize("act", ["sigmoid", "relu"])
@pytest.mark.parametrize("name", ["sgd", "ngsgd"])
def test_fast_stack_equals_layer_by_layer(act, name):
    """The hand-written training stack (bias inside the GEMM, activations written into the next
    layer's [x 1] buffer) = the per-layer autograd path: logits, updates, NG-SGD state, over several
    fused minibatches including a short last one.

    In float64 the two paths must agree to rounding (1e-9 of the weights' change): a real
    difference in the mathematics shows there. In float32 they need not agree to the bit, nor to a
    fixed rtol: the BLAS/ATen kernels the CPU selects (ATen's AVX-512 sigmoid on the strided
    buffer against the contiguous one, MKL's GEMM blocking for the bias-in-the-GEMM product) round
    differently, and NG-SGD's eigendecompositions amplify that (on an AMD EPYC with AVX-512 the
    float32 paths differ by ~1.5e-5 in the weights and a row of R changes sign; with
    ATEN_CPU_CAPABILITY=avx2 they are bit-identical). So each float32 path is compared with the
    float64 reference, relative to how much training moved the weights, and NG-SGD's estimate as
    its Fisher matrix R^T diag(d) R + rho I (R's rows are eigenvectors: their signs, and their
    rotation within near-equal eigenvalues, are arbitrary)."""
    ref, ref_o, ref_w0, ref_outs = _train_fast_or_layer_by_layer(act, name, torch.float64, fast=False)
    ref_wb = [a.wb.detach() for a in ref.affines]
    change = _max_diff(ref_wb, ref_w0)
    assert change > 1e-2                 # training moved the weights
    out_scale = max(float(o.abs().max()) for o in ref_outs)

    def fishers(o):
        return [p.fisher() for p in o.pre_in + o.pre_out]

    for dtype, tol in ((torch.float64, 1e-9), (torch.float32, 1e-3)):
        for fast in ((True,) if dtype == torch.float64 else (True, False)):
            m, o, _, outs = _train_fast_or_layer_by_layer(act, name, dtype, fast)
            assert m.affines[0].wb.dtype == dtype
            assert _max_diff(outs, ref_outs) <= tol * out_scale, (dtype, fast)
            assert _max_diff([a.wb.detach() for a in m.affines], ref_wb) <= tol * change, (dtype, fast)
            if name == "ngsgd":
                for p1, p2 in zip(o.pre_in + o.pre_out, ref_o.pre_in + ref_o.pre_out):
                    assert p1.t == p2.t == 5 and p1.rank == p2.rank
                for f1, f2 in zip(fishers(o), fishers(ref_o)):
                    assert float((f1 - f2).abs().max()) <= tol * float(f2.abs().max()), (dtype, fast)


def test_fast_stack_is_used_and_survives_two_pending_forwards():
    """Two forwards before their backwards (in either order) give each backward its own buffers."""
    x, y = _toy_problem(n=96)
    m1 = Dnn(10, [16, 16], 6, "sigmoid", context=0)
    m1.init_random(0)
    m2 = Dnn(10, [16, 16], 6, "sigmoid", context=0)
    m2.load_state_dict(m1.state_dict())
    m2.fast_stack = False
    make_optimizer("sgd", m1), make_optimizer("sgd", m2)   # gradients into layer.grad
    grads = []
    for m in (m1, m2):
        out_a, out_b = m(x[:48]), m(x[48:])
        assert ("FastStack" in type(out_a.grad_fn).__name__) == (m is m1)
        got = []
        for out, yy in ((out_b, y[48:]), (out_a, y[:48])):
            F.cross_entropy(out, yy, reduction="sum").backward()
            got.append([a.grad.clone() for a in m.affines])
        grads.append(got)
    for g1, g2 in zip(grads[0], grads[1]):
        for a, b in zip(g1, g2):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(grads[0][0][0], grads[0][1][0])
    loss = F.cross_entropy(m1(x[:8]), y[:8], reduction="sum")
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="twice"):
        loss.backward()


def test_weight_rows_stay_aligned_and_model_files_do_not(tmp_path):
    """[W b] keeps a 64-byte-aligned row stride through dtype changes, copies and loading; the model
    file holds plain contiguous tensors."""
    import copy
    from pynnet.nnet.model import load_model, save_model
    m = Dnn(13, [40], 7, "sigmoid", context=0)
    m.init_random(0)
    assert [a.wb.stride() for a in m.affines] == [(16, 1), (48, 1)]
    assert m.double().affines[1].wb.stride() == (48, 1)
    m.float()
    save_model(tmp_path / "m.nnet", m)
    sd = torch.load(tmp_path / "m.nnet", weights_only=False)["state_dict"]
    assert sd["layers.0.wb"].is_contiguous() and sd["layers.0.wb"].shape == (40, 14)
    m2 = load_model(tmp_path / "m.nnet")
    assert m2.affines[0].wb.stride() == (16, 1)
    assert torch.equal(m2.affines[0].wb, m.affines[0].wb)
    c = copy.deepcopy(m)
    make_optimizer("sgd", c).fused_lr = 0.01
    x, y = _toy_problem(n=16, d=13)
    F.cross_entropy(c(x), y % 7, reduction="sum").backward()
    assert c.affines[0].wb.stride() == (16, 1)        # re-aligned when training starts
    assert "_free_buffers" not in copy.deepcopy(c).__dict__

