"""G.fst (format_lm) and HCLG (mkgraph): G gives sentences their ARPA probabilities, empty-word
cycles are refused, and HCLG decodes known utterances with a monophone and a triphone model whose
GMM likelihoods we control (1-dim features, one well-separated Gaussian per pdf)."""
from __future__ import annotations

import math
import os
import random
import re
import subprocess

import numpy as np
import pytest

import kaldi_hmm_gmm as khg
import kaldifst

from pynnet.bin.lang import format_lm_main, mkgraph_main
from pynnet.hmm.graph import format_lm, has_cycle, make_hclg, read_fst
from pynnet.hmm.lang import Lang, prepare_lang
from pynnet.hmm.lm import prune_lm, train_lm
from pynnet.hmm.tree_io import ConstantEventMap, ContextDependencyTree, TableEventMap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LN10 = math.log(10)

LEXICON = "<unk> SPN\nab a b\naba a b a\nab2 a b\ncd c d\nd d\nbad b a d\n"
# Hand-written bigram: only ab, cd, d (and </s>) are LM words.
ARPA = """
\\data\\
ngram 1=5
ngram 2=4

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.3
-0.5\tab\t-0.2
-0.7\tcd\t-0.25
-0.9\td

\\2-grams:
-0.2\t<s> ab
-0.3\tab cd
-0.1\tcd </s>
-0.4\tcd ab

\\end\\
"""


