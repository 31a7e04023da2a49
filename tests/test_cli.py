"""The pynnet programs' command lines (pynnet.bin._opts.Parser): bad usage is one ``ERROR (prog):``
line and exit 1, --help the full usage and exit 0, and an option's value may start with "--"
(``--cmvn-opts --norm-vars=true``), in both the ``--opt value`` and ``--opt=value`` forms."""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib

import pytest

from pynnet.bin._opts import parser
from pynnet.io.errors import PynnetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _programs() -> list[tuple[str, str]]:
    """(console script, module:function) of every pynnet program but pynnet/bin/feat.py's (they
    parse Kaldi's --opt=value options themselves, tests/test_feat.py)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    return sorted((k, v) for k, v in scripts.items() if not v.startswith("pynnet.bin.feat:"))


def _main(target: str):
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


@pytest.mark.parametrize("script,target", _programs(), ids=[s for s, _ in _programs()])
def test_bad_usage_is_one_error_line_and_help_exits_0(script, target, capsys):
    main = _main(target)
    assert main(["--no-such-option", "x"]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR ("), err
    try:
        rc = main(["--help"])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 0 and "usage" in (out + err).lower()


def test_parser_error_is_one_line_with_the_synopsis():
    p = parser("pynnet-x", "test", usage="%(prog)s [opts] <in> <out>\n  e.g. %(prog)s a b")
    p.add_argument("--beam", type=float)
    p.add_argument("inp")
    with pytest.raises(PynnetError, match=r"^argument --beam: invalid float value: 'x'; "
                                          r"usage: pynnet-x \[opts\] <in> <out>$"):
        p.parse_args(["--beam", "x", "a"])
    q = parser("pynnet-y", "test")
    q.add_argument("--a-rather-long-option-name", default="")
    q.add_argument("--another-rather-long-option-name", default="")
    q.add_argument("first_positional")
    q.add_argument("second_positional")
    assert "\n" in q.format_usage().strip()  # argparse wraps it; the error does not
    with pytest.raises(PynnetError) as e:
        q.parse_args([])
    assert "\n" not in str(e.value) and str(e.value).endswith("first_positional second_positional")


def test_option_values_may_start_with_dashes():
    p = parser("pynnet-x", "test")
    p.add_argument("--cmvn-opts", default="")
    p.add_argument("--delta-order", type=int, default=2)
    p.add_argument("--flag", action="store_true")
    p.add_argument("pos", nargs="*")
    for argv in (["--cmvn-opts", "--norm-vars=true"], ["--cmvn-opts=--norm-vars=true"]):
        assert p.parse_args(argv + ["a"]).cmvn_opts == "--norm-vars=true"
    a = p.parse_args(["--cmvn-opts", "--norm-means=false --norm-vars=true", "--flag", "--delta-order", "-1", "a"])
    assert (a.cmvn_opts, a.flag, a.delta_order, a.pos) == ("--norm-means=false --norm-vars=true", True, -1, ["a"])
    assert p.parse_args(["--cmvn-opts", "", "a"]).cmvn_opts == ""
    # after "--" everything is positional
    assert p.parse_args(["--", "--cmvn-opts", "x"]).pos == ["--cmvn-opts", "x"]
    with pytest.raises(PynnetError, match=r"^argument --cmvn-opts: expected one argument; usage: "):
        p.parse_args(["a", "--cmvn-opts"])


def test_ascii_int():
    from pynnet.bin._opts import ascii_int
    from pynnet.io import tables
    assert ascii_int is tables.ascii_int  # one rule for options and file readers
    assert [ascii_int(s) for s in ("0", "17", "-3", "007")] == [0, 17, -3, 7]
    # '²' and '٣' are isdigit(); int() rejects the first and reads the second
    assert [ascii_int(s) for s in ("²", "٣", "", "-", "--5", "+5", " 5", "1_000", "5x")] == [None] * 9


@pytest.mark.parametrize("argv,what", [
    (["split_data.sh", "DATA", "²"], "<num-to-split> must be a positive integer, got '²'"),
    (["remove_dup_utts.sh", "²", "SRC", "DEST"], "<max-count> must be a positive integer, got '²'"),
    (["subset_data_dir.sh", "--seed", "²", "SRC", "3", "DEST"], "--seed needs an integer"),
    (["subset_data_dir.sh", "SRC", "²", "DEST"], "<num> must be a positive integer, got '²'"),
    (["split_scp.pl", "-j", "²", "0", "in.scp"], "-j needs <num-jobs> <job-id>"),
    (["filter_scp.pl", "-f", "²", "ids"], "-f needs a field number"),
    (["filter_scps.pl", "-f", "٣", "JOB=1:2", "ids.JOB", "in.scp", "out.JOB"], "-f needs a field number"),
    (["filter_scps.pl", "JOB=1:٣", "ids.JOB", "in.scp", "out.JOB"], "bad job-range specifier"),
    (["subset_scp.pl", "٣", "in.scp"], "<N> must be a positive integer"),
])
def test_datadir_programs_reject_non_ascii_digits(argv, what, capsys, tmp_path):
    from pynnet.bin import datadir
    mains = {"split_data.sh": datadir.split_data_main, "remove_dup_utts.sh": datadir.remove_dup_utts_main,
             "subset_data_dir.sh": datadir.subset_main, "split_scp.pl": datadir.split_scp_main,
             "filter_scp.pl": datadir.filter_scp_main, "filter_scps.pl": datadir.filter_scps_main,
             "subset_scp.pl": datadir.subset_scp_main}
    (tmp_path / "DATA").mkdir()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert mains[argv[0]](argv[1:]) == 1
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ERROR (") and what in err[0], err


@pytest.mark.parametrize("opts", [["--max-jobs-run", "²"], ["--num-threads", "²"], ["--gpu", "²"]])
def test_run_pl_rejects_non_ascii_digits(opts, tmp_path):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "utils/run.pl"), *opts, "JOB=1:2",
                        str(tmp_path / "x.JOB.log"), "true"], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr
    if opts[0] == "--gpu":  # queue option, ignored by run.pl: not a number, so no GPUs to count
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 1 and f"{opts[0]}" in r.stderr.splitlines()[0], r.stderr


def test_slurm_options_reject_non_ascii_digits():
    from pynnet.bin.jobs import JobSpec, UsageError, sbatch_options
    for k in ("--max-jobs-run", "--gpu", "--num-threads"):
        with pytest.raises(UsageError):
            sbatch_options(JobSpec("slurm.pl", "true", "x.log", opts=[(k, "²")]))


def test_number_options_are_ascii():
    from pynnet.bin._opts import float_opt, int_opt
    p = parser("pynnet-x", "test", usage="%(prog)s [opts] <in>")
    p.add_argument("--order", type=int_opt, default=3)
    p.add_argument("--power", type=float_opt, default=0.2)
    p.add_argument("inp")
    a = p.parse_args(["--order", "-2", "--power=1e-3", "x"])
    assert (a.order, a.power) == (-2, 0.001)
    assert p.parse_args(["--order", "007", "--power", "-.5", "x"]).power == -0.5
    # int()/float() read '\u0663' as 3, '1_000' as 1000, '\u0660.25' as 0.25
    for v in ("\u0663", "1_000", "\u00b2", "3.0", "", "+3"):
        with pytest.raises(PynnetError, match=rf"^argument --order: expected an integer, got '{re.escape(v)}'; "
                                              r"usage: pynnet-x \[opts\] <in>$"):
            p.parse_args(["--order", v, "x"])
    for v in ("\u0660.25", "1_0", "\u00a00.5", "x"):
        with pytest.raises(PynnetError, match=rf"^argument --power: expected a number, got '{re.escape(v)}'; "):
            p.parse_args([f"--power={v}", "x"])


class _Parsed(BaseException):
    pass


@pytest.mark.parametrize("script,target", _programs(), ids=[s for s, _ in _programs()])
def test_no_program_takes_numbers_with_int_or_float(script, target, monkeypatch):
    """Every integer/real option of every program goes through int_opt / float_opt: argparse's
    type=int / type=float take non-ASCII digits and underscores."""
    from pynnet.bin import _opts
    seen = []

    def parse_known_args(self, args=None, namespace=None):
        seen.append(self)
        raise _Parsed()

    monkeypatch.setattr(_opts.Parser, "parse_known_args", parse_known_args)
    try:
        _main(target)(["--help"])
    except _Parsed:
        pass
    bad = [(o.option_strings or o.dest, o.type.__name__) for p in seen for o in p._actions
           if o.type in (int, float)]
    assert not bad, bad
    # (the Kaldi script ports parse their arguments by hand: test_datadir_programs_reject_non_ascii_digits)
    assert bool(seen) == (script not in _HAND_PARSED), "no argparse parser seen" if not seen else "parses with argparse"


_HAND_PARSED = {"pynnet-filter-scp", "pynnet-filter-scps", "pynnet-split-scp", "pynnet-subset-data-dir",
                "pynnet-subset-scp"}


@pytest.mark.parametrize("target,argv,what", [
    ("pynnet.bin.lang:train_lm_main", ["--order", "\u0663", "text", "lm.arpa"], "--order: expected an integer"),
    ("pynnet.bin.gmm:est_main", ["--mix-up", "1_000", "1.mdl", "1.acc", "2.mdl"], "--mix-up: expected an integer"),
    ("pynnet.bin.gmm:est_main", ["--power", "\u0660.25", "1.mdl", "1.acc", "2.mdl"], "--power: expected a number"),
    ("pynnet.bin.decode:lattice_best_path_grid_main", ["--min-lmwt=\u0667", "lat.1.gz", "dir"],
     "--min-lmwt: expected an integer"),
    ("pynnet.bin.corpora:synth_corpus_main", ["--snr-db", "\u0665:20", "db", "data"], "--snr-db: expected MIN:MAX"),
    ("pynnet.bin.corpora:synth_corpus_main", ["--noise-weights", "white=1_0", "db", "data"], "bad noise weight"),
])
def test_programs_reject_non_ascii_numbers(target, argv, what, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _main(target)(argv) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ERROR (") and what in err[0] and "usage:" in err[0], err
    assert not os.listdir(tmp_path)


def test_word_ins_penalty_is_ascii(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main = _main("pynnet.bin.decode:lattice_best_path_grid_main")
    assert main(["--word-ins-penalty", "0.0,\u0661.5", "lat.1.gz", "dir"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--word-ins-penalty: '\u0661.5' is not a number" in err[0], err
    assert not os.listdir(tmp_path)


def test_int_list_is_ascii():
    from pynnet.bin._opts import int_list
    assert int_list("1:2,3:", "--ci-phones") == [1, 2, 3]
    for spec in ("1:\u0663", "1_0:2", "1: 2"):
        with pytest.raises(PynnetError, match="--ci-phones: expected colon-separated integers"):
            int_list(spec, "--ci-phones")
