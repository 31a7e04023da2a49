"""End to end on a tiny generated corpus: steps/train_mono.sh, steps/align_si.sh, steps/train_deltas.sh.

The corpus (tests/gmm_corpus.py) has planted per-phone-state Gaussians, so training must raise the
likelihood and the alignments must spell out each transcript's phones.
"""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest

from gmm_corpus import WORDS, make_corpus, sh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    truth = dict(line.split(None, 1) for line in (work / "truth.txt").read_text().splitlines())
    agree = total = 0
    for utt, ali in alis.items():
        assert ali.size == feats_len[utt]
        frame_phones = np.array([id2phone[int(p)].split("_")[0] for p in t.phone[ali]])
        agree += int((frame_phones == np.array(truth[utt].split())).sum())
        total += ali.size
        ok, pieces = split_to_phones(t, ali)
        assert ok
        phones = [id2phone[int(t.phone[p[0]])].split("_")[0] for p in pieces]
        want = [p for w in text[utt].split() for p in WORDS[w].split()]
        assert [p for p in phones if p != "sil"] == want, utt
    # Flat start on 24 utterances of 8 words settles in a local optimum with some phone
    # boundaries shifted (test_em_from_planted_alignment_keeps_it shows that the machinery keeps
    # the planted segmentation); still far above chance.
    assert agree / total > 0.5, agree / total
    return agree / total


def test_train_mono_align_si_train_deltas(work):
    r = sh(work, "steps/train_mono.sh", "--nj", "2", "--num-iters", "5", "--realign-iters", "2 3 4",
           "--max-iter-inc", "3", "--totgauss", "120", "--boost-silence", "1.25",
           "data/train", "lang", "exp/mono")
    assert "Done training monophone system" in r.stdout
    mono = work / "exp/mono"
    for f in ("final.mdl", "tree", "final.occs", "ali.1.gz", "ali.2.gz", "num_jobs", "cmvn_opts", "delta_opts",
              "0.mdl", "fsts.1.gz"):
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


