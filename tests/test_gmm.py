"""GMM statistics, ML update, mix-up, silence boost and transition update on synthetic data."""
from __future__ import annotations

import numpy as np
import pytest

import kaldi_hmm_gmm as khg  # noqa: I001  (before kaldifst)

from pynnet.hmm.gmm import (AmGmm, GmmAccs, accumulate, boost_silence, mixup, mle_update, split_targets,
                            transition_update)
from pynnet.hmm.train import add_deltas, add_deltas_batch

from test_model_io import make_model


def _one_pdf(x: np.ndarray) -> AmGmm:
    return AmGmm.from_params([np.ones(1)], [x.mean(0, keepdims=True)], [x.var(0, keepdims=True)])


def test_em_with_mixup_recovers_planted_mixture():
    rng = np.random.default_rng(0)
    planted = np.array([[0.0, 0.0, 0.0], [6.0, 6.0, 6.0], [-6.0, 4.0, 0.0]])
    weights = np.array([0.5, 0.3, 0.2])
    n = 6000
    comp = rng.choice(3, size=n, p=weights)
    x = planted[comp] + rng.normal(0, 1.0, (n, 3))
    am = _one_pdf(x)
    tid2pdf = np.array([0, 0])
    tids = np.ones(n, dtype=np.int64)
    likes = []
    for it in range(40):
        acc = GmmAccs.zeros(am, 1)
        likes.append(accumulate(am, x, tids, tid2pdf, acc) / n)
        mle_update(am, acc, min_gaussian_occupancy=10)
        if it < 2:
            mixup(am, acc.pdf_occs(), it + 2, seed=it)
    # EM never decreases the likelihood (apart from the mixing-up passes)
    assert all(b >= a - 1e-9 for a, b in zip(likes[3:], likes[4:]))
    assert am.num_gauss == 3
    order = np.argsort(am.means(0)[:, 0])
    got = am.means(0)[order]
    want = planted[np.argsort(planted[:, 0])]
    np.testing.assert_allclose(got, want, atol=0.15)
    np.testing.assert_allclose(am.weights[0][order], weights[np.argsort(planted[:, 0])], atol=0.03)
    np.testing.assert_allclose(am.vars(0), 1.0, atol=0.15)
    assert likes[-1] > likes[0] + 1.0


def test_accumulate_matches_per_frame_computation():
    rng = np.random.default_rng(1)
    d = 4
    am = AmGmm.from_params([np.array([0.3, 0.7]), np.array([1.0])],
                           [rng.normal(0, 1, (2, d)), rng.normal(0, 1, (1, d))],
                           [rng.random((2, d)) + 0.5, rng.random((1, d)) + 0.5])
    x = rng.normal(0, 1, (50, d))
    tid2pdf = np.array([0, 0, 1, 1])
    tids = rng.integers(1, 4, size=50)
    acc = GmmAccs.zeros(am, 3)
    tot = accumulate(am, x, tids, tid2pdf, acc, chunk=7)
    # brute force, frame by frame, from the textbook Gaussian density
    ref_tot, occ0 = 0.0, np.zeros(2)
    x1_0 = np.zeros((2, d))
    for t in range(50):
        p = tid2pdf[tids[t]]
        m, v, w = am.means(p), am.vars(p), am.weights[p]
        comp = np.log(w) - 0.5 * (np.log(2 * np.pi * v) + (x[t] - m) ** 2 / v).sum(1)
        ll = np.logaddexp.reduce(comp)
        ref_tot += ll
        if p == 0:
            post = np.exp(comp - ll)
            occ0 += post
            x1_0 += post[:, None] * x[t]
    assert tot == pytest.approx(ref_tot, rel=1e-10)
    np.testing.assert_allclose(acc.occ[0], occ0, rtol=1e-10)
    np.testing.assert_allclose(acc.x1[0], x1_0, rtol=1e-10)
    assert acc.trans.tolist() == np.bincount(tids, minlength=4).tolist()
    assert acc.num_frames == 50


