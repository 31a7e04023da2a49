"""LDA+MLLT and SAT (fMLLR) GMM systems end to end on the tiny generated corpus (tests/gmm_corpus.py):
steps/train_lda_mllt.sh, align_si.sh and decode.sh on its system, steps/align_fmllr.sh,
steps/train_sat.sh, steps/decode_fmllr.sh; the Kaldi matrix formats of their transforms; and bad
input (transforms of another dimension, too few frames for a full fMLLR, options out of range).

Module fixtures train mono -> LDA+MLLT -> SAT once, with few passes and small trees (the LDA system
from the monophone alignments, as Kaldi allows: tests/test_train_gmm.py covers the delta systems),
and decode the training data with the SAT system; the kill-and-rerun tests run the same training
commands again into other dirs and compare the outputs byte for byte.
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

from gmm_corpus import make_corpus, script_env, sh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIM = 20                       # --dim of the LDA system
SPLICE = "--left-context=3 --right-context=3"   # (Kaldi's wsj recipe's; the script's default is +-4)
SPLICED = 13 * 7               # the MFCC-like features spliced over +-3 frames
NUM_UTTS = 24
SCORING = "--min-lmwt 10 --max-lmwt 10 --word-ins-penalty 0.0 --lmwt-extend 0"   # one grid point: quick

# The training commands (the kill-and-rerun test runs them again into other dirs: same outputs).
NUM_ITERS = 5                  # EM passes 1..4: MLLT (fMLLR) on 2 and 3, realignment on 3, 4 a plain pass
LDA_OPTS = ["--splice-opts", SPLICE, "--dim", str(DIM), "--num-iters", str(NUM_ITERS), "--realign-iters", "3",
            "--mllt-iters", "2 3", "--max-iter-inc", "4", "40", "150"]
SAT_OPTS = ["--num-iters", str(NUM_ITERS), "--realign-iters", "3", "--fmllr-iters", "2 3", "--max-iter-inc", "4",
            "40", "150"]
MLLT_PASSES = (2, 3)
FMLLR_PASSES = (2, 3)


def _lda_cmd(out):
    return ["steps/train_lda_mllt.sh", *LDA_OPTS, "data/train", "lang", "exp/mono_ali", out]


def _sat_cmd(out):
    return ["steps/train_sat.sh", *SAT_OPTS, "data/train", "lang", "exp/tri2_fmllr", out]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The corpus (3 speakers, 8 utterances each; split in 2 jobs: 2 speakers and 1), lang_test
    (a unigram G over the transcripts), a monophone system and its alignments, and the LDA+MLLT
    system exp/tri2 (trained from them)."""
    d = tmp_path_factory.mktemp("ldasat")
    make_corpus(str(d), num_spk=3, utts_per_spk=8, seed=3)
    for x in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, x), d / x)
    shutil.copytree(d / "lang", d / "lang_test")
    sh(d, "pynnet-make-unigram-grammar", "lang_test/words.txt", "data/train/text", "lang_test/G.fst")
    sh(d, "steps/train_mono.sh", "--nj", "2", "--num-iters", "3", "--realign-iters", "2", "--totgauss", "80",
       "--boost-silence", "1.25", "data/train", "lang", "exp/mono")
    sh(d, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/mono", "exp/mono_ali")
    r = sh(d, *_lda_cmd("exp/tri2"))
    assert "Done training system with LDA+MLLT features in exp/tri2" in r.stdout, r.stdout
    return d


@pytest.fixture(scope="module")
def sat(work):
    """exp/tri2_fmllr (align_fmllr.sh of the LDA system) and the SAT system exp/tri3 on it."""
    r = sh(work, "steps/align_fmllr.sh", "--nj", "2", "data/train", "lang", "exp/tri2", "exp/tri2_fmllr")
    assert f"{NUM_UTTS} of {NUM_UTTS} utterances aligned" in r.stdout, r.stdout
    r = sh(work, *_sat_cmd("exp/tri3"))
    assert "Done training SAT system in exp/tri3" in r.stdout, r.stdout
    assert "using transforms from exp/tri2_fmllr" in r.stdout, r.stdout
    return work


# --------------------------------------------------------------------------- helpers
def _model(path):
    from pynnet.hmm.gmm import AmGmm
    from pynnet.hmm.model_io import read_model

    tm, am = read_model(str(path))
    return tm, AmGmm.from_khg(am)


def _mat(path):
    import kaldiio

    return np.asarray(kaldiio.load_mat(str(path)), np.float64)


def _ark(path) -> dict[str, np.ndarray]:
    import kaldiio

    return {k: np.asarray(v, np.float64) for k, v in kaldiio.load_ark(str(path))}


def _speakers(work, job: int) -> list[str]:
    return [ln.split()[0] for ln in (work / f"data/train/split2/{job}/spk2utt").read_text().splitlines()]


def _text_keys(work) -> list[str]:
    return sorted(ln.split()[0] for ln in (work / "data/train/text").read_text().splitlines())


def _log_float(path, pattern: str) -> float:
    m = re.search(pattern, path.read_text())
    assert m, (path, path.read_text()[-2000:])
    return float(m.group(1))


def _pass_likes(expdir, passes) -> list[float]:
    """The frame-weighted average likelihood (Gaussian only) of each training pass's statistics
    (acc.X.JOB.log, or align.X.JOB.log where the alignment job accumulated them)."""
    out = []
    for x in passes:
        logs = sorted((expdir / "log").glob(f"acc.{x}.*.log")) or sorted((expdir / "log").glob(f"align.{x}.*.log"))
        assert len(logs) == 2, (x, logs)
        tot = frames = 0.0
        for log in logs:
            m = re.search(r"avg like per frame \(Gaussian only\) = (\S+) over (\d+) frames", log.read_text())
            assert m, log
            tot += float(m.group(1)) * int(m.group(2))
            frames += int(m.group(2))
        out.append(tot / frames)
    return out


def _one_line_error(r) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def _script_reason(r, script: str) -> str:
    """A failed job's script: exit 1 and one line of its own giving the reason (run.pl's own
    lines, naming the logs, may come before it)."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"{script}: ")]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and all(ln.startswith(("run.pl: ", f"{script}: "))
                                               for ln in r.stderr.splitlines() if ln.strip()), r.stderr
    return lines[0]


def _graph(work, exp: str) -> str:
    g = f"exp/{exp}/graph"
    if not (work / g / "HCLG.fst").exists():
        sh(work, "utils/mkgraph.sh", "lang_test", f"exp/{exp}", g)
    return g


def _best_wer(decode_dir) -> float:
    line = (decode_dir / "scoring_kaldi/best_wer").read_text()
    return float(re.match(r"%WER (\S+) ", line).group(1))


def _feats(work, *opts, job: int = 1) -> dict[str, np.ndarray]:
    """pynnet-transform-feats of data/train's job ``job`` with ``opts`` (CMVN, no deltas)."""
    import kaldiio

    out = work / "feats_out.ark"
    sh(work, "pynnet-transform-feats", "--cmvn-opts", "", "--delta-order", "0", *opts,
       f"data/train/split2/{job}", f"ark:{out}")
    return {k: np.asarray(v, np.float64) for k, v in kaldiio.load_ark(str(out))}


# --------------------------------------------------------------------------- LDA+MLLT
def test_lda_mllt_system(work):
    tri = work / "exp/tri2"
    for f in ("final.mdl", "final.mat", "full.mat", "0.mat", "splice_opts", "cmvn_opts", "tree", "final.occs",
              "ali.1.gz", "ali.2.gz", "fsts.1.gz", "num_jobs", "phones.txt"):
        assert (tri / f).exists(), f
    assert not (tri / "delta_opts").exists()      # an LDA system's features: splice_opts + final.mat
    assert (tri / "splice_opts").read_text() == SPLICE + "\n"
    assert not (tri / "cache").exists() and not list(tri.glob("*.premllt.mdl")) and not list(tri.glob("*.macc"))

    # final.mat: Kaldi's binary float matrix, (dim, spliced dim): the last MLLT pass's
    from pynnet.hmm.train import read_matrix
    assert os.readlink(tri / "final.mat") == f"{MLLT_PASSES[-1]}.mat"
    assert (tri / "final.mat").read_bytes()[:5] == b"\0BFM "
    final = _mat(tri / "final.mat")
    assert final.shape == (DIM, SPLICED)
    np.testing.assert_array_equal(read_matrix(str(tri / "final.mat")), final)
    assert _mat(tri / "full.mat").shape == (SPLICED, SPLICED)
    lda = _mat(tri / "0.mat")
    assert lda.shape == (DIM, SPLICED)
    # each MLLT pass composes a square transform on the left: x.mat = M_x . previous, so every x.mat
    # lies in the row space of the LDA matrix (and is not the LDA matrix itself)
    prev = lda
    jacobian = {0: 0.0}
    for x in MLLT_PASSES:
        m = _mat(tri / f"{x}.mat")
        sq = m @ np.linalg.pinv(prev)
        np.testing.assert_allclose(sq @ prev, m, atol=1e-4 * np.abs(m).max())
        assert not np.allclose(sq, np.eye(DIM), atol=1e-3)
        jacobian[x] = jacobian[max(jacobian)] + np.linalg.slogdet(sq)[1]
        prev = m
    np.testing.assert_array_equal(prev, final)

    # the model is --dim dimensional
    tm, am = _model(tri / "final.mdl")
    assert am.dim == DIM

    # MLLT's objective improves (logged as Kaldi's est-mllt does), on the MLLT passes only
    assert sorted(p.name for p in (tri / "log").glob("mupdate.*.log")) == [f"mupdate.{x}.log" for x in MLLT_PASSES]
    for x in MLLT_PASSES:
        impr = _log_float(tri / f"log/mupdate.{x}.log",
                          r"Overall objective function improvement for MLLT is (\S+) over \d+ frames")
        assert impr >= 0, (x, impr)
    # (MLLT changes the volume of the feature space, log|det M| > 0 here: the likelihoods of the
    # passes after it are not comparable with those before it without that term)
    assert jacobian[MLLT_PASSES[0]] > 0.1

    # training likelihood over the passes: up on every pass, once the features of an MLLT pass
    # are counted with their Jacobian (log|det| of the MLLT transforms since the LDA features)
    likes = _pass_likes(tri, range(1, NUM_ITERS))
    corr = [like + jacobian[max(k for k in jacobian if k <= x)] for x, like in zip(range(1, NUM_ITERS), likes)]
    assert all(b > a for a, b in zip(corr, corr[1:])), (likes, corr)
    plain = [b > a for x, a, b in zip(range(2, NUM_ITERS), likes, likes[1:]) if x not in MLLT_PASSES]
    assert all(plain), likes
    assert likes[-1] > likes[0] + 1.0, likes

    # every utterance aligned, with the final model's transition ids
    from pynnet.hmm.ali_io import read_alignments
    alis = read_alignments(str(tri))
    assert sorted(alis) == _text_keys(work)


def test_lda_features_are_splice_then_final_mat(work):
    """pynnet-transform-feats with splice_opts and final.mat: final.mat times the spliced CMVN
    features (each utterance clamped at its own edges, as splice-feats)."""
    spliced = _feats(work, "--splice-opts", SPLICE)
    lda = _feats(work, "--splice-opts", SPLICE, "--transform", "exp/tri2/final.mat")
    plain = _feats(work)
    mat = _mat(work / "exp/tri2/final.mat")
    assert sorted(spliced) == sorted(lda) == sorted(plain) and len(lda) == 16
    for utt, x in plain.items():
        t = x.shape[0]
        want = np.hstack([x[np.clip(np.arange(t) + k, 0, t - 1)] for k in range(-3, 4)])
        np.testing.assert_allclose(spliced[utt], want, atol=1e-5)
        np.testing.assert_allclose(lda[utt], spliced[utt] @ mat.T, atol=1e-3, rtol=1e-4)


def test_align_si_and_decode_take_the_lda_system(work):
    r = sh(work, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/tri2", "exp/tri2_ali")
    assert f"{NUM_UTTS} of {NUM_UTTS} utterances aligned" in r.stdout, r.stdout
    ali = work / "exp/tri2_ali"
    # the align dir has the system's features: final.mat (a file, the same bytes), splice_opts
    assert not os.path.islink(ali / "final.mat")
    assert (ali / "final.mat").read_bytes() == (work / "exp/tri2/final.mat").read_bytes()
    assert (ali / "splice_opts").read_text() == SPLICE + "\n" and not (ali / "delta_opts").exists()
    assert "--transform exp/tri2_ali/final.mat" in (ali / "log/align.1.log").read_text()
    from pynnet.hmm.ali_io import read_alignments
    new, old = read_alignments(str(ali)), read_alignments(str(work / "exp/tri2"))
    assert sorted(new) == _text_keys(work)
    # the features the system was trained on: its own last alignments come out again (nearly)
    same = sum(int((new[u] == old[u]).sum()) for u in new) / sum(a.size for a in new.values())
    assert same > 0.9, same

    graph = _graph(work, "tri2")
    r = sh(work, "steps/decode.sh", "--nj", "2", "--scoring-opts", SCORING, graph,
           "data/train", "exp/tri2/decode")
    dec = work / "exp/tri2/decode"
    assert sorted(p.name for p in dec.glob("lat.*.gz")) == ["lat.1.gz", "lat.2.gz"]
    assert "--transform exp/tri2/final.mat" in (dec / "log/decode.1.log").read_text()
    assert _best_wer(dec) <= 10.0, (dec / "scoring_kaldi/best_wer").read_text()


# --------------------------------------------------------------------------- fMLLR and SAT
def _check_trans(work, d, name="trans", identity_ok=False) -> dict[str, np.ndarray]:
    """<d>/<name>.JOB: per job an ark keyed by that job's speakers, each (DIM, DIM + 1)."""
    out = {}
    for job in (1, 2):
        path = d / f"{name}.{job}"
        assert path.read_bytes()[:len(_speakers(work, job)[0]) + 6].endswith(b" \0BFM "), path
        t = _ark(path)
        assert sorted(t) == _speakers(work, job), (path, sorted(t))
        for spk, w in t.items():
            assert w.shape == (DIM, DIM + 1), (path, spk, w.shape)
            assert np.isfinite(w).all()
            if not identity_ok:
                assert not np.allclose(w, np.eye(DIM, DIM + 1), atol=1e-3), (path, spk)
        out.update(t)
    return out


def test_align_fmllr(sat):
    d = sat / "exp/tri2_fmllr"
    trans = _check_trans(sat, d)
    assert sorted(trans) == ["spk1", "spk2", "spk3"]
    from pynnet.hmm.ali_io import read_alignments
    assert sorted(read_alignments(str(d))) == _text_keys(sat)
    for job in (1, 2):
        assert (d / f"pre_ali.{job}.gz").exists()
        impr = _log_float(d / f"log/fmllr.{job}.log", r"auxf improvement (\S+) per frame")
        assert impr > 0, impr
        assert "--fmllr exp/tri2_fmllr/trans.1" in (d / "log/align_pass2.1.log").read_text()
    assert (d / "final.mat").read_bytes() == (sat / "exp/tri2/final.mat").read_bytes()
    assert not (d / "final.alimdl").exists()    # a speaker-independent source: final.mdl aligns first
    # the adapted features are W [x; 1] of the LDA features, the speaker's W (utt2spk)
    lda = _feats(sat, "--splice-opts", SPLICE, "--transform", "exp/tri2/final.mat")
    adapted = _feats(sat, "--splice-opts", SPLICE, "--transform", "exp/tri2/final.mat",
                     "--fmllr", "exp/tri2_fmllr/trans.1")
    assert sorted(adapted) == sorted(lda)
    for utt, x in lda.items():
        w = trans[utt.split("-")[0]]
        np.testing.assert_allclose(adapted[utt], x @ w[:, :DIM].T + w[:, DIM], atol=1e-3, rtol=1e-4)


def test_train_sat(sat):
    tri = sat / "exp/tri3"
    for f in ("final.mdl", "final.alimdl", "final.mat", "splice_opts", "tree", "ali.1.gz", "ali.2.gz",
              "trans.1", "trans.2", "final.occs"):
        assert (tri / f).exists(), f
    assert (tri / "final.mat").read_bytes() == (sat / "exp/tri2/final.mat").read_bytes()
    assert not list(tri.glob("tmp_trans.*")) and not list(tri.glob("composed_trans.*"))
    trans = _check_trans(sat, tri)
    start = _check_trans(sat, sat / "exp/tri2_fmllr")
    for spk in trans:    # re-estimated on the fMLLR passes, composed with the start transforms
        assert not np.allclose(trans[spk], start[spk], atol=1e-3), spk
    assert sorted(p.name for p in (tri / "log").glob("fmllr.*.1.log")) == [f"fmllr.{x}.1.log" for x in FMLLR_PASSES]
    for x in FMLLR_PASSES:
        assert _log_float(tri / f"log/fmllr.{x}.1.log", r"auxf improvement (\S+) per frame") >= 0

    # the alignment model: Gaussian for Gaussian the final model's, other means and variances
    tm, am = _model(tri / "final.mdl")
    _, ali_am = _model(tri / "final.alimdl")
    assert am.dim == ali_am.dim == DIM
    assert [w.size for w in ali_am.weights] == [w.size for w in am.weights]
    assert sum(w.size for w in am.weights) > am.num_pdfs   # (mixed up: more than one Gaussian per pdf)
    assert not np.allclose(np.concatenate([ali_am.means(p) for p in range(am.num_pdfs)]),
                           np.concatenate([am.means(p) for p in range(am.num_pdfs)]), atol=1e-3)
    # training likelihood: up on the passes that keep the transforms (the fMLLR passes change the
    # features: their likelihoods lack the Jacobian), and up overall
    likes = _pass_likes(tri, range(1, NUM_ITERS))
    assert all(b > a for x, a, b in zip(range(2, NUM_ITERS), likes, likes[1:]) if x not in FMLLR_PASSES), likes
    assert likes[-1] > likes[0], likes
    from pynnet.hmm.ali_io import read_alignments
    assert sorted(read_alignments(str(tri))) == _text_keys(sat)


def test_align_fmllr_with_the_sat_system(sat):
    """align_fmllr.sh of a SAT system: the first pass with final.alimdl on the speaker-independent
    features, its Gaussian posteriors for the transforms (--gpost-model), then final.mdl."""
    r = sh(sat, "steps/align_fmllr.sh", "--nj", "2", "data/train", "lang", "exp/tri3", "exp/tri3_ali")
    assert f"{NUM_UTTS} of {NUM_UTTS} utterances aligned" in r.stdout and "with final.alimdl" in r.stdout, r.stdout
    d = sat / "exp/tri3_ali"
    assert (d / "final.alimdl").read_bytes() == (sat / "exp/tri3/final.alimdl").read_bytes()
    assert "exp/tri3_ali/final.alimdl" in (d / "log/align_pass1.1.log").read_text()
    assert "--gpost-model exp/tri3_ali/final.alimdl" in (d / "log/fmllr.1.log").read_text()
    _check_trans(sat, d)
    from pynnet.hmm.ali_io import read_alignments
    new, old = read_alignments(str(d)), read_alignments(str(sat / "exp/tri3"))
    assert sorted(new) == _text_keys(sat)
    same = sum(int((new[u] == old[u]).sum()) for u in new) / sum(a.size for a in new.values())
    assert same > 0.9, same


@pytest.fixture(scope="module")
def sat_decoded(sat):
    """exp/tri3/decode: decode_fmllr.sh of the training data (and its stdout)."""
    r = sh(sat, "steps/decode_fmllr.sh", "--nj", "2", "--scoring-opts", SCORING, _graph(sat, "tri3"),
           "data/train", "exp/tri3/decode")
    return sat, r.stdout


def test_decode_fmllr(sat_decoded):
    sat, stdout = sat_decoded
    dec, si = sat / "exp/tri3/decode", sat / "exp/tri3/decode.si"
    # the speaker-independent pass: decoded with final.alimdl, scored
    assert sorted(p.name for p in si.glob("lat.*.gz")) == ["lat.1.gz", "lat.2.gz"]
    assert "exp/tri3/final.alimdl" in (si / "log/decode.1.log").read_text()
    assert _best_wer(si) <= 15.0
    pre = _check_trans(sat, dec, "pre_trans")
    final = _check_trans(sat, dec, "trans")
    for spk in final:     # the second estimate composed with the first
        assert not np.allclose(final[spk], pre[spk], atol=1e-4), spk
    assert sorted(p.name for p in dec.glob("lat.*")) == ["lat.1.gz", "lat.2.gz"]
    assert not list(dec.glob("trans_tmp.*"))
    assert _best_wer(dec) <= 10.0, (dec / "scoring_kaldi/best_wer").read_text()
    assert "done decoding exp/tri3/decode" in stdout


def _gunzip(path) -> bytes:
    with gzip.open(path, "rb") as f:
        return f.read()


def test_decode_fmllr_killed_or_failed_leaves_no_lattices(sat_decoded, tmp_path):
    """decode_fmllr.sh killed (SIGKILL: no trap runs) after its rescoring jobs, before the
    lattices are renamed: no lat.JOB.gz (the pass-3 lattices are not the decode's); the same
    command again gives the uninterrupted decode's lattices and transforms. A pass whose jobs
    fail ends the script: one reason, exit 1, no lattices, nothing scored."""
    sat, _ = sat_decoded
    graph = _graph(sat, "tri3")
    ref = sat / "exp/tri3/decode"
    killer = tmp_path / "run_then_kill.sh"
    killer.write_text(f'#!/usr/bin/env bash\n{ROOT}/utils/run.pl "$@"\nrc=$?\n'
                      'case "$*" in *log/rescore.JOB.log*) kill -9 $PPID;; esac\nexit $rc\n')
    killer.chmod(0o755)
    cmd = ["steps/decode_fmllr.sh", "--nj", "2", "--skip-scoring", "true", "--si-dir", "exp/tri3/decode.si"]
    dec = sat / "exp/tri3/decode_killed"
    r = subprocess.run([*cmd, "--cmd", str(killer), graph, "data/train", "exp/tri3/decode_killed"], cwd=sat,
                       env=script_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == -9, r.stdout + r.stderr
    assert (dec / "log/rescore.2.log").exists() and (dec / "trans.2").exists()
    assert not (dec / "lat.1.gz").exists() and not (dec / "lat.2.gz").exists(), sorted(os.listdir(dec))
    sh(sat, *cmd, graph, "data/train", "exp/tri3/decode_killed")
    assert sorted(p.name for p in dec.glob("lat.*")) == ["lat.1.gz", "lat.2.gz"]
    for n in (1, 2):
        assert _gunzip(dec / f"lat.{n}.gz") == _gunzip(ref / f"lat.{n}.gz"), n
        for f in (f"trans.{n}", f"pre_trans.{n}"):
            assert (dec / f).read_bytes() == (ref / f).read_bytes(), f

    # rescoring with a model of another dimension fails: the script ends there (it went on to score
    # the unrescored lattices, exit 0)
    r = sh(sat, "steps/decode_fmllr.sh", "--nj", "2", "--si-dir", "exp/tri3/decode.si", "--final-model",
           "exp/mono/final.mdl", graph, "data/train", "exp/tri3/decode_badfinal", check=False)
    reason = _script_reason(r, "steps/decode_fmllr.sh")
    assert reason.startswith("steps/decode_fmllr.sh: rescore failed: ERROR (pynnet-gmm-rescore-lattice): ") and \
        "feature dimension 20 does not match the model's 39 (exp/mono/final.mdl)" in reason, reason
    bad = sat / "exp/tri3/decode_badfinal"
    assert not (bad / "lat.1.gz").exists() and not (bad / "lat.2.gz").exists(), sorted(os.listdir(bad))
    assert not list(bad.glob("wer_*")) and not (bad / "scoring_kaldi").exists()


# --------------------------------------------------------------------------- Kaldi matrix formats
def _kaldi_text_matrix(m: np.ndarray) -> str:
    rows = [" ".join(np.format_float_positional(np.float32(v), unique=True, trim="-") for v in row) for row in m]
    return " [\n  " + "\n  ".join(rows) + " ]\n"


def test_transform_files_are_kaldi_matrices(work, tmp_path):
    import kaldiio

    from pynnet.hmm.adapt import compose_transforms
    from pynnet.hmm.train import read_matrix

    tri = work / "exp/tri2"
    # est-lda's outputs (0.mat, full.mat) and compose-transforms' (the MLLT passes' x.mat)
    for f in ("0.mat", "full.mat", f"{MLLT_PASSES[0]}.mat"):
        assert (tri / f).read_bytes()[:6] == b"\0BFM \4", f
    # est-mllt on statistics accumulated here
    sh(work, "pynnet-gmm-acc-mllt", "--splice-opts", SPLICE, "--transform", "exp/tri2/final.mat",
       "--silence-phones", (work / "lang/phones/silence.csl").read_text().strip(), "exp/tri2/final.mdl",
       "data/train/split2/1", "exp/tri2/ali.1.gz", str(tmp_path / "m.acc"))
    r = sh(work, "pynnet-est-mllt", str(tmp_path / "mllt.mat"), str(tmp_path / "m.acc"))
    assert float(re.search(r"improvement for MLLT is (\S+) over", r.stderr).group(1)) >= 0
    assert (tmp_path / "mllt.mat").read_bytes()[:6] == b"\0BFM \4"
    mllt = _mat(tmp_path / "mllt.mat")
    assert mllt.shape == (DIM, DIM)
    final = _mat(tri / "final.mat")
    sh(work, "pynnet-compose-transforms", str(tmp_path / "mllt.mat"), "exp/tri2/final.mat", str(tmp_path / "c.mat"))
    assert (tmp_path / "c.mat").read_bytes()[:6] == b"\0BFM \4"
    np.testing.assert_allclose(_mat(tmp_path / "c.mat"), mllt @ final, rtol=1e-5, atol=1e-5)

    # a Kaldi text matrix ("[ ... ]", as copy-matrix --binary=false writes): read as the binary one
    text = tmp_path / "final_text.mat"
    text.write_text(_kaldi_text_matrix(final))
    np.testing.assert_array_equal(read_matrix(str(text)), final)
    np.testing.assert_array_equal(np.asarray(kaldiio.load_mat(str(text)), np.float64), final)
    sh(work, "pynnet-compose-transforms", str(tmp_path / "mllt.mat"), str(text), str(tmp_path / "c_text.mat"))
    assert (tmp_path / "c_text.mat").read_bytes() == (tmp_path / "c.mat").read_bytes()
    feats_bin = _feats(work, "--splice-opts", SPLICE, "--transform", "exp/tri2/final.mat")
    feats_txt = _feats(work, "--splice-opts", SPLICE, "--transform", str(text))
    for utt in feats_bin:
        np.testing.assert_array_equal(feats_txt[utt], feats_bin[utt])
    # and one with an offset column (d x d+1, est-lda --remove-offset / fMLLR-style): affine
    aff = np.hstack([final, np.arange(DIM, dtype=np.float64)[:, None] / 4])
    (tmp_path / "aff.mat").write_text(_kaldi_text_matrix(aff))
    feats_aff = _feats(work, "--splice-opts", SPLICE, "--transform", str(tmp_path / "aff.mat"))
    for utt in feats_bin:
        np.testing.assert_allclose(feats_aff[utt], feats_bin[utt] + np.arange(DIM) / 4, atol=1e-4)

    # tables: compose-transforms per speaker (table o table, matrix o table)
    w = {}
    for job in (1, 2):
        ws = {spk: np.hstack([np.diag(1 + 0.1 * np.arange(DIM) + 0.01 * i), np.full((DIM, 1), 0.5 * i)])
              for i, spk in enumerate(_speakers(work, job))}
        with kaldiio.WriteHelper(f"ark:{tmp_path}/w.{job}") as wr:
            for spk, m in ws.items():
                wr(spk, m.astype(np.float32))
        w.update(ws)
    sh(work, "pynnet-compose-transforms", "--b-is-affine", "true", f"ark:{tmp_path}/w.1", f"ark:{tmp_path}/w.1",
       f"ark:{tmp_path}/ww.1")
    ww = _ark(tmp_path / "ww.1")
    assert sorted(ww) == _speakers(work, 1)
    for spk, c in ww.items():
        a = w[spk]
        want = np.hstack([a[:, :DIM] @ a[:, :DIM], (a[:, :DIM] @ a[:, DIM] + a[:, DIM])[:, None]])
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c, compose_transforms(a, a, True), rtol=1e-5, atol=1e-5)
    sh(work, "pynnet-compose-transforms", str(tmp_path / "mllt.mat"), f"ark:{tmp_path}/w.2", f"ark:{tmp_path}/mw.2")
    mw = _ark(tmp_path / "mw.2")
    assert sorted(mw) == _speakers(work, 2)
    for spk, c in mw.items():
        np.testing.assert_allclose(c, mllt @ w[spk], rtol=1e-5, atol=1e-5)
    # speakers only in a: warned about, left out
    both = tmp_path / "w12"
    both.write_bytes((tmp_path / "w.1").read_bytes() + (tmp_path / "w.2").read_bytes())
    r = sh(work, "pynnet-compose-transforms", f"ark:{tmp_path}/w.1", f"ark:{both}", f"ark:{tmp_path}/x.1")
    assert "WARNING" not in r.stderr, r.stderr
    r = sh(work, "pynnet-compose-transforms", f"ark:{both}", f"ark:{tmp_path}/w.1", f"ark:{tmp_path}/x.12")
    missing = sorted(re.findall(r"WARNING: no matrix for '(\S+)' in ", r.stderr))
    assert missing == _speakers(work, 2), r.stderr
    assert sorted(_ark(tmp_path / "x.12")) == _speakers(work, 1)
    np.testing.assert_array_equal(_ark(tmp_path / "x.12")[_speakers(work, 1)[0]],
                                  _ark(tmp_path / "x.1")[_speakers(work, 1)[0]])
    # nothing in common: one error, no (empty) output
    r = sh(work, "pynnet-compose-transforms", f"ark:{tmp_path}/w.1", f"ark:{tmp_path}/w.2", f"ark:{tmp_path}/x.0",
           check=False)
    assert r.returncode == 1 and not (tmp_path / "x.0").exists()
    errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("WARNING: no matrix for ")]
    assert errors == [f"ERROR (pynnet-compose-transforms): ark:{tmp_path}/x.0: no key has a matrix in both "
                      f"ark:{tmp_path}/w.1 and ark:{tmp_path}/w.2: nothing to compose"], r.stderr
    # a table needs a table output
    r = sh(work, "pynnet-compose-transforms", str(tmp_path / "mllt.mat"), f"ark:{tmp_path}/w.1",
           str(tmp_path / "plain.mat"), check=False)
    assert "a table input needs a table output" in _one_line_error(r)
    assert not (tmp_path / "plain.mat").exists()


# --------------------------------------------------------------------------- bad input
def test_transform_of_another_dimension_is_a_one_line_error(work, tmp_path):
    """A final.mat that does not fit the features (another splice) or the model (another --dim):
    pynnet-gmm-acc-stats-ali and steps/decode.sh fail in one line naming the file, writing nothing."""
    rng = np.random.default_rng(0)
    import kaldiio
    wrong_in = tmp_path / "wrong_in.mat"      # made for +-4 frames of splicing: 20 x 117
    kaldiio.save_mat(str(wrong_in), rng.normal(size=(DIM, 13 * 9)).astype(np.float32))
    wrong_out = tmp_path / "wrong_out.mat"    # an LDA to 15 dimensions: 15 x 91
    kaldiio.save_mat(str(wrong_out), rng.normal(size=(15, SPLICED)).astype(np.float32))
    acc = tmp_path / "x.acc"
    base = ["pynnet-gmm-acc-stats-ali", "--cmvn-opts", "", "--delta-order", "0", "--splice-opts", SPLICE]
    args = ["exp/tri2/final.mdl", "data/train/split2/1", "exp/tri2/ali.1.gz", str(acc)]
    line = _one_line_error(sh(work, *base, "--transform", str(wrong_in), *args, check=False))
    assert line == (f"ERROR (pynnet-gmm-acc-stats-ali): {wrong_in}: transform is 20 x 117 but the features are "
                    "91-dimensional (wrong --splice-opts, or a final.mat of another system?)"), line
    line = _one_line_error(sh(work, *base, "--transform", str(wrong_out), *args, check=False))
    assert "feature dimension 15 does not match the model's 20 (exp/tri2/final.mdl)" in line, line
    assert not acc.exists() and not list(tmp_path.glob(".x.acc*"))
    # the right one works
    sh(work, *base, "--transform", "exp/tri2/final.mat", *args)
    assert acc.exists()

    # decode.sh of a system whose final.mat is another system's
    bad = work / "exp/tri2_badmat"
    bad.mkdir()
    for f in ("final.mdl", "tree", "cmvn_opts", "splice_opts"):
        shutil.copy(work / "exp/tri2" / f, bad / f)
    shutil.copy(wrong_in, bad / "final.mat")
    graph = _graph(work, "tri2")
    r = sh(work, "steps/decode.sh", "--nj", "2", graph, "data/train", "exp/tri2_badmat/decode", check=False)
    reason = _script_reason(r, "steps/decode.sh")
    assert reason.startswith("steps/decode.sh: decoding failed: ERROR (pynnet-gmm-latgen-faster): "
                             "exp/tri2_badmat/final.mat: transform is 20 x 117 but the features are 91-dimensional"), \
        reason
    assert not list((bad / "decode").glob("lat.*")) and not (bad / "decode/scoring_kaldi").exists()


def test_fmllr_of_another_system_is_a_one_line_error(sat, tmp_path):
    """align_fmllr.sh of the monophone system (delta features: its transforms are 39 x 40) and
    those transforms given to the 20-dimensional LDA system (--fmllr, decode.sh --transform-dir):
    one line, nothing written."""
    r = sh(sat, "steps/align_fmllr.sh", "--nj", "2", "data/train", "lang", "exp/mono", "exp/mono_fmllr")
    assert f"{NUM_UTTS} of {NUM_UTTS} utterances aligned" in r.stdout, r.stdout
    assert "--delta-order 2" in (sat / "exp/mono_fmllr/log/fmllr.1.log").read_text()
    mono_trans = sat / "exp/mono_fmllr/trans.1"
    assert sorted(_ark(mono_trans)) == _speakers(sat, 1)
    assert {w.shape for w in _ark(mono_trans).values()} == {(39, 40)}
    acc = tmp_path / "x.acc"
    r = sh(sat, "pynnet-gmm-acc-stats-ali", "--delta-order", "0", "--splice-opts", SPLICE, "--transform",
           "exp/tri2/final.mat", "--fmllr", str(mono_trans), "exp/tri3/final.mdl", "data/train/split2/1",
           "exp/tri3/ali.1.gz", str(acc), check=False)
    line = _one_line_error(r)
    assert line == (f"ERROR (pynnet-gmm-acc-stats-ali): {mono_trans}: fMLLR transforms are 39 x 40 but the features "
                    "are 20-dimensional (transforms made with another system?)"), line
    assert not acc.exists()
    # steps/decode.sh --transform-dir with them: refused before decoding (the align dir has no
    # final.mat, the LDA system has one), one line, no decode dir
    r = sh(sat, "steps/decode.sh", "--nj", "2", "--transform-dir", "exp/mono_fmllr", _graph(sat, "tri3"), "data/train",
           "exp/tri3/decode_monotrans", check=False)
    reason = _script_reason(r, "steps/decode.sh")
    assert reason == ("steps/decode.sh: the transforms of exp/mono_fmllr were made with other features than "
                      "exp/tri3's (no final.mat vs exp/tri3/final.mat): transforms of another system?"), reason
    assert not (sat / "exp/tri3/decode_monotrans").exists()
    # an LDA system's transforms with another final.mat (same dimension): refused the same way
    other = sat / "exp/tri3_otherali"
    other.mkdir()
    for f in ("trans.1", "trans.2", "num_jobs"):
        (other / f).write_bytes((sat / "exp/tri2_fmllr" / f).read_bytes())
    (other / "final.mat").write_bytes((sat / "exp/tri2/0.mat").read_bytes())   # LDA without MLLT: 20 x 91 too
    r = sh(sat, "steps/decode.sh", "--nj", "2", "--transform-dir", "exp/tri3_otherali", _graph(sat, "tri3"),
           "data/train", "exp/tri3/decode_othertrans", check=False)
    assert _script_reason(r, "steps/decode.sh").startswith(
        "steps/decode.sh: the transforms of exp/tri3_otherali were made with other features than exp/tri3's"), r.stderr
    assert not (sat / "exp/tri3/decode_othertrans").exists()


def test_too_few_frames_for_a_full_fmllr_falls_back(work, tmp_path):
    """A speaker below --fmllr-min-count gets a smaller update (diag: an offset and a diagonal
    matrix), said in the log; every speaker still gets a transform."""
    sil = (work / "lang/phones/silence.csl").read_text().strip()
    common = ["pynnet-gmm-est-fmllr", "--splice-opts", SPLICE, "--transform", "exp/tri2/final.mat",
              "--silence-phones", sil]
    args = ["exp/tri2/final.mdl", "data/train/split2/1", "exp/tri2/ali.1.gz"]
    r = sh(work, *common, "--fmllr-min-count", "2000", *args, f"ark:{tmp_path}/diag.1")
    fallbacks = re.findall(r"speaker (\S+): ([\d.]+) frames \(< --fmllr-min-count 2000\): 'diag' update instead of "
                           r"'full'", r.stderr)
    assert sorted(s for s, _ in fallbacks) == _speakers(work, 1), r.stderr
    assert all(400 < float(n) < 2000 for _, n in fallbacks), fallbacks
    diag = _ark(tmp_path / "diag.1")
    assert sorted(diag) == _speakers(work, 1)
    for spk, w in diag.items():
        assert w.shape == (DIM, DIM + 1)
        lin = w[:, :DIM]
        np.testing.assert_array_equal(lin - np.diag(np.diag(lin)), 0)
        assert not np.allclose(np.diag(lin), 1, atol=1e-3) and not np.allclose(w[:, DIM], 0, atol=1e-3)
    # far too few: no update at all, the identity ("none"), still one per speaker
    r = sh(work, *common, "--fmllr-min-count", "1e6", *args, f"ark:{tmp_path}/none.1")
    assert len(re.findall(r"'none' update instead of 'full'", r.stderr)) == 2, r.stderr
    none = _ark(tmp_path / "none.1")
    assert sorted(none) == _speakers(work, 1)
    for w in none.values():
        np.testing.assert_array_equal(w, np.eye(DIM, DIM + 1))
    # enough frames: full, nothing said
    r = sh(work, *common, "--fmllr-min-count", "100", *args, f"ark:{tmp_path}/full.1")
    assert "instead of" not in r.stderr
    full = _ark(tmp_path / "full.1")
    assert sorted(full) == _speakers(work, 1)
    assert any(np.abs(w[:, :DIM] - np.diag(np.diag(w[:, :DIM]))).max() > 1e-3 for w in full.values())


def test_script_option_errors(sat):
    graph = _graph(sat, "tri3")
    # decode_fmllr.sh --si-dir of another number of jobs, or without lattices
    si = sat / "exp/tri3/decode_si1"
    si.mkdir(exist_ok=True)
    (si / "num_jobs").write_text("1\n")
    with gzip.open(si / "lat.1.gz", "wb") as f:
        f.write(b"")
    r = sh(sat, "steps/decode_fmllr.sh", "--nj", "2", "--si-dir", "exp/tri3/decode_si1", graph, "data/train",
           "exp/tri3/decode_bad_si", check=False)
    line = _one_line_error(r)
    assert line == ("steps/decode_fmllr.sh: exp/tri3/decode_si1 has 1 jobs, this decode 2: use --nj 1"), line
    assert not (sat / "exp/tri3/decode_bad_si").exists()
    r = sh(sat, "steps/decode_fmllr.sh", "--nj", "2", "--si-dir", "exp/tri3", graph, "data/train",
           "exp/tri3/decode_bad_si", check=False)
    line = _one_line_error(r)
    assert line == "steps/decode_fmllr.sh: no such file exp/tri3/lat.1.gz (--si-dir)", line
    assert not (sat / "exp/tri3/decode_bad_si").exists()

    # an fMLLR update type that does not exist: refused before anything is made
    for script, args in (("steps/train_sat.sh", ["40", "150", "data/train", "lang", "exp/tri2_fmllr", "exp/sat_bad"]),
                         ("steps/align_fmllr.sh", ["data/train", "lang", "exp/tri3", "exp/sat_bad"]),
                         ("steps/decode_fmllr.sh", [graph, "data/train", "exp/tri3/decode_bad"])):
        r = sh(sat, script, "--fmllr-update-type", "bogus", *args, check=False)
        line = _one_line_error(r)
        assert line == f"{script}: --fmllr-update-type must be full, diag, offset or none", (script, line)
        assert not (sat / args[-1]).exists(), script
    # and in the program
    r = sh(sat, "pynnet-gmm-est-fmllr", "--fmllr-update-type", "bogus", "exp/tri3/final.mdl", "data/train",
           "exp/tri3/ali.1.gz", "ark:/dev/null", check=False)
    assert r.returncode != 0 and "bogus" in r.stderr and "Traceback" not in r.stderr
    # --mllt-iters that are not pass numbers
    r = sh(sat, "steps/train_lda_mllt.sh", "--mllt-iters", "2 x", "40", "150", "data/train", "lang", "exp/mono_ali",
           "exp/lda_bad", check=False)
    assert _one_line_error(r) == "steps/train_lda_mllt.sh: --mllt-iters: 'x' is not a pass number"
    assert not (sat / "exp/lda_bad").exists()


# --------------------------------------------------------------------------- kill -9 and rerun
def _kill_during(work, cmd, marker: str, timeout: float = 300) -> None:
    """Start ``cmd`` in its own process group, SIGKILL the whole group as soon as ``marker`` is in
    its output (a pass under way), and wait for it."""
    log = work / "killed.out"
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, cwd=work, env=script_env(), stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        t0 = time.monotonic()
        while marker not in log.read_text():
            assert p.poll() is None, f"{cmd[0]} ended before '{marker}':\n{log.read_text()[-2000:]}"
            assert time.monotonic() - t0 < timeout, f"no '{marker}' in {timeout} s"
            time.sleep(0.05)
        time.sleep(0.3)     # (a moment into the pass's jobs; any moment must resume to the same outputs)
        os.killpg(p.pid, signal.SIGKILL)
        assert p.wait() == -signal.SIGKILL


@pytest.mark.parametrize("which", ["lda_mllt", "sat"])
def test_killed_training_reruns_to_the_same_model(sat, which):
    """kill -9 of the whole process group in the middle of an MLLT (fMLLR) pass, then the same
    command again: the same final.mdl, final.mat, alignments and transforms as the uninterrupted run."""
    ref, out = ("exp/tri2", "exp/tri2_killed") if which == "lda_mllt" else ("exp/tri3", "exp/tri3_killed")
    cmd = _lda_cmd(out) if which == "lda_mllt" else _sat_cmd(out)
    marker = "estimating MLLT" if which == "lda_mllt" else "estimating fMLLR transforms"
    _kill_during(sat, cmd, marker)
    assert not (sat / out / "final.mdl").exists()
    sh(sat, *cmd)
    files = ["final.mdl", "final.mat", "final.occs", "tree", "ali.1.gz", "ali.2.gz"]
    if which == "lda_mllt":
        files += ["0.mat", *(f"{x}.mat" for x in MLLT_PASSES)]
    else:
        files += ["final.alimdl", "trans.1", "trans.2"]
    for f in files:
        a, b = sat / ref / f, sat / out / f
        if f.endswith(".gz"):
            assert _gunzip(a) == _gunzip(b), f
        else:
            assert a.read_bytes() == b.read_bytes(), f
    assert not list((sat / out).glob("*.premllt.mdl")) and not list((sat / out).glob("*trans.*.tmp"))
