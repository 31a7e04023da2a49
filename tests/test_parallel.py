"""Data-parallel training for real: ``mpiexec -n 2`` ranks on a toy corpus (model averaging, fp32
gradient allreduce, 1-bit averaging; MPI and torch.distributed), kill -9 and exact resume, a rank
that hangs or dies, ranks that disagree, bad input; the sharding and the 1-bit quantizer."""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from pynnet.nnet.toy import make_toy_corpus
from pynnet.parallel.quantize import ErrorFeedbackQuantizer, dequantize, quantize
from pynnet.parallel.sync import rank_seed, shard_utterances

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(sys.executable)
TRAIN = os.path.join(VENV_BIN, "pynnet-nnet-train")
MPIRUN = os.path.join(VENV_BIN, "pynnet-mpirun")
SMALL = ["--nn-depth", "2", "--hid-dim", "48", "--buffer-frames", "400", "--checkpoint-every", "2",
         "--average-every", "2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel")
    data, ali = make_toy_corpus(str(root), num_utts=40, drop_ali=2)
    return root, data, ali


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}


def _train_cmd(exp, data, ali, *opts, k=2):
    cmd = [TRAIN, *SMALL, *opts, data, ali, str(exp)]
    if k == 1:
        return cmd
    return [MPIRUN, "--num-workers", str(k), "--log-dir", str(exp / "log"), "--", *cmd[:1],
            "--num-workers", str(k), *cmd[1:]]


def _run(cmd, timeout=180, **kw):
    return subprocess.run([str(c) for c in cmd], env=_env(), capture_output=True, text=True, timeout=timeout, **kw)


def _final(exp):
    return torch.load(exp / "final.nnet", map_location="cpu", weights_only=False)


def _same_weights(a, b):
    return all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])


ONE_BIT = ("--sync", "1bit", "--optimizer", "adagrad", "--minibatch-size", "128")


@pytest.mark.parametrize("mode", ["average", "allreduce", "average-1bit", "1bit"])
def test_two_workers_train_and_keep_identical_replicas(corpus, mode):
    root, data, ali = corpus
    exp = root / f"exp_{mode}"
    r = _run(_train_cmd(exp, data, ali, "--max-epochs", "3", *(ONE_BIT if mode == "1bit" else ("--sync", mode))))
    assert r.returncode == 0, r.stderr
    hist = _final(exp)["history"]
    assert [h["epoch"] for h in hist] == [0, 1, 2, 3]
    assert hist[-1]["cv_loss"] < 0.7 * hist[0]["cv_loss"] and hist[-1]["cv_acc"] > 0.55
    # one log for the job: rank 0's lines, once; every rank built the same initial model (checked
    # at the start) and ended every epoch with the same replica (checked there)
    assert r.stderr.count("initial CV:") == 1 and "replicas differ" not in r.stderr
    assert "rank 0 of 2:" in r.stderr and "rank 1 of 2" not in r.stderr
    ck = torch.load(exp / "checkpoint.pt", weights_only=False)
    assert len(ck["ranks"]) == 2 and ck["cfg"]["num_workers"] == 2 and ck["cfg"]["sync"] == mode
    s0, s1 = ck["ranks"][0]["state"], ck["ranks"][1]["state"]
    # every rank ran the same number of minibatches; each trained its own shard
    assert s0["step"] == s1["step"] > 0 and s0["epoch_steps_total"] == s1["epoch_steps_total"] > 0
    if mode == "average":
        # the NG-SGD preconditioners stay per rank (each has seen its own data)
        p0, p1 = ck["ranks"][0]["opt"]["pre_in"][0], ck["ranks"][1]["opt"]["pre_in"][0]
        assert not torch.equal(p0["R"], p1["R"])
    if mode == "average-1bit":
        res = ck["ranks"][0]["sync"]["residuals"]
        assert len(res) == 3 and float(res[0].abs().sum()) > 0
    if mode == "1bit":
        # the global minibatch of 128 frames is 64 per rank: the same number of updates as one
        # worker with 128; each rank owns its stripe of columns: the AdaGrad sums and second
        # residuals of its columns (66 + 1 inputs: rank 0 has 34, rank 1 33)
        assert s0["epoch_steps_total"] >= 983 // 64
        st0, st1 = ck["ranks"][0]["sync"], ck["ranks"][1]["sync"]
        assert [t.shape[1] for t in st0["sum_sq"]] == [34, 25, 25] and [t.shape[1] for t in st1["sum_sq"]] == [33, 24, 24]
        assert all(float(t.min()) >= 0 and float(t.sum()) > 0 for t in st0["sum_sq"] + st1["sum_sq"])
        assert len(st0["residuals"]) == 3 and len(st0["residuals"][0]) == 2   # both stripes, every matrix
        assert "1-bit exchange" in r.stderr