def test_update_removes_low_count_gaussians_and_floors_variances():
    am = AmGmm.from_params([np.array([0.5, 0.5])], [np.zeros((2, 2))], [np.ones((2, 2))])
    acc = GmmAccs.zeros(am, 1)
    acc.occ[0][:] = [100.0, 2.0]
    acc.x1[0][0] = [100.0, 0.0]        # mean (1, 0)
    acc.x2[0][0] = [100.0 + 1e-6, 50]  # variance (1e-8 -> floored, 0.5)
    st = mle_update(am, acc, min_gaussian_occupancy=3, min_variance=0.001)
    assert am.num_gauss == 1 and st.removed == 1 and st.floored == 1
    np.testing.assert_allclose(am.means(0), [[1.0, 0.0]])
    np.testing.assert_allclose(am.vars(0), [[0.001, 0.5]])
    np.testing.assert_allclose(am.weights[0], [1.0])
    # a pdf without data keeps one Gaussian unchanged
    am2 = AmGmm.from_params([np.array([0.5, 0.5])], [np.array([[1.0], [2.0]])], [np.ones((2, 1))])
    acc2 = GmmAccs.zeros(am2, 1)
    mle_update(am2, acc2)
    assert am2.num_gauss == 1 and am2.means(0)[0, 0] == 1.0


def test_split_targets_follow_occupancy_power_and_min_count():
    occs = np.array([10000.0, 625.0, 30.0, 0.0])
    t = split_targets(occs, 40, power=0.5, min_count=20)
    assert t.sum() == 40
    assert t[2] == 1 and t[3] == 1          # 30 frames cannot feed 2 Gaussians of >= 20; no data
    # allocation ~ sqrt(occ): 100 : 25 -> about 4 : 1
    assert 3.0 <= t[0] / t[1] <= 5.0
    # not enough data anywhere: stops below the target
    assert split_targets(np.array([50.0, 50.0]), 10, power=0.2, min_count=20).sum() == 4


def test_mixup_splits_heaviest_and_keeps_weights_normalised():
    am = AmGmm.from_params([np.array([1.0]), np.array([1.0])], [np.zeros((1, 3)), np.ones((1, 3))],
                           [np.ones((1, 3)), 4 * np.ones((1, 3))])
    total = mixup(am, np.array([1000.0, 1000.0]), 8, power=0.2, min_count=20, perturb_factor=0.01, seed=1)
    assert total == 8 and am.num_gauss == 8
    for p in range(2):
        assert am.weights[p].sum() == pytest.approx(1.0)
        assert np.allclose(am.vars(p), [1.0, 4.0][p])
        # means move by +-0.01 stddev
        assert np.abs(am.means(p) - p).max() < 0.1 * np.sqrt([1.0, 4.0][p])
    assert len({tuple(r) for r in am.means(0).round(8)}) == am.weights[0].size
    # the heaviest component is the one split (as Kaldi's DiagGmm::Split): 0.8 -> 0.4 + 0.4 around
    # its mean, the light one (0.2, mean 5) untouched
    am = AmGmm.from_params([np.array([0.8, 0.2])], [np.array([[0.0] * 3, [5.0] * 3])], [np.ones((2, 3))])
    assert mixup(am, np.array([1000.0]), 3, power=0.2, min_count=20, perturb_factor=0.01, seed=1) == 3
    order = np.argsort(am.weights[0])
    assert np.allclose(am.weights[0][order], [0.2, 0.4, 0.4])
    assert np.allclose(am.means(0)[order[0]], 5.0) and np.abs(am.means(0)[order[1:]]).max() < 0.05


def test_boost_silence_scales_likelihood():
    tm, am_k = make_model()
    am = AmGmm.from_khg(am_k)
    boosted = boost_silence(am, [0, 2], 1.25)
    x = np.random.default_rng(0).normal(0, 1, (5, am.dim))
    for p in range(am.num_pdfs):
        a = np.logaddexp.reduce(am.component_loglikes(p, x), axis=1)
        b = np.logaddexp.reduce(boosted.component_loglikes(p, x), axis=1)
        np.testing.assert_allclose(b - a, np.log(1.25) if p in (0, 2) else 0.0, atol=1e-9)
    assert am.weights[0].sum() == pytest.approx(1.0)  # original untouched


