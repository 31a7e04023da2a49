"""pynnet-prepare-dict and pynnet-check-corpus (egs/custom's data side) on a corpus laid out as a
user lays theirs out (tests/custom_fixture.py)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import soundfile as sf

import custom_fixture as F
from pynnet.bin.custom import check_corpus_main, prepare_dict_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UTILS = os.path.join(ROOT, "utils")


@pytest.fixture(scope="module")
def corpus8(tmp_path_factory):
    return F.make_user_corpus(str(tmp_path_factory.mktemp("user8")), rate=8000)


@pytest.fixture(scope="module")
def corpus16(tmp_path_factory):
    return F.make_user_corpus(str(tmp_path_factory.mktemp("user16")), rate=16000, dev=False, lm_text=False,
                              lowercase=True, unk=False)


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ERROR")]


def _kaldi_checks(dict_dir, oov, tmp_path):
    """utils/validate_dict_dir.pl and utils/prepare_lang.sh accept the dict dir."""
    r = subprocess.run([os.path.join(UTILS, "validate_dict_dir.pl"), dict_dir], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lang = str(tmp_path / "lang")
    r = subprocess.run([os.path.join(UTILS, "prepare_lang.sh"), dict_dir, oov, str(tmp_path / "lang_tmp"), lang],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _lines(os.path.join(lang, "oov.txt")) == [oov]


# ----------------------------------------------------------------------------------------------
# pynnet-prepare-dict
# ----------------------------------------------------------------------------------------------

def test_prepare_dict_upper_case_stressed(corpus8, tmp_path):
    d = str(tmp_path / "dict")
    assert prepare_dict_main([corpus8.lexicon, d]) == 0
    assert _lines(f"{d}/silence_phones.txt") == ["SIL", "SPN"]
    assert _lines(f"{d}/optional_silence.txt") == ["SIL"]
    assert _lines(f"{d}/oov.txt") == ["<UNK>"]          # the lexicon's own, mini_librispeech's form
    nonsil = _lines(f"{d}/nonsilence_phones.txt")
    assert "AA0 AA1 AA2" in nonsil and "B" in nonsil and "HH" in nonsil
    assert not any(p in line.split() for line in nonsil for p in ("SIL", "SPN"))
    q = [line.split() for line in _lines(f"{d}/extra_questions.txt")]
    assert q[0] == ["SIL", "SPN"]
    assert "B" in q[1] and not any(re.search(r"\d$", p) for p in q[1])         # the unstressed class
    for k, stress in enumerate("012", 2):
        assert q[k] and all(p.endswith(stress) for p in q[k]), q[k]
    lex = _lines(f"{d}/lexicon.txt")
    assert "!SIL SIL" in lex and "<UNK> SPN" in lex and "HELLO HH AH0 L OW1" in lex
    assert len(lex) == len(_lines(corpus8.lexicon)) + 1     # only !SIL added
    assert not os.path.exists(f"{d}/lexiconp.txt")
    _kaldi_checks(d, "<UNK>", tmp_path)


def test_prepare_dict_lower_case_adds_oov_and_silence(corpus16, tmp_path):
    d = str(tmp_path / "dict")
    assert prepare_dict_main([corpus16.lexicon, d]) == 0
    assert _lines(f"{d}/silence_phones.txt") == ["sil", "spn"]
    assert _lines(f"{d}/optional_silence.txt") == ["sil"]
    assert _lines(f"{d}/oov.txt") == ["<unk>"]
    lex = _lines(f"{d}/lexicon.txt")
    assert "<unk> spn" in lex and "!SIL sil" in lex and "hello hh ah0 l ow1" in lex
    assert "aa0 aa1 aa2" in _lines(f"{d}/nonsilence_phones.txt")
    _kaldi_checks(d, "<unk>", tmp_path)


def test_prepare_dict_own_silence_nonspeech_words_and_oov_option(tmp_path, capsys):
    lex = tmp_path / "lex.txt"
    # tab-separated, DOS line ends, a blank line, a repeated entry; the lexicon's own <sil> word;
    # [laughter]'s phone is used by no speech word (silence), [hes]'s AH0 is (nonsilence)
    lex.write_bytes(b"<sil>\tsil\r\nhello\thh ah0 l ow1\r\n\r\nworld w er1 l d\r\n[laughter] lau\r\n"
                    b"[hes] ah0\r\nhello hh ah0 l ow1\r\nthe dh ah0\r\nthe dh iy1\r\n")
    d = str(tmp_path / "dict")
    assert prepare_dict_main(["--oov-word", "<garbage>", str(lex), d]) == 0
    err = capsys.readouterr().err
    assert "dropped 1 repeated entry" in err and "added '<garbage> spn'" in err
    assert _lines(f"{d}/silence_phones.txt") == ["sil", "lau", "spn"]
    assert _lines(f"{d}/optional_silence.txt") == ["sil"]
    assert _lines(f"{d}/oov.txt") == ["<garbage>"]
    assert "ah0" in _lines(f"{d}/nonsilence_phones.txt")
    lex_out = _lines(f"{d}/lexicon.txt")
    assert "!SIL sil" not in lex_out and "<sil> sil" in lex_out and len(lex_out) == 8
    _kaldi_checks(d, "<garbage>", tmp_path)
    # --oov-word naming a word the lexicon has: nothing added; --silence-phone
    d2 = str(tmp_path / "dict2")
    assert prepare_dict_main(["--oov-word", "[hes]", "--silence-phone", "pau", str(lex), d2]) == 0
    assert _lines(f"{d2}/oov.txt") == ["[hes]"]
    assert _lines(f"{d2}/optional_silence.txt") == ["pau"]
    assert _lines(f"{d2}/silence_phones.txt") == ["pau", "lau", "sil"]   # ah0 stays a speech phone
    assert "!SIL pau" in _lines(f"{d2}/lexicon.txt")


def test_prepare_dict_lexiconp_form_and_rerun_replaces_whole_dir(tmp_path):
    lex = tmp_path / "lexp.txt"
    lex.write_text("HELLO 1.0 HH AH0 L OW1\nHELLO 0.5 HH EH0 L OW1\nWORLD 1 W ER1 L D\n")
    d = str(tmp_path / "dict")
    assert prepare_dict_main([str(lex), d]) == 0
    assert "HELLO 0.5 HH EH0 L OW1" in _lines(f"{d}/lexiconp.txt")
    assert "<unk> 1.0 SPN" in _lines(f"{d}/lexiconp.txt")
    assert "HELLO HH EH0 L OW1" in _lines(f"{d}/lexicon.txt")
    _kaldi_checks(d, "<unk>", tmp_path)
    # the same dict dir from a plain lexicon: no stale lexiconp.txt left for prepare_lang to use
    plain = tmp_path / "lex.txt"
    plain.write_text("HELLO HH AH0 L OW1\n")
    assert prepare_dict_main([str(plain), d]) == 0
    assert not os.path.exists(f"{d}/lexiconp.txt")
    assert sorted(os.listdir(tmp_path)) == ["dict", "lang", "lang_tmp", "lex.txt", "lexp.txt"]


@pytest.mark.parametrize("content,line,what", [
    (b"HELLO HH AH0 L OW1\nWORLD\n", 2, "word 'WORLD' has no phones"),
    (b"HELLO HH AH0 L OW1\nWORLD W #0 L D\n", 2, "phone '#0' starts with '#'"),
    (b"HELLO HH <eps> L\n", 1, "'<eps>' is not a valid phone"),
    (b"HELLO HH AH0\n<s> SIL\n", 2, "word '<s>' is reserved"),
    (b"HELLO HH AH0\nCAF\xe9 K AE F\n", 2, "not valid UTF-8"),
    (b"HELLO HH AH_B\n", 1, "ends in _B/_E/_I/_S"),
    (b"HELLO\xc2\xa0HH AH0\n", 1, "whitespace character U+00A0"),
    (b"HELLO 1.0 HH AH0\nWORLD W ER1\n", 2, "no pronunciation probability"),
    (b"SIL SIL\n!SIL SIL\n", 1, "optional silence phone 'SIL' is also a phone of the word 'SIL'"),
])
def test_prepare_dict_bad_lexicon_one_line_nothing_written(tmp_path, content, line, what):
    lex = tmp_path / "lex.txt"
    lex.write_bytes(content)
    d = tmp_path / "dict"
    r = subprocess.run(["pynnet-prepare-dict", str(lex), str(d)], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"ERROR (pynnet-prepare-dict): {lex}:{line}: "), r.stderr
    assert what in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["lex.txt"]       # no dict dir, no temp dir


def test_prepare_dict_failure_keeps_the_old_dict_dir(corpus8, tmp_path):
    d = str(tmp_path / "dict")
    assert prepare_dict_main([corpus8.lexicon, d]) == 0
    before = {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)}
    bad = tmp_path / "bad.txt"
    bad.write_text("HELLO\n")
    assert prepare_dict_main([str(bad), d]) == 1
    assert {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)} == before
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "dict"]


# ----------------------------------------------------------------------------------------------
# pynnet-check-corpus
# ----------------------------------------------------------------------------------------------

def _check(args, capsys):
    rc = check_corpus_main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def _seconds(d):
    total = 0.0
    for line in _lines(os.path.join(d, "wav.scp")):
        i = sf.info(line.split(" ", 1)[1])
        total += i.frames / i.samplerate
    return total


@pytest.mark.parametrize("which", ["corpus8", "corpus16"])
def test_check_corpus_summary(which, request, tmp_path, capsys):
    c = request.getfixturevalue(which)
    assert not os.path.exists(os.path.join(c.train, "spk2utt"))      # a user's dir: 3 files, unsorted
    assert _lines(os.path.join(c.train, "utt2spk")) != sorted(_lines(os.path.join(c.train, "utt2spk")))
    js = str(tmp_path / "summary.json")
    rc, out, err = _check(["--lexicon", c.lexicon, "--json", js] + c.dirs, capsys)
    assert rc == 0, err
    s = json.loads(out)
    assert s == json.load(open(js))
    assert s["sample_rate"] == c.rate
    assert list(s["dirs"]) == c.dirs
    for d in c.dirs:
        j = s["dirs"][d]
        assert j["utterances"] == len(_lines(os.path.join(d, "utt2spk")))
        assert j["speakers"] == len({line.split()[1] for line in _lines(os.path.join(d, "utt2spk"))})
        assert j["hours"] == pytest.approx(_seconds(d) / 3600, abs=1e-6)
        assert j["oov_tokens"] == 0 and not j["hours_estimated"] and j["pipes"] == 0
    assert s["total"]["utterances"] == sum(s["dirs"][d]["utterances"] for d in c.dirs)
    assert s["total"]["speakers"] == sum(s["dirs"][d]["speakers"] for d in c.dirs)   # disjoint speakers
    assert s["total"]["hours"] == pytest.approx(sum(s["dirs"][d]["hours"] for d in c.dirs), abs=1e-5)
    assert f"sample rate {c.rate} Hz" in err
    # nothing written into the user's dirs
    assert sorted(os.listdir(c.train)) == ["text", "utt2spk", "wav.scp"]


def _mistake(kind, d, corpus):
    """Inject one mistake into data dir ``d``; returns (extra args, [pieces the one line must hold])."""
    wav = os.path.join(d, "wav.scp")
    if kind == "unprefixed":
        utt, spk, n = F.inject_unprefixed_utt(d)
        return [], [f"{d}/utt2spk:{n}:", f"'{utt}'", f"'{spk}'", "begin with their speaker-id"]
    if kind == "oov":
        F.inject_oov(d, {"FROBNICATE": 3, "QUUX": 1})
        return ["--lexicon", corpus.lexicon], [f"{d}/text:", "FROBNICATE (3), QUUX (1)", "4 of",
                                               "--oov-word <UNK>"]
    if kind == "rate":
        utt, n, f = F.inject_other_rate(d, 16000 if corpus.rate == 8000 else 8000)
        return [], ["mixed sample rates", f, "8000 Hz", "16000 Hz"]
    if kind == "stereo":
        utt, n, f = F.inject_stereo(d)
        return [], [f"{wav}:{n}:", f, "2 channels", f"sox {f} -t wav - remix 1 |"]
    if kind == "empty":
        utt, n = F.inject_empty_transcript(d)
        return [], [f"{d}/text:{n}:", f"'{utt}'", "empty transcript"]
    if kind == "missing":
        utt, n, f = F.inject_missing_audio(d)
        return [], [f"{wav}:{n}:", f, "no such audio file"]
    if kind == "unreadable":
        utt, n, f = F.inject_unreadable_audio(d)
        return [], [f"{wav}:{n}:", f, "cannot read audio file"]
    if kind == "not_in_wav":   # what the data-dir validator finds
        lines = _lines(wav)
        gone = lines.pop(0).split()[0]
        open(wav, "w").write("".join(x + "\n" for x in lines))
        return [], [gone, "has no entry in wav.scp"]
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["unprefixed", "oov", "rate", "stereo", "empty", "missing", "unreadable",
                                  "not_in_wav"])
def test_check_corpus_each_mistake_one_line(kind, corpus8, tmp_path, capsys):
    d = F.copy_dir(corpus8.train, str(tmp_path / "train"))
    extra, pieces = _mistake(kind, d, corpus8)
    before = sorted(os.listdir(d))
    js = str(tmp_path / "s.json")
    rc, out, err = _check(extra + ["--json", js, d, corpus8.test], capsys)
    assert rc == 1
    errs = _errors(err)
    assert len(errs) == 1, err
    for p in pieces:
        assert p in errs[0], (p, errs[0])
    assert out == "" and not os.path.exists(js) and sorted(os.listdir(d)) == before


def test_check_corpus_as_a_program_and_several_mistakes(corpus8, tmp_path):
    d = F.copy_dir(corpus8.train, str(tmp_path / "train"))
    F.inject_empty_transcript(d)
    F.inject_stereo(d)
    r = subprocess.run(["pynnet-check-corpus", "--lexicon", corpus8.lexicon, d], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == "" and "Traceback" not in r.stderr
    errs = _errors(r.stderr)
    assert len(errs) == 2 and all(e.startswith("ERROR (pynnet-check-corpus): ") for e in errs), r.stderr
    assert "empty transcript" in errs[0] and "2 channels" in errs[1]


def test_check_corpus_oov_list_is_capped(corpus8, tmp_path, capsys):
    d = F.copy_dir(corpus8.test, str(tmp_path / "test"))
    F.inject_oov(d, {f"ZZWORD{i:02d}": 30 - i for i in range(25)})
    rc, out, err = _check(["--lexicon", corpus8.lexicon, d], capsys)
    assert rc == 1
    (e,) = _errors(err)
    assert "25 word(s)" in e and "ZZWORD00 (30), ZZWORD01 (29)" in e and "and 5 more" in e
    assert "ZZWORD19 (11)" in e and "ZZWORD20" not in e


def test_check_corpus_oov_word_maps_text(corpus8, tmp_path, capsys):
    d = F.copy_dir(corpus8.train, str(tmp_path / "train"))
    F.inject_oov(d, {"FROBNICATE": 3, "QUUX": 2})
    orig = open(os.path.join(d, "text"), "rb").read()
    rc, out, err = _check(["--lexicon", corpus8.lexicon, "--oov-word", "<UNK>", d], capsys)
    assert rc == 0, err
    s = json.loads(out)["dirs"][d]
    assert (s["oov_tokens"], s["oov_types"]) == (5, 2)
    assert f"{d}/text: mapped 5 token(s) of 2 word(s)" in err
    assert open(os.path.join(d, "text.orig"), "rb").read() == orig
    new = _lines(os.path.join(d, "text"))
    old = orig.decode().splitlines()
    assert [x.split()[0] for x in new] == [x.split()[0] for x in old]          # same utterances, order
    assert sum(x.split().count("<UNK>") for x in new) == 5
    assert not any("FROBNICATE" in x or "QUUX" in x for x in new)
    # a rerun finds nothing to map and keeps the first original
    rc, out, err = _check(["--lexicon", corpus8.lexicon, "--oov-word", "<UNK>", d], capsys)
    assert rc == 0 and json.loads(out)["dirs"][d]["oov_tokens"] == 0
    assert open(os.path.join(d, "text.orig"), "rb").read() == orig


def test_check_corpus_pipes_and_mixed_rates_across_dirs(corpus8, corpus16, tmp_path, capsys):
    d = F.copy_dir(corpus8.train, str(tmp_path / "train"))
    for k in range(3):
        F.inject_pipe(d, k)
    rc, out, err = _check(["--max-pipes", "1", d], capsys)
    assert rc == 0, err
    s = json.loads(out)["dirs"][d]
    assert (s["pipes"], s["pipes_read"], s["hours_estimated"]) == (3, 1, True)
    assert s["hours"] == pytest.approx(_seconds(corpus8.train) / 3600, rel=0.2)
    assert "read 1 of 3 pipes" in err
    rc, out, err = _check(["--max-pipes", "-1", d], capsys)
    s = json.loads(out)["dirs"][d]
    assert rc == 0 and s["pipes_read"] == 3 and not s["hours_estimated"]
    assert s["hours"] == pytest.approx(_seconds(corpus8.train) / 3600, abs=1e-6)
    # train at 8 kHz, test at 16 kHz: one line naming a file of each
    rc, out, err = _check([corpus8.train, corpus16.test], capsys)
    (e,) = _errors(err)
    assert rc == 1 and "mixed sample rates" in e and corpus8.train.rsplit("/", 2)[0] in e and corpus16.root in e


def test_check_corpus_bad_usage_and_malformed_files(corpus8, tmp_path, capsys):
    rc, out, err = _check(["--oov-word", "<UNK>", corpus8.train], capsys)
    assert rc == 1 and "--oov-word needs --lexicon" in err
    rc, out, err = _check([str(tmp_path / "nope")], capsys)
    assert rc == 1 and "no such data directory" in err
    d = F.copy_dir(corpus8.train, str(tmp_path / "train"))
    os.unlink(os.path.join(d, "text"))
    rc, out, err = _check([d], capsys)
    assert rc == 1 and f"{d}/text: no such file" in err
    d2 = F.copy_dir(corpus8.train, str(tmp_path / "train2"))
    with open(os.path.join(d2, "utt2spk"), "a") as f:
        f.write("lonely\n")
    rc, out, err = _check([d2], capsys)
    n = len(_lines(os.path.join(d2, "utt2spk")))
    assert rc == 1 and f"{d2}/utt2spk:{n}:" in err and len(_errors(err)) == 1
