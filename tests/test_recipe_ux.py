"""What a new user meets in the DNN recipe scripts (issue 17): DBN pretraining shows a progress bar
on the terminal and estimates its time; DNN training prints its last lines once and says where its
JSON log and curve are; the DNN decode prints its real-time factor and writes it to <decode-dir>/rtf."""
from __future__ import annotations

import os
import pty
import re
import subprocess

import kaldiio
import pytest

from pynnet.nnet.toy import make_toy_corpus, make_toy_graph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _sh(*argv, timeout=300):
    return subprocess.run(list(argv), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def _on_a_terminal(*argv, timeout=300) -> tuple[int, str]:
    """Run a script with a pseudo-terminal as its controlling terminal, stdout and stderr: what
    the user sees there (and its exit status)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader on the pty
        os.chdir(ROOT)
        os.execvpe(argv[0], list(argv), ENV)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("ux")
    data, ali = make_toy_corpus(str(root), num_utts=24, num_words=8, frames=(30, 60))
    test, _ = make_toy_corpus(str(root), num_utts=8, num_words=8, frames=(30, 60), utt_seed=99, name="test")
    make_toy_graph(str(root / "graph"), 8)
    (root / "lang").mkdir()
    return root, data, ali, test


def test_pretraining_bar_on_the_terminal_and_time_estimate(toy):
    root, data, _, _ = toy
    dbn = root / "dbn"
    rc, seen = _on_a_terminal("steps/nnet/pretrain_dbn.sh", "--nn-depth", "2", "--hid-dim", "16", "--splice", "1",
                              str(data), str(dbn))
    assert rc == 0, seen
    # one bar per RBM over all of its epochs (the Gaussian one: 2), frames with an ETA
    assert re.search(r"RBM 1/2 \(Gaussian-Bernoulli 18x16\): 100%\|[^|]*\| [0-9.]+k?/[0-9.]+k? \[[0-9:]+<[0-9:]+, "
                     r"[0-9.]+k?fr/s, epoch 2/2\]", seen), seen
    assert "RBM 2/2 (Bernoulli-Bernoulli 16x16): 100%" in seen
    assert re.search(r"RBM 1/2 epoch 1 took [0-9.]+ s: the pretraining of 2 RBMs should take about [0-9.]+ s "
                     r"\(about [0-9.]+ s more\)", seen), seen
    assert re.search(r"RBM 1/2 done after [0-9.]+ s of pretraining: about [0-9.]+ s more for RBM 2\r?\n", seen), seen
    assert f"steps/nnet/pretrain_dbn.sh: reconstruction errors per RBM and epoch: {dbn}/log/rbm.json" in seen
    # the log keeps the messages, the estimates among them, and no bar
    log = (dbn / "log" / "pretrain.log").read_text()
    assert "\r" not in log and "%|" not in log
    assert "the pretraining of 2 RBMs should take about" in log and "RBM 1/2 done after" in log
    assert (dbn / "final.dbn").exists()


def test_dnn_training_ends_once_with_its_curve_and_decode_gives_the_rtf(toy):
    root, data, ali, test = toy
    exp = root / "dnn"
    r = _sh("steps/nnet/train.sh", "--hid-dim", "32", "--nn-depth", "1", "--max-epochs", "2",
            data, str(root / "lang"), ali, str(exp))
    assert r.returncode == 0, r.stdout + r.stderr
    seen = r.stdout + r.stderr   # what the user saw: the program's lines once (stderr, through tee)
    final_line = [ln for ln in seen.splitlines() if "final.nnet: CV loss" in ln]
    assert len(final_line) == 1, seen
    assert len([ln for ln in seen.splitlines() if ln.startswith("finished")]) <= 1
    assert r.stdout.splitlines()[-2:] == [
        f"steps/nnet/train.sh: done: {exp}/final.nnet",
        f"steps/nnet/train.sh: per-epoch losses and frame accuracies: {exp}/log/train.json, "
        f"plotted in {exp}/train_curve.png"]
    assert (exp / "log/train.json").exists() and (exp / "train_curve.png").read_bytes()[:4] == b"\x89PNG"
    # with --cmd the program's lines went to the log alone: the last of them are shown, once
    r = _sh("steps/nnet/train.sh", "--cmd", "utils/run.pl", "--hid-dim", "8", "--nn-depth", "1",
            "--max-epochs", "1", data, str(root / "lang"), ali, str(root / "dnn_cmd"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert len([ln for ln in r.stdout.splitlines() if "final.nnet: CV loss" in ln]) == 1, r.stdout
    assert "final.nnet: CV loss" not in r.stderr

    dec = exp / "decode_test"
    r = _sh("steps/nnet/decode.sh", "--nj", "2", "--scoring-opts", "--min-lmwt 1 --max-lmwt 4",
            str(root / "graph"), test, str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    frames = sum(m.shape[0] for _, m in kaldiio.load_scp_sequential(f"{test}/feats.scp"))
    lines = [ln for ln in r.stdout.splitlines() if "real-time factor" in ln]
    assert len(lines) == 1, r.stdout
    m = re.fullmatch(r"steps/nnet/decode\.sh: real-time factor ([0-9.]+) \(([0-9.]+) s of audio decoded in "
                     r"([0-9.]+) s, 2 jobs\)", lines[0])
    assert m, lines[0]
    assert float(m.group(2)) == pytest.approx(frames * 0.01, abs=0.06)   # 100 frames a second
    assert float(m.group(1)) == pytest.approx(float(m.group(3)) / float(m.group(2)), rel=0.2, abs=0.01)
    rtf = (dec / "rtf").read_text().splitlines()
    assert rtf[0] == lines[0] and rtf[1].startswith("CPU real-time factor ")
    # a decode dir's frame_shift says how long a frame is
    (root / "test30").mkdir()
    for f in os.listdir(test):
        if os.path.isfile(os.path.join(test, f)):
            os.symlink(os.path.join(test, f), root / "test30" / f)
    (root / "test30" / "frame_shift").write_text("0.03\n")
    r = _sh("steps/nnet/decode.sh", "--nj", "1", "--skip-scoring", "true", str(root / "graph"),
            str(root / "test30"), str(exp / "decode_test30"))
    assert r.returncode == 0, r.stdout + r.stderr
    got = (exp / "decode_test30" / "rtf").read_text().splitlines()[0]
    assert f"({frames * 0.03:.1f} s of audio decoded in " in got and got.endswith(", 1 job)"), got
