"""egs/custom/run.sh end to end on a corpus laid out the way a user lays theirs out (written by
tests/custom_fixture.py, not by our data prep): 8 kHz with a dev set and an LM text, 16 kHz with
neither; and the common mistakes stopped at stage 0, before any features are made."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from custom_fixture import copy_dir, inject_oov, make_user_corpus

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RUN = os.path.join(ROOT, "egs", "custom", "run.sh")
# toy settings, through options (the recipe's own code path otherwise)
TOY = ["--nj", "2", "--mono-opts", "--num-iters 8", "--tri-opts", "--num-iters 6 --realign-iters 3",
       "--dnn-depth", "2", "--dnn-hid-dim", "64", "--rbm-iter", "1", "--dnn-opts", "--max-epochs 2",
       "--decode-opts", "--beam 8 --lattice-beam 3 --max-active 700"]


def _run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", RUN] + args, capture_output=True, text=True, **kw)


def _wer_lines(results: str) -> list[str]:
    return [line for line in results.splitlines() if line.startswith("%WER")]


def _check_results(w: str, rate: int,
                   systems: tuple | list = ("mono", "tri1", "tri2", "tri3", "tri4", "dnn")) -> str:
    results = open(os.path.join(w, "exp", "RESULTS")).read()
    table = [line.split() for line in results.splitlines() if re.match(r"# (mono|tri[1-4]|dnn) ", line)]
    assert [r[1] for r in table] == list(systems), results   # training order
    for r in table:   # test at dev's choice, test's best, dev's best: numbers, test@dev >= test's best
        # (insertions can take a WER over 100%: at toy size the LDA+MLLT system can get there)
        assert float(r[2]) >= float(r[3]) >= 0 and float(r[4]) >= 0, r
    lines = _wer_lines(results)
    assert len(lines) == 3 * len(systems) and all("decode_dev" in x for x in lines[2::3]), results
    assert "per speaker" in results
    conf = open(os.path.join(w, "conf", "mfcc.conf")).read()
    assert f"--sample-frequency={rate}" in conf
    return results


def test_custom_recipe_8k_with_dev_and_lm_text(tmp_path):
    c = make_user_corpus(str(tmp_path / "corpus"), rate=8000, dev=True, lm_text=True, seed=3)
    w = str(tmp_path / "work")
    r = _run(["--train", c.train, "--dev", c.dev, "--test", c.test, "--lexicon", c.lexicon,
              "--lm-text", c.lm_text, "--work-dir", w] + TOY)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    _check_results(w, 8000)
    # the lexicon's own OOV word (<UNK> SPN, as Kaldi's mini_librispeech) is the lang's
    assert open(os.path.join(w, "data", "lang", "oov.txt")).read().split() == ["<UNK>"]
    # jobs limited by the speakers: the test set has fewer speakers than --nj allows? then fewer jobs
    nspk = len(open(os.path.join(w, "data", "test", "spk2utt")).read().splitlines())
    assert int(open(os.path.join(w, "exp", "mono", "decode_test", "num_jobs")).read()) == min(2, nspk)
    sizes = dict(line.split("=") for line in open(os.path.join(w, "sizes.sh")).read().split())
    assert int(sizes["tri1_leaves"]) < 300   # scaled down from egs/synth's 1-hour trees
    assert 0 < int(sizes["tri3_leaves"]) <= int(sizes["tri4_leaves"]) < 500 and int(sizes["tri4_gauss"]) < 3000
    # the DNN's input: tri4's fMLLR features (train's transforms from its alignments, dev's and
    # test's from the fMLLR decodes), no per-speaker CMVN; decoded with tri4's graph
    for x in ("train", "dev", "test"):
        d = os.path.join(w, "data-fmllr", x)
        assert os.path.getsize(os.path.join(d, "feats.scp")) > 0 and not os.path.exists(os.path.join(d, "cmvn.scp"))
    assert os.path.exists(os.path.join(w, "exp", "tri4", "decode_test", "trans.1"))
    log = open(os.path.join(w, "exp", "dnn_avg", "decode_test", "log", "decode.1.log")).read()
    assert os.path.join(w, "exp", "tri4", "graph", "HCLG.fst") in log, log[:2000]
    assert not os.path.exists(os.path.join(w, "data-fbank"))   # (no fbank features any more)


def test_custom_recipe_16k_without_dev_or_lm_text(tmp_path):
    """What differs from the 8 kHz run is stages 0-2 (rate, held-out dev, LM from the transcripts):
    through the monophone's decodes and the results (the later stages are the same code)."""
    c = make_user_corpus(str(tmp_path / "corpus"), rate=16000, dev=False, lm_text=False, seed=4,
                         lowercase=True)
    w = str(tmp_path / "work")
    args = ["--train", c.train, "--test", c.test, "--lexicon", c.lexicon, "--work-dir", w] + TOY
    r = _run(args + ["--stop-stage", "3"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r2 = _run(args + ["--stage", "12"])   # the results
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    _check_results(w, 16000, systems=["mono"])
    assert "held out 1 of" in r.stdout
    dev_spk = set(open(os.path.join(w, "dev.spk")).read().split())
    train_spk = {line.split()[0] for line in open(os.path.join(w, "data", "train", "spk2utt"))}
    assert dev_spk and not dev_spk & train_spk   # held out by speaker
    # the LM came from the training transcripts
    assert os.path.getsize(os.path.join(w, "data", "local", "lm", "train_text.txt")) > 0


def test_custom_recipe_stops_on_user_mistakes_before_any_work(tmp_path):
    c = make_user_corpus(str(tmp_path / "corpus"), rate=8000, dev=True, lm_text=True, seed=3)
    bad = copy_dir(c.train, str(tmp_path / "bad_train"))
    inject_oov(bad, {"FLIBBERTY": 3, "ZORPLE": 1})
    w = str(tmp_path / "work")
    r = _run(["--train", bad, "--dev", c.dev, "--test", c.test, "--lexicon", c.lexicon, "--work-dir", w] + TOY)
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "text" in errors[0] and "--oov-word" in errors[0], r.stderr
    assert not os.path.exists(os.path.join(w, "mfcc")) and not os.path.exists(os.path.join(w, "sizes.sh"))
    # missing required options, and a data dir that does not exist
    r = _run(["--train", c.train, "--work-dir", w])
    assert r.returncode != 0 and "--train, --test and --lexicon are required" in r.stderr
    r = _run(["--train", str(tmp_path / "nope"), "--test", c.test, "--lexicon", c.lexicon, "--work-dir", w])
    assert r.returncode != 0 and "no such data dir" in r.stderr
