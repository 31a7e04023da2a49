"""egs/synth/run.sh refuses bad options before it does anything (each case also passes
--stage 99 --stop-stage 0, so that a regression runs no stage)."""
import os
import subprocess

import pytest

RUN = os.path.join(os.path.dirname(__file__), "..", "egs", "synth", "run.sh")
SAFE = ["--stage", "99", "--stop-stage", "0"]


@pytest.mark.parametrize("args,msg", [
    ([*SAFE, "extra"], "unexpected argument(s): extra"),
    ([*SAFE, "exp", "--nj", "4"], "unexpected argument(s): exp --nj 4"),
    (["--stop-stage", "0", "--stage", "abc"], "--stage must be an integer, not 'abc'"),
    ([*SAFE, "--nj", "0"], "--nj must be positive"),
    ([*SAFE, "--nj", "2x"], "--nj must be an integer, not '2x'"),
    ([*SAFE, "--rbm-iter", ""], "--rbm-iter must be an integer, not ''"),
    ([*SAFE, "--dnn-minibatch", "0"], "--dnn-minibatch must be positive"),
    ([*SAFE, "--dnn-minibatch", "128k"], "--dnn-minibatch must be an integer, not '128k'"),
    ([*SAFE, "--train-hours", "one"], "--train-hours must be a number of hours, not 'one'"),
])
def test_bad_options_are_refused(args, msg):
    r = subprocess.run(["bash", RUN, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert msg in r.stderr, r.stderr
    assert "stage 0" not in r.stdout + r.stderr and "install" not in r.stdout
