"""n-gram LM trainer: modified Kneser-Ney against a hand-computed example, every context sums to
one (KN, Witten-Bell, pruned), ARPA round trip (gzip) readable by kaldilm, perplexity, bad input."""
from __future__ import annotations

import gzip
import math
import os
import random
import subprocess

import pytest

from pynnet.io.kaldi_libs import import_kaldilm

kaldilm = import_kaldilm()

from pynnet.bin.lang import lm_ppl_main, train_lm_main
from pynnet.hmm.lm import (BOS, EOS, BackoffLM, _kn_discounts, perplexity, prune_lm, read_sentences,
                           read_vocab, train_lm)
from pynnet.io.errors import PynnetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def check_sums_to_one(lm: BackoffLM, tol: float = 1e-9) -> int:
    vocab = [w for w in lm.vocab if w != BOS]
    n = 0
    for h in lm.contexts():
        s = sum(10 ** lm.logprob(w, h) for w in vocab)
        assert abs(s - 1.0) < tol, (h, s)
        n += 1
    return n


def random_corpus(seed=0, n=300, vocab=("a", "b", "c", "d", "e", "f", "g", "h")):
    rnd = random.Random(seed)
    # a little structure so that higher orders matter
    out = []
    for _ in range(n):
        s = [rnd.choice(vocab)]
        for _ in range(rnd.randint(0, 8)):
            s.append(vocab[(vocab.index(s[-1]) + rnd.choice([1, 1, 2, 3])) % len(vocab)])
        out.append(s)
    return out


def test_kn_discounts_formula():
    # n1=3 n2=2 n3=1 n4=1: Y = 3/7; D1 = 1 - 2Y n2/n1 = 3/7; D2 = 2 - 3Y n3/n2 = 19/14; D3+ = 3 - 4Y n4/n3 = 9/7
    d = _kn_discounts([1, 1, 1, 2, 2, 3, 4, 7], 2, warn=False)
    assert d == pytest.approx((3 / 7, 19 / 14, 9 / 7))
    assert _kn_discounts([1, 1], 2, warn=False) == (0.5, 1.0, 1.5)  # too little data: kenlm's fallback


def test_hand_computed_bigram():
    # Sentences "a b", "a"; vocabulary {a, b} (+ </s>, <unk>): V = 4. Discounts fall back to 0.5/1/1.5.
    lm = train_lm([["a", "b"], ["a"]], order=2, vocab=["a", "b"], verbose=False)
    P = lambda w, h=(): 10 ** lm.logprob(w, h)  # noqa: E731
    # unigram continuation counts: a 1 (<s> a), b 1 (a b), </s> 2 (b </s>, a </s>); total 4
    # alpha = (1-.5)/4, (1-.5)/4, (2-1)/4; gamma = (.5+.5+1)/4 = .5; uniform 1/4
    assert P("a") == pytest.approx(0.125 + 0.125)
    assert P("b") == pytest.approx(0.25)
    assert P(EOS) == pytest.approx(0.25 + 0.125)
    assert P("<unk>") == pytest.approx(0.125)
    assert lm.probs[1][(BOS,)] == -99
    # context <s>: c(<s> a) = 2 -> D2 = 1: alpha = .5, gamma = .5
    assert P("a", (BOS,)) == pytest.approx(0.5 + 0.5 * 0.25)
    assert P("b", (BOS,)) == pytest.approx(0.5 * 0.25)
    assert lm.bows[(BOS,)] == pytest.approx(math.log10(0.5))
    # context a: a b 1, a </s> 1: alpha = .25 each, gamma = .5
    assert P("b", ("a",)) == pytest.approx(0.25 + 0.5 * 0.25)
    assert P(EOS, ("a",)) == pytest.approx(0.25 + 0.5 * 0.375)
    # context b: b </s> 1 -> alpha .5, gamma .5
    assert P(EOS, ("b",)) == pytest.approx(0.5 + 0.5 * 0.375)
    assert P("a", ("b",)) == pytest.approx(0.5 * 0.25)
    # perplexity of "a b": P(a|<s>) P(b|a) P(</s>|b) over 3 tokens
    st = perplexity(lm, [["a", "b"]])
    lp = math.log10(0.625 * 0.375 * 0.6875)
    assert st.logprob == pytest.approx(lp)
    assert st.ppl == pytest.approx(10 ** (-lp / 3))
    assert st.ppl1 == pytest.approx(10 ** (-lp / 2))
    check_sums_to_one(lm)