def test_one_cmvn_option_passes_through_the_scripts(work):
    """A --cmvn-opts value of one option ("--norm-vars=true", argparse alone takes it for an
    option of its own) reaches every job: train_mono.sh's (init, equal alignment, accumulation,
    realignment), align_si.sh's (the source dir's cmvn_opts file) and acc-tree-stats, in both the
    --opt value and --opt=value forms."""
    sh(work, "steps/train_mono.sh", "--nj", "2", "--num-iters", "3", "--realign-iters", "1", "--max-iter-inc", "2",
       "--totgauss", "60", "--cmvn-opts", "--norm-vars=true", "data/train", "lang", "exp/mono_nv")
    assert (work / "exp/mono_nv/cmvn_opts").read_text() == "--norm-vars=true\n"
    r = sh(work, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/mono_nv", "exp/mono_nv_ali")
    assert "24 of 24 utterances aligned" in r.stdout
    assert (work / "exp/mono_nv_ali/cmvn_opts").read_text() == "--norm-vars=true\n"
    accs = {}
    for name, opts in {"sep": ["--cmvn-opts", "--norm-vars=true"], "eq": ["--cmvn-opts=--norm-vars=true"],
                       "means": ["--cmvn-opts", ""]}.items():
        sh(work, "pynnet-acc-tree-stats", *opts, "--ci-phones", "1", "exp/mono_nv_ali/final.mdl",
           "data/train/split2/1", "exp/mono_nv_ali/ali.1.gz", f"exp/mono_nv_ali/{name}.treeacc")
        accs[name] = (work / f"exp/mono_nv_ali/{name}.treeacc").read_bytes()
    assert accs["sep"] == accs["eq"] != accs["means"]


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


def _truth_alignment(tm, phone_ids, segments):
    """Transition ids of the planted segmentation (reordered: forward transition first, then
    self-loops, as the training graphs produce); silence uses states 0, 1, 4 of its topology."""
    from pynnet.hmm.model_io import topology_from_khg

    st = tm.__getstate__()
    topo = topology_from_khg(st[1])
    tstate = {tuple(x.__getstate__()[:2]): i + 1 for i, x in enumerate(st[0])}
    state2id = st[2]

    def tid(phone, s, dst):
        trans = topo.entries[topo.phone2idx[phone]][s][2]
        return state2id[tstate[(phone, s)]] + [d for d, _ in trans].index(dst)

    ali = []
    for name, state, n in segments:
        p = phone_ids[name]
        if name == "sil":
            parts = [(0, 1), (1, 4), (4, 5)]
            sizes = [n // 3 + (1 if i < n % 3 else 0) for i in range(3)]
        else:
            parts, sizes = [(state, state + 1)], [n]
        for (s, dst), k in zip(parts, sizes):
            ali += [tid(p, s, dst)] + [tid(p, s, s)] * (k - 1)
    return np.array(ali, np.int32)


def test_em_from_planted_alignment_keeps_it(tmp_path):
    """Statistics, update and Viterbi realignment are consistent: a model estimated on the planted
    segmentation realigns to it, and further EM passes keep it there."""
    import kaldi_hmm_gmm as khg  # noqa: F401

    from pynnet.hmm.align import Aligner, AlignOptions
    from pynnet.hmm.ali_io import TransitionTables
    from pynnet.hmm.gmm import GmmAccs, accumulate, mle_update
    from pynnet.hmm.lang import Lang
    from pynnet.hmm.train import GraphCompiler, gmm_features_batch, init_mono

    data, lang_dir = make_corpus(str(tmp_path), num_spk=2, utts_per_spk=8, seed=5, noise=1.5)
    lang = Lang.load(lang_dir)
    keys, lengths, feats = gmm_features_batch(data)
    ctx, tm, am = init_mono(lang.topo(), [feats], lang.sets)
    t = TransitionTables.from_model(tm)
    segs = {}
    for line in (tmp_path / "segments_truth.txt").read_text().splitlines():
        utt, *items = line.split()
        segs[utt] = [(a, int(b), int(c)) for a, b, c in (x.split(":") for x in items)]
    ali = np.concatenate([_truth_alignment(tm, lang.phones, segs[u]) for u in keys])
    assert ali.size == feats.shape[0]
    truth_phone = t.phone[ali]
    text = dict(line.split(None, 1) for line in open(os.path.join(data, "text")))
    gc = GraphCompiler(tm, ctx, lang_dir)
    graphs = {u: gc.compile(text[u].split()) for u in keys}
    ends = np.cumsum(lengths)
    likes = []
    for it in range(3):
        accs = GmmAccs.zeros(am, t.pdf.size - 1)
        likes.append(accumulate(am, feats, ali, t.pdf, accs) / ali.size)
        mle_update(am, accs, min_gaussian_occupancy=3)
        aligner = Aligner(tm, am.to_khg(), AlignOptions(beam=10, retry_beam=40))
        new = [aligner.align(u, graphs[u].copy(), feats[e - n:e]) for u, e, n in zip(keys, ends, lengths)]
        assert all(a is not None for a in new)
        ali = np.concatenate(new)
        agree = float((t.phone[ali] == truth_phone).mean())
        assert agree > 0.95, (it, agree)
    assert likes[-1] >= likes[0]


def test_non_breaking_space_in_words_and_utterance_ids(tmp_path):
    """Kaldi splits fields at spaces and tabs only: 'caf\u00a0e' is one word of words.txt and of the
    transcripts (words.txt raised 'too many values to unpack'; the transcript had 'caf' and 'e'),
    and 'spk1\u00a0u001\u00a0' one utterance id of feats.scp (kaldiio cut it at the U+00A0) and of
    the alignments (the key's last U+00A0 was stripped)."""
    from gmm_corpus import make_dict

    from pynnet.hmm.ali_io import read_alignments
    from pynnet.hmm.lang import prepare_lang
    from pynnet.hmm.train import read_graphs

    make_dict(str(tmp_path / "dict"))
    with open(tmp_path / "dict" / "lexicon.txt", "a", encoding="utf-8") as f:
        f.write("caf\u00a0e\tc a f e\n")
    prepare_lang(str(tmp_path / "dict"), "<unk>", str(tmp_path / "lang_tmp"), str(tmp_path / "lang"))
    data, lang = make_corpus(str(tmp_path), num_spk=2, utts_per_spk=4, seed=3)
    new = lambda u: u.replace("-", "\u00a0") + "\u00a0"  # noqa: E731  (keeps the order and the speaker prefix)
    d = tmp_path / "data" / "train"
    utts = [line.split(" ", 1)[0] for line in (d / "utt2spk").read_text().splitlines()]
    feats = dict(line.split(" ", 1) for line in (d / "feats.scp").read_text().splitlines())
    (d / "feats.scp").write_text("".join(f"{new(u)}\t {feats[u]}\n" for u in utts), encoding="utf-8")
    text = dict(line.split(" ", 1) for line in (d / "text").read_text().splitlines())
    # 'cafe' and 'caf\u00a0e' are two words with one pronunciation; tabs and runs of spaces separate
    text = {u: "\t".join("caf\u00a0e" if w == "cafe" else w for w in t.split()) + " caf\u00a0e" for u, t in text.items()}
    (d / "text").write_text("".join(f"{new(u)}  {text[u]}\n" for u in utts), encoding="utf-8")
    (d / "utt2spk").write_text("".join(f"{new(u)} {u.split('-')[0]}\n" for u in utts), encoding="utf-8")
    (d / "spk2utt").write_text("".join(f"{s} {' '.join(new(u) for u in utts if u.startswith(s + '-'))}\n"
                                       for s in ("spk1", "spk2")), encoding="utf-8")
    words = (tmp_path / "lang" / "words.txt").read_text(encoding="utf-8")
    assert "\ncaf\u00a0e " in words and "\ncafe " in words

    sh(tmp_path, "pynnet-gmm-init-mono", f"{lang}/topo", data, "0.mdl", "tree")
    r = sh(tmp_path, "pynnet-compile-train-graphs", "tree", "0.mdl", lang, data, "fsts.ark")
    assert "compiled 8 graphs, 0 failed; 0 word tokens mapped to OOV" in r.stderr
    graphs = dict(read_graphs(str(tmp_path / "fsts.ark")))
    assert list(graphs) == [new(u) for u in utts]
    sh(tmp_path, "pynnet-align-equal-compiled", "fsts.ark", data, "ali.1.gz")
    assert sorted(read_alignments(str(tmp_path / "ali.1.gz"))) == sorted(graphs)
