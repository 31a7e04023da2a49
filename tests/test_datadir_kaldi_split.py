"""split_data.sh / split_scp.pl and subset_data_dir.sh choose the same utterances, in the same
parts, as Kaldi's scripts (a split written by one toolkit must match the ali.JOB.gz of the other).

Three kinds of check:
* fixtures whose Kaldi answer is worked out by hand from split_scp.pl's algorithm (comments);
* properties that hold for any input (no expected values typed in);
* a comparison with Kaldi's own perl/shell scripts, taken at test time from a Kaldi git mirror
  ($PYNNET_KALDI_GIT, default /work/.mirror/kaldi-asr+kaldi/repo), skipped when there is none.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pynnet.bin import datadir as B
from pynnet.io import datadir as D
from pynnet.io.errors import PynnetError

TOP = Path(__file__).resolve().parents[1]
KALDI_GIT = os.environ.get("PYNNET_KALDI_GIT", "/work/.mirror/kaldi-asr+kaldi/repo")
KALDI_UTILS = ["split_scp.pl", "subset_scp.pl", "shuffle_list.pl", "filter_scp.pl", "filter_scps.pl",
               "spk2utt_to_utt2spk.pl", "utt2spk_to_spk2utt.pl", "make_absolute.sh", "split_data.sh",
               "subset_data_dir.sh"]


# --- helpers ------------------------------------------------------------------------------------

def shape(n_spk: int, n_utt: int, seed: int, skew: bool = False) -> list[int]:
    """Utterance counts of ``n_spk`` speakers summing to ``n_utt`` (every speaker has one)."""
    rng = random.Random(seed)
    counts = [1] * n_spk
    for _ in range(n_utt - n_spk):
        k = min(int(rng.expovariate(3 / n_spk)), n_spk - 1) if skew else rng.randrange(n_spk)
        counts[k] += 1
    return counts


def utt2spk_of(counts: list[int]) -> list[tuple[str, str]]:
    """(utt, spk) lines, sorted by utterance and by speaker (speaker-prefixed utterance ids)."""
    return [(f"s{i:03d}-u{j:04d}", f"s{i:03d}") for i, c in enumerate(counts) for j in range(c)]


def write_lines(path: Path, lines) -> None:
    path.write_text("".join(" ".join(x) + "\n" if isinstance(x, tuple) else x + "\n" for x in lines))


def make_data_dir(path: Path, counts: list[int]) -> Path:
    path.mkdir(parents=True)
    u2s = utt2spk_of(counts)
    write_lines(path / "utt2spk", u2s)
    s2u: dict[str, list[str]] = {}
    for u, s in u2s:
        s2u.setdefault(s, []).append(u)
    write_lines(path / "spk2utt", [f"{s} {' '.join(us)}" for s, us in s2u.items()])
    write_lines(path / "text", [f"{u} WORD" for u, _ in u2s])
    # --shortest needs feats.scp (Kaldi checks it exists); the lengths come from utt2num_frames
    write_lines(path / "feats.scp", [f"{u} /no/such/feats.ark:{10 * i + 7}" for i, (u, _) in enumerate(u2s)])
    write_lines(path / "utt2num_frames", [f"{u} {100 + (7 * i) % 13}" for i, (u, _) in enumerate(u2s)])
    return path


def run_main(main, args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv0 = sys.argv
    sys.argv = ["prog"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in args])
    finally:
        sys.argv = argv0
    return rc, out.getvalue(), err.getvalue()


# --- fixtures worked out by hand ------------------------------------------------------------------

def test_split_fixture_seven_parts():
    # 8 speakers with 3,1,1,1,1,1,1,5 utterances into 7 parts.  Speaker i starts in part
    # floor(7i/8): [A B] [C] [D] [E] [F] [G] [H] = 4,1,1,1,1,1,5 utterances.  Sweep 1, part 0: moving
    # B (1) to part 1 makes |2-3| = 1 < |1-4| = 3, so it moves: 3,2,1,...  Part 1: moving C on
    # (|2-1| = 1) or B back (|1-4| = 3) is not better than |1-2| = 1; single-speaker parts between
    # counts of 1 never move; H (5) to part 5 gives |0-6| = 6, not < 4.  Sweep 2 changes nothing.
    assert D.split_counts([3, 1, 1, 1, 1, 1, 1, 5], 7) == [1, 2, 1, 1, 1, 1, 1]


def test_split_fixture_backward_move():
    # 1,1,1,1,5,1 into 2: [1 1 1] [1 5 1] = 3,7.  Part 0's last to part 1: |8-2| = 6, not < 4.
    # Part 1's first to part 0: |6-4| = 2 < 4: moves -> 4,6.  Sweep 2: |7-3| = 4 and |1-9| = 8 are
    # not < 2.  Result: 4 speakers, 2 speakers.
    assert D.split_counts([1, 1, 1, 1, 5, 1], 2) == [4, 2]
    # several sweeps: [5 1 1] [1 1 1] = 7,3 -> 6,4 -> 5,5
    assert D.split_counts([5, 1, 1, 1, 1, 1], 2) == [1, 5]


def test_split_fixture_single_utterance_speakers_differ_from_plain_lines():
    # 6 speakers of one utterance into 4 parts: speaker i in part floor(4i/6) = 0,0,1,2,2,3 -> 2,1,2,1
    # (no move helps: neighbours differ by 1).  Plain lines (no --utt2spk): the first 6 mod 4 = 2
    # parts get the extra line -> 2,2,1,1.
    assert D.split_counts([1] * 6, 4) == [2, 1, 2, 1]
    assert D.split_line_counts(6, 4) == [2, 2, 1, 1]


def test_split_scp_fixture_through_the_program(tmp_path):
    counts = [3, 1, 1, 1, 1, 1, 1, 5]
    u2s = utt2spk_of(counts)
    write_lines(tmp_path / "utt2spk", u2s)
    outs = [tmp_path / f"o{k}" for k in range(7)]
    rc, _, err = run_main(B.split_scp_main, [f"--utt2spk={tmp_path / 'utt2spk'}", tmp_path / "utt2spk", *outs])
    assert rc == 0, err
    got = [[ln.split()[0] for ln in o.read_text().splitlines()] for o in outs]
    assert [len(g) for g in got] == [3, 2, 1, 1, 1, 1, 5]
    assert got[1] == ["s001-u0000", "s002-u0000"]


def test_more_parts_than_speakers_is_refused(tmp_path):
    # Kaldi: "Refusing to split data because number of speakers 3 is less than the number of output
    # .scp files 5", exit 1.  Nothing is written.
    d = make_data_dir(tmp_path / "d", [4, 1, 2])
    with pytest.raises(PynnetError, match="only 3 speakers"):
        D.split_data_dir(d, 5)
    assert not any(p.name.startswith("split") or p.name.startswith(".split5") for p in d.iterdir())
    outs = [tmp_path / f"o{k}" for k in range(5)]
    rc, _, err = run_main(B.split_scp_main, [f"--utt2spk={d / 'utt2spk'}", d / "utt2spk", *outs])
    assert rc == 1 and err.strip().splitlines() == [
        f"ERROR (prog): {d}/utt2spk: refusing to split: 3 speakers is fewer than the 5 output files"]
    assert not any(o.exists() for o in outs)


def test_subset_fixture_evenly_and_per_spk():
    items = [f"u{i}" for i in range(10)]
    # subset_scp.pl, 10 lines, 4 needed: [0,5) gets 2 -> [0,2) 1 -> [1,2) -> 1; [2,5) 1 -> [3,5) -> 4
    #                                    [5,10) gets 2 -> [5,7) 1 -> 6;  [7,10) 1 -> [8,10) -> 9
    assert D.evenly_spaced(items, 4) == ["u1", "u4", "u6", "u9"]
    # --per-spk 3 of 10: stride 3 (3*4 > 10) -> 0, 3, 6;  3 of 2: all;  4 of 9: stride 2 -> 0,2,4,6
    assert D.per_speaker_spaced(items, 3) == ["u0", "u3", "u6"]
    assert D.per_speaker_spaced(items[:2], 3) == ["u0", "u1"]
    assert D.per_speaker_spaced(items[:9], 4) == ["u0", "u2", "u4", "u6"]


# --- properties -----------------------------------------------------------------------------------

SHAPES = [(60, 1201, False), (60, 1201, True), (12, 214, False), (10, 180, True), (7, 50, True),
          (25, 26, False), (100, 1000, True), (5, 5, False)]


@pytest.mark.parametrize("n_spk,n_utt,skew", SHAPES)
def test_split_properties(n_spk, n_utt, skew):
    counts = shape(n_spk, n_utt, seed=n_spk + n_utt, skew=skew)
    for n in range(1, min(n_spk, 12) + 1):
        per = D.split_counts(counts, n)
        assert len(per) == n and min(per) >= 1 and sum(per) == n_spk  # contiguous, none empty
        tot, i = [], 0
        for c in per:
            tot.append(sum(counts[i:i + c]))
            i += c
        # Kaldi's stopping point: no single end speaker moving to its neighbour part narrows the gap
        bounds = [sum(per[:k]) for k in range(n + 1)]
        for k in range(n - 1):
            last, first = counts[bounds[k + 1] - 1], counts[bounds[k + 1]]
            gap = abs(tot[k + 1] - tot[k])
            assert not abs((tot[k + 1] + last) - (tot[k] - last)) < gap
            assert not abs((tot[k + 1] - first) - (tot[k] + first)) < gap
        # every speaker in exactly one part, in the input order
        lines = utt2spk_of(counts)
        parts = D.split_scp_lines([u for u, _ in lines], n, dict(lines))
        assert sorted(i for p in parts for i in p) == list(range(n_utt))
        assert all(len({lines[i][1] for i in p}) == c for p, c in zip(parts, per))


def test_split_lines_properties():
    for m in range(1, 40):
        for n in range(1, m + 1):
            c = D.split_line_counts(m, n)
            assert sum(c) == m and max(c) - min(c) <= 1 and c == sorted(c, reverse=True)


def test_split_scp_groups_scattered_speaker_lines():
    # speakers in order of first appearance, each one's lines together, in input order
    keys = ["a1", "b1", "a2", "c1", "b2", "a3"]
    u2s = {k: k[0] for k in keys}
    parts = D.split_scp_lines(keys, 2, u2s)
    assert [[keys[i] for i in p] for p in parts] == [["a1", "a2", "a3"], ["b1", "b2", "c1"]]


def test_subset_properties():
    rng = random.Random(3)
    for _ in range(200):
        m = rng.randint(1, 300)
        n = rng.randint(1, m)
        items = [f"u{i:04d}" for i in range(m)]
        got = D.evenly_spaced(items, n)
        assert len(got) == n and got == sorted(set(got))
        # the halving: the first floor(m/2) items hold floor(n/2) of those chosen
        assert sum(1 for u in got if int(u[1:]) < m // 2) == n // 2
        k = rng.randint(1, 12)
        ps = D.per_speaker_spaced(items, k)
        assert len(ps) == min(k, m) and ps[0] == items[0]
        idx = [int(u[1:]) for u in ps]
        assert len({b - a for a, b in zip(idx, idx[1:])}) <= 1  # one stride
    words = [f"w{i}" for i in range(50)]
    sh = D.perl_shuffle(words)
    assert sorted(sh) == sorted(words) and sh == D.perl_shuffle(words) and sh != words
    assert D.perl_shuffle(words, 1) != sh


def test_perl_shuffle_keys():
    # perl -e 'srand(0); print rand()' prints 0.17082803610629, then 0.749901980484964 and
    # 0.0963716556235674 (drand48 from seed 0): so the third line sorts first, then the first.
    assert D.perl_shuffle(["x", "y", "z"]) == ["z", "x", "y"]


# --- Kaldi's own scripts ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kaldi(tmp_path_factory):
    """A directory with Kaldi's utils/ scripts (from the git mirror), to run them as Kaldi does."""
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    if not os.path.isdir(KALDI_GIT) or shutil.which("git") is None:
        pytest.skip(f"no Kaldi git mirror at {KALDI_GIT} (set PYNNET_KALDI_GIT)")
    root = tmp_path_factory.mktemp("kaldi")
    (root / "utils").mkdir()
    for name in KALDI_UTILS:
        r = subprocess.run(["git", "-C", KALDI_GIT, "show", f"HEAD:egs/wsj/s5/utils/{name}"], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot read utils/{name} from {KALDI_GIT}: {r.stderr.decode().strip()}")
        (root / "utils" / name).write_bytes(r.stdout)
        (root / "utils" / name).chmod(0o755)
    (root / "path.sh").write_text("")
    return root


def kaldi_run(kaldi: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, LC_ALL="C")
    return subprocess.run([str(a) for a in args], cwd=kaldi, env=env, capture_output=True, text=True)


def read_keys(p: Path) -> list[str]:
    return [ln.split()[0] for ln in p.read_text().splitlines()]


COMPARE_SHAPES = [(60, 1201, False), (60, 1201, True), (12, 214, False), (10, 180, True), (7, 50, True),
                  (100, 1000, True), (13, 13, False), (3, 40, True)]


@pytest.mark.parametrize("n_spk,n_utt,skew", COMPARE_SHAPES)
def test_split_scp_matches_kaldi(kaldi, tmp_path, n_spk, n_utt, skew):
    counts = shape(n_spk, n_utt, seed=7 * n_spk + n_utt, skew=skew)
    u2s = tmp_path / "utt2spk"
    write_lines(u2s, utt2spk_of(counts))
    for n in range(1, 13):
        for opt in ([f"--utt2spk={u2s}"], []):
            ko = [tmp_path / f"k{k}" for k in range(n)]
            po = [tmp_path / f"p{k}" for k in range(n)]
            kr = kaldi_run(kaldi, "perl", "utils/split_scp.pl", *opt, u2s, *ko)
            try:
                prc = B.split_scp_main([*opt, str(u2s), *map(str, po)])
            except PynnetError:
                prc = 1
            assert (kr.returncode == 0) == (prc == 0), (n, opt, kr.stderr)
            if kr.returncode == 0:
                assert [o.read_text() for o in po] == [o.read_text() for o in ko], (n, opt)


def test_split_scp_scattered_speakers_match_kaldi(kaldi, tmp_path):
    rng = random.Random(11)
    lines = utt2spk_of(shape(30, 400, seed=2, skew=True))
    rng.shuffle(lines)
    u2s = tmp_path / "utt2spk"
    write_lines(u2s, lines)
    for n in (1, 2, 5, 7, 11):
        ko = [tmp_path / f"k{k}" for k in range(n)]
        po = [tmp_path / f"p{k}" for k in range(n)]
        assert kaldi_run(kaldi, "perl", "utils/split_scp.pl", f"--utt2spk={u2s}", u2s, *ko).returncode == 0
        assert B.split_scp_main([f"--utt2spk={u2s}", str(u2s), *map(str, po)]) == 0
        assert [o.read_text() for o in po] == [o.read_text() for o in ko]
        # -j (one part to stdout)
        rc, out, _ = run_main(B.split_scp_main, ["-j", n, n - 1, f"--utt2spk={u2s}", u2s])
        assert rc == 0 and out == ko[-1].read_text()


@pytest.mark.parametrize("n_spk,n_utt,skew", [(60, 1201, False), (60, 1201, True), (3, 20, False)])
def test_split_data_matches_kaldi(kaldi, tmp_path, n_spk, n_utt, skew):
    counts = shape(n_spk, n_utt, seed=n_spk * 3 + n_utt, skew=skew)
    kd = make_data_dir(kaldi / f"data_{n_spk}_{n_utt}_{skew}", counts)
    pd = make_data_dir(tmp_path / "p", counts)
    for n in range(1, 13):
        for per_utt in (False, True):
            kr = kaldi_run(kaldi, "utils/split_data.sh", *(["--per-utt"] if per_utt else []), kd.name, n)
            try:
                D.split_data_dir(pd, n, per_utt=per_utt)
                ok = True
            except PynnetError:
                ok = False
            assert (kr.returncode == 0) == ok, (n, per_utt, kr.stdout, kr.stderr)
            if not ok:
                continue
            sub = f"split{n}{'utt' if per_utt else ''}"
            for k in range(1, n + 1):
                for f in ("utt2spk", "spk2utt", "text"):
                    assert sorted(read_keys(pd / sub / str(k) / f)) == sorted(read_keys(kd / sub / str(k) / f)), \
                        (n, per_utt, k, f)


@pytest.mark.parametrize("n_spk,n_utt,skew", [(60, 1201, True), (9, 40, False), (4, 4, False)])
def test_subset_data_dir_matches_kaldi(kaldi, tmp_path, n_spk, n_utt, skew):
    counts = shape(n_spk, n_utt, seed=n_spk + 5 * n_utt, skew=skew)
    kd = make_data_dir(kaldi / f"sub_{n_spk}_{n_utt}_{skew}", counts)
    pd = make_data_dir(tmp_path / "p", counts)
    rng = random.Random(n_utt)
    write_lines(tmp_path / "ulist", rng.sample(read_keys(pd / "utt2spk"), max(1, n_utt // 3)))
    write_lines(tmp_path / "slist", rng.sample(read_keys(pd / "spk2utt"), max(1, n_spk // 3)))
    nums = sorted({1, 2, 3, n_utt // 7 + 1, n_utt // 2, n_utt - 1, n_utt} - {0})
    runs = [(mode, [mode, str(x)]) for mode in ("", "--first", "--last", "--speakers", "--per-spk", "--shortest")
            for x in nums]
    runs += [("--utt-list", ["--utt-list", str(tmp_path / "ulist")]),
             ("--spk-list", ["--spk-list", str(tmp_path / "slist")])]
    for i, (mode, args) in enumerate(runs):
        args = [a for a in args if a]
        opts, num = (args, []) if mode.endswith("list") else (args[:-1], args[-1:])
        kr = kaldi_run(kaldi, "utils/subset_data_dir.sh", *opts, kd.name, *num, f"out{i}")
        assert kr.returncode == 0, (args, kr.stdout, kr.stderr)
        rc, _, err = run_main(B.subset_main, [*opts, pd, *num, tmp_path / f"out{i}"])
        assert rc == 0, (args, err)
        for f in ("utt2spk", "spk2utt"):
            assert read_keys(tmp_path / f"out{i}" / f) == sorted(read_keys(kaldi / f"out{i}" / f), key=str.encode), \
                (args, f)


def test_shortest_uses_feature_lengths_without_utt2num_frames(tmp_path):
    # Kaldi's --shortest without utt2num_frames: feat-to-len on feats.scp, `sort -n -k2`, ties by
    # utterance-id.  utt2dur here orders them otherwise, so only the frame counts give this answer.
    import kaldiio
    import numpy as np

    d = make_data_dir(tmp_path / "d", [2, 2])  # s000-u0000 s000-u0001 s001-u0000 s001-u0001
    (d / "utt2num_frames").unlink()
    frames = {"s000-u0000": 7, "s000-u0001": 4, "s001-u0000": 4, "s001-u0001": 2}
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'f.ark'},{d / 'feats.scp'}") as w:
        for u, n in frames.items():
            w(u, np.zeros((n, 3), dtype=np.float32))
    write_lines(d / "utt2dur", [f"{u} {1.0 / n:.3f}" for u, n in frames.items()])
    rc, _, err = run_main(B.subset_main, ["--shortest", d, 2, tmp_path / "s"])
    assert rc == 0, err
    assert read_keys(tmp_path / "s" / "utt2spk") == ["s000-u0001", "s001-u0001"]
