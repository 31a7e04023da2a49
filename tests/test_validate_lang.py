"""utils/validate_dict_dir.pl and utils/validate_lang.pl (pynnet-validate-dict-dir,
pynnet-validate-lang): our prepare_lang + format_lm output validates; dict and lang dirs broken in
realistic ways give one ``ERROR (prog): file[:line]: ...`` line on stderr and exit 1; warnings
exit 0. Where perl and a Kaldi git mirror are here, Kaldi's validate_dict_dir.pl must agree with
ours on pass/fail over the same good and broken dict dirs."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pynnet.bin.lang import validate_dict_dir_main, validate_lang_main
from pynnet.hmm.graph import format_lm
from pynnet.hmm.lang import prepare_lang
from pynnet.hmm.lm import train_lm
from pynnet.io.kaldi_libs import import_kaldi

from gmm_corpus import WORDS, make_dict
from test_kaldi_utils import ENV, UTILS, kaldi_env, kaldi_tree


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """(dict dir, lang dir with G.fst, the lang dir without) made by our prepare_lang and format_lm."""
    t = tmp_path_factory.mktemp("vl")
    make_dict(str(t / "dict"))
    prepare_lang(str(t / "dict"), "<unk>", str(t / "tmp"), str(t / "lang"))
    rnd = random.Random(3)
    sents = [rnd.choices(sorted(WORDS), k=rnd.randint(2, 6)) for _ in range(200)]
    train_lm(sents, 3, vocab=sorted(WORDS), unk="<unk>", verbose=False).write_arpa(str(t / "lm.arpa"))
    format_lm(str(t / "lang"), str(t / "lm.arpa"), None, str(t / "lang_test"), verbose=False)
    return t / "dict", t / "lang_test", t / "lang"


def run(*args):
    return subprocess.run([str(a) for a in args], env=ENV, capture_output=True, text=True)


def error_of(main, argv, capsys) -> str:
    """The one stderr line of a failing ``main(argv)`` (exit 1, no traceback)."""
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert rc == 1, out.out
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    return lines[0]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def ids(lang: Path, name: str = "phones.txt") -> dict[str, int]:
    return {s: int(i) for s, i in (ln.split() for ln in (lang / name).read_text().splitlines())}


# --- good dirs ------------------------------------------------------------------------------------

def test_our_dirs_validate(dirs):
    d, lang, _ = dirs
    r = run(UTILS / "validate_dict_dir.pl", f"{d}/")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == f"--> SUCCESS [validating dictionary directory {d}]"
    r = run(UTILS / "validate_lang.pl", lang)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == f"--> SUCCESS [validating lang directory {lang}]"
    assert "L_disambig.fst o G.fst is determinizable" in r.stdout
    assert validate_lang_main([str(dirs[2])]) == 0   # no G.fst: its checks are left out
    # Kaldi's options: accepted, each skips its checks
    r = run(UTILS / "validate_lang.pl", "--skip-determinization-check", "--skip-disambig-check",
            "--skip-generate-words-check", lang)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "determinizable" not in r.stdout and "best path" not in r.stdout
    assert "SUCCESS" in r.stdout.splitlines()[-1]
    r = run(UTILS / "validate_lang.pl")
    assert r.returncode == 1 and "usage" in r.stderr.lower()


# --- broken lang dirs -------------------------------------------------------------------------------

def _drop_from_phone_list(lang: Path, name: str, phone: str) -> None:
    """A phone taken out of phones/<name>.{txt,int,csl} consistently."""
    i = ids(lang)[phone]
    p = lang / "phones"
    (p / f"{name}.txt").write_text("".join(ln + "\n" for ln in (p / f"{name}.txt").read_text().split() if ln != phone))
    kept = [x for x in (p / f"{name}.int").read_text().split() if int(x) != i]
    (p / f"{name}.int").write_text("".join(x + "\n" for x in kept))
    (p / f"{name}.csl").write_text(":".join(kept) + "\n")


def _phones_dup_id(lang):
    edit(lang / "phones.txt", f"a_E {ids(lang)['a_E']}\n", f"a_E {ids(lang)['a_B']}\n")


def _topo_without_phone(lang):
    i = str(ids(lang)["c_I"])
    text = (lang / "topo").read_text()
    (lang / "topo").write_text(re.sub(rf"(?<=[ >\n]){i}(?=[ \n<])", "", text, count=1))


def _garbage(path):
    path.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(300)))


def _G_with_word_not_in_words_txt(lang):
    _, kf, _ = import_kaldi()
    G = kf.StdVectorFst.read(str(lang / "G.fst"))
    G.add_arc(G.start, kf.StdArc(900, 900, 1.0, G.start))  # the largest label: G stays ilabel-sorted
    G.write(str(lang / "G.fst"))


def _G_with_bos_arc(lang):
    _, kf, _ = import_kaldi()
    G = kf.StdVectorFst.read(str(lang / "G.fst"))
    bos = ids(lang, "words.txt")["<s>"]
    s = G.add_state()
    G.add_arc(s, kf.StdArc(bos, bos, 0.0, s))
    G.write(str(lang / "G.fst"))


def _word_boundary_swapped(lang):
    edit(lang / "phones/word_boundary.txt", "b_B begin\n", "b_B end\n")
    edit(lang / "phones/word_boundary.int", f"{ids(lang)['b_B']} begin\n", f"{ids(lang)['b_B']} end\n")


@pytest.mark.parametrize("breaks,match", [
    (lambda lang: _drop_from_phone_list(lang, "nonsilence", "f_E"),
     r"phones\.txt: phone 'f_E' \(id \d+\) is in none of phones/silence\.txt, nonsilence\.txt and disambig\.txt"),
    (lambda lang: edit(lang / "phones/nonsilence.int", f"\n{ids(lang)['b_I']}\n", f"\n{ids(lang)['b_I'] + 1}\n"),
     r"phones/nonsilence\.int:\d+: expected \d+ \(the id of 'b_I' on line \d+ of nonsilence\.txt\), got '\d+'"),
    (_phones_dup_id, r"phones\.txt:\d+: id \d+ used twice \('a_B' and 'a_E'\)"),
    (lambda lang: edit(lang / "phones.txt", "c_I ", "c_I\r "),
     r"phones\.txt:\d+: carriage return \(\^M\): DOS line ends\?"),
    (_topo_without_phone, r"topo: no <TopologyEntry> for phone 'c_I' \(id \d+\)"),
    (lambda lang: (lang / "oov.int").write_text("5\n"),
     r"oov\.int: expected 1 \(the id of '<unk>' in words\.txt\), got '5'"),
    (lambda lang: _garbage(lang / "L.fst"), r"L\.fst: cannot read as an OpenFst FST \(FstHeader::Read: Bad FST header\)"),
    (lambda lang: shutil.copyfile(lang / "L.fst", lang / "L_disambig.fst"),
     r"L_disambig\.fst: final state \d+ has no #0:#0 self-loop"),
    (_G_with_word_not_in_words_txt, r"G\.fst: an arc of state \d+ has input label 900, which is not in words\.txt"),
    (_G_with_bos_arc, r"G\.fst: the arc \d+ -> \d+ has '<s>' on it"),
    (_word_boundary_swapped, r"word_boundary\.txt:\d+: phone 'b_B' is 'end', but its name says 'begin'"),
    (lambda lang: edit(lang / "phones/sets.txt", "sil sil_B", "sil_B"),
     r"phones/sets\.int:1: expected '\d+( \d+)*' \(line 1 of sets\.txt in ids\)"),
    (lambda lang: edit(lang / "words.txt", "<s> ", "<S> "), r"words\.txt: no '<s>', which a G\.fst made from an ARPA LM needs"),
])
def test_broken_lang_dirs(dirs, tmp_path, capsys, breaks, match):
    lang = tmp_path / "lang"
    shutil.copytree(dirs[1], lang)
    breaks(lang)
    line = error_of(validate_lang_main, [lang], capsys)
    assert line.startswith("ERROR (") and f"): {lang}/" in line, line
    assert re.search(match, line), line


def test_lang_warnings_exit_0(dirs, tmp_path):
    lang = tmp_path / "lang"
    shutil.copytree(dirs[1], lang)
    for e in ("txt", "int"):
        (lang / f"phones/word_boundary.{e}").unlink()
    r = run(UTILS / "validate_lang.pl", lang)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.fullmatch(r"WARNING \(pynnet-validate-lang\): \S+/word_boundary\.txt: no such file, but the phones "
                        r"are position-dependent.*\n", r.stderr), r.stderr
    assert r.stdout.splitlines()[-1] == "--> WARNING (check output above for warnings)"


# --- broken dict dirs --------------------------------------------------------------------------------

def _lexicon(d: Path, text: str) -> None:
    (d / "lexicon.txt").write_text(text, encoding="utf-8")


# (name, how to break a copy of our dict dir, our error (None: it passes))
DICT_CASES = [
    ("good", lambda d: None, None),
    ("unused phone", lambda d: edit(d / "nonsilence_phones.txt", "a\n", "a\nx\n"), None),
    ("stress variants told apart", lambda d: (edit(d / "nonsilence_phones.txt", "a\n", "a a1\n"),
                                              (d / "extra_questions.txt").write_text("a\na1\n"),
                                              edit(d / "lexicon.txt", "ab a b\n", "ab a b\nab a1 b\n")), None),
    ("lexicon phone not in the phone lists", lambda d: edit(d / "lexicon.txt", "ab a b\n", "ab a q\n"),
     r"lexicon\.txt:2: phone 'q' of word 'ab' is not in silence_phones\.txt or nonsilence_phones\.txt"),
    ("CRLF line", lambda d: edit(d / "lexicon.txt", "ab a b\n", "ab a b\r\n"),
     r"lexicon\.txt:2: carriage return \(\^M\): DOS line ends\?"),
    ("CRLF phone list", lambda d: edit(d / "silence_phones.txt", "sil\n", "sil\r\n"),
     r"silence_phones\.txt:1: carriage return"),
    ("no newline at the end", lambda d: _lexicon(d, (d / "lexicon.txt").read_text().rstrip("\n")),
     r"lexicon\.txt:\d+: the last line does not end in a newline"),
    ("no-break space", lambda d: edit(d / "lexicon.txt", "ab a b\n", "ab a\u00a0b\n"),
     r"lexicon\.txt:2: whitespace character U\+00A0"),
    ("empty line", lambda d: edit(d / "nonsilence_phones.txt", "a\n", "a\n\n"),
     r"nonsilence_phones\.txt:2: empty line"),
    ("word without pronunciation", lambda d: edit(d / "lexicon.txt", "ab a b\n", "ab\n"),
     r"lexicon\.txt:2: word 'ab' has an empty pronunciation"),
    ("repeated lexicon line", lambda d: edit(d / "lexicon.txt", "ab a b\n", "ab a b\nab a b\n"),
     r"lexicon\.txt:3: duplicate entry for word 'ab'"),
    ("phone named like a position", lambda d: edit(d / "nonsilence_phones.txt", "a\n", "a_B\n"),
     r"nonsilence_phones\.txt:1: phone 'a_B' ends in _B/_E/_I/_S, which Kaldi reserves"),
    ("phone in both lists", lambda d: edit(d / "nonsilence_phones.txt", "a\n", "a\nsil\n"),
     r"nonsilence_phones\.txt:2: phone 'sil' is listed twice"),
    ("optional silence not silence", lambda d: (d / "optional_silence.txt").write_text("a\n"),
     r"optional_silence\.txt:1: optional silence 'a' is not in silence_phones\.txt"),
    ("unknown phone in extra_questions", lambda d: (d / "extra_questions.txt").write_text("a b z\n"),
     r"extra_questions\.txt:1: phone 'z' is not in"),
    ("phones sharing a root never told apart", lambda d: edit(d / "nonsilence_phones.txt", "a\nb\n", "a b\n"),
     r"nonsilence_phones\.txt:1: phones 'a' and 'b' share a tree root"),
    ("reserved word", lambda d: edit(d / "lexicon.txt", "ab a b\n", "<s> a b\n"),
     r"lexicon\.txt:2: word '<s>' is reserved"),
    ("lexiconp.txt disagreeing with lexicon.txt",
     lambda d: (d / "lexiconp.txt").write_text("<unk> 1.0 sil\nab 1.0 a b\n"),
     r"lexicon\.txt:\d+: word '\S+' \(.*\) is not in \S+lexiconp\.txt"),
    ("bad pronunciation probability",
     lambda d: (d / "lexiconp.txt").write_text("".join(
         f"{w} {'1.5' if w == 'ab' else '1.0'} {' '.join(p)}\n"
         for w, *p in (ln.split() for ln in (d / "lexicon.txt").read_text().splitlines()))),
     r"lexiconp\.txt:2: pronunciation probability 1\.5 is not in \(0, 1\]"),
]


def _broken_dict(dirs, root: Path, case) -> Path:
    d = root / "dict"
    shutil.copytree(dirs[0], d)
    case[1](d)
    return d


@pytest.mark.parametrize("case", DICT_CASES, ids=[c[0] for c in DICT_CASES])
def test_dict_dirs(dirs, tmp_path, capsys, case):
    d = _broken_dict(dirs, tmp_path, case)
    match = case[2]
    if match is None:
        assert validate_dict_dir_main([str(d)]) == 0
        out = capsys.readouterr()
        assert out.out.splitlines()[-1] == f"--> SUCCESS [validating dictionary directory {d}]"
        if case[0] == "unused phone":
            assert re.fullmatch(rf"WARNING \([^)]*\): {d}/nonsilence_phones\.txt: 1 phone\(s\) used by no "
                                r"word of lexicon\.txt \(their models get no data\): x\n", out.err), out.err
        else:
            assert out.err == ""
        return
    line = error_of(validate_dict_dir_main, [d], capsys)
    assert line.startswith("ERROR (") and f"): {d}/" in line, line
    assert re.search(match, line), line


def test_dict_dirs_agree_with_kaldi(dirs, tmp_path):
    """Kaldi's validate_dict_dir.pl (perl, from the mirror) and ours pass and fail the same dict dirs."""
    k = kaldi_tree(tmp_path / "k", ["utils/validate_dict_dir.pl"])
    disagree = []
    for i, case in enumerate(DICT_CASES):
        d = _broken_dict(dirs, tmp_path / f"c{i}", case)
        kr = subprocess.run(["perl", str(k / "utils/validate_dict_dir.pl"), str(d)], env=kaldi_env(k),
                            capture_output=True, text=True)
        ours = run(UTILS / "validate_dict_dir.pl", d)
        assert "SUCCESS" in kr.stdout if kr.returncode == 0 else "ERROR" in kr.stdout, kr.stdout + kr.stderr
        if (kr.returncode == 0) != (ours.returncode == 0):
            disagree.append((case[0], kr.returncode, ours.returncode))
    assert not disagree
