"""RBM pretraining: CD-1 lowers the reconstruction error, BB visible biases come from the layer
below, per-layer resume, and the DBN initialises the DNN's hidden layers (train --dbn)."""
import json
import os
import shutil

import numpy as np
import pytest
import torch

from pynnet.bin.nnet import rbm_main, train_main
from pynnet.io.errors import PynnetError
from pynnet.nnet.rbm import (RECORD_NAME, Nnet1Schedule, Rbm, RbmConfig, cd1_epochs, load_dbn,
                              visible_bias_from_outputs)
from pynnet.nnet.toy import make_toy_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("rbm")
    return (root, *make_toy_corpus(str(root), num_utts=24))


def test_cd1_learns_bernoulli_data():
    g = torch.Generator().manual_seed(0)
    protos = (torch.rand(4, 20, generator=g) < 0.5).float()
    data = protos[torch.randint(0, 4, (3000,), generator=g)]
    flip = (torch.rand(data.shape, generator=g) < 0.05).float()
    data = (data - flip).abs()
    rbm = Rbm(20, 8, gaussian=False, std=0.1, gen=g)
    cfg = RbmConfig()

    def batches(ep):
        perm = torch.randperm(len(data), generator=g)
        for i in range(0, len(data), 100):
            yield data[perm[i:i + 100]]

    errs = cd1_epochs(rbm, batches, len(data), 5, 0.4, cfg, g, "test")
    assert errs[-1] < 0.5 * errs[0], errs


def _cd1_reference_step(rbm, v, mom, step, l2, u):
    """One CD-1 update written as nnet1's rbm-train-cd1-frmshuff states it (uniforms u given)."""
    pos_h = torch.sigmoid(v @ rbm.W.t() + rbm.hbias)
    h = (u < pos_h).float()
    neg_v = h @ rbm.W + rbm.vbias
    if not rbm.gaussian:
        neg_v = torch.sigmoid(neg_v)
    neg_h = torch.sigmoid(neg_v @ rbm.W.t() + rbm.hbias)
    N = v.shape[0]
    gW = (pos_h.t() @ v - neg_h.t() @ neg_v) / N - l2 * rbm.W
    return (step * gW, step * (pos_h - neg_h).mean(0), step * (v - neg_v).mean(0),
            float(((v - neg_v) ** 2).sum()))


@pytest.mark.parametrize("gaussian", [True, False])
def test_cd1_step_matches_the_textbook_update(gaussian):
    # the in-place, fused update must be the plain formula (first step: no momentum history)
    g = torch.Generator().manual_seed(3)
    rbm = Rbm(12, 7, gaussian=gaussian, std=0.3, gen=g)
    rbm.hbias, rbm.vbias = torch.randn(7, generator=g) * 0.1, torch.randn(12, generator=g) * 0.1
    v = torch.randn(50, 12, generator=g) if gaussian else torch.rand(50, 12, generator=g)
    W0, hb0, vb0 = rbm.W.clone(), rbm.hbias.clone(), rbm.vbias.clone()
    cfg = RbmConfig(l2=0.01)
    lr = 0.1
    gen_u = torch.Generator().manual_seed(9)
    u1, u2 = torch.rand(50, 7, generator=gen_u), torch.rand(50, 7, generator=gen_u)
    ref = Rbm.from_dict({"W": W0.clone(), "hbias": hb0.clone(), "vbias": vb0.clone(),
                         "type": "gb" if gaussian else "bb"})
    # nnet1: the first minibatch with momentum 0.5 and the step lr (1 - 0.5), then momentum 0.9
    # and the same step until 500k frames have been seen
    dW, dh, dv, err1 = _cd1_reference_step(ref, v, None, lr * (1 - 0.5), cfg.l2, u1)
    ref.W, ref.hbias, ref.vbias = ref.W + dW, ref.hbias + dh, ref.vbias + dv
    dW2, dh2, dv2, err2 = _cd1_reference_step(ref, v, None, lr * (1 - 0.5), cfg.l2, u2)
    want = (ref.W + 0.9 * dW + dW2, ref.hbias + 0.9 * dh + dh2, ref.vbias + 0.9 * dv + dv2)
    errs = cd1_epochs(rbm, lambda ep: iter([v, v]), 100, 1, lr, cfg, torch.Generator().manual_seed(9), "t")
    assert torch.allclose(rbm.W, want[0], atol=1e-6)
    assert torch.allclose(rbm.hbias, want[1], atol=1e-6)
    assert torch.allclose(rbm.vbias, want[2], atol=1e-6)
    assert errs[0] == pytest.approx((err1 + err2) / 100, rel=1e-5)