@pytest.mark.parametrize("opts", [(), ONE_BIT + ("--double-buffering", "true")], ids=["average", "1bit-db"])
def test_backends_give_the_same_model(corpus, opts):
    """MPI (mpi4py) and torch.distributed (gloo) run the same algorithm: the same bits."""
    root, data, ali = corpus
    name = "db" if opts else "avg"
    a, b = root / f"exp_be_mpi_{name}", root / f"exp_be_torch_{name}"
    r = _run(_train_cmd(a, data, ali, "--max-epochs", "2", *opts))
    assert r.returncode == 0, r.stderr
    cmd = _train_cmd(b, data, ali, "--max-epochs", "2", *opts, "--comm-backend", "torch")
    cmd[1:1] = ["--comm-backend", "torch"]
    r = _run(cmd)
    assert r.returncode == 0, r.stderr
    assert _same_weights(_final(a), _final(b))


AUTO_MB = ("--minibatch-size", "auto", "--auto-minibatch-min", "64", "--auto-minibatch-every-hours", "0.002",
           "--auto-minibatch-trial-hours", "0.001")


@pytest.mark.parametrize("opts", [("--optimizer", "sgd", "--momentum", "0.5"),
                                  ONE_BIT + ("--momentum", "0.5", "--double-buffering", "true") + AUTO_MB],
                         ids=["average-sgd-momentum", "1bit-adagrad-momentum-db-automb"])
def test_kill9_of_the_whole_job_then_rerun_resumes_exactly(corpus, opts):
    """... with the optimizer's state, and 1-bit SGD's residuals, AdaGrad sums and momentum."""
    root, data, ali = corpus
    name = opts[1]
    ref, exp = root / f"exp_k_ref_{name}", root / f"exp_k_run_{name}"
    opts = ("--max-epochs", "3", *opts)
    r = _run(_train_cmd(ref, data, ali, *opts))
    assert r.returncode == 0, r.stderr
    kill_job_mid_epoch(exp, _train_cmd(exp, data, ali, *opts))
    assert not (exp / "final.nnet").exists()
    r = _run(_train_cmd(exp, data, ali, *opts))
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stderr
    a, b = _final(ref), _final(exp)
    assert _same_weights(a, b)
    assert [h["cv_loss"] for h in a["history"]] == [h["cv_loss"] for h in b["history"]]
    if "auto" in opts:
        # the minibatch-size searches (every ~7 updates here) were repeated alike after the resume
        trials = [torch.load(e / "checkpoint.pt", weights_only=False)["ranks"][0]["state"]["minibatch_trials"]
                  for e in (ref, exp)]
        assert trials[0] == trials[1] and len(trials[0]) >= 4
        assert any(t["chosen"] != 64 for t in trials[0]) and all(t["trials"] for t in trials[0])
        assert [h["minibatch"] for h in a["history"][1:]] == [h["minibatch"] for h in b["history"][1:]]


