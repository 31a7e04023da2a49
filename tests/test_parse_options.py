"""utils/parse_options.sh: Kaldi option parsing for shell scripts."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[1]

SCRIPT = f"""#!/usr/bin/env bash
nj=4
stage=0
use_gpu=false
cmd=run.pl
help_message="Usage: $0 [options] <data-dir>
  --nj <n>   number of jobs"
. {TOP}/utils/parse_options.sh || exit 1
echo "nj=$nj stage=$stage use_gpu=$use_gpu cmd=$cmd nargs=$# args=$*"
"""


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "x.sh"
    p.write_text(SCRIPT)
    p.chmod(0o755)
    return p


def run(script, *args):
    return subprocess.run([str(script), *map(str, args)], capture_output=True, text=True)


def test_sets_values_and_leaves_positionals(script):
    r = run(script, "--nj", 8, "--stage", -2, "--use-gpu", "true", "--cmd", "queue.pl --mem 2G", "data/train", "exp/x")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "nj=8 stage=-2 use_gpu=true cmd=queue.pl --mem 2G nargs=2 args=data/train exp/x"


def test_defaults_and_double_dash(script):
    assert run(script, "a").stdout.strip() == "nj=4 stage=0 use_gpu=false cmd=run.pl nargs=1 args=a"
    r = run(script, "--nj", 2, "--", "--stage", "3")
    assert r.stdout.strip() == "nj=2 stage=0 use_gpu=false cmd=run.pl nargs=2 args=--stage 3"


def test_unknown_option_is_an_error(script):
    r = run(script, "--num-jobs", 3, "a")
    assert r.returncode == 1 and r.stdout == ""
    assert f"{script}: invalid option --num-jobs" in r.stderr


def test_boolean_takes_only_true_or_false(script):
    r = run(script, "--use-gpu", "yes", "a")
    assert r.returncode == 1 and r.stdout == ""
    assert 'expected "true" or "false" for --use-gpu, got "yes"' in r.stderr
    assert run(script, "--use-gpu", "false", "a").returncode == 0


def test_missing_value_and_equals_form(script):
    r = run(script, "--nj")
    assert r.returncode == 1 and "option --nj needs a value" in r.stderr
    r = run(script, "--nj=3", "a")
    assert r.returncode == 1 and "--name value" in r.stderr


def test_config_file(script, tmp_path):
    conf = tmp_path / "my.conf"
    conf.write_text("nj=3\nuse_gpu=true\n")
    assert run(script, "--config", conf, "a").stdout.startswith("nj=3 stage=0 use_gpu=true")
    # later options override the config
    assert run(script, "--config", conf, "--nj", 7, "a").stdout.startswith("nj=7 ")
    r = run(script, "--config", tmp_path / "missing.conf", "a")
    assert r.returncode == 1 and "cannot read config file" in r.stderr


def test_command_line_overrides_config_wherever_it_is(script, tmp_path):
    # Kaldi sources config files before applying any option: an option given before --config wins.
    conf = tmp_path / "my.conf"
    conf.write_text("nj=30\nstage=5\n")
    assert run(script, "--nj", 20, "--config", conf, "a").stdout.startswith("nj=20 stage=5 ")
    assert run(script, "--config", conf, "--nj", 20, "a").stdout.startswith("nj=20 stage=5 ")
    # several config files: sourced in order, the later one wins where they overlap
    conf2 = tmp_path / "b.conf"
    conf2.write_text("stage=6\ncmd=queue.pl\n")
    r = run(script, "--stage", 1, "--config", conf, "--config", conf2, "a")
    assert r.stdout.strip() == "nj=30 stage=1 use_gpu=false cmd=queue.pl nargs=1 args=a"
    # an option's value and the positionals are not options: nothing is sourced from them
    r = run(script, "--cmd", "--config", "--nj", 2, "a", "--config", conf)
    assert r.stdout.strip() == f"nj=2 stage=0 use_gpu=false cmd=--config nargs=3 args=a --config {conf}"
    r = run(script, "--nj", 2, "--config", tmp_path / "missing.conf", "a")
    assert r.returncode == 1 and "cannot read config file" in r.stderr and r.stdout == ""


def test_help(script):
    for flag in ("--help", "-h"):
        r = run(script, "--nj", 3, flag)
        assert r.returncode == 0 and r.stdout == ""
        assert r.stderr.startswith(f"Usage: {script} [options] <data-dir>") and "--nj <n>" in r.stderr