def test_momentum_and_step_follow_rbm_train_cd1_frmshuff():
    """--with-bug=true (Kaldi's default): momentum 0.9 from the 2nd minibatch; the step is
    lr (1 - m), m = 0.5 + 0.01 n after n x 500k frames, m = 0.9 from 20M frames on."""
    s = Nnet1Schedule(0.4, RbmConfig())
    assert (s.step, s.momentum) == (pytest.approx(0.2), 0.5)    # before the first minibatch
    got = []
    for _ in range(45 * 5000):          # minibatches of 100 frames: 5000 per 500k frames
        s.advance(100)
        got.append((s.step, s.momentum))
    assert got[0] == (pytest.approx(0.2), 0.9)                        # after the 1st minibatch
    assert got[4998] == (pytest.approx(0.2), 0.9)                     # 499,900 frames
    assert got[4999] == (pytest.approx(0.4 * 0.49), 0.9)              # 500,000 frames
    assert got[20 * 5000 - 1] == (pytest.approx(0.4 * 0.3), 0.9)     # 10M frames
    assert got[40 * 5000 - 1] == (pytest.approx(0.4 * 0.1), 0.9)     # 20M frames
    assert got[-1] == (pytest.approx(0.4 * 0.1), 0.9)
    s.shrink()                          # the explosion protection's x0.9 holds until the next step
    assert s.step == pytest.approx(0.4 * 0.1 * 0.9)
    s2 = Nnet1Schedule(0.4, RbmConfig())
    s2.advance(499_999)
    s2.shrink()
    s2.advance(1)
    assert s2.step == pytest.approx(0.4 * 0.49)


def test_gaussian_rbm_weight_explosion_protection(capsys):
    """A Gaussian-Bernoulli RBM whose reconstructions vary far more than its data (here: weights
    started 30x too large, a high rate) is scaled back instead of diverging, as nnet1 does."""
    g = torch.Generator().manual_seed(0)
    data = torch.randn(4000, 10, generator=g)
    rbm = Rbm(10, 16, gaussian=True, std=3.0, gen=g)
    W0 = rbm.W.clone()

    def batches(ep):
        for i in range(0, len(data), 100):
            yield data[i:i + 100]

    errs = cd1_epochs(rbm, batches, len(data), 3, 0.5, RbmConfig(), g, "RBM 1/1")
    err = capsys.readouterr().err
    assert "reconstruction std" in err and "weights scaled by" in err, err
    assert rbm.W.abs().max() < 0.5 * W0.abs().max()
    assert all(np.isfinite(errs)) and errs[-1] < errs[0]
    # the scaled-back model reconstructs with about the data's spread
    h = rbm.hidden(data)
    recon = (torch.bernoulli(h, generator=g) @ rbm.W + rbm.vbias)
    assert float(recon.std()) < 2.0 * float(data.std())


def test_cd1_stops_on_a_non_finite_reconstruction():
    g = torch.Generator().manual_seed(0)
    rbm = Rbm(6, 4, gaussian=True, std=0.1, gen=g)
    v = torch.randn(20, 6, generator=g)
    v[3, 2] = float("inf")
    with pytest.raises(PynnetError, match="reconstruction error is not finite"):
        cd1_epochs(rbm, lambda ep: iter([v]), 20, 1, 0.01, RbmConfig(), g, "RBM 1/1")