def make_dict(d, lexicon=LEXICON):
    os.makedirs(d, exist_ok=True)
    for name, text in (("silence_phones.txt", "SIL\nSPN\n"), ("nonsilence_phones.txt", "a\nb\nc\nd\n"),
                       ("optional_silence.txt", "SIL\n"), ("lexicon.txt", lexicon)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return str(d)


@pytest.fixture(scope="module")
def lang_test(tmp_path_factory):
    t = tmp_path_factory.mktemp("graph")
    d = make_dict(t / "dict")
    prepare_lang(d, "<unk>", str(t / "tmp"), str(t / "lang"), sil_prob=0.5)
    with open(t / "lm.arpa", "w") as f:
        f.write(ARPA)
    format_lm(str(t / "lang"), str(t / "lm.arpa"), os.path.join(d, "lexicon.txt"), str(t / "lang_test"),
              verbose=False)
    return str(t / "lang_test")


def g_cost(G, word_ids, backoff):
    """Cost of a word sequence in G, following #0 back-off arcs as an ARPA model backs off; None if
    G rejects it."""
    s = G.start
    cost = 0.0

    def arcs(state):
        return {a.ilabel: a for a in kaldifst.ArcIterator(G, state)}

    for w in word_ids + [None]:
        while True:
            out = arcs(s)
            if w is None:
                f = G.final(s).value
                if f != math.inf:
                    return cost + f
            elif w in out:
                cost += out[w].weight.value
                s = out[w].nextstate
                break
            if backoff not in out:
                return None
            cost += out[backoff].weight.value
            s = out[backoff].nextstate


def test_G_gives_arpa_probabilities(lang_test):
    lang = Lang.load(lang_test)
    G = read_fst(os.path.join(lang_test, "G.fst"))
    assert G.is_ilabel_sorted
    w = lang.words
    b = w["#0"]
    ids = lambda s: [w[x] for x in s.split()]  # noqa: E731
    # P(ab|<s>) P(cd|ab) P(</s>|cd) = -0.2 - 0.3 - 0.1
    assert g_cost(G, ids("ab cd"), b) == pytest.approx(0.6 * LN10, abs=1e-4)
    # P(d|<s>) = bow(<s>) + P(d); P(ab|d) = P(ab); P(</s>|ab) = bow(ab) + P(</s>)
    assert g_cost(G, ids("d ab"), b) == pytest.approx((0.3 + 0.9 + 0.5 + 0.2 + 1.0) * LN10, abs=1e-4)
    assert g_cost(G, ids("ab cd ab"), b) == pytest.approx((0.2 + 0.3 + 0.4 + 0.2 + 1.0) * LN10, abs=1e-4)
    # words outside the LM are not accepted; <s> </s> are epsilon, #0 only on back-off arcs
    assert g_cost(G, ids("aba"), b) is None
    labels = {(a.ilabel, a.olabel) for s in kaldifst.StateIterator(G) for a in kaldifst.ArcIterator(G, s)}
    assert labels == {(b, 0)} | {(w[x], w[x]) for x in ("ab", "cd", "d")}
    # the lang test dir is a full copy of the lang dir
    for f in ("L.fst", "L_disambig.fst", "words.txt", "phones.txt", "topo", "phones/disambig.int", "oov.int"):
        assert os.path.exists(os.path.join(lang_test, f))


def test_format_lm_refuses_empty_word_cycles(lang_test, tmp_path, capsys):
    lang_dir = os.path.join(os.path.dirname(lang_test), "lang")
    lex = tmp_path / "lexicon.txt"
    lex.write_text("ab\ncd c d\n")  # 'ab' with an empty pronunciation: <s> ab -> ab -> #0 -> ab ... loops
    out = tmp_path / "lang_test"
    rc = format_lm_main([lang_dir, os.path.join(os.path.dirname(lang_test), "lm.arpa"), str(lex), str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "language model has cycles with empty words" in err
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".lang_test")]
    G = read_fst(os.path.join(lang_test, "G.fst"))
    w = Lang.load(lang_test).words
    assert has_cycle(G, {w["#0"], w["ab"]}) and not has_cycle(G, {w["#0"]})


def test_format_lm_bad_inputs(lang_test, tmp_path, capsys):
    lang_dir = os.path.join(os.path.dirname(lang_test), "lang")
    arpa = tmp_path / "other.arpa"
    arpa.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1 </s>\n-99 <s>\n-1 zebra\n\\end\\\n")
    assert format_lm_main([lang_dir, str(arpa), "", str(tmp_path / "o")]) == 1
    assert "none of the LM's words are in" in capsys.readouterr().err
    arpa.write_text("not an arpa file\n")
    assert format_lm_main([lang_dir, str(arpa), "", str(tmp_path / "o")]) == 1
    assert "not an ARPA file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------ models

def make_model(lang: Lang, context_width: int):
    """A tree (monophone, or triphone whose pdfs depend only on the central phone), its transition
    model, and a 1-dim GMM with one Gaussian per pdf at mean 10*pdf."""
    topo = lang.topo()
    phones = lang.real_phones
    if context_width == 1:
        npc = [0] * (max(phones) + 1)
        for p in phones:
            npc[p] = topo.num_pdf_classes(p)
        ctx = khg.monophone_context_dependency(phones, npc)
        tree = None
    else:
        table = [None] * (max(phones) + 1)
        pdf = 0
        for p in phones:
            n = topo.num_pdf_classes(p)
            table[p] = TableEventMap(-1, [ConstantEventMap(pdf + i) for i in range(n)])
            pdf += n
        tree = ContextDependencyTree(3, 1, TableEventMap(1, table))
        ctx = tree.to_kaldi()
    tm = khg.TransitionModel(ctx, topo)
    am = khg.AmDiagGmm()
    for pdf in range(tm.num_pdfs):
        g = khg.DiagGmm(1, 1)
        g.set_weights(np.array([1.0], dtype=np.float32))
        g.set_means(np.array([[10.0 * pdf]], dtype=np.float32))
        g.set_invvars(np.array([[1.0]], dtype=np.float32))
        g.compute_gconsts()
        am.add_pdf(g)
    pdf_of = {}
    for t in tm.tuples:
        d = {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", str(t))}
        pdf_of[(d["phone"], d["hmm_state"])] = d["forward_pdf"]
    return ctx, tm, am, pdf_of, tree


def synth_feats(lang: Lang, lexp: dict[str, list[str]], tokens: list[str], pdf_of, frames_per_state=3):
    """Feature frames for a token sequence (words, or 'SIL' for silence): each HMM state of each
    phone emits frames at its pdf's mean (plus a little noise)."""
    rnd = np.random.default_rng(0)
    out = []
    for tok in tokens:
        phones = ["SIL"] if tok == "SIL" else lexp[tok]
        for p in phones:
            pid = lang.phones[p]
            for hs in range(lang.topo().num_pdf_classes(pid)):
                out += [10.0 * pdf_of[(pid, hs)]] * frames_per_state
    x = np.array(out, dtype=np.float32)[:, None]
    return x + rnd.normal(0, 0.3, x.shape).astype(np.float32)


def decode(hclg, am, tm, feats):
    dec = khg.LatticeFasterDecoder(hclg, khg.LatticeFasterDecoderConfig(beam=16, lattice_beam=6))
    decodable = khg.DecodableAmDiagGmmScaled(am, tm, feats, 0.1)
    ok, ali, words, loglike = khg.decode_utterance_lattice_faster(dec, decodable, tm, "utt", False)
    assert ok
    return ali, words


def lexicon_phones(lang_test):
    lexp = {}
    with open(os.path.join(lang_test, "phones", "align_lexicon.txt")) as f:
        for line in f:
            w, _, *ph = line.split()
            lexp.setdefault(w, ph)
    return lexp


@pytest.mark.parametrize("context_width", [1, 3])
def test_hclg_decodes_known_utterances(lang_test, tmp_path, context_width):
    lang = Lang.load(lang_test)
    ctx, tm, am, pdf_of, _ = make_model(lang, context_width)
    graph = tmp_path / "graph"
    info = make_hclg(lang_test, ctx, tm, str(graph), verbose=False)
    assert info.hclg_states > 0
    for f in ("HCLG.fst", "words.txt", "phones.txt", "phones/word_boundary.int", "phones/align_lexicon.int",
              "phones/disambig.int", "phones/silence.csl", "phones/optional_silence.csl", "disambig_tid.int"):
        assert (graph / f).exists(), f
    assert (graph / "num_pdfs").read_text() == f"{tm.num_pdfs}\n"
    hclg = read_fst(str(graph / "HCLG.fst"))
    # no disambiguation symbols are left on the input side; all inputs are transition ids
    tids = {int(x) for x in (graph / "disambig_tid.int").read_text().split()}
    assert tids and all(a.ilabel <= tm.num_transition_ids and a.ilabel not in tids
                        for s in kaldifst.StateIterator(hclg) for a in kaldifst.ArcIterator(hclg, s))
    lexp = lexicon_phones(lang_test)
    for tokens in (["ab", "cd"], ["SIL", "d", "SIL", "ab"], ["ab", "cd", "ab", "SIL"], ["cd"]):
        feats = synth_feats(lang, lexp, tokens, pdf_of)
        ali, words = decode(hclg, am, tm, feats)
        assert [lang.word_names[i] for i in words] == [t for t in tokens if t != "SIL"]
        assert len(ali) == feats.shape[0]
        # the alignment's phones are the pronunciations (plus the silences we put in): a phone
        # ends at a transition into its HMM's final state
        phones = [lang.phone_names[tm.transition_id_to_phone(t)] for t in ali if tm.is_final(t)]
        assert phones == [p for t in tokens for p in (["SIL"] if t == "SIL" else lexp[t])]
    # 'aba' is in the lexicon but not in the LM: the graph cannot output it
    ali, words = decode(hclg, am, tm, synth_feats(lang, lexp, ["aba"], pdf_of))
    assert lang.words["aba"] not in words


def test_mkgraph_cli_and_script(lang_test, tmp_path, capsys):
    from pynnet.hmm.model_io import write_model
    from pynnet.hmm.tree_io import write_tree

    lang = Lang.load(lang_test)
    ctx, tm, am, pdf_of, tree = make_model(lang, 3)
    mdir = tmp_path / "tri"
    mdir.mkdir()
    write_model(str(mdir / "final.mdl"), tm, am)
    write_tree(str(mdir / "tree"), tree)
    r = subprocess.run([os.path.join(ROOT, "utils", "mkgraph.sh"), "--self-loop-scale", "0.1", lang_test,
                        str(mdir), str(tmp_path / "graph")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "HCLG" in r.stderr
    hclg = read_fst(str(tmp_path / "graph" / "HCLG.fst"))
    lexp = lexicon_phones(lang_test)
    _, words = decode(hclg, am, tm, synth_feats(lang, lexp, ["d", "ab"], pdf_of))
    assert [lang.word_names[i] for i in words] == ["d", "ab"]
    # Kaldi's forms: bare --remove-oov, the ignored --mono; the same graph as --remove-oov true
    outs = []
    for opts in (["--mono", "--remove-oov", "--self-loop-scale", "0.1"], ["--remove-oov", "true"]):
        g = tmp_path / f"graph_{len(outs)}"
        r = subprocess.run([os.path.join(ROOT, "utils", "mkgraph.sh"), *opts, lang_test, str(mdir), str(g)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append((g / "HCLG.fst").read_bytes())
    assert "--mono, --left-biphone and --quinphone options are deprecated and ignored" in \
        subprocess.run([os.path.join(ROOT, "utils", "mkgraph.sh"), "--mono", lang_test, str(mdir), str(tmp_path / "graph_0")],
                       capture_output=True, text=True).stderr
    assert outs[0] == outs[1]
    # second run: up to date, nothing rebuilt
    mtime = os.path.getmtime(tmp_path / "graph" / "HCLG.fst")
    r = subprocess.run([os.path.join(ROOT, "utils", "mkgraph.sh"), lang_test, str(mdir), str(tmp_path / "graph")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "up to date" in r.stdout
    assert os.path.getmtime(tmp_path / "graph" / "HCLG.fst") == mtime
    # errors: a lang dir without G.fst; a model dir without a tree
    lang_dir = os.path.join(os.path.dirname(lang_test), "lang")
    assert mkgraph_main([lang_dir, str(mdir), str(tmp_path / "g2")]) == 1
    assert "no G.fst" in capsys.readouterr().err
    # a tree from another training (fewer pdfs: the last phone shares the first one's) beside the
    # model: one line, not a traceback from deep inside the H transducer
    phones = lang.real_phones
    shared = [None] * (max(phones) + 1)
    pdf = 0
    for p in phones:
        n = lang.topo().num_pdf_classes(p)
        if p == phones[-1]:
            shared[p] = TableEventMap(-1, [ConstantEventMap(i) for i in range(n)])
        else:
            shared[p] = TableEventMap(-1, [ConstantEventMap(pdf + i) for i in range(n)])
            pdf += n
    write_tree(str(mdir / "tree"), ContextDependencyTree(3, 1, TableEventMap(1, shared)))
    assert mkgraph_main([lang_test, str(mdir), str(tmp_path / "g3")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{mdir}/tree: the tree has {pdf} pdfs but {mdir}/final.mdl has {tm.num_pdfs}" in err[0], err
    os.unlink(mdir / "tree")
    assert mkgraph_main([lang_test, str(mdir), str(tmp_path / "g2")]) == 1
    assert "no tree" in capsys.readouterr().err
    assert not (tmp_path / "g2" / "HCLG.fst").exists()


def test_several_hundred_word_trigram_graph_builds_and_decodes(tmp_path):
    """Triphone HCLG for a 300-word lexicon and a pruned trigram trained on 3000 sentences."""
    rnd = random.Random(0)
    phones = [f"p{i}" for i in range(30)]
    words = [f"w{i}" for i in range(300)]
    lex = "<unk> SPN\n" + "".join(f"{w} {' '.join(rnd.choice(phones) for _ in range(rnd.randint(2, 6)))}\n"
                                  for w in words)
    d = tmp_path / "dict"
    make_dict(d, lex)
    (d / "nonsilence_phones.txt").write_text("\n".join(phones) + "\n")
    lang = prepare_lang(str(d), "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang"))
    weights = [1 / (i + 1) for i in range(len(words))]
    sents = [rnd.choices(words, weights, k=rnd.randint(3, 12)) for _ in range(3000)]
    lm = prune_lm(train_lm(sents, 3, vocab=words, unk="<unk>", verbose=False), 1e-5, verbose=False)
    lm.write_arpa(str(tmp_path / "lm.arpa.gz"))
    format_lm(str(tmp_path / "lang"), str(tmp_path / "lm.arpa.gz"), str(d / "lexicon.txt"),
              str(tmp_path / "lang_test"), verbose=False)
    ctx, tm, am, pdf_of, _ = make_model(lang, 3)
    info = make_hclg(str(tmp_path / "lang_test"), ctx, tm, str(tmp_path / "graph"), verbose=False)
    assert info.hclg_arcs > 10000
    # and it decodes a sentence of the training text
    hclg = read_fst(str(tmp_path / "graph" / "HCLG.fst"))
    lexp = lexicon_phones(str(tmp_path / "lang_test"))
    sent = sents[0]
    _, out = decode(hclg, am, tm, synth_feats(lang, lexp, sent, pdf_of))
    # homophones are possible with random prons; compare pronunciations, not spellings
    assert [lexp[lang.word_names[i]] for i in out] == [lexp[w] for w in sent]


def test_format_lm_script_with_dict_dir(lang_test, tmp_path):
    base = os.path.dirname(lang_test)
    r = subprocess.run([os.path.join(ROOT, "utils", "format_lm.sh"), os.path.join(base, "lang"),
                        os.path.join(base, "lm.arpa"), os.path.join(base, "dict"), str(tmp_path / "lt")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "fstisstochastic" in r.stderr
    G = read_fst(str(tmp_path / "lt" / "G.fst"))
    w = Lang.load(str(tmp_path / "lt")).words
    assert g_cost(G, [w["ab"], w["cd"]], w["#0"]) == pytest.approx(0.6 * LN10, abs=1e-4)
    r = subprocess.run([os.path.join(ROOT, "utils", "format_lm.sh"), os.path.join(base, "lang"),
                        os.path.join(base, "lm.arpa"), str(tmp_path / "lt")], capture_output=True, text=True)
    assert r.returncode == 1 and "Usage" in r.stderr


def test_remove_oov(lang_test, tmp_path):
    base = os.path.dirname(lang_test)
    arpa = tmp_path / "unk.arpa"
    arpa.write_text(ARPA.replace("ngram 1=5", "ngram 1=6").replace("-0.9\td\n", "-0.9\td\n-1.5\t<unk>\n"))
    format_lm(os.path.join(base, "lang"), str(arpa), "", str(tmp_path / "lt"), verbose=False)
    lang = Lang.load(str(tmp_path / "lt"))
    ctx, tm, _, _, _ = make_model(lang, 1)

    def outputs(remove):
        g = tmp_path / f"graph_{remove}"
        make_hclg(str(tmp_path / "lt"), ctx, tm, str(g), remove_oov=remove, verbose=False)
        h = read_fst(str(g / "HCLG.fst"))
        return {a.olabel for s in kaldifst.StateIterator(h) for a in kaldifst.ArcIterator(h, s)}

    keep, removed = outputs(False), outputs(True)
    assert lang.oov_id in keep and lang.oov_id not in removed
    assert removed - {0} == {lang.words[w] for w in ("ab", "cd", "d")}


def _path_weights(fst, max_len=6):
    """(input labels, output labels) -> total weight of every path of up to max_len arcs."""
    out = {}
    stack = [(fst.start, (), (), 0.0)]
    while stack:
        s, i, o, w = stack.pop()
        f = fst.final(s).value
        if f != math.inf:
            out[(i, o)] = min(out.get((i, o), math.inf), w + f)
        if len(i) < max_len:
            for a in kaldifst.ArcIterator(fst, s):
                stack.append((a.nextstate, i + (a.ilabel,), o + (a.olabel,), w + a.weight.value))
    return out


def test_push_special_keeps_path_weights_and_evens_out_states():
    from pynnet.hmm.graph import push_special, stochasticity

    # a small cyclic, non-stochastic FST (like a back-off LM)
    fst = kaldifst.compile("0 1 1 1 0.5\n0 2 2 2 2.0\n1 2 3 3 0.1\n2 0 4 4 1.5\n1 1 5 5 3.0\n1 0.7\n2 0.2\n")
    lo, hi = stochasticity(fst)
    assert hi - lo > 0.5
    pushed = push_special(fst)
    lo2, hi2 = stochasticity(pushed)
    assert hi2 - lo2 < 1e-4  # every state now has the same outgoing mass
    before, after = _path_weights(fst), _path_weights(pushed)
    assert before.keys() == after.keys() and len(before) > 10
    for k in before:
        assert after[k] == pytest.approx(before[k], abs=1e-4)
