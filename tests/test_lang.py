"""prepare_lang: lang dir layout as Kaldi's, L.fst / L_disambig.fst spell the lexicon with optional
silence, Lang.load, OOV mapping, and one-line errors for bad dict dirs."""
from __future__ import annotations

import math
import os
import subprocess

import pytest

import kaldi_hmm_gmm  # noqa: F401  (before kaldifst)
import kaldifst

from pynnet.bin.lang import prepare_lang_main
from pynnet.hmm.lang import Lang, add_lex_disambig, map_text_to_ids, prepare_lang
from pynnet.io.errors import PynnetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LEXICON = """<unk> SPN
ab a b
aba a b a
ab2 a b
cd c d
d d
"""


def make_dict(d, lexicon=LEXICON, sil="SIL\nSPN\n", nonsil="a\nb\nc\nd\n", opt="SIL\n",
              extra=None, lexiconp=False):
    os.makedirs(d, exist_ok=True)
    for name, text in (("silence_phones.txt", sil), ("nonsilence_phones.txt", nonsil),
                       ("optional_silence.txt", opt)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    with open(os.path.join(d, "lexiconp.txt" if lexiconp else "lexicon.txt"), "w") as f:
        f.write(lexicon)
    if extra is not None:
        with open(os.path.join(d, "extra_questions.txt"), "w") as f:
            f.write(extra)
    return str(d)


def transduce(fst, ilabels):
    """All output label sequences (without epsilons) of successful paths reading exactly
    ``ilabels``, with their lowest cost (tropical)."""
    best = {}
    start = fst.start
    agenda = [(start, 0, (), 0.0)]
    seen = 0
    while agenda:
        s, i, out, cost = agenda.pop()
        seen += 1
        assert seen < 100000
        if i == len(ilabels):
            f = fst.final(s).value
            if f != math.inf:
                best[out] = min(best.get(out, math.inf), cost + f)
        for a in kaldifst.ArcIterator(fst, s):
            o = out + ((a.olabel,) if a.olabel else ())
            if a.ilabel == 0:
                agenda.append((a.nextstate, i, o, cost + a.weight.value))
            elif i < len(ilabels) and a.ilabel == ilabels[i]:
                agenda.append((a.nextstate, i + 1, o, cost + a.weight.value))
    return best


@pytest.fixture(scope="module")
def lang(tmp_path_factory):
    t = tmp_path_factory.mktemp("lang")
    d = make_dict(t / "dict", extra="a b\nSIL SPN\n")
    return prepare_lang(d, "<unk>", str(t / "tmp"), str(t / "lang"), sil_prob=0.5)


def read(path):
    with open(path) as f:
        return f.read()


def test_layout_matches_kaldi(lang):
    d = lang.dir
    # phones.txt: <eps>, silence phones with their word-position variants, nonsilence variants, #0..#N
    names = [line.split()[0] for line in read(f"{d}/phones.txt").splitlines()]
    assert names[:7] == ["<eps>", "SIL", "SIL_B", "SIL_E", "SIL_I", "SIL_S", "SPN"]
    assert names[11:15] == ["a_B", "a_E", "a_I", "a_S"]
    # ab / ab2 share a pronunciation -> #1 #2; one more for silence in L_disambig; plus #0
    assert names[-4:] == ["#0", "#1", "#2", "#3"]
    assert [int(line.split()[1]) for line in read(f"{d}/phones.txt").splitlines()] == list(range(len(names)))
    words = read(f"{d}/words.txt").split("\n")
    assert words[0] == "<eps> 0"
    assert [w.split()[0] for w in words[1:-4]] == ["<unk>", "ab", "ab2", "aba", "cd", "d"]  # C-sorted
    assert [w.split()[0] for w in words[-4:-1]] == ["#0", "<s>", "</s>"]
    assert read(f"{d}/oov.txt") == "<unk>\n" and read(f"{d}/oov.int") == "1\n"
    assert lang.oov_id == 1 and lang.oov_word == "<unk>"
    ph = lang.phones
    assert read(f"{d}/phones/silence.csl").strip() == ":".join(str(i) for i in range(1, 11))
    assert read(f"{d}/phones/optional_silence.txt") == "SIL\n"
    assert read(f"{d}/phones/roots.txt").splitlines()[2] == "shared split a_B a_E a_I a_S"
    assert lang.roots[0] == (True, True, [1, 2, 3, 4, 5])
    assert lang.sets[2] == [ph["a_B"], ph["a_E"], ph["a_I"], ph["a_S"]]
    eq = read(f"{d}/phones/extra_questions.txt").splitlines()
    assert eq[0] == "a_B a_E a_I a_S b_B b_E b_I b_S"  # user question expanded to all variants
    assert "a_B b_B c_B d_B" in eq and "SIL_S SPN_S" in eq and "SIL SPN" in eq
    wb = dict(line.split() for line in read(f"{d}/phones/word_boundary.txt").splitlines())
    assert wb["SIL"] == "nonword" and wb["a_B"] == "begin" and wb["d_S"] == "singleton" and wb["b_I"] == "internal"
    al = read(f"{d}/phones/align_lexicon.txt").splitlines()
    assert "<eps> <eps> SIL" in al and "aba aba a_B b_I a_E" in al
    ali_int = read(f"{d}/phones/align_lexicon.int").splitlines()
    assert f"{lang.words['cd']} {lang.words['cd']} {ph['c_B']} {ph['d_E']}" in ali_int
    assert read(f"{d}/phones/wdisambig_phones.int").strip() == str(ph["#0"])
    assert read(f"{d}/phones/wdisambig_words.int").strip() == str(lang.words["#0"])
    assert lang.disambig_phones == [ph[f"#{i}"] for i in range(4)]
    assert lang.context_indep == lang.silence_phones
    assert lang.position_dependent
    assert lang.words_to_ids(["ab", "zzz", "d"]) == [lang.words["ab"], 1, lang.words["d"]]


def test_topology(lang):
    topo = lang.topo()
    ph = lang.phones
    assert topo.num_pdf_classes(ph["a_B"]) == 3 and topo.num_pdf_classes(ph["SIL"]) == 5
    assert sorted(topo.phones) == lang.real_phones
    text = read(lang.topo_path)
    assert "<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>" in text
    assert "<State> 4 <PdfClass> 4 <Transition> 4 0.75 <Transition> 5 0.25 </State>" in text
    assert ("<State> 0 <PdfClass> 0 <Transition> 0 0.25 <Transition> 1 0.25 <Transition> 2 0.25 "
            "<Transition> 3 0.25 </State>") in text


def test_L_spells_lexicon_with_optional_silence(lang):
    L = lang.L_fst()
    assert L.is_olabel_sorted and lang.L_disambig_fst().is_olabel_sorted  # as Kaldi: fstarcsort --sort_type=olabel
    ph, w = lang.phones, lang.words
    p = lambda *names: [ph[n] for n in names]  # noqa: E731
    nosil, sil = -math.log(0.5), -math.log(0.5)
    # each word alone; ab and ab2 share a pronunciation, so both come out
    got = transduce(L, p("a_B", "b_E"))
    assert set(got) == {(w["ab"],), (w["ab2"],)}
    assert got[(w["ab"],)] == pytest.approx(nosil + nosil, abs=1e-4)
    assert set(transduce(L, p("a_B", "b_I", "a_E"))) == {(w["aba"],)}
    assert set(transduce(L, p("d_S"))) == {(w["d"],)}
    # optional silence at the start and between words, each with its probability
    got = transduce(L, p("SIL", "c_B", "d_E", "SIL", "d_S"))
    assert set(got) == {(w["cd"], w["d"])}
    assert got[(w["cd"], w["d"])] == pytest.approx(sil + sil + nosil, abs=1e-4)
    # not a word: wrong positions, or silence inside a word
    assert transduce(L, p("a_S", "b_E")) == {}
    assert transduce(L, p("c_B", "SIL", "d_E")) == {}
    assert transduce(L, p("SIL", "SIL", "d_S")) == {}


def test_L_disambig(lang):
    Ld = lang.L_disambig_fst()
    ph, w = lang.phones, lang.words
    assert set(transduce(Ld, [ph["a_B"], ph["b_E"], ph["#1"]])) == {(w["ab"],)}
    assert set(transduce(Ld, [ph["a_B"], ph["b_E"], ph["#2"]])) == {(w["ab2"],)}
    assert transduce(Ld, [ph["a_B"], ph["b_E"]]) == {}
    # silence is followed by its own disambiguation symbol; #0:#0 loops pass G's back-off symbol
    assert set(transduce(Ld, [ph["SIL"], ph["#3"], ph["d_S"], ph["#0"], ph["d_S"]])) == {
        (w["d"], w["#0"], w["d"])}


def test_pron_probs_and_position_independent(tmp_path):
    d = make_dict(tmp_path / "dict", lexicon="<unk> 1.0 SPN\nx 0.25 a b\nx 1.0 c\n", lexiconp=True)
    lang = prepare_lang(d, "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang"),
                        position_dependent=False, sil_prob=0.0)
    assert not lang.position_dependent
    assert "a_B" not in lang.phones and "SIL_S" not in lang.phones
    assert not os.path.exists(os.path.join(lang.dir, "phones", "word_boundary.txt"))
    got = transduce(lang.L_fst(), [lang.phones["a"], lang.phones["b"]])
    assert got == {(lang.words["x"],): pytest.approx(-math.log(0.25), abs=1e-4)}
    # no silence arcs with --sil-prob 0
    assert transduce(lang.L_fst(), [lang.phones["SIL"], lang.phones["c"]]) == {}


