"""Stopping the feature stage: a SIGTERM'd pynnet program removes the temp files of its atomic
outputs and says so in one ERROR line (exit 143); steps/make_mfcc.sh stops its jobs at once on
SIGTERM/SIGINT (or ``timeout``) and puts the previous feats.scp back; a signal while it installs
the new features waits until they are all in place. Also: its internal variables are not options,
and only this run's logs are quoted."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from test_feat_failures import ROOT, N_UTTS, _conf, _data_dir, _env, _feats, _sh

needs_run_pl = pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "utils", "run.pl")),
                                  reason="needs utils/run.pl")


def _slow_wav_scp(d, seconds: float) -> None:
    """Every recording comes through a pipe that first sleeps: the jobs take N_UTTS * seconds."""
    lines = [ln.split(" ", 1) for ln in (d / "wav.scp").read_text().splitlines()]
    (d / "wav.scp").write_text("".join(f"{u} sleep {seconds}; cat {p} |\n" for u, p in lines))


def _tmp_files(*dirs) -> list[str]:
    return [os.path.join(str(d), f) for d in dirs if os.path.isdir(d) for f in os.listdir(d)
            if f.endswith(".tmp") or ".new." in f]


def _wait_for(pred, timeout=20.0) -> None:
    t0 = time.time()
    while not pred():
        assert time.time() - t0 < timeout, "timed out"
        time.sleep(0.05)


def _sleepers(tag: str, only_sleep: bool = False) -> list[str]:
    """Processes still running whose command line has ``tag`` (our jobs' pipe commands: the
    shell running them and the sleep itself; only the sleep with ``only_sleep``)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if (ln.strip().startswith(tag) if only_sleep else tag in ln)]


# -- pynnet programs -------------------------------------------------------------------------------

def test_sigterm_removes_the_temp_outputs_and_is_one_error_line(tmp_path):
    d = tmp_path / "data"
    _data_dir(d)
    _slow_wav_scp(d, 0.5)
    out = tmp_path / "out"
    out.mkdir()
    cmd = ["pynnet-compute-mfcc-feats", "--sample-frequency=8000",
           f"scp:{d}/wav.scp", f"ark,scp:{out}/raw.1.ark,{out}/raw.1.scp"]
    p = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: any(f.endswith(".tmp") for f in os.listdir(out)))   # writing its outputs
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143, err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["ERROR (pynnet-compute-mfcc-feats): terminated"]
    assert os.listdir(out) == []


def test_sigterm_unwinds_every_cli_program(tmp_path):
    """The handler is the cli wrapper's: any program's atomic output is cleaned up; a SIGTERM
    after the program has returned, or an ignored SIGTERM, is as before."""
    script = f"""
import os, signal, sys
from pynnet.bin._cli import cli
from pynnet.io.atomic import atomic_write

@cli
def main(argv):
    with atomic_write({str(tmp_path / 'out.txt')!r}) as f:
        f.write('x')
        os.kill(os.getpid(), signal.SIGTERM)
        f.write('never')
    return 0

rc = main(None)
assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
print('rc', rc, sorted(os.listdir({str(tmp_path)!r})))

@cli
def outer(argv):     # a program that runs another: the outer one stops too
    main(None)
    print('outer went on')
    return 0

print('outer', outer(None))
signal.signal(signal.SIGTERM, signal.SIG_IGN)

@cli
def ignored(argv):
    os.kill(os.getpid(), signal.SIGTERM)
    return 0

print('ignored', ignored(None), signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
"""
    (tmp_path / "sub").mkdir()
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path / "sub", env=_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["rc 143 ['sub']", "outer 143", "ignored 0 True"], r.stdout + r.stderr
    assert r.stderr.splitlines() == ["ERROR (-c): terminated"] * 2, r.stderr


# -- steps/make_mfcc.sh ----------------------------------------------------------------------------

