"""utils/subset_scp.pl and utils/filter_scps.pl: the same output as Kaldi's perl scripts (taken
from a Kaldi git mirror at test time; those comparisons are skipped without one), and one-line
errors for bad input."""
from __future__ import annotations

from pathlib import Path

from test_kaldi_utils import UTILS, kaldi_tree, one_error_line, run


def _scp(path: Path, n: int) -> Path:
    path.write_text("".join(f"utt{i:03d} /data/a{i}.wav\n" for i in range(1, n + 1)))
    return path


def test_subset_scp_matches_kaldi(tmp_path):
    k = kaldi_tree(tmp_path, ["utils/subset_scp.pl"])
    for total in (1, 2, 7, 10, 33, 100):
        scp = _scp(tmp_path / f"in{total}.scp", total)
        for n in sorted({min(k, total) for k in (1, 2, 3, total // 2 or 1, total - 1 or 1, total)}):
            # (the evenly spread default is the one with an algorithm to match; the options once)
            for opts in ([], ["--first"], ["--last"], ["--quiet", "--last"]) if total == 33 else ([],):
                kr = run("perl", k / "utils/subset_scp.pl", *opts, n, scp)
                r = run(UTILS / "subset_scp.pl", *opts, n, scp)
                assert kr.returncode == 0 and r.returncode == 0, (kr.stderr, r.stderr)
                assert r.stdout == kr.stdout, (total, n, opts)
                assert len(r.stdout.splitlines()) == n
    # --quiet: asking for more than there are gives them all, as Kaldi's
    scp = _scp(tmp_path / "in5.scp", 5)
    kr = run("perl", k / "utils/subset_scp.pl", "--quiet", 9, scp)
    assert run(UTILS / "subset_scp.pl", "--quiet", 9, scp).stdout == kr.stdout == scp.read_text()
    # a last line without a newline is printed as it is
    (tmp_path / "nonl.scp").write_text("a 1\nb 2\nc 3")
    for opts in (["3"], ["--last", "1"], ["2"]):
        assert (run(UTILS / "subset_scp.pl", *opts, tmp_path / "nonl.scp").stdout
                == run("perl", k / "utils/subset_scp.pl", *opts, tmp_path / "nonl.scp").stdout)


def test_subset_scp_errors(tmp_path):
    scp = _scp(tmp_path / "in.scp", 4)
    line = one_error_line(run(UTILS / "subset_scp.pl", 5, scp))
    assert line == f"ERROR (pynnet-subset-scp): {scp}: you requested more lines than there are: 5 > 4 (--quiet gives them all)"
    for bad in ("0", "-2", "x"):
        assert "<N> must be a positive integer" in one_error_line(run(UTILS / "subset_scp.pl", bad, scp))
    assert "no such file" in one_error_line(run(UTILS / "subset_scp.pl", 2, tmp_path / "nope.scp"))
    assert "usage: subset_scp.pl" in one_error_line(run(UTILS / "subset_scp.pl", "--firts", 2, scp))
    assert "usage: subset_scp.pl" in one_error_line(run(UTILS / "subset_scp.pl", 2))
    # stdin
    assert run(UTILS / "subset_scp.pl", "--first", 2, "-", input=scp.read_text()).stdout == "".join(
        scp.read_text().splitlines(keepends=True)[:2])


def _jobs(tmp_path: Path, n: int, utts: list[str]) -> None:
    for j in range(1, n + 1):
        d = tmp_path / f"split{n}" / str(j)
        d.mkdir(parents=True)
        (d / "utt2spk").write_text("".join(f"{u} spk{j}\n" for u in utts[j - 1::n]))


def test_filter_scps_matches_kaldi(tmp_path):
    k = kaldi_tree(tmp_path, ["utils/filter_scps.pl"])
    scp = _scp(tmp_path / "feats.scp", 23)
    utts = [ln.split()[0] for ln in scp.read_text().splitlines()]
    _jobs(tmp_path, 4, utts[:20])          # 3 utterances in no job: a warning, as Kaldi's
    (tmp_path / "spk").write_text("".join(f"{u} /x/{u}.ark:1 spk{i % 3}\n" for i, u in enumerate(utts)))
    (tmp_path / "bykey").write_text("spk0\nspk2\n")
    for opts, ids, src in (([], "split4/JOB/utt2spk", "feats.scp"), (["--no-warn"], "split4/JOB/utt2spk", "feats.scp"),
                           (["-f", "3"], "bykey", "spk")):
        job = "JOB=1:4" if "JOB" in ids else "JOB=1:1"
        kr = run("perl", k / "utils/filter_scps.pl", *opts, job, ids, src, "kaldi.JOB.out", cwd=tmp_path)
        r = run(UTILS / "filter_scps.pl", *opts, job, ids, src, "ours.JOB.out", cwd=tmp_path)
        assert kr.returncode == r.returncode == 0, (kr.stderr, r.stderr)
        for j in range(1, 5 if "JOB" in ids else 2):
            assert (tmp_path / f"ours.{j}.out").read_text() == (tmp_path / f"kaldi.{j}.out").read_text(), (opts, j)
        assert ("did not get output" in r.stderr) == ("did not get output" in kr.stderr), (r.stderr, kr.stderr)
        if not opts:
            assert (tmp_path / "ours.2.out").read_text().split()[::2] == utts[1:20:4]
    # an utterance in two jobs goes to both, with Kaldi's warning
    with open(tmp_path / "split4/2/utt2spk", "a") as f:
        f.write("utt001 spk2\n")
    kr = run("perl", k / "utils/filter_scps.pl", "JOB=1:4", "split4/JOB/utt2spk", "feats.scp", "kaldi.JOB.out",
             cwd=tmp_path)
    r = run(UTILS / "filter_scps.pl", "JOB=1:4", "split4/JOB/utt2spk", "feats.scp", "ours.JOB.out", cwd=tmp_path)
    assert "output to multiple files" in r.stderr and "output to multiple files" in kr.stderr
    for j in range(1, 5):
        assert (tmp_path / f"ours.{j}.out").read_text() == (tmp_path / f"kaldi.{j}.out").read_text()


def test_filter_scps_errors(tmp_path):
    scp = _scp(tmp_path / "feats.scp", 6)
    _jobs(tmp_path, 2, [ln.split()[0] for ln in scp.read_text().splitlines()])

    def err(*args):
        return one_error_line(run(UTILS / "filter_scps.pl", *args, cwd=tmp_path))

    assert "bad job-range specifier 'JOB=1-2'" in err("JOB=1-2", "split2/JOB/utt2spk", "feats.scp", "o.JOB")
    assert "invalid job range JOB=3:1" in err("JOB=3:1", "split2/JOB/utt2spk", "feats.scp", "o.JOB")
    assert "does not contain JOB" in err("JOB=1:2", "split2/1/utt2spk", "feats.scp", "o.JOB")
    assert "does not contain JOB" in err("JOB=1:2", "split2/JOB/utt2spk", "feats.scp", "o.txt")
    assert err("JOB=1:3", "split2/JOB/utt2spk", "feats.scp", "o.JOB").endswith("split2/3/utt2spk: no such file")
    assert "usage: filter_scps.pl" in err("JOB=1:2", "split2/JOB/utt2spk", "feats.scp")
    assert "cannot select field 4" in err("-f", "4", "JOB=1:2", "split2/JOB/utt2spk", "feats.scp", "o.JOB")
    # nothing half-written: a failure leaves no output files
    assert not list(tmp_path.glob("o.*"))