def kill_job_mid_epoch(exp, cmd) -> dict:
    """Start ``cmd`` (a job of 2+ ranks training into ``exp``) and SIGKILL the launcher, mpiexec
    and every rank once a checkpoint inside epoch 2 is there; returns rank 1's state in it."""
    p = subprocess.Popen([str(c) for c in cmd], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    killed = None
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        try:
            st = torch.load(exp / "checkpoint.pt", weights_only=False)["ranks"][1]["state"]
            if st["epoch"] == 2 and st.get("epoch_step", 0) > 0:
                os.killpg(p.pid, signal.SIGKILL)
                killed = st
                break
        except Exception:  # noqa: BLE001 - not there yet, or being replaced
            pass
        time.sleep(0.02)
    p.wait()
    assert killed is not None, "could not kill the job mid-epoch"
    return killed


def _start_and_get_rank_pid(exp, cmd, rank):
    p = subprocess.Popen([str(c) for c in cmd], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    f = exp / "log" / "ranks" / str(rank)
    deadline = time.time() + 60
    while time.time() < deadline and not (exp / "checkpoint.pt").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    host, pid = f.read_text().split()
    return p, int(pid)


@pytest.mark.parametrize("opts", [(), ONE_BIT + ("--double-buffering", "true")], ids=["average", "1bit-db"])
def test_a_hung_rank_ends_the_job_naming_it(corpus, opts):
    """... also when the collectives run in 1-bit SGD's exchange thread."""
    root, data, ali = corpus
    exp = root / ("exp_hang_1bit" if opts else "exp_hang")
    p, pid = _start_and_get_rank_pid(exp, _train_cmd(exp, data, ali, "--max-epochs", "500", "--comm-timeout", "5",
                                                     *opts), 1)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.time()
    try:
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    took = time.time() - t0
    assert p.returncode != 0 and took < 30
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, out
    assert "rank 1 did not reach" in errors[0] and "within 5 s: dead or hung" in errors[0]
    assert f"the last checkpoint is {exp}/checkpoint.pt (epoch" in errors[0] and "rerun the same command" in errors[0]


def test_a_killed_rank_is_named_by_the_launcher(corpus):
    root, data, ali = corpus
    exp = root / "exp_dead"
    p, pid = _start_and_get_rank_pid(exp, _train_cmd(exp, data, ali, "--max-epochs", "500"), 1)
    os.kill(pid, signal.SIGKILL)
    out, _ = p.communicate(timeout=60)
    assert p.returncode != 0
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, out
    assert errors[0].startswith(f"ERROR (pynnet-mpirun): rank 1 (pid {pid} on ")
    assert "died (killed by signal 9 (SIGKILL)); the last checkpoint is" in errors[0]


def test_ranks_that_disagree_are_one_error_not_a_hang(corpus):
    root, data, ali = corpus
    exp = root / "exp_disagree"
    base = [TRAIN, *SMALL, "--num-workers", "2", "--max-epochs", "1"]
    cmd = ["mpiexec", "-n", "1", *base, "--learn-rate", "0.008", data, ali, exp, ":",
           "-n", "1", *base, "--learn-rate", "0.004", data, ali, exp]
    r = _run(cmd, timeout=60)
    assert r.returncode != 0
    errors = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1, r.stderr
    assert "the ranks disagree: rank 1 has options" in errors[0] and "every rank must run the same command" in errors[0]


def test_bad_worker_counts(corpus, tmp_path):
    root, data, ali = corpus
    r = _run([TRAIN, "--num-workers", "0", data, ali, tmp_path / "e0"])
    assert r.returncode == 1 and "--num-workers must be positive" in r.stderr
    r = _run(["mpiexec", "-n", "2", TRAIN, *SMALL, data, ali, tmp_path / "e1"], timeout=60)
    assert r.returncode != 0 and "started as 2 ranks but --num-workers is 1" in r.stderr
    # more workers than CV utterances (2 of a 12-utterance corpus)
    small = tmp_path / "small"
    d, a = make_toy_corpus(str(small), num_utts=12)
    r = _run(_train_cmd(tmp_path / "e2", d, a, "--cv-percent", "10"), timeout=60)
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "2 data-parallel workers but only 1 CV utterances" in errors[0], r.stderr
    r = _run([MPIRUN, "--num-workers", "2", "--mpirun", "no-such-mpiexec -n 2", "--log-dir", tmp_path / "l",
              "--", "true"])
    assert r.returncode == 1 and "no 'no-such-mpiexec' on PATH" in r.stderr
    # 1-bit SGD: its own update rules, a global minibatch split K ways (x 2 halves)
    for opts, msg in ((("--sync", "1bit"), "--sync 1bit updates with AdaGrad (Seide et al.) or SGD on the "
                       "aggregated gradient: use --optimizer adagrad or sgd, not ngsgd"),
                      (ONE_BIT + ("--minibatch-size", "3", "--double-buffering", "true"),
                       "--minibatch-size 3 is the global minibatch of --sync 1bit: it must be at least the 4 parts")):
        r = _run([TRAIN, "--num-workers", "2", *opts, data, ali, tmp_path / "e3"])
        assert r.returncode == 1 and r.stderr.count("ERROR") == 1 and msg in r.stderr, r.stderr
        assert not (tmp_path / "e3").exists()


def test_train_sh_num_workers(corpus, tmp_path):
    """steps/nnet/train.sh --num-workers 2 starts the ranks itself (pynnet-mpirun, mpiexec)."""
    root, data, ali = corpus
    (tmp_path / "lang").mkdir()
    dnn = tmp_path / "dnn"
    r = subprocess.run(["steps/nnet/train.sh", "--num-workers", "2", "--hid-dim", "32", "--nn-depth", "1",
                        "--max-epochs", "1", "--buffer-frames", "400", data, str(tmp_path / "lang"), ali, str(dnn)],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    # (threads per rank: the machine's cores / 2)
    assert re.search(r"on 2 workers \(average, \d+ threads each\)", r.stdout + r.stderr)
    assert (dnn / "final.nnet").exists() and (dnn / "log" / "ranks" / "1").exists()
    r = subprocess.run(["steps/nnet/train.sh", "--num-workers", "x", data, str(tmp_path / "lang"), ali, str(dnn)],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--num-workers must be a positive integer" in r.stderr


# ---------------------------------------------------------------- no MPI needed
def test_shards_are_balanced_whole_utterances():
    rng = np.random.default_rng(0)
    utts = [f"u{i:03d}" for i in range(101)]
    frames = {u: int(rng.integers(50, 800)) for u in utts}
    for k in (2, 3, 8):
        shards = shard_utterances(utts, frames, k)
        assert sorted(sum(shards, [])) == utts                       # every utterance once
        loads = [sum(frames[u] for u in s) for s in shards]
        assert max(loads) - min(loads) <= max(frames.values())       # balanced to one utterance
        assert shards == shard_utterances(list(reversed(utts)), frames, k)   # deterministic
    assert rank_seed(777, 0, 1) == 777 and len({rank_seed(777, r, 4) for r in range(4)}) == 4


def test_1bit_sgd_without_error_feedback_is_worse(corpus):
    """Seide et al.: without carrying the quantization error forward, 1-bit SGD trains badly."""
    root, data, ali = corpus
    loss = {}
    for ef in ("true", "false"):
        exp = root / f"exp_ef_{ef}"
        r = _run(_train_cmd(exp, data, ali, "--max-epochs", "3", *ONE_BIT, "--minibatch-size", "64",
                            "--error-feedback", ef))
        assert r.returncode == 0, r.stderr
        loss[ef] = _final(exp)["history"][-1]["cv_loss"]
    assert loss["false"] > loss["true"] + 0.2, loss


def test_quantizer_round_trip_and_error_feedback():
    g = torch.randn(37, 5)
    bits, recon, deq = quantize(g)
    assert bits.shape == (4 * ((37 * 5 + 31) // 32),) and torch.equal(dequantize(bits, recon, 37), deq)
    assert torch.equal(deq, torch.where(g >= 0, recon[0], recon[1]))   # each value its column's mean
    # per column: the mean of the non-negative and of the negative entries
    col = g[:, 2]
    assert float(recon[0, 2]) == pytest.approx(float(col[col >= 0].mean()))
    assert float(recon[1, 2]) == pytest.approx(float(col[col < 0].mean()))
    # the fast quantizer writes the reference's bits and means, on any strides (a column stripe)
    wide = torch.randn(37, 12)
    wide[:, 5] = 0.0                      # a column of zeros: all non-negative
    wide[:, 6] = -1.0 - torch.rand(37)    # all negative
    q = ErrorFeedbackQuantizer(37, 5, error_feedback=False)
    out = torch.zeros(q.nbytes, dtype=torch.uint8)
    q.encode(wide[:, 3:8], out)
    bits, recon, deq = quantize(wide[:, 3:8].contiguous())
    assert torch.equal(out[:q.nbits], torch.from_numpy(bits))
    assert torch.allclose(q.recon(out), recon, rtol=1e-6, atol=1e-7)
    assert torch.allclose(q.decode(out), deq, rtol=1e-6, atol=1e-6)
    assert float(q.recon(out)[1, 2]) == 0.0 and float(q.recon(out)[0, 3]) == 0.0   # empty halves: 0
    # the GPU's bit packing (torch) writes numpy's bits
    from pynnet.parallel.quantize import _pack_torch, _unpack_torch
    for n in (185, 8, 7, 64):
        mask = torch.rand(n) > 0.5
        mine = torch.zeros((n + 7) // 8, dtype=torch.uint8)
        _pack_torch(mask, mine)
        assert torch.equal(mine, torch.from_numpy(np.packbits(mask.numpy())))
        assert torch.equal(_unpack_torch(mine, n), mask.to(torch.uint8))
    # error feedback: the sum of what was sent tracks the sum of the inputs (the error stays
    # bounded by one residual); without it the error grows with the number of steps
    torch.manual_seed(1)
    gs = [torch.randn(64, 8) * 0.1 + 0.02 * torch.randn(64, 1) for _ in range(200)]
    errs = {}
    for fb in (True, False):
        q = ErrorFeedbackQuantizer(64, 8, error_feedback=fb)
        buf = torch.zeros(q.nbytes, dtype=torch.uint8)
        sent = torch.zeros(64, 8)
        for x in gs:
            q.encode(x, buf)
            q.decode_add(buf, sent)
        errs[fb] = float((sent - sum(gs)).abs().max())
        if fb:
            assert torch.allclose(sent + q.residual, sum(gs), atol=1e-4)
        else:
            assert float(q.residual.abs().max()) == 0.0
    assert errs[True] < 0.2 * errs[False]


_NAN_ON_RANK_1 = """
import os, sys, torch
import torch.nn.functional as F
from pynnet.bin.nnet import train_main
if os.environ.get("PMI_RANK") == "1":
    ce, calls = F.cross_entropy, [0]
    def poisoned(*a, **k):
        out = ce(*a, **k)
        if torch.is_grad_enabled():
            calls[0] += 1
            if calls[0] == 7:
                return out * float("nan")
        return out
    F.cross_entropy = poisoned
sys.exit(train_main(sys.argv[1:]))
"""


@pytest.mark.parametrize("opts", [(), ONE_BIT + ("--double-buffering", "true")], ids=["average", "1bit-db"])
def test_a_nan_on_one_rank_restores_the_same_checkpoint_everywhere(corpus, opts):
    root, data, ali = corpus
    exp = root / ("exp_nan_1bit" if opts else "exp_nan")
    cmd = [MPIRUN, "--num-workers", "2", "--log-dir", exp / "log", "--", sys.executable, "-c", _NAN_ON_RANK_1,
           "--num-workers", "2", *SMALL, "--max-epochs", "2", *opts, data, ali, exp]
    r = _run(cmd)
    assert r.returncode == 0, r.stderr
    warn = [line for line in r.stderr.splitlines() if "non-finite loss on 1 of 2 ranks" in line]
    assert len(warn) == 1 and "restored the last checkpoint" in warn[0] and "halved the learning rate" in warn[0]
    ck = torch.load(exp / "checkpoint.pt", weights_only=False)
    assert [p["state"]["nan_restarts"] for p in ck["ranks"]] == [1, 1]
    assert [p["state"]["step"] for p in ck["ranks"]][0] == ck["ranks"][1]["state"]["step"]
    assert _final(exp)["history"][-1]["cv_acc"] > 0.4


@pytest.mark.parametrize("opts", [(), ONE_BIT + ("--double-buffering", "true")], ids=["average", "1bit-db"])
def test_two_workers_on_the_gpu_match_the_cpu(corpus, opts):
    """--device cuda with the MPI backend (a pip MPI is not CUDA-aware: the buffers go through the
    host): the ranks train on the GPU and end close to the CPU run (GEMMs round differently).
    Run by tools/gpu_check.sh; PYNNET_TEST_GPU_DEVICE=cpu checks the test itself."""
    dev = os.environ.get("PYNNET_TEST_GPU_DEVICE") or ("cuda" if torch.cuda.is_available() else "")
    if not dev:
        pytest.skip("no GPU")
    root, data, ali = corpus
    name = "1bit" if opts else "avg"
    a, b = root / f"exp_gpu_cpu_{name}", root / f"exp_gpu_dev_{name}"
    for exp, d in ((a, "cpu"), (b, dev)):
        r = _run(_train_cmd(exp, data, ali, "--max-epochs", "2", "--device", d, *opts))
        assert r.returncode == 0, r.stderr
    fa, fb = _final(a), _final(b)
    if opts:
        # 1 bit per value: a value near 0 that rounds the other way flips its bit, so the runs
        # part at the bit level; they must still train alike
        la, lb = fa["history"][-1]["cv_loss"], fb["history"][-1]["cv_loss"]
        assert abs(la - lb) < 0.05 * la and lb < 0.8 * fb["history"][0]["cv_loss"], (la, lb)
        return
    for k in fa["state_dict"]:
        assert torch.allclose(fa["state_dict"][k], fb["state_dict"][k], rtol=1e-3, atol=1e-3), k