def test_kn_lower_orders_use_continuation_counts():
    # "x" follows only "a" (many times); "y" follows many words once each. A trigram model must give
    # y the larger unigram (continuation) probability although x is more frequent.
    sents = [["a", "x"]] * 10 + [[w, "y"] for w in ("a", "b", "c", "d")]
    lm = train_lm(sents, order=3, verbose=False)
    assert lm.logprob("y", ()) > lm.logprob("x", ())
    wb = train_lm(sents, order=3, discount="wb", verbose=False)
    assert wb.logprob("x", ()) > wb.logprob("y", ())  # Witten-Bell uses raw counts


@pytest.mark.parametrize("order,discount", [(1, "kn"), (2, "kn"), (3, "kn"), (4, "kn"), (3, "wb")])
def test_every_context_sums_to_one(order, discount):
    vocab = ["a", "b", "c", "d", "e", "f", "g", "h", "unseen"]
    lm = train_lm(random_corpus(), order=order, vocab=vocab, discount=discount, verbose=False)
    n = check_sums_to_one(lm)
    assert n == 1 + sum(1 for k in range(1, order) for g in lm.probs[k] if g[-1] != EOS)
    assert lm.logprob("unseen", ()) > -99  # vocabulary words get probability mass
    assert lm.logprob("zzz", ()) == lm.logprob("<unk>", ())


def test_pruning_keeps_normalisation_and_shrinks():
    lm = train_lm(random_corpus(1), order=3, verbose=False)
    small = prune_lm(lm, 1e-3, verbose=False)
    assert sum(small.num_ngrams()[1:]) < sum(lm.num_ngrams()[1:])
    assert small.num_ngrams()[0] == lm.num_ngrams()[0]  # unigrams are never pruned
    check_sums_to_one(small)
    # every kept n-gram's context is still listed (ARPA requirement)
    for k in range(2, small.order + 1):
        for g in small.probs[k]:
            assert g[:-1] in small.probs[k - 1]
    # a tiny threshold prunes (almost) nothing; a larger one costs perplexity on the training text
    corpus = random_corpus(1)
    assert perplexity(prune_lm(lm, 1e-9, verbose=False), corpus).ppl == pytest.approx(perplexity(lm, corpus).ppl)
    assert perplexity(small, corpus).ppl > perplexity(lm, corpus).ppl


@pytest.mark.parametrize("discount", ["wb", "kn"])
def test_pruned_4gram_contexts_sum_to_one(tmp_path, discount):
    # Unstructured text: pruning removes most 2- to 4-grams but keeps some (<s> x y) contexts whose
    # suffix (x y) is pruned; their backoff goes through (x y), which must then weigh 1, not its old
    # backoff weight.  Checked in memory and as written to (and read back from) ARPA.
    rnd = random.Random(0)
    sents = [[rnd.choice("abcdefgh") for _ in range(rnd.randint(1, 10))] for _ in range(400)]
    lm = train_lm(sents, order=4, discount=discount, verbose=False)
    small = prune_lm(lm, 2e-3, verbose=False)
    assert all(a < b for a, b in zip(small.num_ngrams()[1:], lm.num_ngrams()[1:]))
    assert any(h[1:] not in small.probs[len(h) - 1] for h in small.contexts() if len(h) >= 2)
    check_sums_to_one(small)
    assert all(h in small.probs[len(h)] for h in small.bows)
    small.write_arpa(str(tmp_path / "lm.arpa"))
    check_sums_to_one(BackoffLM.read_arpa(str(tmp_path / "lm.arpa")), tol=1e-5)


def test_non_breaking_space_is_part_of_a_word(tmp_path):
    # Kaldi splits on spaces and tabs only: 'caf\u00a0e' is one word of the text, the vocabulary
    # and the ARPA file (str.split() made it two, and the ARPA file could not be read back).
    text = tmp_path / "text"
    text.write_text("u1 caf\u00a0e au lait\nu2 un caf\u00a0e\r\nu3 au\u3000lait\n", encoding="utf-8")
    sents = list(read_sentences(str(text), skip_uttid=True))
    assert sents == [["caf\u00a0e", "au", "lait"], ["un", "caf\u00a0e"], ["au\u3000lait"]]
    vocab = tmp_path / "words.txt"
    vocab.write_text("<eps> 0\ncaf\u00a0e 1\nau 2\nlait 3\nun 4\nau\u3000lait 5\n", encoding="utf-8")
    assert read_vocab(str(vocab)) == ["caf\u00a0e", "au", "lait", "un", "au\u3000lait"]
    lm = train_lm(sents, order=3, vocab=read_vocab(str(vocab)), verbose=False)
    lm.write_arpa(str(tmp_path / "lm.arpa"))
    back = BackoffLM.read_arpa(str(tmp_path / "lm.arpa"))
    assert ("caf\u00a0e",) in back.probs[1] and ("caf",) not in back.probs[1]
    assert all(back.probs[k].keys() == lm.probs[k].keys() for k in (1, 2, 3))
    check_sums_to_one(back, tol=1e-5)


