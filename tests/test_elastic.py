"""Elastic model averaging (--elastic true, pynnet.parallel.elastic) for real: 3 ranks under
``pynnet-mpirun --elastic``, one of them SIGKILLed mid-epoch; the others drop it and finish."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from pynnet.nnet.toy import make_toy_corpus

VENV_BIN = os.path.dirname(sys.executable)
TRAIN = os.path.join(VENV_BIN, "pynnet-nnet-train")
MPIRUN = os.path.join(VENV_BIN, "pynnet-mpirun")
# the exponential schedule: its annealing brings runs with other data orders to nearly the same CV
# loss (three seeds undisturbed: 0.1655-0.1687), which newbob's early stop on this toy does not
# (seeds 3-7% apart), so that the 2% of the issue measures the loss of a rank, not the seed
OPTS = ["--nn-depth", "2", "--hid-dim", "128", "--minibatch-size", "32", "--buffer-frames", "400",
        "--checkpoint-every", "4", "--average-every", "2", "--schedule", "exponential", "--num-epochs", "6",
        "--num-epochs-extra", "1", "--final-learn-rate", "0.0008", "--cv-percent", "25", "--comm-timeout", "5"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("elastic")
    data, ali = make_toy_corpus(str(root), num_utts=300, drop_ali=2, feat_dim=4)
    return root, data, ali


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}


def _cmd(exp, data, ali, *opts, k=3):
    return [MPIRUN, "--num-workers", str(k), "--elastic", "true", "--log-dir", str(exp / "log"), "--",
            TRAIN, "--num-workers", str(k), "--elastic", "true", *OPTS, *opts, data, ali, str(exp)]


def _final(exp):
    return torch.load(exp / "final.nnet", map_location="cpu", weights_only=False)


@pytest.fixture(scope="module")
def undisturbed(corpus):
    root, data, ali = corpus
    exp = root / "exp_ref"
    r = subprocess.run(_cmd(exp, data, ali), env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return _final(exp)


def _kill_rank_mid_epoch(exp, cmd, rank, sig=signal.SIGKILL):
    """Run ``cmd``; send ``sig`` to job rank ``rank`` alone once a checkpoint inside epoch 2 is
    there. Returns (exit status, output, seconds from the signal to the survivors' warning)."""
    p = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    lines, killed_at, noticed_at = [], None, None
    import threading

    def read():
        nonlocal noticed_at
        for line in p.stdout:
            lines.append(line)
            if killed_at and noticed_at is None and "WARNING: lost rank(s)" in line:
                noticed_at = time.time()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.time() + 180
    while time.time() < deadline and p.poll() is None and killed_at is None:
        try:
            st = torch.load(exp / "checkpoint.pt", weights_only=False)["ranks"][0]["state"]
            if st["epoch"] == 2 and st.get("epoch_step", 0) > 0:
                _, pid = (exp / "log" / "ranks" / str(rank)).read_text().split()
                os.kill(int(pid), sig)
                killed_at = time.time()
        except Exception:  # noqa: BLE001 - not there yet, or being replaced
            pass
        time.sleep(0.02)
    try:
        rc = p.wait(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    t.join(10)
    assert killed_at is not None, "could not kill the rank mid-epoch:\n" + "".join(lines)
    return rc, "".join(lines), (noticed_at - killed_at) if noticed_at else None


@pytest.mark.parametrize("rank", [1, 0], ids=["rank1", "rank0-the-writer"])
def test_a_killed_rank_is_dropped_and_the_job_completes(corpus, undisturbed, rank):
    root, data, ali = corpus
    exp = root / f"exp_kill{rank}"
    rc, out, noticed = _kill_rank_mid_epoch(exp, _cmd(exp, data, ali), rank)
    assert rc == 0, out
    assert noticed is not None and noticed < 60, out
    assert f"WARNING: lost rank(s) {rank} in " in out and "going on with job ranks" in out
    assert f"the job completed without rank(s) {rank}" in out
    final = _final(exp)
    # the final model and the logs say which rank was lost when
    lost = final["lost_ranks"]
    assert len(lost) == 1 and lost[0]["ranks"] == [rank] and lost[0]["epoch"] == 2
    assert lost[0]["members"] == [r for r in range(3) if r != rank]
    hist = final["history"]
    assert [h["epoch"] for h in hist] == list(range(8))
    assert hist[2]["lost_ranks"][0]["ranks"] == [rank]
    assert json.loads((exp / "log" / "lost_ranks.json").read_text())[0]["ranks"] == [rank]
    assert json.loads((exp / "log" / "train.json").read_text())[2]["lost_ranks"][0]["ranks"] == [rank]
    # the survivors wrote the last checkpoints (2 ranks), and re-sharded epoch 3 over themselves
    ck = torch.load(exp / "checkpoint.pt", weights_only=False)
    assert ck["members"] == lost[0]["members"] and len(ck["ranks"]) == 2
    assert [e["state"]["shard"] for e in ck["ranks"]] == [[0, 2], [1, 2]]
    # the CV loss (over the whole CV set) within 2% of the undisturbed run's
    ref = undisturbed["history"][-1]["cv_loss"]
    assert abs(hist[-1]["cv_loss"] - ref) <= 0.02 * ref, (hist[-1]["cv_loss"], ref)
    assert "lost_ranks" not in undisturbed


@pytest.mark.slow
def test_a_hung_rank_is_dropped_and_killed_at_the_end(corpus):
    """SIGSTOP: the others time out (--comm-timeout 5), wait 10 s for it to answer, drop it; the
    launcher kills it once the job has completed."""
    root, data, ali = corpus
    exp = root / "exp_hang"
    rc, out, noticed = _kill_rank_mid_epoch(exp, _cmd(exp, data, ali), 2, signal.SIGSTOP)
    assert rc == 0, out
    assert noticed is not None and noticed < 60, out
    assert "WARNING: lost rank(s) 2 in " in out
    assert "rank 2 (pid" in out and "was dropped from the job and is still running: killed" in out
    assert _final(exp)["lost_ranks"][0]["ranks"] == [2]


def test_elastic_rerun_of_a_finished_job_says_so(corpus, undisturbed):
    root, data, ali = corpus
    exp = root / "exp_kill1"
    if not (exp / "final.nnet").exists():
        pytest.skip("needs the killed run above")
    r = subprocess.run(_cmd(exp, data, ali), env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "training already finished" in r.stderr


@pytest.mark.parametrize("opts, msg", [
    (("--sync", "allreduce"), "--elastic works with --sync average or average-1bit, not allreduce"),
    (("--comm-backend", "mpi"), "--elastic runs over torch.distributed"),
    (("--model-parallel", "3"), "--elastic does not combine with --model-parallel"),
])
def test_bad_elastic_options_are_one_line(corpus, opts, msg):
    root, data, ali = corpus
    r = subprocess.run([TRAIN, "--num-workers", "3", "--elastic", "true", *OPTS, *opts, data, ali,
                        str(root / "exp_bad")], env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and msg in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_elastic_rank_without_the_launchers_store_is_one_line(corpus):
    root, data, ali = corpus
    env = {**_env(), "PMI_RANK": "0", "PMI_SIZE": "2"}
    r = subprocess.run([TRAIN, "--num-workers", "2", "--elastic", "true", *OPTS, data, ali, str(root / "exp_nostore")],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--elastic needs the store of pynnet-mpirun --elastic" in r.stderr
