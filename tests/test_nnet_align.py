"""DNN alignment: pynnet-align-compiled-mapped (Kaldi's align-compiled-mapped) and
steps/nnet/align.sh (nnet1's), on the tiny planted-Gaussian corpus of tests/gmm_corpus.py.

Given the GMM's own per-pdf log-likelihoods as the matrix, the mapped aligner must reproduce the
GMM aligner exactly; a DNN trained on the GMM's alignments must realign the corpus to the same
phone sequences, with frame labels close to the GMM's."""
from __future__ import annotations

import os

import kaldiio
import numpy as np
import pytest

from gmm_corpus import WORDS, make_corpus, make_dict, sh
from pynnet.bin.gmm import align_compiled_mapped_main
from pynnet.hmm.ali_io import read_alignments

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Corpus, lang dir, a monophone system and its alignments, and a small DNN trained on them."""
    d = tmp_path_factory.mktemp("nnetali")
    make_corpus(str(d), num_spk=2, utts_per_spk=8, seed=11)
    for x in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, x), d / x)
    sh(d, "steps/train_mono.sh", "--nj", "2", "--num-iters", "4", "--totgauss", "80", "--realign-iters", "1 2 3",
       "data/train", "lang", "exp/mono")
    sh(d, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/mono", "exp/mono_ali")
    sh(d, "steps/nnet/train.sh", "--nn-depth", "1", "--hid-dim", "64", "--max-epochs", "6", "--splice", "2",
       "data/train", "lang", "exp/mono_ali", "exp/dnn")
    return d


def _phone_seqs(tm_dir, ali_dir):
    """Per utterance: the phone sequence (silence dropped) of the alignments in ali_dir."""
    from pynnet.hmm.model_io import read_transition_model

    tm = read_transition_model(os.path.join(tm_dir, "final.mdl"))
    t2ph = np.asarray([0] + [tm.transition_id_to_phone(t) for t in range(1, tm.num_transition_ids + 1)])
    return {u: t2ph[np.asarray(a)] for u, a in read_alignments(str(ali_dir)).items()}


def test_mapped_aligner_on_gmm_loglikes_equals_the_gmm_aligner(work, tmp_path):
    """pynnet-align-compiled-mapped given the GMM's log-likelihoods per pdf = pynnet-gmm-align-compiled."""
    from pynnet.decode.decoder import GmmScorer
    from pynnet.hmm.model_io import read_model
    from pynnet.hmm.train import gmm_features_batch

    d = work
    sh(d, "pynnet-compile-train-graphs", "exp/mono/tree", "exp/mono/final.mdl", "lang", "data/train",
       str(tmp_path / "fsts.gz"))
    cmvn_opts = (d / "exp/mono/cmvn_opts").read_text().strip() if (d / "exp/mono/cmvn_opts").exists() else ""
    sh(d, "pynnet-gmm-align-compiled", f"--cmvn-opts={cmvn_opts}", "exp/mono/final.mdl", str(tmp_path / "fsts.gz"),
       "data/train", str(tmp_path / "gmm_ali.gz"))
    tm, am = read_model(str(d / "exp/mono/final.mdl"))
    keys, lengths, feats = gmm_features_batch(str(d / "data/train"), cmvn_opts, 2, None, None)
    scorer = GmmScorer(am)
    with kaldiio.WriteHelper(f"ark:{tmp_path}/ll.ark") as w:
        for utt, x in zip(keys, np.split(feats, np.cumsum(lengths)[:-1])):
            w(utt, scorer.loglikes(x).astype(np.float32))
    assert align_compiled_mapped_main([str(d / "exp/mono/final.mdl"), str(tmp_path / "fsts.gz"),
                                       f"ark:{tmp_path}/ll.ark", str(tmp_path / "mapped_ali.gz")]) == 0
    gmm, mapped = read_alignments(str(tmp_path / "gmm_ali.gz")), read_alignments(str(tmp_path / "mapped_ali.gz"))
    assert len(gmm) == 16 and sorted(gmm) == sorted(mapped)
    for u in gmm:
        assert np.array_equal(gmm[u], mapped[u]), u


