"""Helpers that several programs share: pynnet.io.datadir.read_data_file (one table of a data
dir), the pynnet-* option plumbing (pynnet.bin._opts), utils/lib/SymTab.pm behind
int2sym.pl/sym2int.pl through a symlinked utils/ (as egs/*/utils), and the steps/libs/
decode error report."""
from __future__ import annotations

import argparse
import os
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from pynnet.bin._opts import add_binary_opt, add_context_opts, check_stats_context, int_list, parser
from pynnet.io.datadir import read_data_file
from pynnet.io.errors import PynnetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return str(path)


# -- read_data_file -----------------------------------------------------------------------------

def test_read_data_file_reads_one_table_in_file_order(tmp_path):
    _write(tmp_path / "utt2spk", "b-u1 b\na-u1 a\n")  # unsorted is accepted unless check_sorted
    _write(tmp_path / "text", "a-u1 hello  world\nb-u1\n")
    assert read_data_file(tmp_path, "utt2spk") == {"b-u1": "b", "a-u1": "a"}
    assert list(read_data_file(tmp_path, "utt2spk")) == ["b-u1", "a-u1"]
    assert read_data_file(tmp_path, "text") == {"a-u1": "hello  world", "b-u1": ""}
    assert read_data_file(tmp_path, "spk2gender", required=False) is None
    with pytest.raises(PynnetError, match=r"utt2spk:2: not sorted"):
        read_data_file(tmp_path, "utt2spk", check_sorted=True)


@pytest.mark.parametrize("name,text,msg", [
    ("utt2spk", "u1 s1\nu2 s1\nu1 s2\n", r"utt2spk:3: duplicate key 'u1' \(first on line 1\)"),
    ("utt2spk", "u1 s1\nu2 s1 extra\n", r"utt2spk:2: expected at most 2 fields"),
    ("utt2spk", "u1 s1\n\nu2 s1\n", r"utt2spk:2: empty line"),
    ("text", "u1 a <s> b\n", r"text:1: transcript contains the illegal symbol <s>"),
    ("feats.scp", "u1\n", r"feats.scp:1: expected at least 2 fields"),
])
def test_read_data_file_errors_name_file_and_line(tmp_path, name, text, msg):
    _write(tmp_path / name, text)
    with pytest.raises(PynnetError, match=msg):
        read_data_file(tmp_path, name)


def test_read_data_file_missing(tmp_path):
    with pytest.raises(PynnetError, match=r"cmvn.scp: no such file"):
        read_data_file(tmp_path, "cmvn.scp")
    with pytest.raises(ValueError):
        read_data_file(tmp_path, "not-a-table")


def test_read_features_reports_bad_utt2spk(tmp_path):
    """read_features reads utt2spk through read_data_file: a duplicated utterance is an error
    naming the line, not a silent choice of speaker."""
    import kaldiio

    from pynnet.feat import cmvn_stats, read_features
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/feats.ark,{tmp_path}/feats.scp") as w:
        w("u1", x)
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/cmvn.ark,{tmp_path}/cmvn.scp") as w:
        w("s1", cmvn_stats(x))
    _write(tmp_path / "utt2spk", "u1 s1\n")
    (utt, y), = list(read_features(tmp_path))
    assert utt == "u1" and np.allclose(y, x - x.mean(axis=0), atol=1e-5)
    _write(tmp_path / "utt2spk", "u1 s1\nu1 s2\n")
    with pytest.raises(PynnetError, match=r"utt2spk:2: duplicate key 'u1'"):
        list(read_features(tmp_path))


# -- pynnet.bin._opts ---------------------------------------------------------------------------

def test_opts_parser_binary_and_context():
    p = parser("pynnet-x", "test")
    add_binary_opt(p)
    add_context_opts(p, checked=True)
    a = p.parse_args(["--binary", "false", "--context-width", "1", "--central-position", "0"])
    assert (a.binary, a.context_width, a.central_position) == (False, 1, 0)
    d = p.parse_args([])
    assert (d.binary, d.context_width, d.central_position) == (True, 3, 1)
    assert "must match acc-tree-stats (checked)" in p.format_help()
    with pytest.raises(PynnetError, match=r"^argument --binary: expected true or false; usage: pynnet-x "):
        p.parse_args(["--binary", "yes"])


def test_opts_int_list_and_context_check():
    assert int_list("1:2:3", "--ci-phones") == [1, 2, 3]
    assert int_list("4,5", "--ci-phones") == [4, 5]
    assert int_list("", "--ci-phones") == []
    with pytest.raises(PynnetError, match=r"--ci-phones: expected colon-separated integers, got '1:x'"):
        int_list("1:x", "--ci-phones")
    a = argparse.Namespace(context_width=3, central_position=1)
    check_stats_context(SimpleNamespace(context_width=3, central_position=1), a, "treeacc")
    with pytest.raises(PynnetError, match=r"treeacc: stats have context width 1 / central position 0, "
                                          r"options say 3 / 1"):
        check_stats_context(SimpleNamespace(context_width=1, central_position=0), a, "treeacc")