def test_transition_update_matches_kaldi_hmm_gmm():
    tm, _ = make_model()
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 40, size=tm.num_transition_ids + 1).astype(float)
    counts[0] = 0
    counts[3:5] = [1.0, 0.0]  # a state below --transition-min-count keeps its probs
    new, impr, total = transition_update(tm, counts, floor=0.01, mincount=5.0)
    ref = pickle_copy(tm)
    stats = ref.init_stats()
    for tid in range(1, tm.num_transition_ids + 1):
        for _ in range(int(counts[tid])):
            stats = ref.accumulate(1.0, tid, stats)
    ref_impr, ref_count = ref.mle_update(stats, khg.MleTransitionUpdateConfig(floor=0.01, mincount=5.0))
    np.testing.assert_allclose(new.log_probs, ref.log_probs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new.non_self_loop_log_probs, ref.non_self_loop_log_probs, rtol=1e-5, atol=1e-6)
    assert impr == pytest.approx(ref_impr, rel=1e-4)
    assert total == pytest.approx(ref_count)


def pickle_copy(obj):
    import pickle
    return pickle.loads(pickle.dumps(obj))


def test_deltas_match_kaldi_definition_and_batch_version():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (12, 3)).astype(np.float32)
    d = add_deltas(x, 2)
    assert d.shape == (12, 9)
    # Kaldi: delta_t = sum_{k=1..2} k (x_{t+k} - x_{t-k}) / 10, frames clamped at the edges
    xp = np.pad(x, ((2, 2), (0, 0)), mode="edge")
    delta = sum(k * (xp[2 + k:14 + k] - xp[2 - k:14 - k]) for k in (1, 2)) / 10
    np.testing.assert_allclose(d[:, 3:6], delta, atol=1e-5)
    y = rng.normal(0, 1, (7, 3)).astype(np.float32)
    both = add_deltas_batch(np.concatenate([x, y]), np.array([12, 7]), 2)
    np.testing.assert_allclose(both, np.concatenate([d, add_deltas(y, 2)]), atol=1e-5)


def test_boost_silence_and_mixup_programs(tmp_path):
    import os
    import subprocess
    import sys

    from pynnet.hmm.model_io import KaldiOutput, read_model, write_model

    tm, am = make_model()
    write_model(tmp_path / "a.mdl", tm, am)
    bindir = os.path.dirname(sys.executable)
    # phone 1's pdf (pdf 0) is boosted, the others are not
    subprocess.run([f"{bindir}/pynnet-gmm-boost-silence", "--boost", "2", "1", str(tmp_path / "a.mdl"),
                    str(tmp_path / "b.mdl")], check=True, capture_output=True)
    a, b = AmGmm.from_khg(am), AmGmm.from_khg(read_model(tmp_path / "b.mdl")[1])
    assert [round(b.weights[p].sum() / a.weights[p].sum(), 6) for p in range(a.num_pdfs)] == [2.0] + [1.0] * 6
    w = KaldiOutput(True)
    w.float_vector(np.full(a.num_pdfs, 500.0))
    (tmp_path / "occs").write_bytes(w.getvalue())
    r = subprocess.run([f"{bindir}/pynnet-gmm-mixup", "--mix-up", "30", str(tmp_path / "a.mdl"), str(tmp_path / "occs"),
                        str(tmp_path / "c.mdl")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert read_model(tmp_path / "c.mdl")[1].num_gauss == 30
    (tmp_path / "occs").write_bytes(w.getvalue()[:20])
    r = subprocess.run([f"{bindir}/pynnet-gmm-mixup", "--mix-up", "30", str(tmp_path / "a.mdl"), str(tmp_path / "occs"),
                        str(tmp_path / "d.mdl")], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("ERROR (pynnet-gmm-mixup): ") and "occs" in r.stderr
    assert not (tmp_path / "d.mdl").exists()
