"""A full disk and a read-only file system under the outputs of the feature, alignment and
training stages (issue 19, item 4): the run fails with one clear line naming the file and the
cause, leaves no partial output under a final name and no temp file, and the same command,
rerun once space is freed (or the file system is writable again), completes; training resumes
from its last checkpoint.

The outputs go to a small tmpfs mounted under tmp_path (root only: skipped elsewhere, e.g. CI
without privileges); the inputs stay on the ordinary disk. A tmpfs is filled, grown or made
read-only by remounting it, as root's writes ignore file modes."""
from __future__ import annotations

import errno
import os
import subprocess
import sys

import kaldiio
import numpy as np
import pytest

from gmm_corpus import make_corpus, script_env, sh
from pynnet.nnet.toy import make_toy_corpus
from test_feat_failures import _conf, _data_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL, READ_ONLY = "No space left on device", "Read-only file system"


class Tmpfs:
    """A tmpfs mounted at ``path`` for one test."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.filler = os.path.join(path, "filler")

    def remount(self, opts: str) -> None:
        subprocess.run(["mount", "-o", "remount," + opts, self.path], check=True, capture_output=True)

    def fill(self, leave: int = 0) -> None:
        """Take all its free space but ``leave`` bytes (rounded down to pages) with a filler file."""
        st = os.statvfs(self.path)
        todo = st.f_bavail * st.f_frsize - leave
        with open(self.filler, "ab") as f:
            try:
                while todo > 0:
                    todo -= f.write(b"\0" * min(todo, 1 << 16))
                f.flush()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise

    def unfill(self) -> None:
        os.remove(self.filler)

    def files(self, under: str | None = None) -> list[str]:
        """Every file below ``under`` (default: the whole tmpfs) but the filler, relative to it."""
        top = under or self.path
        return sorted(os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top) for f in fs
                      if os.path.join(d, f) != self.filler)


@pytest.fixture
def disk(tmp_path):
    """An empty 1 MiB tmpfs at tmp_path/disk; always unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs (a full or read-only file system) needs root")
    path = tmp_path / "disk"
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (no privileges?): {(r.stderr or r.stdout).strip()}")
    try:
        yield Tmpfs(str(path))
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _one_clear_error(r: subprocess.CompletedProcess, why: str, under: str) -> str:
    """The run failed with exactly one line giving ``why`` and naming a file below ``under``, and
    no traceback. Returns that line."""
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "Traceback" not in out, out
    lines = [ln for ln in r.stderr.splitlines() if why in ln]
    assert len(lines) == 1, r.stderr
    assert under.rstrip("/") + "/" in lines[0], lines[0]
    return lines[0]


def _no_temp_files(top: str) -> None:
    left = [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs
            if f.startswith(".") or f.endswith(".tmp") or ".new." in f]
    assert left == [], left


def _run(cmd: list[str], cwd, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env or script_env(), capture_output=True, text=True,
                          timeout=timeout)


# -- the writers, without root: a file size limit and a refused temp file stand for the disk -------

def _limited(limit_kb: int, *cmd: str) -> subprocess.CompletedProcess:
    """cmd with writes past limit_kb failing (EFBIG, as ENOSPC: the write, not the open, fails)."""
    return subprocess.run(["bash", "-c", f"trap '' XFSZ; ulimit -f {limit_kb}; exec \"$@\"", "-", *cmd],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("utts,shape,fails", [
    (20, (1, 60), "f.ark"),     # the ark's last buffer, flushed as the writer closes
    (200, (1, 1), "f.scp"),     # the scp (the longer file here), while the matrices are written
])
def test_matrix_writer_failed_write_names_its_file_and_removes_both_temps(tmp_path, utts, shape, fails):
    """A write that fails names its own file (a failed flush at the end used to name none and
    leave both temp files), and neither temp file stays."""
    src = tmp_path / "in.ark"
    with kaldiio.WriteHelper(f"ark:{src}") as w:
        for i in range(utts):
            w(f"utt{i:03d}", np.full(shape, i, dtype=np.float32))
    out = tmp_path / "out"
    out.mkdir()
    r = _limited(4, os.path.join(os.path.dirname(sys.executable), "pynnet-copy-feats"), f"ark:{src}",
                 f"ark,scp:{out}/f.ark,{out}/f.scp")
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [f"ERROR (pynnet-copy-feats): File too large: {out}/{fails}"], r.stderr
    assert os.listdir(out) == []


def test_a_refused_temp_file_names_the_target(tmp_path, monkeypatch):
    """A read-only file system refuses the temp file: the error names the file being written."""
    import tempfile

    from pynnet.io.atomic import atomic_path

    def refuse(dir, prefix, suffix):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.path.join(dir, prefix + "abc" + suffix))

    monkeypatch.setattr(tempfile, "mkstemp", lambda dir, prefix, suffix: refuse(dir, prefix, suffix))
    with pytest.raises(OSError) as e:
        with atomic_path(tmp_path / "x.ark"):
            pass
    assert (e.value.errno, e.value.filename) == (errno.EROFS, str(tmp_path / "x.ark"))