def test_tree_programs_check_stats_context(tmp_path, capsys):
    """cluster-phones and build-tree refuse stats of another context width (one ERROR line)."""
    from pynnet.bin.tree import build_tree_main, cluster_phones_main
    from pynnet.hmm.tree import TreeStats

    stats = TreeStats(1, 0, np.array([[1, 1], [1, 2]], np.int32), np.array([10.0, 12.0]),
                      np.ones((2, 2)), np.ones((2, 2)) * 2)
    acc = str(tmp_path / "treeacc")
    stats.save(acc)
    _write(tmp_path / "sets.int", "1\n2\n")
    out = str(tmp_path / "q")
    capsys.readouterr()
    assert cluster_phones_main([acc, str(tmp_path / "sets.int"), out]) == 1
    assert build_tree_main([acc, "r", "q", "t", str(tmp_path / "tree")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(e.startswith("ERROR (") and e.endswith(
        f"): {acc}: stats have context width 1 / central position 0, options say 3 / 1") for e in err)
    assert not os.path.exists(out)
    assert cluster_phones_main(["--context-width", "1", "--central-position", "0", acc,
                                str(tmp_path / "sets.int"), out]) == 0
    assert os.path.exists(out)


# -- utils/int2sym.pl, utils/sym2int.pl (utils/lib/SymTab.pm) -----------------------------------

def test_symtab_scripts_through_symlinked_utils(tmp_path):
    """As a recipe calls them: egs/x/utils -> the real utils/, so the module is found by the
    script's real location; -f ranges, --map-oov and errors naming input file and line."""
    os.symlink(os.path.join(ROOT, "utils"), tmp_path / "utils")
    words = _write(tmp_path / "words.txt", "<eps> 0\nhello 1\nworld 2\n<unk> 3\n")
    inp = _write(tmp_path / "in.txt", "u1 hello world zzz\nu2 world\n")

    def run(cmd):
        return subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True)

    r = run(f"utils/sym2int.pl --map-oov '<unk>' -f 2- {words} {inp}")
    assert r.returncode == 0 and r.stdout == "u1 1 2 3\nu2 2\n"
    assert "replaced 1 OOV instances with '<unk>'" in r.stderr
    r = run(f"echo '1 2 9' | utils/int2sym.pl -f1-2 {words}")
    assert r.returncode == 0 and r.stdout == "hello world 9\n"
    r = run(f"echo '1 2 9' | utils/int2sym.pl {words}")
    assert r.returncode != 0 and r.stderr.strip() == f"utils/int2sym.pl: -:1: no symbol for id '9' in {words}"
    r = run(f"utils/sym2int.pl -f 2- {words} {inp}")
    assert r.returncode != 0 and f"{inp}:1: symbol 'zzz' is not in" in r.stderr
    r = run(f"utils/int2sym.pl -f x {words}")
    assert r.returncode != 0 and "bad field range 'x'" in r.stderr
    r = run(f"utils/int2sym.pl --map-oov x {words}")  # sym2int's option only
    assert r.returncode != 0 and "unknown option --map-oov" in r.stderr
    bad = _write(tmp_path / "bad.txt", "a 1\nb c d\n")
    r = run(f"echo 1 | utils/int2sym.pl {bad}")
    assert r.returncode != 0 and f"{bad}:2: expected 'symbol id'" in r.stderr


# -- steps/libs/decode.sh -----------------------------------------------------------------------

def test_decode_lib_reports_first_error_and_leaves_no_lattices(tmp_path):
    """decode_run_jobs: a failing job's first ERROR line is the one-line reason, partial lattices
    are removed; decode_setup rejects a bad --nj."""
    script = _write(tmp_path / "t.sh", f"""
cd {ROOT}
nj=2; cmd=utils/run.pl; data={tmp_path}/data; dir={tmp_path}/decode
. steps/libs/decode.sh
decode_run_jobs bash -c 'echo x | gzip -c > {tmp_path}/decode/lat.JOB.gz; [ JOB = 1 ] || {{ echo "ERROR (prog): bad JOB"; exit 1; }}'
echo not reached
""")
    os.makedirs(tmp_path / "decode" / "log")
    r = subprocess.run(["bash", script], capture_output=True, text=True)
    assert r.returncode == 1 and "not reached" not in r.stdout
    err = [ln for ln in r.stderr.splitlines() if "decoding failed" in ln]
    assert len(err) == 1 and "decoding failed: ERROR (prog): bad 2" in err[0] and "decode.2.log" in err[0]
    assert not list((tmp_path / "decode").glob("lat.*.gz"))
    bad_nj = _write(tmp_path / "n.sh", f"cd {ROOT}; nj=0; data=x; dir={tmp_path}/d2; . steps/libs/decode.sh; decode_setup")
    r = subprocess.run(["bash", bad_nj], capture_output=True, text=True)
    assert r.returncode == 1 and "--nj must be a positive integer, got '0'" in r.stderr
    assert not (tmp_path / "d2").exists()
