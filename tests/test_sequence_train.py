"""nnet1 sequence-discriminative training end to end on the tiny planted-Gaussian corpus of
tests/gmm_corpus.py: utils/make_unigram_grammar.pl and pynnet-make-unigram-grammar (Kaldi's
unigram denominator LM), steps/nnet/make_denlats.sh, pynnet-nnet-train-sequential and
steps/nnet/train_mpe.sh."""
from __future__ import annotations

import json
import math
import os
import subprocess

import numpy as np
import pytest

from gmm_corpus import sh
from test_kaldi_utils import kaldi_tree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Corpus, lang dir, monophone system, its alignments, a small DNN on them, and the DNN's
    realignment (the numerator alignments) and denominator lattices."""
    from gmm_corpus import make_corpus

    d = tmp_path_factory.mktemp("seq")
    make_corpus(str(d), num_spk=2, utts_per_spk=8, seed=11)
    for x in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, x), d / x)
    sh(d, "steps/train_mono.sh", "--nj", "2", "--num-iters", "4", "--totgauss", "80", "data/train", "lang", "exp/mono")
    sh(d, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/mono", "exp/mono_ali")
    sh(d, "steps/nnet/train.sh", "--nn-depth", "1", "--hid-dim", "48", "--max-epochs", "3", "--splice", "2",
       "data/train", "lang", "exp/mono_ali", "exp/dnn")
    sh(d, "steps/nnet/align.sh", "--nj", "2", "data/train", "lang", "exp/dnn", "exp/dnn_ali")
    r = sh(d, "steps/nnet/make_denlats.sh", "--nj", "2", "data/train", "lang", "exp/dnn", "exp/dnn_denlats")
    assert "done generating denominator lattices" in r.stdout
    return d


def test_unigram_grammar_matches_kaldi(tmp_path):
    k = kaldi_tree(tmp_path, ["utils/make_unigram_grammar.pl"])
    text = "3 4 5 4\n4 4\n\n7\n5 3 3\n"
    ours = subprocess.run([os.path.join(ROOT, "utils/make_unigram_grammar.pl")], input=text, capture_output=True,
                          text=True, env=dict(os.environ, PATH=f"{ROOT}/tools/venv/bin:{os.environ['PATH']}"))
    kaldi = subprocess.run(["perl", str(k / "utils/make_unigram_grammar.pl")], input=text, capture_output=True, text=True)
    assert ours.returncode == kaldi.returncode == 0, ours.stderr
    assert sorted(ours.stdout.splitlines()) == sorted(kaldi.stdout.splitlines())
    # stochastic: the self-loops and the final probability sum to one
    costs = [float(ln.split()[-1]) for ln in ours.stdout.splitlines()]
    assert sum(math.exp(-c) for c in costs) == pytest.approx(1.0)


def test_make_denlats(work):
    """A unigram G over the training words, its graph, and a lattice for every utterance whose
    paths have the utterance's length and include the transcript."""
    from pynnet.decode.lattice import read_lattice_ark
    from pynnet.decode.sequence import state_times
    from pynnet.hmm.graph import read_fst, fst_arcs

    d = work / "exp/dnn_denlats"
    for f in ("final.mdl", "tree", "num_jobs", "lat.1.gz", "lat.2.gz", "dengraph/HCLG.fst", "lang/G.fst",
              "log/decode_den.1.log"):
        assert (d / f).exists(), f
    words = {w: int(i) for w, i in (ln.split() for ln in (work / "lang/words.txt").read_text().splitlines())}
    text = dict(ln.split(maxsplit=1) for ln in (work / "data/train/text").read_text().splitlines())
    G = read_fst(str(d / "lang/G.fst"))
    loops = {ilab: cost for _, ilab, olab, cost, _ in fst_arcs(G)}
    counts = {}
    for t in text.values():
        for w in t.split():
            counts[words[w]] = counts.get(words[w], 0) + 1
    total = sum(counts.values()) + len(text)
    assert loops == pytest.approx({w: -math.log(c / total) for w, c in counts.items()})
    from pynnet.feat.tables import read_matrices
    frames = {u: m.shape[0] for u, m in read_matrices(f"scp:{work}/data/train/feats.scp")}
    lats = {}
    for n in (1, 2):
        lats.update(read_lattice_ark(str(d / f"lat.{n}.gz")))
    assert sorted(lats) == sorted(frames)
    for u, lat in lats.items():
        assert state_times(lat)[1] == frames[u], u
    # rerun: the graph is kept (newer than the model), the lattices are made again
    r = sh(work, "steps/nnet/make_denlats.sh", "--nj", "2", "data/train", "lang", "exp/dnn", "exp/dnn_denlats")
    assert "not rebuilt" in r.stdout


def test_make_denlats_bad_input(work):
    r = sh(work, "steps/nnet/make_denlats.sh", "data/train", "lang", "exp/nope", "exp/x", check=False)
    assert r.returncode == 1 and r.stderr.strip() == "steps/nnet/make_denlats.sh: no such file exp/nope/final.nnet"
    r = sh(work, "steps/nnet/make_denlats.sh", "--sub-split", "4", "data/train", "lang", "exp/dnn", "exp/x", check=False)
    assert r.returncode == 1 and "jobs are not sub-split" in r.stderr
    r = sh(work, "steps/nnet/make_denlats.sh", "--ivector", "scp:i.scp", "data/train", "lang", "exp/dnn", "exp/x",
           check=False)
    assert r.returncode == 1 and "i-vector inputs are not supported" in r.stderr
    assert not (work / "exp/x/lat.1.gz").exists()