def test_visible_bias_is_logit_of_mean_activation():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.1, 0.5, 0.9, 0.99])
    acts = (torch.rand(20000, 4, generator=g) < p).float()
    vb = visible_bias_from_outputs((acts[i:i + 100] for i in range(0, 20000, 100)), 4)
    assert torch.allclose(vb, torch.log(p / (1 - p)), atol=0.08)


def test_pretrain_dbn_resume_and_dnn_init(corpus, capsys):
    root, data, ali = corpus
    out = root / "dbn"
    args = ["--nn-depth", "2", "--hid-dim", "32", "--rbm-iter", "2", "--splice", "2", "--buffer-frames", "500",
            data, str(out)]
    assert rbm_main(args) == 0
    rep = json.load(open(out / "log" / "rbm.json"))
    assert rep["1"]["type"] == "gb" and rep["1"]["epochs"] == 4 and rep["1"]["lr"] == 0.01
    assert rep["2"]["type"] == "bb" and rep["2"]["epochs"] == 2 and rep["2"]["lr"] == 0.4
    e1 = rep["1"]["reconstruction_mse"]
    assert e1[-1] < e1[0]
    dbn = load_dbn(str(out / "final.dbn"))
    assert [tuple(x["W"].shape) for x in dbn["layers"]] == [(32, 30), (32, 32)]
    # per-layer resume: remove layer 2 and the DBN; layer 1 is reused, not retrained
    l1 = (out / "1.rbm").stat().st_mtime_ns
    os.unlink(out / "2.rbm")
    os.unlink(out / "final.dbn")
    capsys.readouterr()
    assert rbm_main(args) == 0
    err = capsys.readouterr().err
    assert "layer 1 already trained" in err and "RBM 2/2" in err and "RBM 1/2" not in err
    assert (out / "1.rbm").stat().st_mtime_ns == l1
    dbn2 = load_dbn(str(out / "final.dbn"))
    assert torch.equal(dbn2["layers"][0]["W"], dbn["layers"][0]["W"])
    # the DBN initialises the DNN (train --dbn): hidden weights and biases, feature transform
    exp = root / "dnn"
    assert train_main(["--dbn", str(out / "final.dbn"), "--max-epochs", "1", "--buffer-frames", "500",
                       data, ali, str(exp)]) == 0
    init = torch.load(exp / "nnet.init", weights_only=False)
    sd = init["state_dict"]
    assert init["arch"]["hidden_dims"] == [32, 32] and init["arch"]["context"] == 2
    assert torch.equal(sd["layers.0.wb"][:, :-1], dbn2["layers"][0]["W"])
    assert torch.equal(sd["layers.0.wb"][:, -1], dbn2["layers"][0]["hbias"])
    assert torch.equal(sd["layers.2.wb"][:, :-1], dbn2["layers"][1]["W"])
    assert torch.equal(sd["transform.shift"], dbn2["transform"]["shift"])
    # the softmax layer as nnet1's train.sh makes it over a DBN: N(0, 0.1 x 35 sqrt(2/(in+out))), bias 0
    out_w = sd["layers.4.wb"]
    n_in, n_out = out_w.shape[1] - 1, out_w.shape[0]
    want = 0.1 * 35.0 * (2.0 / (n_in + n_out)) ** 0.5
    assert float(out_w[:, :-1].std()) == pytest.approx(want, rel=0.25)
    assert torch.count_nonzero(out_w[:, -1]) == 0
    hist = json.load(open(exp / "log" / "train.json"))
    assert hist[1]["cv_loss"] < hist[0]["cv_loss"]