def test_arpa_round_trip_gzip_and_kaldilm(tmp_path):
    lm = train_lm(random_corpus(2), order=3, vocab=list("abcdefgh"), verbose=False)
    for name in ("lm.arpa", "lm.arpa.gz"):
        path = str(tmp_path / name)
        lm.write_arpa(path)
        if name.endswith(".gz"):
            with gzip.open(path, "rt") as f:
                head = f.read(200)
        else:
            head = open(path).read(200)
        assert head.startswith("\n\\data\\\nngram 1=11\n")  # 8 words + <s> </s> <unk>
        back = BackoffLM.read_arpa(path)
        assert back.num_ngrams() == lm.num_ngrams()
        for k in range(1, 4):
            for g, p in lm.probs[k].items():
                assert back.probs[k][g] == pytest.approx(p, abs=1e-6)
        check_sums_to_one(back, tol=1e-5)
    # a second write, later: the same bytes (gzip header without name or time stamp)
    import time
    time.sleep(1.1)
    lm.write_arpa(str(tmp_path / "again.arpa.gz"))
    assert (tmp_path / "again.arpa.gz").read_bytes() == (tmp_path / "lm.arpa.gz").read_bytes()
    # kaldilm (Kaldi's arpa2fst) reads it: one state per context, #0 back-off arcs
    txt = kaldilm.arpa2fst(input_arpa=str(tmp_path / "lm.arpa"), disambig_symbol="#0", max_arpa_warnings=0)
    lines = [line.split() for line in txt.strip().splitlines()]
    states = {int(f[0]) for f in lines} | {int(f[1]) for f in lines if len(f) >= 4}
    assert len(states) == len(lm.contexts())   # (), <s> and each bigram context
    # every context but () backs off through one #0:<eps> arc (the only arcs with an empty output)
    backoff = [f for f in lines if len(f) >= 4 and f[3] == "0"]
    assert len(backoff) == len(lm.contexts()) - 1 and len({f[2] for f in backoff}) == 1 and backoff[0][2] != "0"


def test_read_arpa_errors(tmp_path, capsys):
    p = tmp_path / "bad.arpa"
    p.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 a\n-0.5 </s>\n")
    with pytest.raises(PynnetError, match="missing .end"):
        BackoffLM.read_arpa(str(p))
    # more n-grams than \data\ announces is an error; fewer a warning (a pruned LM with its old
    # header, as Kaldi's arpa2fst); <s> and </s> must be unigrams
    p.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-99 <s>\n-1.0 a\n-0.5 </s>\n\\end\\\n")
    with pytest.raises(PynnetError, match=r"bad.arpa:8: .data. says ngram 1=2 but the .1-grams: section has 3"):
        BackoffLM.read_arpa(str(p))
    p.write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-99 <s>\n-1.0 a\n-0.5 </s>\n\\end\\\n")
    assert BackoffLM.read_arpa(str(p)).num_ngrams() == [3]
    assert "bad.arpa:8: \\data\\ says ngram 1=4 but the \\1-grams: section has 3" in capsys.readouterr().err
    p.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 a\n-0.5 </s>\n\\end\\\n")
    with pytest.raises(PynnetError, match=r"bad.arpa:7: no unigram <s>"):
        BackoffLM.read_arpa(str(p))
    p.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 a\nxx </s>\n\\end\\\n")
    with pytest.raises(PynnetError, match=r"bad.arpa:6: bad number"):
        BackoffLM.read_arpa(str(p))
    # numbers as Kaldi reads them: Python's float() also takes '1_0' and non-ASCII digits
    for bad in ("-1_0", "-\u0661", "nan"):
        p.write_text(f"\\data\\\nngram 1=3\n\n\\1-grams:\n-99 <s>\n{bad} a\n-0.5 </s>\n\\end\\\n",
                     encoding="utf-8")
        with pytest.raises(PynnetError, match=f"bad.arpa:6: bad number '{bad}'"):
            BackoffLM.read_arpa(str(p))
    p.write_bytes(b"\\data\\\nngram 1=3\n\n\\1-grams:\n-99 <s>\n-1 \xff\n-0.5 </s>\n\\end\\\n")
    with pytest.raises(PynnetError, match="bad.arpa:6: not valid UTF-8"):
        BackoffLM.read_arpa(str(p))
    p.write_text("hello\n")
    with pytest.raises(PynnetError, match="not an ARPA file"):
        BackoffLM.read_arpa(str(p))


