"""The --device cuda path (skipped where CUDA is absent; run it on a GPU machine with
tools/gpu_check.sh): training steps with each optimizer, the NG-SGD preconditioner, whole training
runs, exact resume from a checkpoint, a CPU checkpoint resumed on the GPU and the forward program
agree with the CPU.

``PYNNET_TEST_GPU_DEVICE=cpu`` runs the same tests with the CPU standing in for the GPU: it checks
the tests themselves (CPU against CPU), not the CUDA path."""
import copy
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pynnet.nnet.model import Dnn
from pynnet.nnet.ngsgd import OnlineNaturalGradient
from pynnet.nnet.optim import make_optimizer

GPU = os.environ.get("PYNNET_TEST_GPU_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(GPU == "cuda" and not torch.cuda.is_available(), reason="needs CUDA")


def _on_gpu(t: torch.Tensor) -> bool:
    return t.device.type == torch.device(GPU).type


@pytest.fixture(autouse=True)
def _exact_fp32():
    # the CPU reference is plain fp32: no TF32 on the GPU side
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _steps(model, opt_name, x, y, fused, steps=6, lr=1e-3, momentum=0.0):
    opt = make_optimizer(opt_name, model, momentum)
    if fused and opt.fusable:
        opt.fused_lr = lr
    for i in range(steps):
        j = (i % 3) * 64
        loss = F.cross_entropy(model(x[j:j + 64]), y[j:j + 64], reduction="sum")
        loss.backward()
        opt.step(lr)
    opt.detach()
    return float(loss.detach())


@pytest.mark.parametrize("opt_name,fused,momentum", [("sgd", True, 0.0), ("sgd", False, 0.0), ("sgd", False, 0.5),
                                                     ("ngsgd", True, 0.0), ("ngsgd", False, 0.0),
                                                     ("adagrad", False, 0.0)])
@pytest.mark.parametrize("activation", ["sigmoid", "relu", "pnorm"])
def test_training_steps_match_cpu(opt_name, fused, momentum, activation):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(192, 7 * 11, generator=g)
    y = torch.randint(0, 30, (192,), generator=g)
    cpu = Dnn(7, [64, 64], 30, activation, context=5, pnorm_group=4)
    cpu.init_random(1)
    gpu = copy.deepcopy(cpu).to(GPU)
    assert _on_gpu(gpu.affines[0].wb)
    loss_cpu = _steps(cpu, opt_name, x, y, fused, momentum=momentum)
    loss_gpu = _steps(gpu, opt_name, x.to(GPU), y.to(GPU), fused, momentum=momentum)
    assert loss_gpu == pytest.approx(loss_cpu, rel=1e-3)
    for (k, a), b in zip(cpu.state_dict().items(), gpu.state_dict().values()):
        assert torch.allclose(a, b.cpu(), rtol=1e-3, atol=1e-4), k


def test_preconditioner_matches_cpu():
    g = torch.Generator().manual_seed(2)
    p_cpu, p_gpu = OnlineNaturalGradient(20, seed=5), OnlineNaturalGradient(20, seed=5)
    for _ in range(14):   # past the initial updates, through a refresh
        M = torch.randn(128, 300, generator=g)
        P1, g1, r1 = p_cpu.precondition(M)
        P2, g2, r2 = p_gpu.precondition(M.to(GPU))
        assert _on_gpu(P2) and g2 == pytest.approx(g1, rel=1e-4)
        assert torch.allclose(P1, P2.cpu(), rtol=1e-3, atol=1e-4)
        assert torch.allclose(r1, r2.cpu(), rtol=1e-3)


@pytest.fixture
def toy(tmp_path):
    """The toy corpus (data dir, alignment dir); needs kaldiio and kaldi-hmm-gmm (tools/gpu_check.sh)."""
    pytest.importorskip("kaldiio")
    pytest.importorskip("kaldi_hmm_gmm")
    from pynnet.nnet.toy import make_toy_corpus
    return make_toy_corpus(str(tmp_path), num_utts=24)


def test_training_run_and_forward_on_cuda(tmp_path, toy):
    import kaldiio

    from pynnet.bin.nnet import forward_main
    from pynnet.nnet.model import load_model
    from pynnet.nnet.train import TrainConfig, build_and_train

    data, ali = toy
    runs = {}
    for name, dev in (("cpu", "cpu"), ("gpu", GPU)):
        cfg = TrainConfig(optimizer="ngsgd", max_epochs=3, buffer_frames=400, device=dev)
        st = build_and_train(data, ali, str(tmp_path / name), cfg, hidden_dims=[48, 48], context=2,
                             apply_cmvn=True, progress=False)
        runs[name] = st["history"]
    cv = {d: [h["cv_loss"] for h in hist] for d, hist in runs.items()}
    assert cv["gpu"][-1] < 0.7 * cv["gpu"][0]
    assert np.allclose(cv["gpu"], cv["cpu"], rtol=2e-2), cv
    # the model trained on the GPU loads on the CPU; the forward program on the GPU matches the
    # CPU's, for posteriors and for the pseudo-log-likelihoods decode.sh asks for
    model = load_model(str(tmp_path / "gpu" / "final.nnet"))
    assert model.affines[0].wb.device.type == "cpu"
    for opts in ([], ["--prior-subtract"]):
        outs = {}
        for name, dev in (("cpu", "cpu"), ("gpu", GPU)):
            out = tmp_path / f"{name}.ark"
            assert forward_main(["--device", dev, *opts, "--utt2spk", f"{data}/utt2spk", "--cmvn-scp",
                                 f"{data}/cmvn.scp", str(tmp_path / "gpu" / "final.nnet"), f"scp:{data}/feats.scp",
                                 f"ark:{out}"]) == 0
            outs[name] = dict(kaldiio.load_ark(str(out)))
        assert outs["cpu"].keys() == outs["gpu"].keys()
        for u, m in outs["cpu"].items():
            assert np.allclose(m, outs["gpu"][u], atol=1e-3), (opts, u)
        if opts:   # log posteriors minus log priors: not probabilities
            assert max(float(np.abs(np.exp(m).sum(1) - 1).max()) for m in outs["cpu"].values()) > 0.1


def test_dbn_pretraining_on_cuda(tmp_path, toy):
    import json

    from pynnet.bin.nnet import rbm_main, train_main
    from pynnet.nnet.rbm import load_dbn

    data, ali = toy
    mse = {}
    for name, dev in (("cpu", "cpu"), ("gpu", GPU)):
        out = tmp_path / f"dbn_{name}"
        assert rbm_main(["--device", dev, "--nn-depth", "2", "--hid-dim", "32", "--rbm-iter", "2", "--splice", "2",
                         "--buffer-frames", "500", data, str(out)]) == 0
        rep = json.load(open(out / "log" / "rbm.json"))
        mse[name] = [e for layer in ("1", "2") for e in rep[layer]["reconstruction_mse"]]
    # the hidden-unit samples come from another generator on the GPU: close, not equal
    assert np.allclose(mse["gpu"], mse["cpu"], rtol=0.1), mse
    dbn = load_dbn(str(tmp_path / "dbn_gpu" / "final.dbn"))
    assert all(x["W"].device.type == "cpu" for x in dbn["layers"])
    assert train_main(["--device", GPU, "--max-epochs", "1", "--buffer-frames", "400", "--dbn",
                       str(tmp_path / "dbn_gpu" / "final.dbn"), data, ali, str(tmp_path / "dnn")]) == 0


class _Killed(Exception):
    pass


def _killed_after(n):
    from pynnet.nnet.train import Synchronizer

    class KillAfter(Synchronizer):
        def after_update(self, step, model, optimizer):
            if step == n:
                raise _Killed
    return KillAfter()


def _final_weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


@pytest.mark.parametrize("opt_name,momentum", [("ngsgd", 0.0), ("sgd", 0.5)])
def test_resume_on_the_gpu_is_exact(tmp_path, toy, opt_name, momentum):
    """Killed mid-epoch on the GPU, resumed there from checkpoint.pt (the optimizer state, NG-SGD
    preconditioners or momentum, moved back onto the device): the same final model as without the
    interruption."""
    from pynnet.nnet.train import TrainConfig, build_and_train

    data, ali = toy
    cfg = TrainConfig(optimizer=opt_name, momentum=momentum, max_epochs=2, minibatch_size=64,
                      buffer_frames=400, checkpoint_every=4, device=GPU)
    kw = dict(hidden_dims=[32, 32], context=2, apply_cmvn=True, progress=False)
    st = build_and_train(data, ali, str(tmp_path / "ref"), cfg, **kw)
    stop = st["step"] // 2 + (st["step"] // 2 % 4 == 0)
    with pytest.raises(_Killed):
        build_and_train(data, ali, str(tmp_path / "run"), cfg, sync=_killed_after(stop), **kw)
    st2 = build_and_train(data, ali, str(tmp_path / "run"), cfg, **kw)
    assert st2["step"] == st["step"]
    a, b = _final_weights(tmp_path / "ref" / "final.nnet"), _final_weights(tmp_path / "run" / "final.nnet")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_cpu_checkpoint_resumed_on_the_gpu(tmp_path, toy, capsys):
    """A run started on the CPU goes on on the GPU (with a warning: not bit-identical) and ends
    close to the CPU-only run."""
    from pynnet.nnet.train import TrainConfig, build_and_train

    data, ali = toy
    kw = dict(hidden_dims=[32, 32], context=2, apply_cmvn=True, progress=False)
    base = dict(optimizer="ngsgd", max_epochs=3, minibatch_size=64, buffer_frames=400, checkpoint_every=4)
    ref = build_and_train(data, ali, str(tmp_path / "ref"), TrainConfig(**base), **kw)
    with pytest.raises(_Killed):
        build_and_train(data, ali, str(tmp_path / "run"), TrainConfig(**base), sync=_killed_after(ref["step"] // 2), **kw)
    capsys.readouterr()
    st = build_and_train(data, ali, str(tmp_path / "run"), TrainConfig(**base, device=GPU), **kw)
    err = capsys.readouterr().err
    assert "resuming from" in err
    if GPU != "cpu":
        assert "was written on cpu, resuming on cuda (" in err and "not bit-identical" in err
    cv = [[h["cv_loss"] for h in s["history"]] for s in (ref, st)]
    assert np.allclose(cv[0], cv[1], rtol=2e-2), cv
