"""The --device cuda path (skipped where CUDA is absent; run it on a GPU machine with
tools/gpu_check.sh): training steps with each optimizer, the NG-SGD preconditioner, a whole
training run and the forward program agree with the CPU."""
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pynnet.nnet.model import Dnn
from pynnet.nnet.ngsgd import OnlineNaturalGradient
from pynnet.nnet.optim import make_optimizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(autouse=True)
def _exact_fp32():
    # the CPU reference is plain fp32: no TF32 on the GPU side
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _steps(model, opt_name, x, y, fused, steps=6, lr=1e-3):
    opt = make_optimizer(opt_name, model)
    if fused and opt.fusable:
        opt.fused_lr = lr
    for i in range(steps):
        j = (i % 3) * 64
        loss = F.cross_entropy(model(x[j:j + 64]), y[j:j + 64], reduction="sum")
        loss.backward()
        opt.step(lr)
    opt.detach()
    return float(loss.detach())


@pytest.mark.parametrize("opt_name,fused", [("sgd", True), ("sgd", False), ("ngsgd", True),
                                            ("ngsgd", False), ("adagrad", False)])
@pytest.mark.parametrize("activation", ["sigmoid", "relu", "pnorm"])
def test_training_steps_match_cpu(opt_name, fused, activation):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(192, 7 * 11, generator=g)
    y = torch.randint(0, 30, (192,), generator=g)
    cpu = Dnn(7, [64, 64], 30, activation, context=5, pnorm_group=4)
    cpu.init_random(1)
    gpu = copy.deepcopy(cpu).to("cuda")
    assert gpu.affines[0].wb.is_cuda
    loss_cpu = _steps(cpu, opt_name, x, y, fused)
    loss_gpu = _steps(gpu, opt_name, x.cuda(), y.cuda(), fused)
    assert loss_gpu == pytest.approx(loss_cpu, rel=1e-3)
    for (k, a), b in zip(cpu.state_dict().items(), gpu.state_dict().values()):
        assert torch.allclose(a, b.cpu(), rtol=1e-3, atol=1e-4), k


def test_preconditioner_matches_cpu():
    g = torch.Generator().manual_seed(2)
    p_cpu, p_gpu = OnlineNaturalGradient(20, seed=5), OnlineNaturalGradient(20, seed=5)
    for _ in range(14):   # past the initial updates, through a refresh
        M = torch.randn(128, 300, generator=g)
        P1, g1, r1 = p_cpu.precondition(M)
        P2, g2, r2 = p_gpu.precondition(M.cuda())
        assert P2.is_cuda and g2 == pytest.approx(g1, rel=1e-4)
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
    for dev in ("cpu", "cuda"):
        cfg = TrainConfig(optimizer="ngsgd", max_epochs=3, buffer_frames=400, device=dev)
        st = build_and_train(data, ali, str(tmp_path / dev), cfg, hidden_dims=[48, 48], context=2,
                             apply_cmvn=True, progress=False)
        runs[dev] = st["history"]
    cv = {d: [h["cv_loss"] for h in hist] for d, hist in runs.items()}
    assert cv["cuda"][-1] < 0.7 * cv["cuda"][0]
    assert np.allclose(cv["cuda"], cv["cpu"], rtol=2e-2), cv
    # the model trained on the GPU loads on the CPU; the forward program on cuda matches cpu
    model = load_model(str(tmp_path / "cuda" / "final.nnet"))
    assert not model.affines[0].wb.is_cuda
    outs = {}
    for dev in ("cpu", "cuda"):
        out = tmp_path / f"{dev}.ark"
        assert forward_main(["--device", dev, "--utt2spk", f"{data}/utt2spk", "--cmvn-scp", f"{data}/cmvn.scp",
                             str(tmp_path / "cuda" / "final.nnet"), f"scp:{data}/feats.scp", f"ark:{out}"]) == 0
        outs[dev] = dict(kaldiio.load_ark(str(out)))
    for u, m in outs["cpu"].items():
        assert np.allclose(m, outs["cuda"][u], atol=1e-3), u


def test_dbn_pretraining_on_cuda(tmp_path, toy):
    import json

    from pynnet.bin.nnet import rbm_main, train_main
    from pynnet.nnet.rbm import load_dbn

    data, ali = toy
    mse = {}
    for dev in ("cpu", "cuda"):
        out = tmp_path / f"dbn_{dev}"
        assert rbm_main(["--device", dev, "--nn-depth", "2", "--hid-dim", "32", "--rbm-iter", "2", "--splice", "2",
                         "--buffer-frames", "500", data, str(out)]) == 0
        rep = json.load(open(out / "log" / "rbm.json"))
        mse[dev] = [e for layer in ("1", "2") for e in rep[layer]["reconstruction_mse"]]
    # the hidden-unit samples come from another generator on the GPU: close, not equal
    assert np.allclose(mse["cuda"], mse["cpu"], rtol=0.1), mse
    dbn = load_dbn(str(tmp_path / "dbn_cuda" / "final.dbn"))
    assert all(not x["W"].is_cuda for x in dbn["layers"])
    assert train_main(["--device", "cuda", "--max-epochs", "1", "--buffer-frames", "400", "--dbn",
                       str(tmp_path / "dbn_cuda" / "final.dbn"), data, ali, str(tmp_path / "dnn")]) == 0
