"""egs/synth/local/prepare_data.sh's <db-dir>/.done stamp: a changed --synth-config file (same path,
new contents) makes the corpus out of date. A stand-in pynnet-synth-corpus records its calls, so
no corpus is synthesised (tests/test_synth.py runs the real thing)."""
from __future__ import annotations

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "egs", "synth", "local", "prepare_data.sh")

FAKE_SYNTH = """#!/bin/bash
# stand-in for pynnet-synth-corpus: writes the files prepare_data.sh checks for
echo "$*" >> "$CALLS"
for a; do db=$data; data=$a; done
for x in train dev test; do mkdir -p "$data/$x" && echo "u1 /dev/null" > "$data/$x/wav.scp"; done
mkdir -p "$data/local/dict" "$data/local/lm"
echo "a AH" > "$data/local/dict/lexicon.txt"; echo "a" > "$data/local/lm/train.txt"
for x in train dev test; do echo "u1 s1" > "$data/$x/utt2spk"; echo "s1 u1" > "$data/$x/spk2utt"; done
echo '{}'
"""


def _recipe(tmp_path):
    """A recipe dir whose path.sh puts only the stand-in (and the system) on PATH."""
    rec = tmp_path / "recipe"
    (rec / "bin").mkdir(parents=True)
    fake = rec / "bin" / "pynnet-synth-corpus"
    fake.write_text(FAKE_SYNTH)
    fake.chmod(0o755)
    (rec / "path.sh").write_text(f"export PATH={rec}/bin:/usr/bin:/bin LC_ALL=C\n")
    os.symlink(os.path.join(ROOT, "utils"), rec / "utils")
    return rec


def _run(rec, *args):
    env = {"PATH": "/usr/bin:/bin", "CALLS": str(rec / "calls"), "HOME": str(rec)}
    return subprocess.run([SCRIPT, *args, "db", "data"], cwd=rec, env=env, capture_output=True,
                          text=True, timeout=60)


def _calls(rec):
    return (rec / "calls").read_text().splitlines() if (rec / "calls").exists() else []


def test_stamp_follows_the_config_contents(tmp_path):
    rec = _recipe(tmp_path)
    cfg = rec / "synth.json"
    cfg.write_text('{"snr_db": [10, 30]}\n')
    r = _run(rec, "--tiny", "true", "--synth-config", "synth.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(_calls(rec)) == 1 and "--config synth.json" in _calls(rec)[0]
    r = _run(rec, "--tiny", "true", "--synth-config", "synth.json")
    assert r.returncode == 0 and "nothing to do" in r.stdout, r.stdout + r.stderr
    assert len(_calls(rec)) == 1

    # same path, same size, new contents: the corpus is out of date
    cfg.write_text('{"snr_db": [20, 30]}\n')
    r = _run(rec, "--tiny", "true", "--synth-config", "synth.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nothing to do" not in r.stdout and len(_calls(rec)) == 2
    r = _run(rec, "--tiny", "true", "--synth-config", "synth.json")
    assert "nothing to do" in r.stdout and len(_calls(rec)) == 2
    # touching the file changes nothing; dropping the config is a different corpus
    os.utime(cfg, (1, 1))
    assert "nothing to do" in _run(rec, "--tiny", "true", "--synth-config", "synth.json").stdout
    r = _run(rec, "--tiny", "true")
    assert r.returncode == 0 and "nothing to do" not in r.stdout and len(_calls(rec)) == 3

    # a config that is not there: a clear error, nothing synthesised
    r = _run(rec, "--tiny", "true", "--synth-config", "nope.json")
    assert r.returncode == 1 and "no such file nope.json" in r.stderr and len(_calls(rec)) == 3


def test_stamp_without_a_config_is_unchanged(tmp_path):
    """Corpora made before the config checksum (stamp = the options) are still up to date."""
    rec = _recipe(tmp_path)
    assert _run(rec, "--train-hours", "1.0").returncode == 0 and len(_calls(rec)) == 1
    assert (rec / "db" / ".done").read_text() == "--seed 1 --train-hours 1.0\n"
    r = _run(rec, "--train-hours", "1.0", "--nj", "7")
    assert "nothing to do" in r.stdout and len(_calls(rec)) == 1