def test_torch_save_failing_write_keeps_its_errno(tmp_path):
    """torch's zip writer turns a failed write into a RuntimeError ('unexpected pos'): the model
    writers report the write's own error, naming the file."""
    code = ("import sys, torch; from pynnet.nnet.model import save_atomic; "
            "from pynnet.bin._cli import cli; "
            "sys.exit(cli(lambda argv: save_atomic({'w': torch.zeros(100000)}, sys.argv[1]))(None))")
    r = _limited(64, sys.executable, "-c", code, str(tmp_path / "m.pt"))
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith(f"File too large: {tmp_path}/m.pt"), r.stderr
    assert "Traceback" not in r.stderr and os.listdir(tmp_path) == []


# -- features: steps/make_mfcc.sh (pynnet-compute-mfcc-feats) --------------------------------------

def _feats(data) -> dict[str, np.ndarray]:
    return {u: np.array(m) for u, m in kaldiio.load_scp(str(data / "feats.scp")).items()}


def test_features_disk_full_then_read_only(tmp_path, disk):
    data = tmp_path / "data" / "train"
    utts = _data_dir(data)
    _conf(tmp_path)
    featdir = os.path.join(disk.path, "mfcc")
    cmd = [f"{ROOT}/steps/make_mfcc.sh", "--nj", "2", "data/train", "exp/make_mfcc", featdir]

    # the archives are about 5 KB a job: room for a page of them only
    disk.fill(leave=4096)
    r = _run(cmd, tmp_path)
    line = _one_clear_error(r, FULL, featdir)
    assert "ERROR (pynnet-compute-mfcc-feats)" in line and "make_mfcc_train." in line, line
    assert disk.files() == [] and not (data / "feats.scp").exists()
    _no_temp_files(disk.path)
    _no_temp_files(str(data))
    assert "Traceback" not in "".join(open(tmp_path / "exp/make_mfcc" / f).read()
                                      for f in os.listdir(tmp_path / "exp/make_mfcc") if f.endswith(".log"))

    disk.unfill()
    r = _run(cmd, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    before, scp_before = _feats(data), (data / "feats.scp").read_text()
    assert sorted(before) == sorted(utts)

    # read-only: the previous features stay as they were, feats.scp reads them again
    disk.remount("ro")
    r = _run(cmd, tmp_path)
    line = _one_clear_error(r, READ_ONLY, featdir)
    assert "ERROR (pynnet-compute-mfcc-feats)" in line, line
    assert "is the previous one again" in r.stderr
    assert (data / "feats.scp").read_text() == scp_before
    after = _feats(data)
    assert all(np.array_equal(after[u], before[u]) for u in utts)
    _no_temp_files(str(data))

    disk.remount("rw")
    r = _run(cmd, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(_feats(data)) == sorted(utts)
    _no_temp_files(disk.path)


# -- alignment: steps/align_si.sh (pynnet-gmm-align) ---------------------------------------------

# The job runner the test's align_si.sh runs: the file system fails just as the jobs start (the
# script's own small files are written by then), then utils/run.pl runs them as usual.
FAULTY_RUN_PL = f"""#!/bin/sh
case "$DISK_FAULT" in
  full) cat /dev/zero > "$DISK_FAULT_DIR/filler" 2>/dev/null ;;
  ro) mount -o remount,ro "$DISK_FAULT_DIR" || exit 1 ;;
esac
exec {ROOT}/utils/run.pl "$@"
"""


@pytest.fixture(scope="module")
def gmm_work(tmp_path_factory):
    """A tiny corpus, its lang dir and a briefly trained monophone system exp/mono."""
    d = tmp_path_factory.mktemp("diskfault_gmm")
    make_corpus(str(d), num_spk=2, utts_per_spk=6, seed=5)
    for x in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, x), d / x)
    sh(d, "steps/train_mono.sh", "--nj", "2", "--num-iters", "2", "--totgauss", "40", "--realign-iters", "1",
       "data/train", "lang", "exp/mono")
    runner = d / "faulty_run.pl"
    runner.write_text(FAULTY_RUN_PL)
    runner.chmod(0o755)
    return d


