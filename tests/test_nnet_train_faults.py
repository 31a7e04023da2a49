"""DNN training faults: NaN/inf recovery (weights really restored, learning rate halved again on a
second failure, the exponential schedule, giving up), non-finite CV losses, resuming on other
data, unreadable checkpoints, and the one-line errors of pynnet-nnet-train / rbm-train / forward."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pynnet.nnet.train as train_mod
from pynnet.bin._cli import cli
from pynnet.bin.nnet import forward_main, rbm_main, train_main
from pynnet.io.errors import PynnetError
from pynnet.nnet.toy import make_toy_corpus
from pynnet.nnet.train import Synchronizer, TrainConfig, Trainer, build_and_train, exponential_lr
from test_nnet_train import _Scripted   # scripted CV losses: the accept/reject decisions alone

BIN = os.path.join(os.path.dirname(sys.executable), "pynnet-nnet-train")
SMALL = ["--nn-depth", "1", "--hid-dim", "8", "--buffer-frames", "400", "--checkpoint-every", "4", "--max-epochs", "1"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("nnet_faults")
    data, ali = make_toy_corpus(str(root), num_utts=40, drop_ali=2)
    return root, data, ali


def _load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def _one_line_error(err: str, *parts: str) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert lines and lines[-1].startswith("ERROR ("), err
    assert sum("ERROR" in x for x in lines) == 1, err
    for p in parts:
        assert p in lines[-1], (p, lines[-1])


# ------------------------------------------------------------------ NaN / inf recovery
class Poison(Synchronizer):
    """Corrupts the first layer's weights after the given update steps (once each): the failure
    happens in the real model, not only in the reported loss."""

    def __init__(self, steps, value=float("nan"), every_from=None):
        self.steps, self.value, self.every_from = set(steps), value, every_from

    def after_update(self, step, model, optimizer):
        if step in self.steps or (self.every_from is not None and step >= self.every_from):
            self.steps.discard(step)
            with torch.no_grad():
                model.affines[0].wb[0, -1] = self.value   # a bias: its input is always 1


class Recording(Trainer):
    """Records the state right after each recovery, against the checkpoint it restored."""
    recoveries: list

    def _recover(self, what):
        super()._recover(what)
        ck = _load(self.ckpt_path)
        have = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        self.recoveries.append({
            "what": what, "step": self.st["step"], "ckpt_step": ck["state"]["step"],
            "lr": self.st["lr"], "lr_factor": self.st["lr_factor"],
            "epochs_done": self.st["epoch"] - 1 + self.st["acc"]["frames"] / self.tr.num_frames,
            "equal": have.keys() == ck["model"].keys() and all(torch.equal(have[k], ck["model"][k]) for k in have),
            "finite": all(bool(torch.isfinite(v).all()) for v in have.values())})


@pytest.fixture
def recording(monkeypatch):
    Recording.recoveries = []
    monkeypatch.setattr(train_mod, "Trainer", Recording)   # build_and_train makes a Recording
    return Recording.recoveries


def test_nan_restores_checkpoint_weights_and_halves_twice(tmp_path, corpus, recording, capsys):
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="ngsgd", learn_rate=0.008, minibatch_size=64, max_epochs=1,
                      buffer_frames=400, checkpoint_every=4)
    # NaN after update 9: update 10 sees a NaN loss -> back to the checkpoint of step 8; on the
    # replay NaN after update 10: back to step 8 again, the rate halved once more
    st = build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[16], context=2, progress=False,
                         sync=Poison({9, 10}))
    err = capsys.readouterr().err
    assert len(recording) == 2
    for r in recording:
        assert r["what"].startswith("non-finite loss at epoch 1 chunk ")
        assert r["equal"] and r["finite"] and r["step"] == r["ckpt_step"] == 8
    assert [r["lr"] for r in recording] == [0.004, 0.002]
    assert "halved the learning rate to 0.004" in err and "halved the learning rate to 0.002" in err
    assert "restored the last checkpoint (epoch 1, chunk " in err
    assert st["history"][1]["lr"] == 0.002 and st["nan_restarts"] == 2
    final = _load(tmp_path / "final.nnet")
    assert all(bool(torch.isfinite(v).all()) for v in final["state_dict"].values())


def test_inf_parameters_are_never_checkpointed_exponential(tmp_path, corpus, recording, capsys):
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="sgd", schedule="exponential", num_epochs=2, learn_rate=0.004,
                      final_learn_rate=0.001, minibatch_size=64, buffer_frames=400, checkpoint_every=4)
    # +inf in a sigmoid unit's bias leaves the loss finite (the unit saturates): only the check
    # before writing the checkpoint at step 12 notices; the replay then saves step 12 and an inf
    # after update 13 is refused at step 16
    st = build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[16], context=2, progress=False,
                         sync=Poison({9, 13}, float("inf")))
    err = capsys.readouterr().err
    assert len(recording) == 2, err
    for r in recording:
        assert r["what"].startswith("non-finite parameters (layers.0.wb) at epoch 1 ")
        assert "(checkpoint not written)" in r["what"]
        assert r["equal"] and r["finite"]
    assert [r["ckpt_step"] for r in recording] == [8, 12]
    # the factor in use is halved (1/2, then 1/4); the rate is the schedule's at the restored
    # position (the decay is per minibatch) times that factor, and the one reported
    assert [r["lr_factor"] for r in recording] == [0.5, 0.25]
    for r, factor in zip(recording, (0.5, 0.25)):
        assert 0 < r["epochs_done"] < 1
        assert r["lr"] == pytest.approx(factor * exponential_lr(0.004, 0.001, r["epochs_done"], 2))
        assert f"halved the learning rate to {r['lr']:.4g}" in err
    h = st["history"]
    assert len(h) == 1 + 3    # 2 epochs of decay + 1 at the final rate (num_epochs_extra)
    assert h[2]["lr"] == pytest.approx(0.25 * exponential_lr(0.004, 0.001, 1, 2))
    assert h[3]["lr"] == h[3]["lr_last"] == pytest.approx(0.25 * 0.001)
    for p in (tmp_path / "checkpoint.pt", tmp_path / "nnet" / "best.pt"):
        assert all(bool(torch.isfinite(v).all()) for v in _load(p)["model"].values())


def test_inf_at_the_end_of_an_epoch_is_not_accepted(tmp_path, corpus, recording, capsys, monkeypatch):
    _, data, ali = corpus
    poisoned = []

    def run_epoch(self):
        Trainer.run_epoch(self)
        if not poisoned:   # the epoch's last update left an inf the CV loss does not show
            poisoned.append(self.st["step"])
            with torch.no_grad():
                self.model.affines[0].wb[0, -1] = float("inf")

    monkeypatch.setattr(Recording, "run_epoch", run_epoch, raising=False)
    cfg = TrainConfig(optimizer="sgd", learn_rate=0.004, minibatch_size=64, max_epochs=1,
                      buffer_frames=400, checkpoint_every=4)
    st = build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[16], context=2, progress=False)
    assert len(recording) == 1
    r = recording[0]
    assert r["what"] == "non-finite parameters (layers.0.wb) at the end of epoch 1"
    assert r["equal"] and r["finite"] and r["ckpt_step"] == 4 * (poisoned[0] // 4) and r["lr"] == 0.002
    assert st["history"][1]["accepted"] and st["history"][1]["lr"] == 0.002
    assert all(bool(torch.isfinite(v).all()) for v in _load(tmp_path / "final.nnet")["state_dict"].values())


def test_gives_up_after_max_restarts_with_one_line(tmp_path, corpus, capsys):
    _, data, ali = corpus
    cfg = TrainConfig(optimizer="ngsgd", learn_rate=0.008, minibatch_size=64, max_epochs=1,
                      buffer_frames=400, checkpoint_every=4)

    @cli
    def main(argv):
        build_and_train(data, ali, str(tmp_path), cfg, hidden_dims=[16], context=2, progress=False,
                        sync=Poison((), every_from=9))
    assert main([]) == 1
    err = capsys.readouterr().err
    _one_line_error(err, f"{tmp_path}/checkpoint.pt: non-finite loss at epoch 1 chunk ",
                    f"gave up after {train_mod.MAX_NAN_RESTARTS} restarts with halved learning rates")
    assert err.count("WARNING: non-finite loss") == train_mod.MAX_NAN_RESTARTS
    assert f"halved the learning rate to {0.008 / 2 ** train_mod.MAX_NAN_RESTARTS:.4g}" in err
    assert not (tmp_path / "final.nnet").exists()
    assert all(bool(torch.isfinite(v).all()) for v in _load(tmp_path / "checkpoint.pt")["model"].values())


@pytest.mark.parametrize("schedule,losses,accepted", [
    ("exponential", [1.0, 0.9, float("nan"), 0.95], [True, False, True]),
    ("exponential", [1.0, 0.9, float("inf"), 0.95], [True, False, True]),
    ("newbob", [1.0, 0.9, float("nan"), 0.8, float("nan")], [True, False, True, False]),
])
def test_nonfinite_cv_loss_rejects_the_epoch(tmp_path, corpus, schedule, losses, accepted):
    from pynnet.nnet.data import load_frame_sets
    from pynnet.nnet.model import Dnn

    _, data, ali = corpus
    tr, cv, n = load_frame_sets(data, ali, apply_cmvn=False, delta_order=0, cv_percent=10, seed=1)
    m = Dnn(6, [8], n, context=1)
    m.init_random(0)
    cfg = TrainConfig(optimizer="sgd", schedule=schedule, num_epochs=3, max_epochs=4, final_learn_rate=0.001,
                      num_epochs_extra=0)
    t = _Scripted(str(tmp_path), m, tr, cv, cfg, progress=False, cv_losses=losses)
    t.train()
    h = t.st["history"][1:]
    assert [x["accepted"] for x in h] == accepted
    assert t.st["best_loss"] == [x for x, a in zip(losses[1:], accepted) if a][-1]
    # the rejected epoch 2 was undone: epoch 3 started from epoch 1's weights, and the best model
    # never took a non-finite CV loss
    best = _load(tmp_path / "nnet" / "best.pt")["model"]
    assert float(best["layers.0.wb"][0, 0]) == 3.0
    assert t.starts[2] == (1.0, 100), t.starts   # (weight mark, optimizer steps) epoch 3 began with


# ------------------------------------------------------------------ resuming on other data
def test_resume_on_other_data_is_refused(tmp_path, corpus, capsys):
    from pynnet.nnet.data import read_pdf_alignments

    _, data, ali = corpus
    exp = str(tmp_path / "e")
    cfg = TrainConfig(optimizer="sgd", max_epochs=1, buffer_frames=400)

    def run(**k):
        return build_and_train(data, ali, exp, cfg, hidden_dims=[8], context=1, progress=False, **k)

    run()
    ck = _load(f"{exp}/checkpoint.pt")
    assert ck["data"]["cv_percent"] == 10.0 and ck["data"]["num_cv_utts"] == 4
    lists = {f: open(f"{exp}/{f}").read() for f in ("train_utts.list", "cv_utts.list")}
    with pytest.raises(PynnetError, match=r"checkpoint.pt: checkpoint was written for other data \("
                       r"--cv-percent 10.0 now 20.0; the training utterance list differs \(34 utterances then, "
                       r"30 now\); the CV utterance list differs \(4 utterances then, 8 now\)\); remove it"):
        run(cv_percent=20.0)
    pdf_ali, num_pdfs = read_pdf_alignments(ali)
    # one frame's target changed: same lists, other alignments
    changed = dict(pdf_ali)
    u = open(f"{exp}/train_utts.list").read().split()[0]
    changed[u] = changed[u].copy()
    changed[u][0] = (int(changed[u][0]) + 1) % num_pdfs
    with pytest.raises(PynnetError, match=r"checkpoint.pt: checkpoint was written for other data \("
                       r"the alignment targets differ\)"):
        run(targets=(changed, num_pdfs))
    # an utterance without alignments now
    fewer = {k: v for k, v in pdf_ali.items() if k != u}
    with pytest.raises(PynnetError, match=r"the training utterance list differs \(34 utterances then, 33 now\)"):
        run(targets=(fewer, num_pdfs))
    # the refused runs left the split lists describing the checkpoint
    assert lists == {f: open(f"{exp}/{f}").read() for f in lists}
    capsys.readouterr()
    # the same data resumes (finished here)
    run(targets=(pdf_ali, num_pdfs))
    assert "already finished" in capsys.readouterr().err
    # a checkpoint from before the data fields is accepted
    del ck["data"]
    torch.save(ck, f"{exp}/checkpoint.pt")
    run(cv_percent=10.0)
    assert "already finished" in capsys.readouterr().err


# ------------------------------------------------------------------ unreadable checkpoints
@pytest.mark.parametrize("damage", ["garbage", "truncated", "not_a_checkpoint"])
def test_unreadable_checkpoint_is_one_line(tmp_path, corpus, capsys, damage):
    _, data, ali = corpus
    exp = tmp_path / "e"
    exp.mkdir()
    ck = exp / "checkpoint.pt"
    if damage == "garbage":
        ck.write_bytes(b"\x00garbage" * 10)
    elif damage == "truncated":
        buf = tmp_path / "full.pt"
        torch.save({"cfg": {}, "state": {}, "model": {"w": torch.zeros(1000)}, "opt": {}, "arch": {},
                    "input_pipeline": {}}, buf)
        ck.write_bytes(buf.read_bytes()[:2000])
    else:
        torch.save({"model": {}}, ck)
    assert train_main([*SMALL, data, ali, str(exp)]) == 1
    err = capsys.readouterr().err
    _one_line_error(err, f"{ck}: ", "delete it to start over")
    assert ("not a pynnet training state" if damage == "not_a_checkpoint" else "cannot read it") in err


# ------------------------------------------------------------------ option errors
@pytest.mark.parametrize("opts,msg", [
    (["--schedule", "exponential", "--final-learn-rate", "0"], "--final-learn-rate must be positive"),
    (["--schedule", "exponential", "--final-learn-rate", "-0.001"], "--final-learn-rate must be positive"),
    (["--learn-rate", "0"], "--learn-rate must be positive"),
    (["--learn-rate", "-0.1"], "--learn-rate must be positive"),
    (["--learn-rate", "nan"], "--learn-rate must be positive"),
    (["--cv-percent", "-10"], "--cv-percent must be in (0, 100)"),
    (["--cv-percent", "0"], "--cv-percent must be in (0, 100)"),
    (["--cv-percent", "100"], "--cv-percent must be in (0, 100)"),
    (["--splice", "-1"], "--splice must not be negative"),
    (["--pnorm-group", "0"], "--pnorm-group must be positive"),
    (["--activation", "pnorm", "--pnorm-group", "-2"], "--pnorm-group must be positive"),
    (["--minibatch-size", "0"], "--minibatch-size must be positive"),
    (["--halving-factor", "0"], "--halving-factor must be in (0, 1], not 0.0"),
    (["--halving-factor", "nan"], "--halving-factor must be in (0, 1], not nan"),
    (["--halving-factor", "2"], "--halving-factor must be in (0, 1], not 2.0"),
    (["--start-halving-impr", "nan"], "--start-halving-impr must not be negative, not nan"),
    (["--end-halving-impr", "-0.1"], "--end-halving-impr must not be negative, not -0.1"),
    (["--learn-rate", "inf"], "--learn-rate must be positive and finite, not inf"),
    (["--apply-cmvn", "yes"], "argument --apply-cmvn: invalid choice: 'yes'"),
    (["--seed", "-1"], "--seed must not be negative, not -1"),
    (["--schedule", "exponential", "--num-epochs-extra", "-1"], "--num-epochs-extra must not be negative, not -1"),
    (["--schedule", "exponential", "--num-epochs", "0"], "--num-epochs must be positive"),
    (["--momentum", "0.9"], "--momentum 0.9: only --optimizer sgd and adagrad use momentum, not ngsgd"),
    (["--optimizer", "adagrad", "--momentum", "-0.1"], "--momentum must be in [0, 1), not -0.1"),
    (["--minibatch-size", "abc"], "--minibatch-size: expected an integer or auto, got 'abc'"),
    (["--minibatch-size", "auto", "--auto-minibatch-trial-hours", "0"], "--auto-minibatch-trial-hours must be positive"),
    (["--optimizer", "sgd", "--momentum", "1.0"], "--momentum must be in [0, 1)"),
])
def test_train_option_errors(tmp_path, corpus, capsys, opts, msg):
    _, data, ali = corpus
    exp = tmp_path / "e"
    assert train_main([*SMALL, *opts, data, ali, str(exp)]) == 1
    _one_line_error(capsys.readouterr().err, "ERROR (", msg)
    assert not exp.exists()   # refused before reading any data


def test_train_option_error_in_a_process(tmp_path, corpus):
    _, data, ali = corpus
    r = subprocess.run([BIN, "--schedule", "exponential", "--final-learn-rate", "0", data, ali, str(tmp_path / "e")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    _one_line_error(r.stderr, "ERROR (pynnet-nnet-train): --final-learn-rate must be positive")


@pytest.mark.parametrize("limit_kb", [2, 16])
def test_failed_writes_are_one_line_and_leave_nothing(tmp_path, corpus, limit_kb):
    """A file size limit (as a full disk: writes fail) stops training with one line naming the
    file, whether torch's writer (models, checkpoints) or a plain write (JSON, PNG) hits it; no
    temp file is left, and the rerun without the limit resumes and finishes."""
    _, data, ali = corpus
    exp = tmp_path / "e"
    cmd = [BIN, *SMALL, "--max-epochs", "2", data, ali, str(exp)]
    r = subprocess.run(["bash", "-c", f"trap '' XFSZ; ulimit -f {limit_kb}; exec \"$@\"", "-", *cmd],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    _one_line_error(r.stderr, "ERROR (pynnet-nnet-train): ")
    last = r.stderr.strip().splitlines()[-1]
    assert str(exp) + os.sep in last and ("File too large" in last or "cannot write it" in last), last
    left = [os.path.join(d, f) for d, _, fs in os.walk(exp) for f in fs if f.startswith(".")]
    assert left == []
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (exp / "final.nnet").exists() and (exp / "train_curve.png").exists()


@pytest.mark.parametrize("opts,msg", [
    (["--splice", "-1"], "--splice must not be negative"),
    (["--minibatch-size", "0"], "--minibatch-size must be positive"),
])
def test_rbm_option_errors(tmp_path, corpus, capsys, opts, msg):
    _, data, _ = corpus
    assert rbm_main([*opts, data, str(tmp_path / "dbn")]) == 1
    _one_line_error(capsys.readouterr().err, msg)
    assert not (tmp_path / "dbn").exists()


def test_make_optimizer_momentum():
    from pynnet.nnet.model import Dnn
    from pynnet.nnet.optim import Sgd, make_optimizer

    m = Dnn(6, [8], 4, context=1)
    with pytest.raises(PynnetError, match="only --optimizer sgd and adagrad use momentum, not ngsgd"):
        make_optimizer("ngsgd", m, momentum=0.9)
    make_optimizer("ngsgd", m, momentum=0.0).detach()
    assert isinstance(make_optimizer("sgd", m, momentum=0.9), Sgd)
    assert make_optimizer("adagrad", m, momentum=0.9).momentum == 0.9


# ------------------------------------------------------------------ forward: unreadable features
@pytest.mark.parametrize("kind", ["missing_scp", "scp_to_missing_ark", "garbage_ark", "truncated_ark"])
def test_forward_unreadable_features_is_one_line(tmp_path, corpus, capsys, kind):
    import kaldiio

    from pynnet.nnet.model import Dnn, save_model

    _, data, _ = corpus
    m = Dnn(6, [8], 4, context=1)
    m.init_random(0)
    save_model(tmp_path / "m.nnet", m)
    if kind == "missing_scp":
        spec, name = f"scp:{tmp_path}/nothing.scp", f"{tmp_path}/nothing.scp"
    elif kind == "scp_to_missing_ark":
        (tmp_path / "f.scp").write_text(f"u1 {tmp_path}/gone.ark:8\n")
        spec, name = f"scp:{tmp_path}/f.scp", "gone.ark"
    elif kind == "garbage_ark":
        (tmp_path / "f.ark").write_bytes(b"u1 \x00Bxx garbage" * 5)
        spec, name = f"ark:{tmp_path}/f.ark", f"{tmp_path}/f.ark"
    else:
        with kaldiio.WriteHelper(f"ark:{tmp_path}/full.ark") as w:
            w("u1", np.ones((30, 6), np.float32))
            w("u2", np.ones((30, 6), np.float32))
        (tmp_path / "f.ark").write_bytes((tmp_path / "full.ark").read_bytes()[:-100])
        spec, name = f"ark:{tmp_path}/f.ark", f"{tmp_path}/f.ark"
    out = tmp_path / "out.ark"
    assert forward_main([str(tmp_path / "m.nnet"), spec, f"ark:{out}"]) == 1
    _one_line_error(capsys.readouterr().err, "ERROR (", name)
    assert not out.exists()


# ------------------------------------------------------------------ --dbn: the options it decides
@pytest.fixture(scope="module")
def dbn(corpus):
    root, data, _ = corpus
    out = root / "dbn16"
    assert rbm_main(["--nn-depth", "1", "--hid-dim", "16", "--rbm-iter", "1", "--splice", "2", "--buffer-frames", "400",
                     data, str(out)]) == 0
    return str(out / "final.dbn")


@pytest.mark.parametrize("opts,msg", [
    (["--splice", "5"], "--splice 5: the DBN has 2; leave it out with --dbn"),
    (["--activation", "relu"], "--activation relu: the DBN has sigmoid; leave it out with --dbn"),
    (["--nn-depth", "2"], "--nn-depth 2: the DBN has 1; leave it out with --dbn"),
    (["--hid-dim", "8"], "--hid-dim 8: the DBN has 16; leave it out with --dbn"),
])
def test_dbn_options_that_disagree_are_refused(tmp_path, corpus, dbn, capsys, opts, msg):
    # they used to be ignored silently (the DBN's shape won)
    _, data, ali = corpus
    capsys.readouterr()
    assert train_main(["--max-epochs", "1", "--buffer-frames", "400", "--dbn", dbn, *opts, data, ali,
                       str(tmp_path / "e")]) == 1
    _one_line_error(capsys.readouterr().err, f"{dbn}: {msg}")
    assert not (tmp_path / "e").exists()


def test_a_rerun_with_another_initialisation_is_refused(tmp_path, corpus, dbn, capsys):
    # a killed random-init run rerun with --dbn (or a DBN run rerun without it / with another DBN)
    # must not resume the model it did not ask for
    _, data, ali = corpus
    exp = str(tmp_path / "e")
    base = ["--buffer-frames", "400", "--checkpoint-every", "4", "--splice", "2"]
    assert train_main([*base, "--max-epochs", "1", "--nn-depth", "1", "--hid-dim", "16", data, ali, exp]) == 0
    capsys.readouterr()
    assert train_main(["--buffer-frames", "400", "--checkpoint-every", "4", "--max-epochs", "1", "--dbn", dbn,
                       data, ali, exp]) == 1
    _one_line_error(capsys.readouterr().err, f"{exp}/checkpoint.pt: was started from random initialisation, "
                    "not from the DBN with weights sha1 ", f"(--dbn {dbn}); remove the exp dir to start over")
    # without a checkpoint (killed before the first one), nnet.init says the same
    os.unlink(f"{exp}/checkpoint.pt")
    assert train_main(["--buffer-frames", "400", "--max-epochs", "1", "--dbn", dbn, data, ali, exp]) == 1
    _one_line_error(capsys.readouterr().err, f"{exp}/nnet.init: was started from random initialisation")
    # the other way round
    exp2 = str(tmp_path / "e2")
    assert train_main(["--buffer-frames", "400", "--max-epochs", "1", "--dbn", dbn, data, ali, exp2]) == 0
    capsys.readouterr()
    assert train_main([*base, "--max-epochs", "1", "--nn-depth", "1", "--hid-dim", "16", data, ali, exp2]) == 1
    _one_line_error(capsys.readouterr().err, f"{exp2}/checkpoint.pt: was started from the DBN with weights sha1 ",
                    "not from random initialisation (--dbn not given)")


def test_alignments_that_never_match_the_features(tmp_path, corpus, capsys):
    # every alignment 3 frames short: each utterance is skipped with a warning, and the error says
    # why there is nothing to train on (it blamed the global CMVN)
    from pynnet.hmm.ali_io import read_alignments, write_alignments
    _, data, ali = corpus
    short = tmp_path / "ali_short"
    short.mkdir()
    (short / "final.mdl").write_bytes(open(f"{ali}/final.mdl", "rb").read())
    write_alignments(str(short / "ali.1.gz"), {u: a[:-3] for u, a in read_alignments(ali).items()})
    capsys.readouterr()
    assert train_main([*SMALL, data, str(short), str(tmp_path / "e")]) == 1
    err = capsys.readouterr().err
    assert "feature frames but" in err and "alignment frames; skipping" in err
    _one_line_error(err, "feats.scp: no usable training frames for the global CMVN: every utterance was skipped "
                    "(its alignment length differs from its features', or NaN/inf: the warnings above)")


def test_identical_runs_write_identical_files(tmp_path, corpus):
    # byte for byte (cmp, md5sum): no temp-file name inside the archive, no timings in the model
    _, data, ali = corpus
    for run in ("a", "b"):
        assert train_main([*SMALL, "--max-epochs", "2", data, ali, str(tmp_path / run)]) == 0
    for f in ("nnet.init", "final.nnet"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    hist = _load(tmp_path / "a" / "final.nnet")["history"]
    assert len(hist) == 3 and all("seconds" not in h and "frames_per_sec" not in h for h in hist)
    import json
    assert all("frames_per_sec" in h for h in json.load(open(tmp_path / "a" / "log" / "train.json"))[1:])


def test_progress_bars_go_to_the_terminal_not_the_log(monkeypatch):
    import builtins
    import io

    import pynnet.io.progress as progress
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setattr(progress, "_tty", None)
    monkeypatch.delenv("PYNNET_PROGRESS_TTY", raising=False)
    assert progress.progress_stream() is None          # a log file or a pipe: no bars
    monkeypatch.setenv("PYNNET_PROGRESS_TTY", "1")      # train.sh: its own stderr is a terminal
    real_open, tty = builtins.open, io.StringIO()
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: tty if f == "/dev/tty" else real_open(f, *a, **k))
    assert progress.progress_stream() is tty
    monkeypatch.setattr(progress, "_tty", None)

    def no_tty(f, *a, **k):
        if f == "/dev/tty":
            raise OSError(6, "No such device or address")
        return real_open(f, *a, **k)
    monkeypatch.setattr(builtins, "open", no_tty)       # a batch job: no controlling terminal
    assert progress.progress_stream() is None
