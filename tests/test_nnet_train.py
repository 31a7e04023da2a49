"""DNN training: end to end on a toy corpus, kill -9 and exact resume, newbob decisions and epoch
rejection, the exponential schedule, user errors (NaN recovery and bad inputs:
test_nnet_train_faults.py)."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from pynnet.bin.nnet import train_main
from pynnet.io.errors import PynnetError
from pynnet.nnet.toy import make_toy_corpus
from pynnet.nnet.train import Synchronizer, TrainConfig, Trainer, build_and_train, exponential_lr

BIN = os.path.join(os.path.dirname(sys.executable), "pynnet-nnet-train")
SMALL = ["--nn-depth", "2", "--hid-dim", "48", "--buffer-frames", "400", "--checkpoint-every", "2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("nnet_train")
    data, ali = make_toy_corpus(str(root), num_utts=40, drop_ali=2)
    return root, data, ali


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def test_train_end_to_end_outputs(corpus, capsys):
    root, data, ali = corpus
    exp = root / "exp_e2e"
    assert train_main([*SMALL, "--max-epochs", "3", data, ali, str(exp)]) == 0
    err = capsys.readouterr().err
    assert "2 of 40 utterances have no alignment; skipping them" in err
    hist = json.load(open(exp / "log" / "train.json"))
    assert [h["epoch"] for h in hist] == [0, 1, 2, 3]
    assert hist[-1]["cv_loss"] < 0.6 * hist[0]["cv_loss"]
    assert hist[-1]["cv_acc"] > 0.6 and all(h["frames_per_sec"] > 0 for h in hist[1:])
    assert (exp / "train_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    final = _weights(exp / "final.nnet")
    assert final["arch"]["hidden_dims"] == [48, 48] and final["arch"]["output_dim"] == 12
    assert final["input_pipeline"] == {"apply_cmvn": True, "delta_order": 0}   # cmvn.scp exists: auto
    # priors are the alignment relative frequencies
    lp = final["state_dict"]["log_priors"]
    assert abs(float(lp.exp().sum()) - 1.0) < 1e-4
    counts = np.array(open(exp / "ali_train_pdf.counts").read().split()[1:-1], dtype=float)
    # the reference: every aligned frame's pdf through Kaldi's own TransitionModel (kaldi-hmm-gmm)
    import kaldiio
    from pynnet.nnet.toy import toy_transition_model
    tm = toy_transition_model(4)
    with kaldiio.ReadHelper(f"ark:gunzip -c {ali}/ali.1.gz |") as r:
        pdfs = np.concatenate([[tm.transition_id_to_pdf(int(t)) for t in tids] for _, tids in r])
    assert np.array_equal(counts, np.bincount(pdfs, minlength=12))
    assert np.allclose(np.log(counts / counts.sum()), lp.numpy(), atol=1e-5)
    cv = open(exp / "cv_utts.list").read().split()
    tr = open(exp / "train_utts.list").read().split()
    assert len(cv) == 4 and len(tr) == 34 and not set(cv) & set(tr)
    # a rerun finds the finished training and does nothing
    assert train_main([*SMALL, "--max-epochs", "3", data, ali, str(exp)]) == 0
    assert "already finished" in capsys.readouterr().err


def test_rerun_writes_final_nnet_when_the_finished_run_could_not(corpus, capsys, monkeypatch):
    # the last checkpoint says done, then writing final.nnet failed (disk full, killed): a rerun
    # must write it, not just say 'already finished'
    import pynnet.nnet.train as train_mod

    root, data, ali = corpus
    exp = root / "exp_final_failed"
    args = [*SMALL, "--max-epochs", "1", data, ali, str(exp)]

    real_save = train_mod.save_model

    def cannot_write(path, *a, **k):
        if os.path.basename(path) == "final.nnet":
            raise PermissionError(13, "Permission denied", path)
        return real_save(path, *a, **k)

    monkeypatch.setattr(train_mod, "save_model", cannot_write)
    assert train_main(args) == 1
    assert not (exp / "final.nnet").exists() and _weights(exp / "checkpoint.pt")["state"]["done"]
    monkeypatch.undo()
    capsys.readouterr()
    assert train_main(args) == 0
    assert "already finished" in capsys.readouterr().err
    final = _weights(exp / "final.nnet")
    best = _weights(exp / "nnet" / "best.pt")
    for k, v in best["model"].items():
        assert torch.equal(final["state_dict"][k], v), k


def test_kill9_mid_epoch_then_resume_is_bit_exact(corpus):
    root, data, ali = corpus
    args = [*SMALL, "--max-epochs", "2", "--optimizer", "ngsgd", data, ali]
    ref = root / "exp_ref"
    # the uninterrupted run with the same thread count as the killed one: GEMMs split over
    # another number of threads round differently
    r = subprocess.run([BIN, *args, str(ref)], env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    exp = root / "exp_killed"
    p = subprocess.Popen([BIN, *args, str(exp)], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = exp / "checkpoint.pt"
    deadline = time.time() + 90
    killed_at = None
    while time.time() < deadline and p.poll() is None:
        if ckpt.exists():
            try:
                st = torch.load(ckpt, weights_only=False)["state"]
            except Exception:  # being replaced right now
                st = None
            if st and st["epoch"] == 2 and (st["chunk"] > 0 or st["batch"] > 0):
                os.kill(p.pid, signal.SIGKILL)
                killed_at = st
                break
        time.sleep(0.02)
    p.wait()
    assert killed_at is not None and p.returncode == -signal.SIGKILL, "could not kill the run mid-epoch"
    assert not (exp / "final.nnet").exists()
    r = subprocess.run([BIN, *args, str(exp)], env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stderr
    assert "torch threads" not in r.stderr   # (the thread-count warning)
    assert _weights(ref / "checkpoint.pt")["threads"] == _weights(exp / "checkpoint.pt")["threads"] == 1
    a, b = _weights(ref / "final.nnet"), _weights(exp / "final.nnet")
    for k in a["state_dict"]:
        assert torch.equal(a["state_dict"][k], b["state_dict"][k]), k
    ha = [(h.get("train_loss"), h["cv_loss"], h["lr"]) for h in a["history"]]
    hb = [(h.get("train_loss"), h["cv_loss"], h["lr"]) for h in b["history"]]
    assert ha == hb


class _Scripted(Trainer):
    """Trainer whose epochs and CV losses are scripted: tests the newbob decisions alone."""

    def __init__(self, *a, cv_losses, **k):
        super().__init__(*a, **k)
        self.cv_losses = list(cv_losses)
        self.starts: list[tuple[float, int]] = []   # (weight mark, optimizer steps) each epoch began with

    def evaluate(self, fs):
        return self.cv_losses.pop(0), 0.5

    def run_epoch(self):
        wb = self.model.affines[0].wb
        self.starts.append((float(wb.detach()[0, 0]), self.opt.num_steps))
        with torch.no_grad():
            wb[0, 0] = float(self.st["epoch"])   # mark the weights and the optimizer's state
        self.opt.num_steps = 100 * self.st["epoch"]
        self.st["acc"] = {"loss": 1.0, "correct": 1, "frames": 2, "seconds": 1.0}


def _scripted(tmp_path, cfg, losses, corpus):
    from pynnet.nnet.data import load_frame_sets
    from pynnet.nnet.model import Dnn

    _, data, ali = corpus
    tr, cv, n = load_frame_sets(data, ali, apply_cmvn=False, delta_order=0, cv_percent=10, seed=1)
    m = Dnn(6, [8], n, context=1)
    m.init_random(0)
    t = _Scripted(str(tmp_path), m, tr, cv, cfg, progress=False, cv_losses=losses)
    t.train()
    return t


def test_newbob_halving_rejection_and_stop(tmp_path, corpus):
    cfg = TrainConfig(optimizer="sgd", learn_rate=0.008, max_epochs=20)
    # initial 1.0; ep1 0.9 (rel .1); ep2 0.895 (rel .0056 < .01: start halving);
    # ep3 0.85 (rel .050, halving: lr keeps halving); ep4 0.86 worse -> rejected, rel 0 < .001 -> stop
    t = _scripted(tmp_path, cfg, [1.0, 0.9, 0.895, 0.85, 0.86], corpus)
    h = t.st["history"]
    assert [x["lr"] for x in h[1:]] == [0.008, 0.008, 0.004, 0.002]
    assert [x["accepted"] for x in h[1:]] == [True, True, True, False]
    assert t.st["done"] and t.st["best_loss"] == 0.85
    final = _weights(tmp_path / "final.nnet")
    # the rejected epoch 4 was undone: the final model carries epoch 3's mark
    assert float(final["state_dict"]["layers.0.wb"][0, 0]) == 3.0
    assert [m for m, _ in t.starts[1:]] == [1.0, 2.0, 3.0] and [n for _, n in t.starts[1:]] == [100, 200, 300]
    # ... and so does the live model the trainer goes on with
    assert float(t.model.affines[0].wb.detach()[0, 0]) == 3.0 and t.opt.num_steps == 300


def test_newbob_rejected_epoch_restarts_from_the_accepted_weights(tmp_path, corpus):
    # ep1 0.9 accepted; ep2 0.95 worse -> rejected (not halving yet: halving starts, lr 0.004);
    # ep3 must begin from epoch 1's weights and optimizer state, not epoch 2's
    cfg = TrainConfig(optimizer="sgd", learn_rate=0.008, max_epochs=3)
    t = _scripted(tmp_path, cfg, [1.0, 0.9, 0.95, 0.85], corpus)
    assert [x["accepted"] for x in t.st["history"][1:]] == [True, False, True]
    assert t.starts[2] == (1.0, 100), t.starts


def test_newbob_stops_at_max_epochs(tmp_path, corpus):
    cfg = TrainConfig(optimizer="sgd", max_epochs=3)
    t = _scripted(tmp_path, cfg, [1.0, 0.5, 0.25, 0.12], corpus)
    assert len(t.st["history"]) == 4 and all(x["accepted"] for x in t.st["history"][1:])
    assert [x["lr"] for x in t.st["history"][1:]] == [0.008] * 3


def test_exponential_schedule(tmp_path, corpus):
    # nnet2 train_pnorm_fast.sh: i * exp(x ln(f/i) / n) after x of n epochs, then f
    assert exponential_lr(0.04, 0.004, 0, 4) == pytest.approx(0.04)
    assert exponential_lr(0.04, 0.004, 2, 4) == pytest.approx(0.04 * 0.1 ** 0.5)
    assert exponential_lr(0.04, 0.004, 1.5, 4) == pytest.approx(0.04 * 0.1 ** (1.5 / 4))
    assert exponential_lr(0.04, 0.004, 4, 4) == exponential_lr(0.04, 0.004, 5.5, 4) == 0.004
    cfg = TrainConfig(optimizer="sgd", schedule="exponential", num_epochs=2, learn_rate=0.01,
                      final_learn_rate=0.001, num_epochs_extra=1)
    t = _scripted(tmp_path, cfg, [1.0, 1.1, 1.2, 1.3], corpus)  # no rejection in nnet2 style
    h = t.st["history"][1:]
    assert len(h) == 3 and all(x["accepted"] for x in h)
    # the rate of each epoch's first minibatch (the decay within an epoch: the test below)
    assert [x["lr"] for x in h] == pytest.approx([0.01, 0.01 * 0.1 ** 0.5, 0.001])


class _RateRecorder(Synchronizer):
    """Records the learning rate each update used; ``stop_after``: dies after that update (as
    kill -9 would, the checkpoint on disk is whatever was written last)."""

    def __init__(self, stop_after: int = 0):
        self.rates: list[float] = []
        self.stop_after = stop_after

    def after_update(self, step, model, optimizer):
        self.rates.append(optimizer.fused_lr)
        if step == self.stop_after:
            raise _Killed


class _Killed(Exception):
    pass


def test_exponential_decays_per_minibatch_and_resumes_exactly(tmp_path, corpus):
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="ngsgd", schedule="exponential", num_epochs=2, num_epochs_extra=1,
                      learn_rate=0.01, final_learn_rate=0.001, minibatch_size=64, buffer_frames=400,
                      checkpoint_every=4)
    kw = dict(hidden_dims=[16], context=2, progress=False)
    ref = _RateRecorder()
    st = build_and_train(data, ali, str(tmp_path / "ref"), cfg, sync=ref, **kw)
    frames = st["history"][1]["frames"]
    # each rate is the schedule's after the frames already trained: from the rates, the position
    # x = 2 ln(lr / i) / ln(f / i) advances by one minibatch (at most 64 frames) per update
    x = [2 * math.log(r / 0.01) / math.log(0.1) for r in ref.rates]
    decaying = [v for v in x if v < 2 - 1e-9]
    assert x[0] == 0 and all(0 < b - a <= 64 / frames + 1e-9 for a, b in zip(decaying, decaying[1:]))
    h = st["history"][1:]
    assert h[0]["lr"] == 0.01 and h[1]["lr"] == pytest.approx(0.01 * 0.1 ** 0.5)
    assert h[0]["lr"] > h[0]["lr_last"] > h[1]["lr"] > h[1]["lr_last"] > 0.001 == h[2]["lr"] == h[2]["lr_last"]
    assert len(decaying) >= 2 * frames / 64
    assert ref.rates[len(decaying):] == [pytest.approx(0.001)] * (len(ref.rates) - len(decaying))
    assert len(ref.rates) - len(decaying) >= frames / 64     # the extra epoch at the final rate
    # killed mid-epoch 2 (not at a checkpoint): the rerun replays from the last checkpoint with
    # the same rates and ends with the same weights
    stop = len(ref.rates) // 2 + (len(ref.rates) // 2 % 4 == 0)
    killed = _RateRecorder(stop_after=stop)
    with pytest.raises(_Killed):
        build_and_train(data, ali, str(tmp_path / "run"), cfg, sync=killed, **kw)
    resumed = _RateRecorder()
    build_and_train(data, ali, str(tmp_path / "run"), cfg, sync=resumed, **kw)
    assert killed.rates[:stop // 4 * 4] + resumed.rates == ref.rates
    a = _weights(tmp_path / "ref" / "final.nnet")["state_dict"]
    b = _weights(tmp_path / "run" / "final.nnet")["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_feature_dim_mismatch_is_one_line_error(tmp_path, capsys):
    import kaldiio

    data, ali = make_toy_corpus(str(tmp_path), num_utts=12)
    # append an utterance with the wrong dimension to feats.scp (and give it an alignment length)
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/bad.ark,{tmp_path}/bad.scp") as w:
        w("spk0-utt9999", np.zeros((50, 9), np.float32))
    with open(f"{data}/feats.scp", "a") as f:
        f.write(open(f"{tmp_path}/bad.scp").read())
    from pynnet.hmm.ali_io import read_alignments, write_alignments
    alis = read_alignments(ali)
    alis["spk0-utt9999"] = next(iter(alis.values()))[:1].repeat(50)
    write_alignments(f"{ali}/ali.1.gz", alis)
    capsys.readouterr()
    assert train_main([*SMALL, "--apply-cmvn", "false", "--max-epochs", "1", data, ali, str(tmp_path / "exp")]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("ERROR (") and sum("ERROR" in x for x in lines) == 1
    assert "feats.scp:13: feature dim mismatch: utterance 'spk0-utt9999' has dim 9, expected 6" in lines[-1]
    assert "Traceback" not in err
    assert not (tmp_path / "exp" / "final.nnet").exists()


def test_bad_inputs(tmp_path, corpus, capsys):
    _, data, ali = corpus
    # no alignments for any utterance
    empty_ali = tmp_path / "ali_other"
    empty_ali.mkdir()
    os.link(f"{ali}/final.mdl", empty_ali / "final.mdl")
    from pynnet.hmm.ali_io import write_alignments
    write_alignments(str(empty_ali / "ali.1.gz"), {"nobody": np.array([1, 2], np.int32)})
    with pytest.raises(PynnetError, match="no utterance of feats.scp has an alignment"):
        build_and_train(data, str(empty_ali), str(tmp_path / "e1"), TrainConfig(), hidden_dims=[8], progress=False)
    # missing model in the alignment dir
    os.unlink(empty_ali / "final.mdl")
    with pytest.raises(PynnetError, match="final.mdl"):
        build_and_train(data, str(empty_ali), str(tmp_path / "e2"), TrainConfig(), hidden_dims=[8], progress=False)
    # resuming with different options is refused, naming the checkpoint
    cfg = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400)
    build_and_train(data, ali, str(tmp_path / "e3"), cfg, hidden_dims=[8], context=1, progress=False)
    cfg2 = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400, learn_rate=0.1)
    with pytest.raises(PynnetError, match="checkpoint.pt: checkpoint was written with other options"):
        build_and_train(data, ali, str(tmp_path / "e3"), cfg2, hidden_dims=[8], context=1, progress=False)
    capsys.readouterr()
    for bad in ("tpu", "cudax", "cuda:x", "cuda0", "cuda:-1"):
        assert train_main(["--device", bad, data, ali, str(tmp_path / "e4")]) == 1
        err = capsys.readouterr().err
        assert err.startswith("ERROR (") and len(err.strip().splitlines()) == 1, err
        assert f"--device must be cpu or cuda[:N], not '{bad}'" in err or (
            "CUDA is not available" in err and not torch.cuda.is_available()), err
    if not torch.cuda.is_available():
        assert train_main(["--device", "cuda:0", data, ali, str(tmp_path / "e4")]) == 1
        assert "--device cuda:0: CUDA is not available on this machine" in capsys.readouterr().err
    assert not (tmp_path / "e4").exists()


def test_synchronizer_hooks_and_lr_scale(tmp_path, corpus):
    """The parallel stage's plug-in point: called around every local update, scales the lr."""
    from pynnet.nnet.train import Synchronizer
    _, data, ali = corpus

    class Counting(Synchronizer):
        lr_scale = 0.5
        needs_gradients = True

        def __init__(self):
            self.before, self.after, self.reduced = [], [], 0

        def before_update(self, step, model, optimizer, lr=0.0):
            assert all(a.grad is not None for a in model.affines)
            self.before.append(step)

        def after_update(self, step, model, optimizer):
            self.after.append(step)

        def reduce(self, stats):
            self.reduced += 1
            return stats

    sync = Counting()
    cfg = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400, learn_rate=0.004)
    st = build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False, sync=sync)
    n = st["step"]
    assert n > 5 and sync.before == list(range(n)) and sync.after == list(range(1, n + 1))
    assert sync.reduced == 3   # initial CV, epoch train stats, epoch CV
    assert st["history"][1]["lr"] == 0.004   # the schedule's lr; the step used lr * lr_scale
    assert st["history"][1]["accepted"]
    # lr_scale really scales the step: same weights as lr 0.002 without a synchronizer
    cfg2 = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400, learn_rate=0.002)
    build_and_train(data, ali, str(tmp_path / "plain"), cfg2, hidden_dims=[8], context=1, progress=False)
    a, b = _weights(tmp_path / "final.nnet"), _weights(tmp_path / "plain" / "final.nnet")
    # (the plain run updates inside backward: equal up to rounding)
    assert all(torch.allclose(a["state_dict"][k], b["state_dict"][k], rtol=0, atol=1e-5) for k in a["state_dict"])
    c = _weights(tmp_path / "plain" / "nnet.init")
    assert not torch.allclose(a["state_dict"]["layers.0.wb"], c["state_dict"]["layers.0.wb"], rtol=0, atol=1e-3)