def test_train_sequential_improves_the_criterion(work):
    """Passes of sMBR raise the expected frame accuracy on the training data (what the per-utterance
    SGD maximises); the history and curve are written; a rerun skips finished passes."""
    r = sh(work, "steps/nnet/train_mpe.sh", "--num-iters", "3", "--learn-rate", "0.0002", "data/train", "lang",
           "exp/dnn", "exp/dnn_ali", "exp/dnn_denlats", "exp/dnn_smbr")
    d = work / "exp/dnn_smbr"
    for f in ("0.nnet", "1.nnet", "2.nnet", "3.nnet", "final.nnet", "final.mdl", "tree", "log/train.json",
              "log/train.png", "log/mpe.3.log"):
        assert (d / f).exists(), f
    assert os.readlink(d / "final.nnet") == "3.nnet"
    hist = json.loads((d / "log/train.json").read_text())
    assert [h["iter"] for h in hist] == [1, 2, 3] and all(h["criterion"] == "smbr" for h in hist)
    acc = [h["objective_per_frame"] for h in hist]
    assert acc[2] > acc[0], acc
    assert all(h["utterances"] == 16 and h["skipped"] == 0 for h in hist), hist
    r = sh(work, "steps/nnet/train_mpe.sh", "--num-iters", "3", "--learn-rate", "0.0002", "data/train", "lang",
           "exp/dnn", "exp/dnn_ali", "exp/dnn_denlats", "exp/dnn_smbr")
    assert r.stdout.count("skipped, ") == 3
    # priors re-estimated from the network's posteriors (make_priors.sh): they sum to the frames
    from pynnet.feat.tables import read_matrices
    from pynnet.hmm.model_io import read_vector_file
    counts = read_vector_file(str(d / "prior_counts"))
    frames = sum(m.shape[0] for _, m in read_matrices(f"scp:{work}/data/train/feats.scp"))
    num_pdfs = int(sh(work, "pynnet-gmm-info", "exp/dnn_smbr/final.mdl").stdout.split("number of pdfs")[1].split()[0])
    assert counts.size == num_pdfs
    assert counts.sum() == pytest.approx(frames, rel=1e-4) and (counts >= 0).all()
    assert "priors already re-estimated" in r.stdout
    # ... and decode.sh takes them, as Kaldi's does
    r = sh(work, "steps/nnet/decode.sh", "--nj", "1", "--skip-scoring", "true", "exp/dnn_denlats/dengraph",
           "data/train", "exp/dnn_smbr/decode_train")
    assert "--class-frame-counts exp/dnn_smbr/prior_counts" in (d / "decode_train/log/decode.1.log").read_text()
    # the sMBR network decodes like any nnet1 DNN
    probe = sh(work, "pynnet-nnet-forward", "--prior-subtract", "--utt2spk", "data/train/utt2spk", "--cmvn-scp",
               "data/train/cmvn.scp", "exp/dnn_smbr/final.nnet", "scp:data/train/feats.scp", "ark,t:-")
    assert np.isfinite(float(probe.stdout.split()[3]))


def test_train_mmi(work):
    """steps/nnet/train_mmi.sh: MMI passes raise the MMI objective; its own log names."""
    r = sh(work, "steps/nnet/train_mmi.sh", "--num-iters", "2", "--learn-rate", "0.0002", "data/train", "lang",
           "exp/dnn", "exp/dnn_ali", "exp/dnn_denlats", "exp/dnn_mmi")
    assert "steps/nnet/train_mmi.sh: done" in r.stdout, r.stdout
    d = work / "exp/dnn_mmi"
    assert (d / "log/mmi.2.log").exists() and not (d / "log/mpe.1.log").exists()
    hist = json.loads((d / "log/train.json").read_text())
    assert [h["criterion"] for h in hist] == ["mmi", "mmi"]
    assert hist[1]["objective_per_frame"] > hist[0]["objective_per_frame"], hist
    r = sh(work, "steps/nnet/train_mmi.sh", "--num-iters", "0", "data/train", "lang", "exp/dnn", "exp/dnn_ali",
           "exp/dnn_denlats", "exp/dnn_mmi0", check=False)
    assert r.returncode == 1 and r.stderr.strip() == \
        "steps/nnet/train_mmi.sh: --num-iters must be a positive integer, not '0'"


def test_sequential_pass_is_reproducible(work):
    """A pass is a function of its inputs and seed (what makes a rerun of an interrupted pass give
    the finished pass's result): twice the same pass gives identical networks; another seed
    another utterance order, so another network."""
    import torch

    from pynnet.nnet.model import load_model_file

    args = ["--learn-rate", "0.0002", "--silence-phones", (work / "lang/phones/silence.csl").read_text().strip(),
            "exp/dnn/final.nnet", "exp/dnn_ali/final.mdl", "data/train", "exp/dnn_denlats", "exp/dnn_ali"]
    for out, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        sh(work, "pynnet-nnet-train-sequential", "--seed", seed, *args, f"exp/rep_{out}.nnet")
    a, b, c = (load_model_file(work / f"exp/rep_{x}.nnet")["state_dict"] for x in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
