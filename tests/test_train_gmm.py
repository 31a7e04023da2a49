"""End to end on a tiny generated corpus: steps/train_mono.sh, steps/align_si.sh, steps/train_deltas.sh.

The corpus (tests/gmm_corpus.py) has planted per-phone-state Gaussians, so training must raise the
likelihood and the alignments must spell out each transcript's phones.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from gmm_corpus import WORDS, make_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{ROOT}/utils:{ROOT}/tools/venv/bin:" + env["PATH"]
    env["LC_ALL"] = "C"
    env["OMP_NUM_THREADS"] = "1"
    return env


def sh(cwd, *cmd, check=True):
    r = subprocess.run(list(cmd), cwd=cwd, env=_env(), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("gmm")
    make_corpus(str(d), num_spk=3, utts_per_spk=8, seed=3)
    for x in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, x), d / x)
    return d


def _acc_likes(expdir, passes):
    out = []
    for x in passes:
        tot, frames = 0.0, 0
        # realignment passes accumulate inside the alignment job (align.X.JOB.log)
        logs = sorted((expdir / "log").glob(f"acc.{x}.*.log")) or sorted((expdir / "log").glob(f"align.{x}.*.log"))
        assert logs, f"no logs of pass {x}"
        for log in logs:
            m = re.search(r"avg like per frame \(Gaussian only\) = (\S+) over (\d+) frames", log.read_text())
            tot += float(m.group(1)) * int(m.group(2))
            frames += int(m.group(2))
        out.append(tot / frames)
    return out


def _check_alignments_spell_transcripts(work, mdl, alidir):
    """Every utterance aligned, and its non-silence phones are its words' pronunciations."""
    import kaldi_hmm_gmm  # noqa: F401
    from pynnet.hmm.ali_io import TransitionTables, read_alignments, split_to_phones
    from pynnet.hmm.model_io import read_model

    tm, _ = read_model(mdl)
    t = TransitionTables.from_model(tm)
    alis = read_alignments(alidir)
    text = dict(line.split(None, 1) for line in (work / "data/train/text").read_text().splitlines())
    assert sorted(alis) == sorted(text)
    names = dict(line.split() for line in (work / "lang/phones.txt").read_text().splitlines())
    id2phone = {int(v): k for k, v in names.items()}
    feats_len = {}
    import kaldiio
    for k, m in kaldiio.load_scp_sequential(str(work / "data/train/feats.scp")):
        feats_len[k] = m.shape[0]
    for utt, ali in alis.items():
        assert ali.size == feats_len[utt]
        ok, pieces = split_to_phones(t, ali)
        assert ok
        phones = [id2phone[int(t.phone[p[0]])].split("_")[0] for p in pieces]
        want = [p for w in text[utt].split() for p in WORDS[w].split()]
        assert [p for p in phones if p != "sil"] == want, utt


def test_train_mono_align_si_train_deltas(work):
    r = sh(work, "steps/train_mono.sh", "--nj", "2", "--num-iters", "5", "--realign-iters", "2 3 4",
           "--max-iter-inc", "3", "--totgauss", "120", "--boost-silence", "1.25",
           "data/train", "lang", "exp/mono")
    assert "Done training monophone system" in r.stdout
    mono = work / "exp/mono"
    for f in ("final.mdl", "tree", "final.occs", "ali.1.gz", "ali.2.gz", "num_jobs", "cmvn_opts", "delta_opts",
              "0.mdl", "fsts.1.ark"):
        assert (mono / f).exists(), f
    assert (mono / "num_jobs").read_text().strip() == "2"
    likes = _acc_likes(mono, range(0, 5))
    assert all(b > a for a, b in zip(likes, likes[1:])), likes
    info = sh(work, "pynnet-gmm-info", "exp/mono/final.mdl").stdout
    assert int(re.search(r"gaussians (\d+)", info).group(1)) > 23
    # the tree is a Kaldi monophone tree with one pdf per (shared) phone state
    from pynnet.hmm.tree_io import read_tree_py
    assert read_tree_py(mono / "tree").num_pdfs == 23

    r = sh(work, "steps/align_si.sh", "--nj", "2", "--boost-silence", "1.25", "data/train", "lang", "exp/mono",
           "exp/mono_ali")
    assert "24 of 24 utterances aligned" in r.stdout
    _check_alignments_spell_transcripts(work, mono / "final.mdl", work / "exp/mono_ali")

    r = sh(work, "steps/train_deltas.sh", "--num-iters", "4", "--realign-iters", "2", "--max-iter-inc", "2",
           "40", "150", "data/train", "lang", "exp/mono_ali", "exp/tri1")
    tri = work / "exp/tri1"
    assert "Done training system with delta+delta-delta features" in r.stdout
    for f in ("final.mdl", "tree", "questions.qst", "ali.1.gz", "ali.2.gz", "final.occs"):
        assert (tri / f).exists(), f
    likes = _acc_likes(tri, range(1, 4))
    assert all(b > a for a, b in zip(likes, likes[1:])), likes
    _check_alignments_spell_transcripts(work, tri / "final.mdl", tri)


def test_alignment_failures_are_reported_and_dimension_mismatch_is_an_error(work):
    if not (work / "exp/mono/final.mdl").exists():
        pytest.skip("needs the monophone system of the previous test")

    # A copy of the data in which one utterance gets a transcript far too long for its frames.
    bad = work / "data/bad"
    if bad.exists():
        shutil.rmtree(bad)
    shutil.copytree(work / "data/train", bad, ignore=shutil.ignore_patterns("split*"))
    lines = (bad / "text").read_text().splitlines()
    victim = lines[0].split()[0]
    lines[0] = victim + " " + " ".join(["cafe"] * 40)
    (bad / "text").write_text("\n".join(lines) + "\n")
    r = sh(work, "steps/align_si.sh", "--nj", "2", "data/bad", "lang", "exp/mono", "exp/bad_ali")
    assert "1 of 24 utterances failed to align" in r.stdout and victim in r.stdout
    assert "23 of 24 utterances aligned" in r.stdout
    from pynnet.hmm.ali_io import read_alignments
    alis = read_alignments(work / "exp/bad_ali")
    assert len(alis) == 23 and victim not in alis

    # Features of another dimension than the model's: a one-line error, non-zero exit.
    wrong = work / "exp/mono_wrongdim"
    if wrong.exists():
        shutil.rmtree(wrong)
    shutil.copytree(work / "exp/mono", wrong, symlinks=True)
    (wrong / "delta_opts").write_text("--delta-order 1\n")
    r = sh(work, "steps/align_si.sh", "--nj", "1", "data/train", "lang", "exp/mono_wrongdim", "exp/wrong_ali",
           check=False)
    assert r.returncode != 0
    log = (work / "exp/wrong_ali/log/align.1.log").read_text()
    errors = [ln for ln in log.splitlines() if ln.startswith("ERROR")]
    assert len(errors) == 1 and "dimension 26 does not match the model's 39" in errors[0]
    assert "Traceback" not in log
    assert not (work / "exp/wrong_ali/ali.1.gz").exists()