def test_mapped_aligner_bad_input(work, tmp_path, capsys):
    d = work
    sh(d, "pynnet-compile-train-graphs", "exp/mono/tree", "exp/mono/final.mdl", "lang", "data/train",
       str(tmp_path / "fsts.gz"))
    num_pdfs = int(sh(d, "pynnet-gmm-info", "exp/mono/final.mdl").stdout.split("number of pdfs")[1].split()[0])
    utts = (d / "data/train/utt2spk").read_text().split()[::2]
    mdl, fsts = str(d / "exp/mono/final.mdl"), str(tmp_path / "fsts.gz")

    def run(mats, out="ali.gz"):
        with kaldiio.WriteHelper(f"ark:{tmp_path}/ll.ark") as w:
            for u, m in mats.items():
                w(u, m)
        capsys.readouterr()
        rc = align_compiled_mapped_main([mdl, fsts, f"ark:{tmp_path}/ll.ark", str(tmp_path / out)])
        return rc, capsys.readouterr().err

    # the wrong number of columns (a network for another tree): one line naming the utterance
    rc, err = run({utts[0]: np.zeros((50, num_pdfs + 3), np.float32)})
    assert rc == 1 and err.strip().splitlines()[-1].endswith(
        f"): utterance '{utts[0]}': log-likelihoods have {num_pdfs + 3} "
        f"columns but the model has {num_pdfs} pdfs (wrong model or wrong network?)")
    assert not (tmp_path / "ali.gz").exists()
    rc, err = run({utts[0]: np.full((50, num_pdfs), np.nan, np.float32)})
    assert rc == 1 and "NaN or infinity" in err and not (tmp_path / "ali.gz").exists()
    # an utterance without a graph, and one too short for its transcript: warned about, left out;
    # the rest is aligned
    rng = np.random.default_rng(0)
    rc, err = run({"nosuchutt": np.zeros((40, num_pdfs), np.float32), utts[0]: np.zeros((2, num_pdfs), np.float32),
                   utts[1]: rng.normal(size=(300, num_pdfs)).astype(np.float32)})
    assert rc == 0, err
    assert "WARNING: no training graph for utterance nosuchutt" in err
    assert f"WARNING: alignment failed for utterance {utts[0]}" in err
    assert list(read_alignments(str(tmp_path / "ali.gz"))) == [utts[1]]
    # an empty matrix (Kaldi writes it 0 x 0): that utterance fails, the others align
    rc, err = run({utts[0]: np.zeros((0, 0), np.float32), utts[1]: rng.normal(size=(300, num_pdfs)).astype(np.float32)})
    assert rc == 0 and f"WARNING: alignment failed for utterance {utts[0]} (empty log-likelihood matrix)" in err, err
    assert list(read_alignments(str(tmp_path / "ali.gz"))) == [utts[1]]
    # pipes and scp are refused for the graphs and the output
    capsys.readouterr()
    assert align_compiled_mapped_main([mdl, fsts, f"ark:{tmp_path}/ll.ark", "ark:|gzip -c > x.gz"]) == 1
    assert "pipes are not supported here" in capsys.readouterr().err