def test_rerun_with_another_architecture_is_refused(tmp_path, corpus):
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400)
    build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False)
    with pytest.raises(PynnetError, match=r"checkpoint.pt: was made for another model \(hidden_dims: \[8\] now \[9\]"):
        build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[9], context=1, progress=False)


def test_resume_with_another_thread_count_warns(tmp_path, corpus, capsys, monkeypatch):
    # the result would no longer be bit-identical to an uninterrupted run: say so, then go on
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400)
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")    # what steps/nnet/train.sh --num-threads sets
        build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False)
        capsys.readouterr()
        build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False)
        assert "torch threads" not in capsys.readouterr().err
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False)
        err = capsys.readouterr().err
        assert "written with 1 torch threads, resuming with 2" in err and "already finished" in err
    finally:
        torch.set_num_threads(before)


def test_resume_on_another_device_warns(tmp_path, corpus, capsys):
    # a checkpoint written on a GPU resumed on the CPU (or on another GPU model or CUDA version):
    # the run goes on, but it is not bit-identical to an uninterrupted one: say so
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="sgd", max_epochs=2, buffer_frames=400, checkpoint_every=3)
    ckpt = tmp_path / "checkpoint.pt"
    build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False)
    obj = torch.load(ckpt, weights_only=False)
    assert obj["device"] == "cpu"
    obj["device"] = "cuda (NVIDIA H200, CUDA 12.8)"
    obj["state"]["done"] = False     # (as if it had stopped before the end)
    torch.save(obj, ckpt)
    capsys.readouterr()
    build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[8], context=1, progress=False)
    err = capsys.readouterr().err
    assert (f"WARNING: {ckpt} was written on cuda (NVIDIA H200, CUDA 12.8), resuming on cpu: training "
            "continues, but not bit-identical to an uninterrupted run") in err
    assert "torch threads" not in err
    assert torch.load(ckpt, weights_only=False)["device"] == "cpu"


