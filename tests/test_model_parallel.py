"""Model parallelism for real (``mpiexec -n 2`` and ``-n 4`` ranks on a toy corpus): the layers split
M ways give the single process's model within float rounding; data x model (2 x 2) gives the
2-worker data-parallel model; kill -9 + rerun resumes exactly; bad options are one-line errors."""
import subprocess

import pytest
import torch

from pynnet.parallel.model_parallel import group_layout, gather_slices, reduce_scatter_slices
from pynnet.parallel.sync import column_stripes
from tests.test_parallel import MPIRUN, ROOT, SMALL, TRAIN, _env, _final, _run, _same_weights, kill_job_mid_epoch
from tests.test_parallel import corpus  # noqa: F401 - the toy corpus fixture


def _cmd(exp, data, ali, *opts, k=1, m=1):
    cmd = [TRAIN, *SMALL, *opts, data, ali, str(exp)]
    if k == 1:
        return cmd
    # (the launcher sets up torch.distributed's rendezvous when the ranks use it)
    backend = list(opts[opts.index("--comm-backend"):][:2]) if "--comm-backend" in opts else []
    return [MPIRUN, "--num-workers", str(k), *backend, "--log-dir", str(exp / "log"), "--", TRAIN,
            "--num-workers", str(k), "--model-parallel", str(m), *cmd[1:]]


def _max_diff(a, b):
    return max(float((a["state_dict"][k] - b["state_dict"][k]).abs().max()) for k in a["state_dict"])


@pytest.mark.parametrize("opts", [(), ("--optimizer", "sgd", "--momentum", "0.5")], ids=["ngsgd", "sgd-momentum"])
def test_split_layers_train_the_single_process_model(corpus, opts):
    root, data, ali = corpus
    name = opts[1] if opts else "ngsgd"
    one, two = root / f"one_{name}", root / f"mp2_{name}"
    for exp, k in ((one, 1), (two, 2)):
        r = _run(_cmd(exp, data, ali, "--max-epochs", "2", *opts, k=k, m=k))
        assert r.returncode == 0, r.stderr
    a, b = _final(one), _final(two)
    # the same mathematics; only the summation order of dL/dx (two partial sums) differs
    assert _max_diff(a, b) < 1e-5
    assert [h["accepted"] for h in a["history"][1:]] == [h["accepted"] for h in b["history"][1:]]
    for x, y in zip(a["history"], b["history"]):
        assert abs(x["cv_loss"] - y["cv_loss"]) < 1e-5
    ck = torch.load(two / "checkpoint.pt", weights_only=False)
    # rank 0 wrote the whole model and each rank's optimizer state: its slices (48 = 24 + 24 hidden
    # units, 12 pdfs = 6 + 6)
    assert ck["model"]["layers.0.wb"].shape == (48, 67) and len(ck["ranks"]) == 2
    assert r.stderr.count("initial CV:") == 1
    if not opts:
        # NG-SGD preconditions the whole output derivative on both ranks: the same estimate
        p0, p1 = (ck["ranks"][j]["opt"]["pre_out"][0] for j in (0, 1))
        assert p0["R"].shape[1] == 48 and torch.equal(p0["R"], p1["R"])
    else:
        v0, v1 = (ck["ranks"][j]["opt"]["velocity"] for j in (0, 1))
        assert [v.shape[0] for v in v0] == [24, 24, 6] and [v.shape[0] for v in v1] == [24, 24, 6]