def test_steps_nnet_align(work):
    """steps/nnet/align.sh: the DNN realigns every utterance to its transcript's phones, with frame
    labels close to the GMM alignments it was trained on; the result feeds steps/nnet/train.sh."""
    d = work
    r = sh(d, "steps/nnet/align.sh", "--nj", "2", "data/train", "lang", "exp/dnn", "exp/dnn_ali")
    assert "done aligning data (16 of 16 utterances aligned)" in r.stdout, r.stdout + r.stderr
    for f in ("ali.1.gz", "ali.2.gz", "final.mdl", "tree", "num_jobs", "phones.txt"):
        assert (d / "exp/dnn_ali" / f).exists(), f
    assert not list((d / "exp/dnn_ali").glob("fsts.*"))
    gmm, dnn = _phone_seqs(d / "exp/mono_ali", d / "exp/mono_ali"), _phone_seqs(d / "exp/dnn_ali", d / "exp/dnn_ali")
    assert sorted(gmm) == sorted(dnn) and len(dnn) == 16
    # the non-silence phones in order spell out the transcript (position-dependent phones: two
    # phones in a row never share an id, so each change of id is a new phone)
    phones = {int(i): p for p, i in (ln.split() for ln in (d / "lang/phones.txt").read_text().splitlines())}
    text = dict(ln.split(maxsplit=1) for ln in (d / "data/train/text").read_text().splitlines())
    agree = total = 0
    for u, ph in dnn.items():
        seq = [phones[int(p)] for i, p in enumerate(ph) if i == 0 or p != ph[i - 1]]
        assert [p for p in seq if not p.startswith("sil")] == _positional(text[u]), u
        agree += int((ph == gmm[u]).sum())
        total += len(ph)
    assert agree / total > 0.85, agree / total
    # the DNN's alignments train a DNN (the nnet1 realignment loop)
    sh(d, "steps/nnet/train.sh", "--nn-depth", "1", "--hid-dim", "32", "--max-epochs", "1", "--splice", "1",
       "data/train", "lang", "exp/dnn_ali", "exp/dnn2")
    assert (d / "exp/dnn2/final.nnet").exists()


def _positional(text: str) -> list[str]:
    out = []
    for w in text.split():
        pron = WORDS[w].split()
        out += [p + ("_B" if i == 0 else "_E" if i == len(pron) - 1 else "_I") for i, p in enumerate(pron)]
    return out


def test_steps_nnet_align_bad_input(work, tmp_path):
    d = work
    # a lang dir with other phones: refused before any job runs
    dict2 = tmp_path / "dict2"
    make_dict(str(dict2))
    with open(dict2 / "nonsilence_phones.txt", "a") as f:
        f.write("g\n")
    with open(dict2 / "lexicon.txt", "a") as f:
        f.write("gag g a g\n")
    from pynnet.hmm.lang import prepare_lang
    prepare_lang(str(dict2), "<unk>", str(tmp_path / "lang2_tmp"), str(tmp_path / "lang2"))
    r = sh(d, "steps/nnet/align.sh", "data/train", str(tmp_path / "lang2"), "exp/dnn", "exp/dnn_ali_lang2",
           check=False)
    assert r.returncode == 1 and "not compatible" in r.stderr, r.stderr
    assert not (d / "exp/dnn_ali_lang2/ali.1.gz").exists()
    for opts, msg in ((["--ivector", "scp:x.scp"], "i-vector inputs are not supported"),
                      (["--align-to-lats", "true"], "alignments as lattices are not supported"),
                      (["--use-gpu", "maybe"], "--use-gpu must be yes, no, optional or wait")):
        r = sh(d, "steps/nnet/align.sh", *opts, "data/train", "lang", "exp/dnn", "exp/dnn_ali_x", check=False)
        assert r.returncode == 1 and msg in r.stderr, r.stderr
    r = sh(d, "steps/nnet/align.sh", "--stage", "1", "--nj", "2", "data/train", "lang", "exp/dnn", "exp/dnn_ali_new", check=False)
    assert r.returncode == 1 and r.stderr.strip() == \
        "steps/nnet/align.sh: no such file exp/dnn_ali_new/log/align.1.log (run from --stage 0)", r.stderr
    r = sh(d, "steps/nnet/align.sh", "data/train", "lang", "exp/nope", "exp/dnn_ali_x", check=False)
    assert r.returncode == 1 and r.stderr.strip() == "steps/nnet/align.sh: no such file exp/nope/final.nnet"