def test_explicit_cv_set_as_kaldi_nnet1(corpus, tmp_path, capsys):
    """--cv-data/--cv-ali (steps/nnet/train.sh's six-argument form): every aligned utterance of
    <data> trains, the CV set is the other dir's; its own alignment dir, or <ali-dir>'s."""
    root, data, ali = corpus
    cv_data, cv_ali = make_toy_corpus(str(tmp_path), num_utts=6, utt_seed=11, name="cv", spk_prefix="cv")
    exp = tmp_path / "exp"
    assert train_main([*SMALL, "--max-epochs", "1", "--cv-data", cv_data, "--cv-ali", cv_ali, data, ali,
                       str(exp)]) == 0
    tr = open(exp / "train_utts.list").read().split()
    cv = open(exp / "cv_utts.list").read().split()
    assert len(tr) == 38 and cv == sorted(open(f"{cv_data}/feats.scp").read().split()[::2])
    assert _weights(exp / "checkpoint.pt")["data"]["cv_percent"] is None
    hist = json.load(open(exp / "log" / "train.json"))
    assert np.isfinite(hist[1]["cv_loss"]) and hist[1]["cv_loss"] < hist[0]["cv_loss"]
    capsys.readouterr()
    # bad uses: one line each, before any training
    for args, msg in ((["--cv-data", cv_data, "--cv-percent", "5"], "with --cv-data leave it out"),
                      (["--cv-ali", cv_ali], "--cv-ali needs --cv-data"),
                      (["--cv-data", cv_data], "no utterance of feats.scp has an alignment in"),   # not in <ali-dir>
                      (["--cv-data", str(tmp_path / "nope")], "no such file")):
        assert train_main([*SMALL, "--max-epochs", "1", *args, data, ali, str(tmp_path / "bad")]) == 1
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("ERROR")]
        assert len(err) == 1 and msg in err[0], err
    # CV features of another dimension (deltas on the CV dir's features only: simulated by a
    # data dir whose feats have 7 columns)
    odd = tmp_path / "odd"
    shutil.copytree(cv_data, odd)
    import kaldiio
    feats = dict(kaldiio.load_scp(f"{cv_data}/feats.scp"))
    with kaldiio.WriteHelper(f"ark,scp:{odd}/feats.ark,{odd}/feats.scp") as w:
        for u in sorted(feats):
            w(u, np.hstack([feats[u], feats[u][:, :1]]))
    (odd / "cmvn.scp").unlink()
    assert train_main([*SMALL, "--max-epochs", "1", "--apply-cmvn", "false", "--cv-data", str(odd), "--cv-ali", cv_ali,
                       data, ali, str(tmp_path / "bad2")]) == 1
    err = capsys.readouterr().err
    assert "the CV features have dimension 7, the training features" in err and "6" in err