def test_dbn_pipeline_mismatch_and_bad_file(corpus, tmp_path):
    root, data, ali = corpus
    out = tmp_path / "dbn"
    assert rbm_main(["--nn-depth", "1", "--hid-dim", "8", "--rbm-iter", "1", "--apply-cmvn", "false",
                     data, str(out)]) == 0
    from pynnet.nnet.train import TrainConfig, build_and_train
    with pytest.raises(PynnetError, match="the DBN was trained on features with"):
        build_and_train(data, ali, str(tmp_path / "x"), TrainConfig(), hidden_dims=[8], apply_cmvn=True,
                        dbn_path=str(out / "final.dbn"), progress=False)
    # a library caller's shape that the DBN contradicts is refused (it would be ignored), before
    # any data is read or anything written
    dbn_path = str(out / "final.dbn")
    for bad, msg in (({"hidden_dims": [9]}, r"hidden_dims \[9\]: the DBN has \[8\]"),
                     ({"activation": "relu"}, "activation relu: the DBN has sigmoid"),
                     ({"context": 4}, "context 4: the DBN has 5")):
        with pytest.raises(PynnetError, match=msg):
            build_and_train(data, ali, str(tmp_path / "y"), TrainConfig(), apply_cmvn=False, dbn_path=dbn_path,
                            progress=False, **bad)
        assert not (tmp_path / "y" / "nnet.init").exists()
    (tmp_path / "junk.dbn").write_bytes(b"not a dbn")
    with pytest.raises(PynnetError, match="junk.dbn: cannot read DBN"):
        load_dbn(str(tmp_path / "junk.dbn"))
    assert np.isfinite(json.load(open(out / "log" / "rbm.json"))["1"]["reconstruction_mse"]).all()