@pytest.mark.parametrize("fault,why", [("full", FULL), ("ro", READ_ONLY)])
def test_alignment_disk_full_or_read_only(gmm_work, disk, tmp_path, fault, why):
    from pynnet.hmm.ali_io import read_alignments

    ali = os.path.join(disk.path, "ali")
    # the logs were written before the disk failed: they are kept elsewhere (log -> tmp_path/log)
    os.makedirs(ali)
    os.makedirs(tmp_path / "log")
    os.symlink(tmp_path / "log", os.path.join(ali, "log"))
    cmd = ["steps/align_si.sh", "--nj", "2", "--cmd", str(gmm_work / "faulty_run.pl"), "data/train", "lang",
           "exp/mono", ali]
    env = dict(script_env(), DISK_FAULT=fault, DISK_FAULT_DIR=disk.path)
    r = _run(cmd, gmm_work, env)
    line = _one_clear_error(r, why, ali)
    assert line.startswith("steps/align_si.sh: align failed: ERROR (pynnet-gmm-align): ") and "/ali.1.gz" in line, line
    assert not [f for f in disk.files(ali) if f.startswith("ali.")]
    _no_temp_files(ali)
    for n in (1, 2):
        assert "Traceback" not in (tmp_path / "log" / f"align.{n}.log").read_text()

    # space freed (the file system writable again): the same command completes
    if fault == "full":
        disk.unfill()
    else:
        disk.remount("rw")
    r = _run(cmd, gmm_work)
    assert r.returncode == 0, r.stdout + r.stderr
    got = read_alignments(ali)
    assert len(got) == 12 and all(len(v) for v in got.values())
    _no_temp_files(ali)


# -- training: pynnet-nnet-train (1 worker) ------------------------------------------------------

TRAIN = os.path.join(os.path.dirname(sys.executable), "pynnet-nnet-train")
SMALL = ["--nn-depth", "1", "--hid-dim", "8", "--buffer-frames", "400", "--checkpoint-every", "4",
         "--max-epochs", "2"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy corpus and the final.nnet of its training undisturbed."""
    import torch

    root = tmp_path_factory.mktemp("diskfault_toy")
    data, ali = make_toy_corpus(str(root), num_utts=40)
    r = _run([TRAIN, *SMALL, data, ali, str(root / "ref")], root)
    assert r.returncode == 0, r.stderr
    return data, ali, torch.load(root / "ref" / "final.nnet", map_location="cpu", weights_only=False)


def test_training_disk_full_mid_training_then_read_only(toy, disk):
    import torch

    data, ali, want = toy
    exp = os.path.join(disk.path, "exp")
    cmd = [TRAIN, *SMALL, data, ali, exp]
    # 56 KiB: nnet.init and the first checkpoints fit, a later checkpoint (written beside the
    # previous one, then renamed onto it) does not
    disk.remount("size=56k")
    r = _run(cmd, disk.path)
    line = _one_clear_error(r, FULL, exp)
    assert line.startswith("ERROR (pynnet-nnet-train): "), line
    assert r.stderr.strip().splitlines()[-1] == line
    files = disk.files(exp)
    assert "nnet.init" in files and "final.nnet" not in files, files
    _no_temp_files(exp)
    with open(os.path.join(exp, "checkpoint.pt"), "rb") as f:
        checkpoint = f.read()
    ck = torch.load(os.path.join(exp, "checkpoint.pt"), map_location="cpu", weights_only=False)
    assert ck["state"]["step"] > 0, "the tmpfs no longer fills up mid-training: change its size"

    # read-only: the rerun stops at its first write, and leaves the checkpoint as it was
    disk.remount("ro")
    r = _run(cmd, disk.path)
    line = _one_clear_error(r, READ_ONLY, exp)
    assert line.startswith("ERROR (pynnet-nnet-train): "), line
    assert disk.files(exp) == files
    with open(os.path.join(exp, "checkpoint.pt"), "rb") as f:
        assert f.read() == checkpoint

    # writable, with room: the same command resumes from the checkpoint and trains to the end,
    # to the very model of the undisturbed training
    disk.remount("rw,size=4m")
    r = _run(cmd, disk.path)
    assert r.returncode == 0, r.stderr
    assert f"resuming from {exp}/checkpoint.pt" in r.stderr, r.stderr
    got = torch.load(os.path.join(exp, "final.nnet"), map_location="cpu", weights_only=False)
    assert got["state_dict"].keys() == want["state_dict"].keys()
    assert all(torch.equal(got["state_dict"][k], want["state_dict"][k]) for k in want["state_dict"])
    assert [h["cv_loss"] for h in got["history"]] == [h["cv_loss"] for h in want["history"]]
    _no_temp_files(exp)