def _features_before(tmp_path):
    d = tmp_path / "data" / "train"
    _data_dir(d)
    _conf(tmp_path)
    r = _sh(f"{ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return d, (d / "feats.scp").read_text(), _feats(d)


def _check_previous_features(tmp_path, d, scp_before, before):
    assert (d / "feats.scp").read_text() == scp_before
    after = _feats(d)
    assert sorted(after) == sorted(before) and all((after[u] == before[u]).all() for u in before)
    assert not (d / ".backup" / "feats.scp").exists()
    assert not _tmp_files(tmp_path / "mfcc", d, tmp_path / "exp" / "mfcc")


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


@needs_run_pl
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_make_mfcc_stops_its_jobs_at_once_on_a_signal(tmp_path, sig):
    d, scp_before, before = _features_before(tmp_path)
    tag = f"sleep 3.{int(sig):02d}1"     # this test's jobs, to check that none is left running
    _slow_wav_scp(d, tag.split()[1])     # 20 utterances, 2 jobs: 30 s if the jobs were not stopped
    # (the signals at their defaults: a test run started in the background of a shell inherits an
    # ignored SIGINT, which bash can then never trap)
    p = subprocess.Popen(f"exec {ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", shell=True,
                         cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_default_signals)
    _wait_for(lambda: len(_sleepers(tag, only_sleep=True)) == 2)   # both jobs are reading
    time.sleep(0.5)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, out + err
    assert "is the previous one again" in err and "Succeeded" not in out
    _check_previous_features(tmp_path, d, scp_before, before)
    assert not _sleepers(tag)
    for n in (1, 2):
        log = (tmp_path / "exp" / "mfcc" / f"make_mfcc_train.{n}.log").read_text()
        assert "ERROR (pynnet-compute-mfcc-feats): terminated" in log and "# Ended (code 143)" in log, log


@needs_run_pl
def test_make_mfcc_under_timeout_puts_the_previous_features_back(tmp_path):
    d, scp_before, before = _features_before(tmp_path)
    _slow_wav_scp(d, "3.0001")
    # -k 20: the KILL only if stopping the jobs hangs (it took > 2 s, and once > 8 s, on a loaded
    # clean-clone CI machine)
    r = _sh(f"timeout -k 20 2 {ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", tmp_path)
    assert r.returncode == 124, r.stdout + r.stderr
    _check_previous_features(tmp_path, d, scp_before, before)
    assert not _sleepers("sleep 3.0001")


def _fake_mv(tmp_path, action: str):
    """A ``mv`` first on PATH that does ``action`` instead of moving job 1's new archive."""
    b = tmp_path / "bin"
    b.mkdir()
    (b / "mv").write_text(f"""#!/usr/bin/env bash
case "$1" in *raw_mfcc_train.1.new.ark) {action} ;; esac
exec /bin/mv "$@"
""")
    os.chmod(b / "mv", 0o755)
    env = _env()
    env["PATH"] = f"{b}:{env['PATH']}"
    return env


@needs_run_pl
def test_make_mfcc_failing_to_install_the_first_archive_puts_the_old_features_back(tmp_path):
    d, scp_before, before = _features_before(tmp_path)
    env = _fake_mv(tmp_path, "echo 'mv: no space left' >&2; exit 1")
    r = subprocess.run(f"{ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", shell=True,
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "is the previous one again" in r.stderr and "failed while installing" not in r.stderr
    _check_previous_features(tmp_path, d, scp_before, before)


@needs_run_pl
def test_make_mfcc_a_signal_while_installing_waits_for_the_install(tmp_path):
    d, scp_before, before = _features_before(tmp_path)
    (tmp_path / "conf" / "mfcc.conf").write_text("--sample-frequency=8000\n--num-ceps=10\n")
    # the TERM reaches the script while it moves job 1's archive into place
    env = _fake_mv(tmp_path, "kill -TERM $PPID; sleep 0.2")
    r = subprocess.run(f"{ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", shell=True,
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 143, r.stdout + r.stderr
    assert "interrupted after installing the new mfcc features" in r.stderr, r.stderr
    new = _feats(d)      # the new features, all of them, and their utt2num_frames
    assert sorted(new) == sorted(before) and all(m.shape[1] == 10 for m in new.values())
    assert {ln.split()[0]: int(ln.split()[1]) for ln in open(d / "utt2num_frames")} == \
        {u: m.shape[0] for u, m in new.items()}
    assert (d / ".backup" / "feats.scp").read_text() == scp_before
    assert not _tmp_files(tmp_path / "mfcc", d)


@needs_run_pl
def test_make_mfcc_quotes_only_this_runs_logs(tmp_path):
    d = tmp_path / "data" / "train"
    _data_dir(d, missing={"spk0-u02", "spk1-u13"})
    _conf(tmp_path)
    # a log of job 3 from an earlier run with --nj 3
    (tmp_path / "exp" / "mfcc").mkdir(parents=True)
    (tmp_path / "exp" / "mfcc" / "make_mfcc_train.3.log").write_text(
        "WARNING (pynnet-compute-mfcc-feats): stale warning\nERROR (pynnet-compute-mfcc-feats): stale error\n")
    r = _sh(f"{ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", tmp_path)
    assert r.returncode == 1 and "less than 95%" in r.stderr and "no such audio file" in r.stderr, r.stderr
    assert "stale" not in r.stderr
    _data_dir(d, missing={f"spk0-u{i:02d}" for i in range(0, N_UTTS, 2)})   # job 1 gets no features
    r = _sh(f"{ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", tmp_path)
    assert r.returncode == 1 and "no utterance produced features" in r.stderr, r.stderr
    assert "stale" not in r.stderr


@pytest.mark.parametrize("script,opt", [("make_fbank.sh", "--kind mfcc"), ("make_mfcc.sh", "--kind fbank"),
                                        ("make_fbank.sh", "--me x"), ("make_mfcc.sh", "--utils /tmp")])
def test_make_mfcc_internal_variables_are_not_options(tmp_path, script, opt):
    d = tmp_path / "data" / "train"
    _data_dir(d)
    _conf(tmp_path)
    r = _sh(f"{ROOT}/steps/{script} {opt} --nj 1 data/train exp/x feats", tmp_path)
    assert r.returncode == 1 and f"invalid option {opt.split()[0]}" in r.stderr, r.stdout + r.stderr
    assert not (d / "feats.scp").exists()


def test_make_fbank_usage_and_run_are_fbank(tmp_path):
    r = _sh(f"{ROOT}/steps/make_fbank.sh", tmp_path)
    assert r.returncode == 1 and "make_fbank.sh [options]" in r.stderr and "--fbank-config" in r.stderr, r.stderr
    r = _sh(f"{ROOT}/steps/make_fbank.sh --help", tmp_path)
    assert r.returncode == 0 and "--fbank-config" in r.stderr and "mfcc" not in r.stderr, r.stderr
    d = tmp_path / "data" / "train"
    _data_dir(d)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "fbank.conf").write_text("--sample-frequency=8000\n--num-mel-bins=23\n")
    r = _sh(f"{ROOT}/steps/make_fbank.sh --nj 2 data/train exp/fbank fbank", tmp_path)
    assert r.returncode == 0 and "Succeeded creating FBANK features for train" in r.stdout, r.stdout + r.stderr
    assert all(m.shape[1] == 23 for m in _feats(d).values())
    assert sorted(os.listdir(tmp_path / "fbank")) == [f"raw_fbank_train.{n}.{e}" for n in (1, 2) for e in ("ark", "scp")]