def test_integers_are_ascii_as_kaldi_reads_them(tmp_path):
    # ids and counts are ASCII integers: lstrip("-").isdigit() took '--5' (and '\u00b2', on which
    # int() raised), int() read '\u0661' as 1; a '#' word is a disambiguation symbol only with ASCII digits
    vocab = tmp_path / "words.txt"
    vocab.write_text("<eps> 0\na\t1\n#1  2\n#\u00b2 3\nb -4\n", encoding="utf-8")
    assert read_vocab(str(vocab)) == ["a", "#\u00b2", "b"]
    for bad in ("--5", "\u00b2", "\u0661", "1_0", "5x", "\u00a05"):
        vocab.write_text(f"<eps> 0\na {bad}\n", encoding="utf-8")
        with pytest.raises(PynnetError, match=r"words.txt:2: expected 'word' or 'word id' \(an integer\)"):
            read_vocab(str(vocab))
    # '\data\' lines are split as Kaldi's ARPA reader splits them: 'ngram', N, '=', count
    arpa = tmp_path / "lm.arpa"
    body = "\n\\1-grams:\n-99 <s>\n-0.5 </s>\n-0.3 a\n\n\\end\\\n"
    arpa.write_text("\\data\\\nngram\t1 =  3\n" + body, encoding="utf-8")
    assert set(BackoffLM.read_arpa(str(arpa)).probs[1]) == {("<s>",), ("</s>",), ("a",)}
    for data, msg in (("ngram 1=\u00b3", "bad ngram count line"), ("ngram \u0661=3", "bad ngram count line"),
                      ("ngram 1=--3", "bad ngram count line"), ("ngram 1=3=3", "bad ngram count line"),
                      ("ngram\u00a01=3", "expected 'ngram N=count'")):
        arpa.write_text(f"\\data\\\n{data}\n" + body, encoding="utf-8")
        with pytest.raises(PynnetError, match=f"lm.arpa:2: {msg}"):
            BackoffLM.read_arpa(str(arpa))
    arpa.write_text("\\data\\\nngram 1=3\n" + body.replace("\\1-grams", "\\\u0661-grams"), encoding="utf-8")
    with pytest.raises(PynnetError, match=r"lm.arpa:4: bad section header"):
        BackoffLM.read_arpa(str(arpa))