def test_non_breaking_space_is_part_of_a_word(tmp_path):
    # Kaldi splits lexicon lines on spaces and tabs only: 'caf\u00a0e' is one word (str.split()
    # made it two, and writing align_lexicon.int then failed); a phone may hold one too.
    lex = "<unk> SPN\ncaf\u00a0e c a\u00a0x\nd\td \t\n"
    d = make_dict(tmp_path / "dict", lexicon=lex, nonsil="a\u00a0x\nc\nd\n")
    lang = prepare_lang(d, "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang"))
    assert "caf\u00a0e" in lang.words and "caf" not in lang.words and "d" in lang.words
    assert "a\u00a0x_E" in lang.phones
    ali = read(f"{lang.dir}/phones/align_lexicon.int").splitlines()
    w, c_b, ax_e = lang.words["caf\u00a0e"], lang.phones["c_B"], lang.phones["a\u00a0x_E"]
    assert f"{w} {w} {c_b} {ax_e}" in ali
    assert (w,) in transduce(lang.L_fst(), [c_b, ax_e])


def test_add_lex_disambig_prefixes():
    prons, m = add_lex_disambig([["a"], ["a", "b"], ["a", "b"], ["c"]])
    assert prons == [["a", "#1"], ["a", "b", "#1"], ["a", "b", "#2"], ["c"]] and m == 2