def test_device_option_errors_are_one_line(corpus, capsys):
    root, data, _ = corpus
    assert rbm_main(["--device", "gpu", data, str(root / "dbn_bad")]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--device must be cpu or cuda[:N], not 'gpu'" in err
    if not torch.cuda.is_available():
        assert rbm_main(["--device", "cuda", data, str(root / "dbn_bad")]) == 1
        assert "CUDA is not available on this machine" in capsys.readouterr().err
    assert not (root / "dbn_bad" / "final.dbn").exists()


@pytest.mark.parametrize("opts,msg", [
    (["--apply-cmvn", "yes"], "argument --apply-cmvn: invalid choice: 'yes'"),
    (["--seed", "-1"], "--seed must not be negative, not -1"),
    (["--rbm-lrate", "-1"], "--rbm-lrate must be positive, not -1.0"),
    (["--rbm-lrate", "nan"], "--rbm-lrate must be positive, not nan"),
    (["--rbm-lrate-low", "inf"], "--rbm-lrate-low must be positive and finite, not inf"),
    (["--rbm-l2penalty", "-5"], "--rbm-l2penalty must not be negative, not -5.0"),
])
def test_option_errors_before_any_work(corpus, capsys, opts, msg):
    # one line, and nothing written (these were tracebacks after the feature transform was
    # written, or silently trained with a negative step)
    root, data, _ = corpus
    out = root / "dbn_opt"
    assert rbm_main([*opts, data, str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR (") and err.strip().count("\n") == 0 and msg in err, err
    assert not out.exists()


def test_utt2num_frames_bad_value_and_stale_count(tmp_path, capsys):
    data, _ = make_toy_corpus(str(tmp_path), num_utts=8)
    lines = open(f"{data}/utt2num_frames").read().splitlines()
    u1, n1 = lines[1].split()
    opts = ["--nn-depth", "1", "--hid-dim", "8", "--splice", "1", data]
    # a bad value: one line naming the file and line (was int()'s traceback)
    with open(f"{data}/utt2num_frames", "w") as f:
        f.write("\n".join([lines[0], f"{u1} {n1}x", *lines[2:]]) + "\n")
    assert rbm_main([*opts, str(tmp_path / "dbn1")]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "utt2num_frames:2" in err, err
    assert not (tmp_path / "dbn1" / "final.dbn").exists()
    # a stale count: the utterance is skipped, and the message names utt2num_frames (not alignments)
    with open(f"{data}/utt2num_frames", "w") as f:
        f.write("\n".join([lines[0], f"{u1} 5", *lines[2:]]) + "\n")
    assert rbm_main([*opts, str(tmp_path / "dbn2")]) == 0
    err = capsys.readouterr().err
    assert f"WARNING: utterance '{u1}': {n1} feature frames but 5 utt2num_frames frames; skipping" in err
    assert "alignment" not in err


# ---------------------------------------------------------------- resume only with the same options
BASE = ["--hid-dim", "8", "--rbm-iter", "1", "--splice", "1", "--buffer-frames", "500", "--apply-cmvn", "true"]


@pytest.fixture(scope="module")
def pretrained(corpus):
    """A finished one-layer DBN dir (never changed by the tests that use it in place)."""
    root, data, _ = corpus
    out = root / "dbn_base"
    assert rbm_main(["--nn-depth", "1", *BASE, data, str(out)]) == 0
    assert (out / RECORD_NAME).exists()
    return out


def _snapshot(d) -> dict:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(d.iterdir()) if p.is_file()}


def _with(opts: list[str], name: str, value: str) -> list[str]:
    i = opts.index(name)
    return [*opts[:i + 1], value, *opts[i + 2:]]


@pytest.mark.parametrize("change, expected", [
    (("--hid-dim", "16"), "--hid-dim 8 -> 16"),
    (("--splice", "2"), "--splice 1 -> 2"),
    (("--apply-cmvn", "false"), "--apply-cmvn true -> false"),
    (("data", None), "data "),
])
def test_resume_with_other_options_or_data_fails(corpus, pretrained, capsys, change, expected):
    root, data, _ = corpus
    opts = BASE
    if change[0] == "data":
        data = make_toy_corpus(str(root), num_utts=24, seed=1, name="other_data")[0]
    else:
        opts = _with(BASE, *change)
    before = _snapshot(pretrained)
    capsys.readouterr()
    assert rbm_main(["--nn-depth", "1", *opts, data, str(pretrained)]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0, err
    assert f"{pretrained / RECORD_NAME}: the layers in {pretrained} were trained with other options" in err
    assert expected in err and "use a fresh dir or delete" in err
    assert _snapshot(pretrained) == before


def test_identical_resume_reuses_the_layers(corpus, pretrained, tmp_path, capsys):
    root, data, _ = corpus
    out = tmp_path / "dbn"
    shutil.copytree(pretrained, out)
    before = _snapshot(out)
    # a copy of the data dir is the same data
    copy = tmp_path / "data_copy"
    shutil.copytree(data, copy)
    capsys.readouterr()
    assert rbm_main(["--nn-depth", "1", *BASE, str(copy), str(out)]) == 0
    err = capsys.readouterr().err
    assert "layer 1 already trained" in err and "RBM 1/1" not in err
    after = _snapshot(out)
    for f in ("1.rbm", "feature_transform.pt", RECORD_NAME):
        assert after[f] == before[f], f
    a, b = load_dbn(str(pretrained / "final.dbn")), load_dbn(str(out / "final.dbn"))
    assert torch.equal(a["layers"][0]["W"], b["layers"][0]["W"])
    assert torch.equal(a["transform"]["shift"], b["transform"]["shift"])


def test_deeper_resume_reuses_the_lower_layers(corpus, pretrained, tmp_path, capsys):
    root, data, _ = corpus
    out = tmp_path / "dbn"
    shutil.copytree(pretrained, out)
    before = _snapshot(out)
    capsys.readouterr()
    assert rbm_main(["--nn-depth", "2", *BASE, data, str(out)]) == 0
    err = capsys.readouterr().err
    assert "layer 1 already trained" in err and "RBM 2/2" in err and "RBM 1/2" not in err
    after = _snapshot(out)
    for f in ("1.rbm", "feature_transform.pt", RECORD_NAME):   # the depth is not in the record
        assert after[f] == before[f], f
    dbn = load_dbn(str(out / "final.dbn"))
    assert [tuple(x["W"].shape) for x in dbn["layers"]] == [(8, 18), (8, 8)]
    assert torch.equal(dbn["layers"][0]["W"], load_dbn(str(pretrained / "final.dbn"))["layers"][0]["W"])


def test_dir_from_before_the_record_still_resumes(corpus, pretrained, tmp_path, capsys):
    root, data, _ = corpus
    old = tmp_path / "old"
    shutil.copytree(pretrained, old)
    os.unlink(old / RECORD_NAME)
    other = tmp_path / "other"
    shutil.copytree(old, other)
    before = _snapshot(old)
    capsys.readouterr()
    # its files have the shapes these options need: trusted, and the record written now
    assert rbm_main(["--nn-depth", "1", *BASE, data, str(old)]) == 0
    assert f"has no {RECORD_NAME}" in capsys.readouterr().err
    assert _snapshot(old)["1.rbm"] == before["1.rbm"]
    assert json.load(open(old / RECORD_NAME))["options"]["hid_dim"] == 8
    # a shape that does not fit is a one-line error, not a torch traceback, and writes no record
    assert rbm_main(["--nn-depth", "1", *_with(BASE, "--hid-dim", "16"), data, str(other)]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0, err
    assert f"{other / '1.rbm'}: has shape [8, 18], these options need [16, 18]" in err
    assert not (other / RECORD_NAME).exists()


def test_pretrain_clock_scales_the_first_epoch_by_the_layers_cost():
    """The estimate of the whole pretraining: the seconds per unit of CD-1 + propagation cost so far,
    times the cost left (an epoch of layer l: frames x (5 vis hid + the layers below's vis hid))."""
    from pynnet.nnet.rbm import PretrainClock
    clock = PretrainClock([(10, 20, 2), (20, 20, 1)], frames=100)
    assert clock.costs == [100 * 5 * 200, 100 * (5 * 400 + 200)]
    clock.epoch_done(0, 2.0)
    assert clock.left() == pytest.approx(2.0 / 100000 * (2 * 100000 + 220000 - 100000))
    clock.epoch_done(0, 2.0)
    clock.epoch_done(1, 5.0)
    assert clock.left() == 0.0 and clock.seconds == 9.0


def test_one_bar_per_rbm_over_its_epochs(monkeypatch):
    """cd1_epochs draws one bar for all of an RBM's epochs (frames x epochs, with an ETA), and
    calls on_epoch after each epoch; the training is the same with or without it."""
    import io

    import pynnet.nnet.rbm as rbm_mod
    stream = io.StringIO()
    monkeypatch.setattr(rbm_mod, "progress_kwargs", lambda enabled=True: {"file": stream, "disable": False})
    g = torch.Generator().manual_seed(0)
    data = (torch.rand(300, 6, generator=g) < 0.5).float()

    def batches(ep):
        for i in range(0, len(data), 100):
            yield data[i:i + 100]

    seen = []
    rbm = Rbm(6, 4, gaussian=False, std=0.1, gen=torch.Generator().manual_seed(1))
    errs = cd1_epochs(rbm, batches, len(data), 3, 0.4, RbmConfig(), torch.Generator().manual_seed(2), "RBM x",
                      on_epoch=lambda ep, s: seen.append((ep, s >= 0)))
    assert seen == [(0, True), (1, True), (2, True)]
    bar = stream.getvalue()
    assert "RBM x: 100%" in bar and "900/900" in bar and "epoch 3/3" in bar and "<" in bar
    ref = Rbm(6, 4, gaussian=False, std=0.1, gen=torch.Generator().manual_seed(1))
    assert cd1_epochs(ref, batches, len(data), 3, 0.4, RbmConfig(), torch.Generator().manual_seed(2), "RBM x") == errs
    assert torch.equal(ref.W, rbm.W)