def test_cli(tmp_path, capsys):
    text = tmp_path / "text"
    text.write_text("".join(f"utt{i} {' '.join(s)}\n" for i, s in enumerate(random_corpus(3, 100))))
    words = tmp_path / "words.txt"
    words.write_text("<eps> 0\n<UNK> 1\na 2\nb 3\nc 4\nd 5\n#0 6\n<s> 7\n</s> 8\n")
    out = tmp_path / "lm.arpa.gz"
    assert train_lm_main(["--order", "3", "--vocab", str(words), "--unk", "<UNK>", "--text-has-uttid", "true",
                          str(text), str(out)]) == 0
    err = capsys.readouterr().err
    assert "OOV tokens mapped to <UNK>" in err
    lm = BackoffLM.read_arpa(str(out))
    assert set(lm.vocab) == {"<s>", "</s>", "<UNK>", "a", "b", "c", "d"}
    check_sums_to_one(lm, tol=1e-6)  # ARPA keeps 7 significant digits
    assert lm_ppl_main(["--text-has-uttid", "true", str(out), str(text)]) == 0
    o = capsys.readouterr().out
    assert o.startswith(f"file {text}: 100 sentences,") and "ppl= " in o
    ppl = float(o.split("ppl= ")[1].split()[0])
    assert 1.0 < ppl < 7.0  # 5 LM words incl. <UNK> and </s>; structured text is predictable
    # bad input: one-line errors, nothing written
    bad = tmp_path / "bad.txt"
    bad.write_text("a b\n<s> c\n")
    out2 = tmp_path / "x.arpa"
    assert train_lm_main([str(bad), str(out2)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.txt:2: the text must not contain '<s>'" in err[0]
    assert not out2.exists()
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert train_lm_main([str(empty), str(out2)]) == 1
    assert "training text is empty" in capsys.readouterr().err
    assert train_lm_main(["--order", "0", str(text), str(out2)]) == 1
    assert train_lm_main(["--discount", "gt", str(text), str(out2)]) == 1
    assert lm_ppl_main([str(tmp_path / "nope.arpa"), str(text)]) == 1
    assert "nope.arpa: no such file" in capsys.readouterr().err


def test_train_lm_script(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "text").write_text("".join(f"u{i} {' '.join(s)}\n" for i, s in enumerate(random_corpus(4, 50))))
    lang = tmp_path / "lang"
    lang.mkdir()
    (lang / "words.txt").write_text("<eps> 0\n<UNK> 1\na 2\nb 3\nc 4\n#0 5\n<s> 6\n</s> 7\n")
    (lang / "oov.txt").write_text("<UNK>\n")
    out = tmp_path / "lm" / "lm_bg.arpa.gz"
    r = subprocess.run([os.path.join(ROOT, "steps", "train_lm.sh"), "--order", "2", "--discount", "wb",
                        "--text-has-uttid", "true", str(lang / "words.txt"), str(data / "text"), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lm = BackoffLM.read_arpa(str(out))
    assert lm.order == 2 and "<UNK>" in lm.vocab and "<unk>" not in lm.vocab  # the lang's oov.txt
    assert "ppl=" in r.stdout
    assert "ppl=" in (tmp_path / "lm" / "log" / "train_lm.lm_bg.log").read_text()
    r = subprocess.run([os.path.join(ROOT, "steps", "train_lm.sh"), str(lang / "words.txt"), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "Usage" in r.stderr


def test_read_sentences_skips_uttid(tmp_path):
    p = tmp_path / "t"
    p.write_text("u1 a b\nu2\n")
    assert list(read_sentences(str(p), skip_uttid=True)) == [["a", "b"], []]


def test_perplexity_oovs_without_unk():
    # An LM trained without a vocabulary has <unk> only as a uniform share; drop it to get an LM
    # without <unk>: OOVs are then left out of the score and the word count, as SRILM's ngram -ppl.
    lm = train_lm([["a", "b"], ["a"]], order=2, vocab=["a", "b"], verbose=False)
    with_unk = perplexity(lm, [["a", "zz", "b"]])
    assert with_unk.oovs == 1 and not with_unk.oovs_excluded and with_unk.zeroprobs == 0
    del lm.probs[1][("<unk>",)]
    st = perplexity(lm, [["a", "zz", "b"]])
    assert st.oovs == 1 and st.oovs_excluded and st.zeroprobs == 0
    # scored: a, b, </s> (the history after zz is "zz", which backs off to unigrams)
    lp = math.log10(0.625) + math.log10(0.25) + lm.logprob("</s>", ("b",))
    assert st.logprob == pytest.approx(lp)
    assert st.ppl == pytest.approx(10 ** (-lp / 3)) and st.ppl1 == pytest.approx(10 ** (-lp / 2))


@pytest.mark.parametrize("gz", [False, True])
def test_lines_end_at_newline_only(tmp_path, gz):
    # As Kaldi and the transcript/data-dir/lattice readers: a lone '\r' is part of a word (universal
    # newlines ended the line there: 'u1 a\rb' was [['a'], []]); a '\r' before '\n' is dropped.
    def write(name: str, text: str) -> str:
        path = str(tmp_path / (name + (".gz" if gz else "")))
        with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
            f.write(text.encode("utf-8"))
        return path

    text = write("text", "u1 a\rb\r\nu2 c d\nu3 a\rb c\n")
    sents = list(read_sentences(text, skip_uttid=True))
    assert sents == [["a\rb"], ["c", "d"], ["a\rb", "c"]]
    vocab = write("words.txt", "<eps> 0\na\rb 1\r\nc 2\nd 3\n")
    assert read_vocab(vocab) == ["a\rb", "c", "d"]
    lm = train_lm(sents, order=2, vocab=read_vocab(vocab), verbose=False)
    path = str(tmp_path / ("lm.arpa" + (".gz" if gz else "")))
    lm.write_arpa(path)
    back = BackoffLM.read_arpa(path)
    assert ("a\rb",) in back.probs[1] and ("a\rb", "c") in back.probs[2]
    assert all(back.probs[k].keys() == lm.probs[k].keys() for k in (1, 2))
    # CRLF line ends in an ARPA file
    with (gzip.open(path, "rt", encoding="utf-8", newline="") if gz else open(path, newline="")) as f:
        crlf = f.read().replace("\n", "\r\n")
    from_crlf = BackoffLM.read_arpa(write("crlf.arpa", crlf))
    assert from_crlf.probs == back.probs and from_crlf.bows == back.bows


def test_high_oov_rate_is_a_warning_naming_the_cause(tmp_path, capsys):
    """A text that still holds its utterance ids (one OOV token per line, half of all tokens here)
    trains, with one WARNING line: the file, the rate, the most frequent OOV words and the hint."""
    words = tmp_path / "words.txt"
    words.write_text("<eps> 0\n<unk> 1\na 2\nb 3\nc 4\n#0 5\n<s> 6\n</s> 7\n")
    text = tmp_path / "text"
    text.write_text("".join(f"sw0{i:04d}-A {'a b' if i % 2 else 'c'}\n" for i in range(40)))
    out = tmp_path / "lm.arpa"
    assert train_lm_main(["--order", "2", "--vocab", str(words), str(text), str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    warn = [ln for ln in err if "vocabulary" in ln]
    assert warn == [f"pynnet-train-lm: WARNING: 40 of the 100 tokens of {text} (40.0%) are not in the vocabulary "
                    "and were mapped to <unk>; the most frequent: sw00000-A (1), sw00001-A (1), sw00002-A (1), "
                    "sw00003-A (1), sw00004-A (1). The first word of 40 of the 40 lines is out of the "
                    "vocabulary, a different one on almost every line: does the text still hold utterance ids? "
                    "(strip them, or use --text-has-uttid true)"]
    assert out.exists()
    # with --text-has-uttid true: no OOV at all, no warning
    assert train_lm_main(["--order", "2", "--vocab", str(words), "--text-has-uttid", "true", str(text), str(out)]) == 0
    assert "vocabulary" not in capsys.readouterr().err

    # many OOV tokens of one word, not at the start of the lines: the rate and the word, no hint
    text2 = tmp_path / "text2"
    text2.write_text("a zz b\nc a zz\nzz\na b c a b c\n" * 3)
    assert train_lm_main(["--order", "2", "--vocab", str(words), str(text2), str(out)]) == 0
    warn = [ln for ln in capsys.readouterr().err.splitlines() if "vocabulary" in ln]
    assert warn == [f"pynnet-train-lm: WARNING: 9 of the 39 tokens of {text2} (23.1%) are not in the vocabulary "
                    "and were mapped to <unk>; the most frequent: zz (9)"]
    # at most 5%: quiet
    text3 = tmp_path / "text3"
    text3.write_text("a b c a b c a b c a b c a b c a b c a zz\n")
    assert train_lm_main(["--order", "2", "--vocab", str(words), str(text3), str(out)]) == 0
    err = capsys.readouterr().err
    assert "vocabulary" not in err and "1 OOV tokens mapped to <unk>" in err


def test_train_lm_script_warns_of_utterance_ids(tmp_path):
    """steps/train_lm.sh on a Kaldi text without --text-has-uttid: the warning reaches the user
    (and the log)."""
    lang = tmp_path / "lang"
    lang.mkdir()
    (lang / "words.txt").write_text("<eps> 0\n<UNK> 1\na 2\nb 3\nc 4\n#0 5\n<s> 6\n</s> 7\n")
    (lang / "oov.txt").write_text("<UNK>\n")
    text = tmp_path / "text"
    text.write_text("".join(f"u{i} {' '.join(s)}\n" for i, s in enumerate(random_corpus(4, 50))))
    out = tmp_path / "lm" / "lm.arpa.gz"
    r = subprocess.run([os.path.join(ROOT, "steps", "train_lm.sh"), "--order", "2", str(lang / "words.txt"),
                        str(text), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    warn = [ln for ln in r.stderr.splitlines() if "vocabulary" in ln]
    assert len(warn) == 1 and f"of {text} (" in warn[0] and "mapped to <UNK>" in warn[0]
    assert "does the text still hold utterance ids?" in warn[0]
    assert warn[0] in (tmp_path / "lm" / "log" / "train_lm.lm.log").read_text()