def test_map_text_to_ids(lang, tmp_path, capsys):
    t = tmp_path / "text"
    t.write_text("u1 ab zz cd\nu2 zz yy\n")
    ids = map_text_to_ids(str(t), lang)
    assert ids == {"u1": [lang.words["ab"], 1, lang.words["cd"]], "u2": [1, 1]}
    assert "2 words (3 tokens) mapped to <unk>" in capsys.readouterr().err
    t.write_text("u1 ab\nu1 cd\n")
    with pytest.raises(PynnetError, match=r"text:2: duplicate utterance id"):
        map_text_to_ids(str(t), lang)


@pytest.mark.parametrize("kw,match", [
    (dict(lexicon="<unk> SPN\nab a x\n"), r"lexicon.txt:2: phone 'x' of word 'ab' is not in"),
    (dict(lexicon="<unk> SPN\nab\n"), r"lexicon.txt:2: word 'ab' has an empty pronunciation"),
    (dict(lexicon="<unk> SPN\nab a b\nab a b\n"), r"lexicon.txt:3: duplicate entry for word 'ab'"),
    (dict(lexicon="<unk> SPN\n<s> a\n"), r"lexicon.txt:2: word '<s>' is reserved"),
    (dict(nonsil="a\nb\nc\nd\nSIL\n"), r"nonsilence_phones.txt:5: phone 'SIL' is listed twice"),
    (dict(nonsil="a\nb_B\n"), r"nonsilence_phones.txt:2: phone 'b_B' ends in _B"),
    (dict(opt="a\n"), r"optional_silence.txt:1: optional silence 'a' is not in silence_phones.txt"),
    (dict(opt="SIL SPN\n"), r"optional_silence.txt:1: must contain exactly one phone"),
    (dict(extra="a q\n"), r"extra_questions.txt:1: phone 'q' is not in"),
    (dict(lexicon="<unk> 1.0 SPN\nab 1.5 a b\n", lexiconp=True), r"lexiconp.txt:2: pronunciation probability 1.5"),
    # a field is cut at spaces and tabs only, and float() took '\u00a00.5' and '0_5'
    (dict(lexicon="<unk> 1.0 SPN\nab \u00a00.5 a b\n", lexiconp=True), r"lexiconp.txt:2: bad pronunciation probability"),
    (dict(lexicon="<unk> 1.0 SPN\nab 0_5 a b\n", lexiconp=True), r"lexiconp.txt:2: bad pronunciation probability"),
    (dict(lexicon="ab a b\n"), r"lexicon.txt: OOV word '<unk>' is not in the lexicon"),
])
def test_bad_dict_dirs(tmp_path, capsys, kw, match):
    d = make_dict(tmp_path / "dict", **kw)
    lang_dir = tmp_path / "lang"
    rc = prepare_lang_main([d, "<unk>", str(tmp_path / "tmp"), str(lang_dir)])
    err = capsys.readouterr().err
    assert rc == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR (")
    assert __import__("re").search(match, lines[0]), lines[0]
    assert not lang_dir.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".lang")]  # no staging dir left