@pytest.mark.parametrize("backend", ["mpi", "torch"])
def test_data_times_model_trains_the_data_parallel_model(corpus, backend):
    """2 groups x 2 slices, averaging: the 2-worker data-parallel model (each group on the shard
    the data-parallel rank of its number trains), through either communicator backend."""
    root, data, ali = corpus
    dp, hy = root / f"dp2_{backend}", root / f"hybrid_{backend}"
    extra = ("--comm-backend", backend)
    r = _run(_cmd(dp, data, ali, "--max-epochs", "2", *extra, k=2))
    assert r.returncode == 0, r.stderr
    r = _run(_cmd(hy, data, ali, "--max-epochs", "2", *extra, k=4, m=2), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(data shard 0 of 2)" in r.stderr
    assert _max_diff(_final(dp), _final(hy)) < 1e-5
    ck = torch.load(hy / "checkpoint.pt", weights_only=False)
    assert len(ck["ranks"]) == 4 and ck["cfg"]["model_parallel"] == 2


def test_model_parallel_kill9_then_rerun_resumes_exactly(corpus):
    root, data, ali = corpus
    ref, exp = root / "mp_kill_ref", root / "mp_kill_run"
    opts = ("--max-epochs", "3", "--optimizer", "sgd", "--momentum", "0.5")
    r = _run(_cmd(ref, data, ali, *opts, k=2, m=2))
    assert r.returncode == 0, r.stderr
    kill_job_mid_epoch(exp, _cmd(exp, data, ali, *opts, k=2, m=2))
    r = _run(_cmd(exp, data, ali, *opts, k=2, m=2))
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stderr
    a, b = _final(ref), _final(exp)
    assert _same_weights(a, b)
    assert [h["cv_loss"] for h in a["history"]] == [h["cv_loss"] for h in b["history"]]


def test_bad_model_parallel_options(corpus, tmp_path):
    root, data, ali = corpus
    for opts, msg in ((("--num-workers", "2", "--model-parallel", "3"), "--model-parallel 3 must divide --num-workers 2"),
                      (("--num-workers", "2", "--model-parallel", "0"), "--model-parallel must be positive"),
                      (("--num-workers", "2", "--model-parallel", "2", "--optimizer", "adagrad"),
                       "--model-parallel trains with --optimizer ngsgd or sgd"),
                      (("--num-workers", "2", "--model-parallel", "2", "--activation", "pnorm"),
                       "splits sigmoid or ReLU layers, not pnorm")):
        r = _run([TRAIN, *opts, data, ali, tmp_path / "e"])
        assert r.returncode == 1 and r.stderr.count("ERROR") == 1 and msg in r.stderr, r.stderr
        assert not (tmp_path / "e").exists()
    # a layer narrower than the group (found by the ranks: one message)
    r = _run(_cmd(tmp_path / "e2", data, ali, "--hid-dim", "1", k=2, m=2), timeout=60)
    assert r.returncode != 0
    assert "a layer of 1 units cannot be split 2 ways" in r.stderr
    r = subprocess.run(["steps/nnet/train.sh", "--num-workers", "2", "--model-parallel", "4", data, str(tmp_path),
                        ali, str(tmp_path / "e3")], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--model-parallel 4 must divide --num-workers 2" in r.stderr


def test_group_layout_and_slices_without_mpi():
    mp, dp = group_layout(8, 2)   # Seide's 4 x 2
    assert mp == [[0, 1], [2, 3], [4, 5], [6, 7]] and dp == [[0, 2, 4, 6], [1, 3, 5, 7]]
    with pytest.raises(Exception, match="must divide"):
        group_layout(6, 4)

    class Loop:   # a communicator of 3 ranks simulated in one process (each call: one rank's view)
        size = 3

        def __init__(self, parts):
            self.parts, self.rank = parts, 0

        def allgather(self, t, what):
            return torch.stack([p(t) for p in self.parts])

        def alltoall(self, t, what):
            return torch.stack([p(t)[self.rank] for p in self.parts])

    bounds = column_stripes(7, 3)    # 3 + 2 + 2 columns
    x = torch.randn(5, 7)
    views = [lambda t, a=a, b=b: torch.nn.functional.pad(x[:, a:b], (0, 3 - (b - a))) for a, b in bounds]
    assert torch.equal(gather_slices(x[:, :3], Loop(views), bounds, "test"), x)
    partials = [torch.randn(5, 7) for _ in range(3)]
    for r, (a, b) in enumerate(bounds):
        comm = Loop([lambda t, p=p: torch.stack([torch.nn.functional.pad(p[:, c:d], (0, 3 - (d - c)))
                                                 for c, d in bounds]) for p in partials])
        comm.rank = r
        got = reduce_scatter_slices(partials[0], comm, bounds, "test")
        assert torch.allclose(got, sum(partials)[:, a:b], atol=1e-6)


def test_average_every_auto_chooses_logs_and_keeps_the_period(corpus, tmp_path):
    """--average-every auto: the period from the calibration (the model's prediction for this
    shape, minibatch and K), logged, kept in the checkpoint; a job killed and rerun keeps it
    whatever the file says then."""
    import json

    from pynnet.parallel.perfmodel import ModelShape, auto_average_every, load_calibration

    root, data, ali = corpus
    cal = tmp_path / "hw.json"
    r = _run([TRAIN.replace("pynnet-nnet-train", "pynnet-parallel-model"), "--calibrate", "--quick",
              "--out", cal], timeout=120)
    assert r.returncode == 0, r.stderr
    shape = ModelShape(66, (48, 48), 12)
    want, share = auto_average_every(load_calibration(str(cal)), shape, 64, 2, 0.5)
    opts = ("--average-every", "auto", "--calibration", str(cal), "--comm-share", "0.5", "--minibatch-size", "64")
    one = root / "avg_auto_1"
    r = _run(_cmd(one, data, ali, "--max-epochs", "1", *opts, k=2))
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if "--average-every auto:" in x)
    assert f"every {want} minibatches" in line and "target 50.0%" in line and str(cal) in line
    ck = torch.load(one / "checkpoint.pt", weights_only=False)
    assert [p["sync"]["every"] for p in ck["ranks"]] == [want, want] and ck["cfg"]["average_every"] == 0
    # killed and rerun after the file changed (another machine's figures: a longer period): the
    # period the run started with
    exp = root / "avg_auto_2"
    kill_job_mid_epoch(exp, _cmd(exp, data, ali, "--max-epochs", "2", *opts, k=2))
    doc = json.loads(cal.read_text())
    doc["link_bw"], doc["latency"] = doc["link_bw"] / 1000, doc["latency"] * 10
    cal.write_text(json.dumps(doc))
    assert auto_average_every(load_calibration(str(cal)), shape, 64, 2, 0.5)[0] > want
    r = _run(_cmd(exp, data, ali, "--max-epochs", "2", *opts, k=2))
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stderr and "--average-every auto:" not in r.stderr
    ck = torch.load(exp / "checkpoint.pt", weights_only=False)
    assert [p["sync"]["every"] for p in ck["ranks"]] == [want, want]
    # bad input: no calibration; an unreadable one
    for extra, msg in (((), "--average-every auto needs --calibration FILE"),
                       (("--calibration", str(tmp_path / "none.json")), "none.json")):
        r = _run([TRAIN, "--num-workers", "2", "--average-every", "auto", *extra, data, ali, tmp_path / "e"])
        assert r.returncode == 1 and r.stderr.count("ERROR") == 1 and msg in r.stderr, r.stderr
    r = _run([TRAIN, "--num-workers", "2", "--average-every", "often", data, ali, tmp_path / "e"])
    assert r.returncode == 1 and "--average-every: expected an integer or auto, got 'often'" in r.stderr
