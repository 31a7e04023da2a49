"""pynnet-results (a recipe's exp/RESULTS) on decode dirs laid out as the scoring scripts leave
them, and pynnet-recipe-sizes."""
from __future__ import annotations

import os
import subprocess

import pytest

from pynnet.corpora.sizes import recipe_sizes
from pynnet.io.errors import PynnetError

GRID = [(lm, wip) for lm in range(7, 12) for wip in ("0.0", "0.5")]


def _decode_dir(path: str, errs: dict[tuple[int, str], int], words: int = 100) -> None:
    """wer_<LMWT>_<WIP> files, scoring_kaldi/best_wer and wer_details/{lmwt,wip}."""
    os.makedirs(os.path.join(path, "scoring_kaldi", "wer_details"))
    best = min(errs, key=lambda k: (errs[k], k))
    for (lm, wip), e in errs.items():
        with open(os.path.join(path, f"wer_{lm}_{wip}"), "w") as f:
            f.write(f"%WER {100 * e / words:.2f} [ {e} / {words}, 0 ins, 0 del, {e} sub ]\n")
    e = errs[best]
    with open(os.path.join(path, "scoring_kaldi", "best_wer"), "w") as f:
        f.write(f"%WER {100 * e / words:.2f} [ {e} / {words}, 0 ins, 0 del, {e} sub ] "
                f"{path}/wer_{best[0]}_{best[1]}\n")
    for name, v in (("lmwt", best[0]), ("wip", best[1])):
        with open(os.path.join(path, "scoring_kaldi", "wer_details", name), "w") as f:
            f.write(f"{v}\n")


def _results(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pynnet-results", *args], capture_output=True, text=True)


def test_test_at_dev_choice_training_order_and_worse_than_parent(tmp_path):
    exp = tmp_path / "exp"
    # mono: dev best at (9, 0.5), where test has 20 errors (test's own best: 15 at (11, 0.0))
    _decode_dir(str(exp / "mono" / "decode_dev"), {k: 30 - (k == (9, "0.5")) * 5 for k in GRID})
    _decode_dir(str(exp / "mono" / "decode_test"),
                {k: 20 if k == (9, "0.5") else 15 if k == (11, "0.0") else 25 for k in GRID})
    # tri1: worse than mono at dev's choice (22 > 20)
    _decode_dir(str(exp / "tri1" / "decode_dev"), {k: 10 + (k != (8, "0.0")) for k in GRID})
    _decode_dir(str(exp / "tri1" / "decode_test"), {k: 22 for k in GRID})
    r = _results("--test", "test", "--dev", "dev", "--system", f"tri1={exp}/tri1:mono",
                 "--system", f"mono={exp}/mono")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("# mono") or line.startswith("# tri1")]
    assert [x[1] for x in rows] == ["tri1", "mono"]          # the order given (training order)
    mono = dict(zip(["test@dev", "test", "dev", "point"], rows[1][2:6]))
    assert mono == {"test@dev": "20.00", "test": "15.00", "dev": "25.00", "point": "9/0.5"}
    wer = [line for line in r.stdout.splitlines() if line.startswith("%WER")]
    assert wer[3].startswith("%WER 20.00") and "mono/decode_test/wer_9_0.5" in wer[3]
    assert "WARNING (pynnet-results) tri1 (22.00) is worse than mono (20.00)" in r.stderr
    assert "# WARNING: tri1 (22.00) is worse than mono (20.00)" in r.stdout
    # without dev: each system's test best
    r = _results("--test", "test", "--system", f"mono={exp}/mono", "--system", f"tri1={exp}/tri1:mono")
    assert r.returncode == 0 and "tri1 (22.00) is worse than mono (15.00)" in r.stderr, r.stderr
    assert "wer_9_0.5" not in r.stdout
    # no warning when the child is better
    r = _results("--test", "test", "--system", f"tri1={exp}/tri1", "--system", f"mono={exp}/mono:tri1")
    assert r.returncode == 0 and "WARNING" not in r.stderr, r.stderr
    # a system not decoded yet is left out; bad specifications are one line
    r = _results("--test", "test", "--system", f"mono={exp}/mono", "--system", f"tri2={exp}/tri2:mono")
    assert r.returncode == 0 and "tri2" not in r.stdout
    for args, msg in ((["--system", "mono"], "NAME=EXP-DIR"), (["--system", f"a={exp}/mono:zz"], "parent 'zz'"),
                      ([], "no --system")):
        r = _results("--test", "test", *args)
        assert r.returncode == 1 and msg in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_recipe_sizes_scale_with_the_data():
    s1 = recipe_sizes(1.0, 60, 8)
    # anchored at egs/synth's tuned 1-hour sizes and Kaldi s5c's 110-hour ones
    assert (s1.tri1_leaves, s1.tri1_gauss, s1.tri2_leaves, s1.tri2_gauss) == (300, 2000, 500, 3000)
    assert (s1.tri3_leaves, s1.tri3_gauss, s1.tri4_leaves, s1.tri4_gauss) == (500, 3000, 500, 3000)
    big = recipe_sizes(110.0, 500, 30)
    assert (big.tri1_leaves, big.tri1_gauss, big.tri2_leaves, big.tri2_gauss) == (3200, 30000, 4000, 70000)
    assert (big.dnn_depth, big.dnn_hid_dim, big.rbm_iter) == (6, 2048, 1)
    # LDA+MLLT and SAT: Kaldi s5c's on train_nodup (286 h)
    nodup = recipe_sizes(286.0, 500, 30)
    assert (nodup.tri3_leaves, nodup.tri3_gauss, nodup.tri4_leaves, nodup.tri4_gauss) == (6000, 140000, 11500, 200000)
    small = recipe_sizes(5 / 60, 4, 8)
    # >= 100 frames per Gaussian, unless the smallest tree worth building needs 2 per leaf
    for tri in ("tri2", "tri3", "tri4"):
        leaves, gauss = getattr(small, f"{tri}_leaves"), getattr(small, f"{tri}_gauss")
        assert gauss <= max(5 / 60 * 360000 / 100, 2 * leaves), tri
        assert getattr(recipe_sizes(0.25, 10, 8), f"{tri}_gauss") <= 0.25 * 360000 / 100, tri
    assert small.nj == 4
    prev = None
    for h in (0.02, 0.1, 0.25, 0.5, 1, 5, 30, 110, 300, 1000):
        s = recipe_sizes(h, 100, 8)
        for tri in ("tri1", "tri2", "tri3", "tri4"):
            leaves, gauss = getattr(s, f"{tri}_leaves"), getattr(s, f"{tri}_gauss")
            if prev:
                assert gauss >= getattr(prev, f"{tri}_gauss") and leaves >= getattr(prev, f"{tri}_leaves"), (h, tri)
            assert gauss >= 2 * leaves and leaves >= 3 * 40 + 20, (h, tri)
        # the ladder: no tree smaller than tri1's; SAT's at least LDA+MLLT's
        assert min(s.tri2_leaves, s.tri3_leaves) >= s.tri1_leaves and s.tri4_leaves >= s.tri3_leaves, h
        if prev:
            assert s.dnn_hid_dim >= prev.dnn_hid_dim
        prev = s
    with pytest.raises(PynnetError):
        recipe_sizes(0, 4, 8)
    r = subprocess.run(["pynnet-recipe-sizes", "--hours", "0.25", "--speakers", "3", "--max-jobs", "8"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "nj=3\n" in r.stdout and "tri1_leaves=" in r.stdout and "tri4_gauss=" in r.stdout