def test_missing_files(tmp_path, capsys):
    d = make_dict(tmp_path / "dict")
    os.unlink(os.path.join(d, "silence_phones.txt"))
    assert prepare_lang_main([d, "<unk>", str(tmp_path / "t"), str(tmp_path / "l")]) == 1
    assert "silence_phones.txt: no such file" in capsys.readouterr().err


def test_failure_keeps_old_lang_dir(lang, tmp_path, capsys):
    # A failed re-run must not damage an existing lang dir.
    import shutil
    copy = tmp_path / "lang"
    shutil.copytree(lang.dir, copy)
    before = read(copy / "words.txt")
    d = make_dict(tmp_path / "dict", lexicon="<unk> SPN\nab a x\n")
    assert prepare_lang_main([d, "<unk>", str(tmp_path / "t"), str(copy)]) == 1
    assert read(copy / "words.txt") == before


@pytest.mark.parametrize("name,old,new,match", [
    ("words.txt", "\nab ", "\nab \u00a0", r"words.txt:\d+: bad id '\u00a0\d+'"),
    ("words.txt", "\nab ", "\nab\t ", None),
    ("phones/sets.int", " ", " \u00a0", r"sets.int:1: expected integers"),
    ("phones/sets.int", " ", " \t ", None),
    ("phones/roots.int", "split ", "split \u0661", r"roots.int:1: expected integer phone ids"),
    ("phones/word_boundary.int", " ", "\u00a0", r"word_boundary.int:1: expected '<phone-id> <begin"),
])
def test_lang_dir_fields_and_integers_as_kaldi_reads_them(lang, tmp_path, name, old, new, match):
    # Kaldi cuts fields at spaces and tabs only and reads ASCII integers: int() took '\u00a05' and
    # '\u0661', str.split() made '1\u00a02' two ids, int() raised on '1\u00a0begin'
    import shutil
    copy = tmp_path / "lang"
    shutil.copytree(lang.dir, copy)
    text = read(copy / name)
    assert old in text
    (copy / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    if match is None:
        import dataclasses
        assert dataclasses.replace(Lang.load(str(copy)), dir=lang.dir) == Lang.load(lang.dir)
    else:
        with pytest.raises(PynnetError, match=match):
            Lang.load(str(copy))


def test_shell_script(tmp_path):
    d = make_dict(tmp_path / "dict")
    r = subprocess.run([os.path.join(ROOT, "utils", "prepare_lang.sh"), "--sil-prob", "0.3",
                        "--num-sil-states", "3", d, "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lang = Lang.load(str(tmp_path / "lang"))
    assert lang.topo().num_pdf_classes(lang.phones["SIL"]) == 3
    L = lang.L_fst()
    got = transduce(L, [lang.phones["SIL"], lang.phones["d_S"]])
    assert got[(lang.words["d"],)] == pytest.approx(-math.log(0.3) - math.log(0.7), abs=1e-4)
    r = subprocess.run([os.path.join(ROOT, "utils", "prepare_lang.sh"), d, "<unk>"], capture_output=True, text=True)
    assert r.returncode != 0 and "Usage" in r.stderr


def test_lexicon_and_lexiconp_must_agree(tmp_path):
    # lexiconp.txt wins when both exist: one that lists other words or pronunciations than
    # lexicon.txt is an error (Kaldi's validate_dict_dir.pl), not silently used
    d = make_dict(tmp_path / "dict")
    agree = "".join(f"{w} 1.0 {' '.join(p)}\n" for w, *p in (x.split() for x in LEXICON.splitlines()))
    with open(os.path.join(d, "lexiconp.txt"), "w") as f:
        f.write(agree)
    prepare_lang(d, "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang_ok"))
    assert "ab2" in open(tmp_path / "lang_ok" / "words.txt").read()
    with open(os.path.join(d, "lexiconp.txt"), "a") as f:
        f.write("newword 1.0 a c\n")
    with pytest.raises(PynnetError, match=r"lexiconp.txt: word 'newword' \(a c\) of lexiconp.txt is not in .*"
                                          r"lexicon.txt: the two lexicons must agree"):
        prepare_lang(d, "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang_bad"))
    with open(os.path.join(d, "lexiconp.txt"), "w") as f:
        f.write(agree.replace("cd 1.0 c d\n", ""))
    with pytest.raises(PynnetError, match=r"lexicon.txt:5: word 'cd' \(c d\) is not in .*lexiconp.txt, which is "
                                          r"the one used"):
        prepare_lang(d, "<unk>", str(tmp_path / "tmp"), str(tmp_path / "lang_bad"))
    assert not (tmp_path / "lang_bad").exists()
