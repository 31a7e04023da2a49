"""egs/swbd data preparation on the generated mini Switchboard (tests/swbd_fixture.py): the dict,
data/train and data/eval2000 as Kaldi's s5c local/ scripts make them, the word mapping and
acronym rules, eval2000's segment padding, audio through the sph2pipe wav.scp lines, the LM
script, and one-line errors for wrongly laid-out corpora."""
from __future__ import annotations

import glob
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from pynnet.corpora import swbd
from pynnet.io.audio import (iter_utterances, linear_to_ulaw, read_sphere, ulaw_to_linear,
                             write_sphere)
from pynnet.io.errors import PynnetError
from tests.swbd_fixture import SCRIPT, make_swbd_fixture

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL = os.path.join(ROOT, "egs", "swbd", "local")


def _recipe_dir(path) -> str:
    """A stand-in for egs/swbd: our local/ scripts, utils/, steps/ and a path.sh."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "path.sh"), "w") as f:
        f.write(f'. "{ROOT}/path.sh"\n')
    for name, target in (("local", LOCAL), ("utils", os.path.join(ROOT, "utils")),
                         ("steps", os.path.join(ROOT, "steps"))):
        os.symlink(target, os.path.join(path, name))
    return str(path)


def _sh(cwd: str, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", *cmd], cwd=cwd, capture_output=True, text=True, timeout=300)


def _sph_path(fx, reco: str) -> str:
    (path,) = glob.glob(os.path.join(fx.swbd_dir, "swb1_d*", "data", reco + ".sph"))
    return path


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    top = tmp_path_factory.mktemp("swbd")
    fx = make_swbd_fixture(top / "corpora")
    run = _recipe_dir(top / "s5c")
    logs = {}
    for name, args in (("dict", ["local/swbd1_prepare_dict.sh", fx.swbd_dir]),
                       ("train", ["local/swbd1_data_prep.sh", fx.swbd_dir]),
                       ("eval2000", ["local/eval2000_data_prep.sh", fx.eval2000_audio_dir,
                                     fx.eval2000_text_dir])):
        p = _sh(run, *args)
        assert p.returncode == 0, p.stdout + p.stderr
        logs[name] = p.stdout + p.stderr
    return fx, run, logs


# ---------------------------------------------------------------------------------------------
# the fixture and SPHERE writing

def test_sphere_roundtrip_ulaw_and_pcm(tmp_path):
    rng = np.random.default_rng(3)
    x = np.clip(rng.standard_normal((4001, 2)) * 4000, -32768, 32767).astype(np.int16)
    write_sphere(tmp_path / "p.sph", x, 8000, "pcm", {"conversation_id": "2001"})
    y, rate = read_sphere(tmp_path / "p.sph")
    assert rate == 8000 and np.array_equal(x, y)
    write_sphere(tmp_path / "u.sph", x, 8000, "ulaw")
    y, rate = read_sphere(tmp_path / "u.sph")
    assert rate == 8000 and y.shape == x.shape
    # mu-law: the error of a sample is within its segment's step (about 1/16 of its size)
    err = np.abs(y.astype(int) - x.astype(int))
    assert np.all(err <= np.abs(x.astype(int)) / 16 + 8)
    # decoded values encode to themselves, so a second round trip is exact
    assert np.array_equal(ulaw_to_linear(linear_to_ulaw(y)), y)
    codes = np.arange(256, dtype=np.uint8)
    back = linear_to_ulaw(ulaw_to_linear(codes))
    assert np.array_equal(back[codes != 0x7F], codes[codes != 0x7F])   # 0x7F is -0: 0xFF
    with open(tmp_path / "u.sph", "rb") as f:
        head = f.read(1024)
    assert head.startswith(b"NIST_1A\n   1024\n") and b"sample_coding -s4 ulaw" in head
    assert os.path.getsize(tmp_path / "u.sph") == 1024 + x.size
    assert sorted(os.listdir(tmp_path)) == ["p.sph", "u.sph"]   # no temp files left


def test_fixture_is_deterministic_and_laid_out_as_ldc(tmp_path):
    kw = dict(train_conversations=1, eval_swbd=1, eval_callhome=0, utts_per_side=2,
              eval_utts_per_side=2)

    def digests(top):
        out = {}
        for d, _, files in os.walk(top):
            for f in files:
                with open(os.path.join(d, f), "rb") as fh:
                    out[os.path.relpath(os.path.join(d, f), top)] = hashlib.sha1(fh.read()).hexdigest()
        return out

    a = make_swbd_fixture(tmp_path / "a", seed=5, **kw)
    make_swbd_fixture(tmp_path / "b", seed=5, **kw)
    da, db = digests(tmp_path / "a"), digests(tmp_path / "b")
    assert da == db
    assert set(da) == {
        "LDC97S62/swb1_d1/data/sw02001.sph",
        "LDC97S62/transcriptions/swb_ms98_transcriptions/20/2001/sw2001A-ms98-a-trans.text",
        "LDC97S62/transcriptions/swb_ms98_transcriptions/20/2001/sw2001B-ms98-a-trans.text",
        "LDC97S62/transcriptions/swb_ms98_transcriptions/sw-ms98-dict.text",
        "LDC2002S09/hub5e_00/english/sw_4390.sph", "LDC2002S09/hub5e_00/english/hub5e_00.pem",
        "LDC2002T43/2000_hub5_eng_eval_tr/reference/hub5e00.english.000405.stm",
        "LDC2002T43/2000_hub5_eng_eval_tr/reference/en20000405_hub5.glm"}
    c = make_swbd_fixture(tmp_path / "c", seed=6, **kw)
    assert digests(tmp_path / "c") != da
    assert a.swbd_dir.endswith("LDC97S62") and c.pcm_conversation == "sw02001"


def test_fixture_transcripts_match_kaldis_expectations(prepared):
    fx = prepared[0]
    trans = fx.transcripts_dir
    lines = _lines(os.path.join(trans, "20", "2001", "sw2001A-ms98-a-trans.text"))
    assert re.fullmatch(r"sw2001A-ms98-a-0001 0\.000000 \d+\.\d{6} \[silence\]", lines[0])
    assert lines[1].split()[3:] == SCRIPT[0].split()
    # contiguous segments covering the side
    for a, b in zip(lines, lines[1:]):
        assert a.split()[2] == b.split()[1]
    with open(os.path.join(trans, "sw-ms98-dict.text")) as f:
        first = f.readline()
    assert first == " file: $SWB/data/dictionary/sw-ms98-dict.text\n"
    # 2-channel 8 kHz; mu-law but for one PCM file
    codings = {}
    for reco in fx.conversations:
        path = _sph_path(fx, reco)
        with open(path, "rb") as f:
            codings[reco] = re.search(rb"sample_coding -s\d (\w+)", f.read(1024)).group(1).decode()
        data, rate = read_sphere(path)
        assert rate == 8000 and data.shape[1] == 2
    assert sorted(set(codings.values())) == ["pcm", "ulaw"]
    assert codings[fx.pcm_conversation] == "pcm"


# ---------------------------------------------------------------------------------------------
# the mapping rules (docs/notes/swbd_s5c.md section 1)

@pytest.mark.parametrize("token,mapped", [
    ("[laughter-story]", "story"), ("[LAUGHTER-Yeah]", "Yeah"), ("[laughter-yeah]-", "yeah-"),
    ("[it'n/isn't]", "it'n"), ("-[th]e", "-e"), ("[th]e", "-e"), ("th[e]-", "th-"),
    ("ab[solute]", "ab-"), ("-[a]b[out]-", "-b-"), ("-[40]1K", "-1K"), ("{yuppiedom}", "yuppiedom"),
    ("them_1", "them"), ("them_1's", "them's"), ("ammu[n]it-", "ammn-t-"),
    ("[noise]", "[noise]"), ("[laughter]", "[laughter]"), ("[vocalized-noise]", "[vocalized-noise]"),
    ("uh-huh", "uh-huh"), ("Dallas", "Dallas"), ("IBM's", "IBM's"),
])
def test_map_word(token, mapped):
    assert swbd.map_word(token) == mapped


def test_acronyms():
    letters = swbd.LETTER_PRONS
    assert swbd.acronym_form("IBM", "ay b iy eh m") == ("i._b._m.", "i b m")
    assert swbd.acronym_form("IBMs", "ay b iy eh m z") == ("i._b._m.s", "i b m's")
    assert swbd.acronym_form("IBM's", "ay b iy eh m z") == ("i._b._m.'s", "i b m's")
    assert swbd.acronym_form("A", "ey") == ("a.", "a")
    assert swbd.acronym_form("i", "ay") == ("i.", "i")
    assert swbd.acronym_form("W", letters["W"]) == ("w.", "w")
    for word, pron in (("is", "ih z"), ("IBM", "ih b m"), ("a", "ax"), ("it's", "ih t s"),
                       ("uh-huh", "ah hh ah"), ("[noise]", "nsn")):
        assert swbd.acronym_form(word, pron) is None
    amap = {"I": "i.", "i": "i.", "T": "t.", "B": "b.", "IBM": "i._b._m.", "IBMs": "i._b._m.s"}
    # 'I' among single capitals is a letter; alone it is the pronoun
    assert swbd.map_acronyms("I worked for T I in Dallas".split(), amap) == \
        "I worked for t. i. in Dallas".split()
    assert swbd.map_acronyms("I B M and IBMs".split(), amap) == "i. b. M and i._b._m.s".split()
    assert swbd.map_acronyms("i like IBM".split(), amap) == "i like i._b._m.".split()


def test_transcript_normalisation():
    amap = {"I": "i.", "i": "i.", "T": "t.", "CNN": "c._n._n."}
    norm = swbd.normalise_transcript
    assert norm("[silence] I worked for T I <b_aside> in [silence] Dallas <E_ASIDE>", amap) == \
        "i worked for t. i. in dallas"
    assert norm("[SILENCE]", amap) is None
    assert norm("<b_aside> <e_aside>", amap) is None
    # Kaldi's substitution eats the space it needs: of two [silence] in a row one stays
    assert norm("[silence] [silence]", amap) == "[silence]"
    assert norm("[laughter-yeah] the news on CNN th[e]- the -[to]morrow them_1 {Monday}", amap) == \
        "yeah the news on c._n._n. th- the -morrow them monday"
    assert swbd.ms98_utt_id("sw2001A-ms98-a-0002", "0.977625", "11.561375") == "sw02001-A_000098-001156"
    assert swbd.ms98_utt_id("sw4940B-ms98-a-0001", "0.000000", "0.004999") == "sw04940-B_000000-000000"


def test_extend_segments_as_kaldis_examples():
    # the examples at the end of Kaldi's extend_segments.pl
    segs = [("a1", "A", 0.0, 1.0), ("a2", "A", 3.0, 4.0), ("b1", "B", 0.0, 1.0), ("b2", "B", 2.0, 3.0)]
    assert swbd.extend_segments(segs, 1.0) == [("a1", "A", 0.0, 2.0), ("a2", "A", 2.0, 5.0),
                                              ("b1", "B", 0.0, 1.5), ("b2", "B", 1.5, 4.0)]
    with pytest.warns(swbd.SwbdWarning, match="already overlap"):
        out = swbd.extend_segments([("a1", "A", 0.0, 2.0), ("a2", "A", 1.0, 3.0)], 1.0)
    assert out == [("a1", "A", 0.0, 2.0), ("a2", "A", 1.0, 4.0)]
    out = swbd.extend_segments([("a1", "A", 0.0, 2.0), ("a2", "A", 5.0, 6.0), ("a3", "A", 3.0, 4.0)], 1.0)
    assert out == [("a1", "A", 0.0, 2.5), ("a2", "A", 4.5, 7.0), ("a3", "A", 2.5, 4.5)]


def test_fisher_map_words():
    f = swbd.fisher_map_words
    assert f("(( Yeah )) [laugh] i [lipsmack] mean *mandatory [mn] <german ja> ok?") == \
        "yeah [laughter] i [noise] mean mandatory [vocalized-noise] ok"
    assert f("[[skip]] [pause] 'kay - so") == "-kay so"
    assert f("   ") is None


# ---------------------------------------------------------------------------------------------
# the dict dir

def test_dict_dir(prepared):
    _, run, logs = prepared
    d = os.path.join(run, "data", "local", "dict_nosp")
    p = _sh(run, "utils/validate_dict_dir.pl", d)
    assert p.returncode == 0, p.stdout + p.stderr
    assert _lines(os.path.join(d, "silence_phones.txt")) == ["sil", "spn", "nsn", "lau"]
    assert _lines(os.path.join(d, "optional_silence.txt")) == ["sil"]
    assert _lines(os.path.join(d, "extra_questions.txt")) == []
    nonsil = _lines(os.path.join(d, "nonsilence_phones.txt"))
    assert "ax" in nonsil and not any("sil" in p for p in nonsil)
    lex = _lines(os.path.join(d, "lexicon.txt"))
    assert lex == sorted(set(lex), key=lambda s: s.encode())
    for entry in ("!sil sil", "[vocalized-noise] spn", "[noise] nsn", "[laughter] lau", "<unk> spn",
                  "i ay", "i. ay", "a ax", "a. ey", "w. d ah b ax l y uw", "i._b._m. ay b iy eh m",
                  "i._b._m.s ay b iy eh m z", "i._b._m.'s ay b iy eh m z",
                  "c._n._n. s iy eh n eh n", "dallas d ae l ax s", "monday m ah n d ey",
                  "them dh eh m", "them dh ax m", "[silence] sil"):
        assert entry in lex, entry
    words = {line.split()[0] for line in lex}
    assert "tomo-" in words and "-morrow" in words and "yeah" in words
    assert not any(w.startswith(("[laughter-", "{")) or "_1" in w or "[" in w[1:-1] for w in words)
    assert all(line == line.lower() for line in lex)
    assert "file:" not in words and "ibm" not in words and "a. ey" in lex
    acr = _lines(os.path.join(d, "acronyms.map"))
    assert "IBM\ti._b._m.\ti b m" in acr and "IBM's\ti._b._m.'s\ti b m's" in acr
    assert "I\ti.\ti" in acr and "i\ti.\ti" in acr and "CNN\tc._n._n.\tc n n" in acr
    assert all(len(a.split("\t")) == 3 for a in acr)
    assert len(_lines(os.path.join(d, "MSU_single_letter.txt"))) == 26
    assert "dict.patch" in open(os.path.join(LOCAL, "swbd1_prepare_dict.sh")).read()


# ---------------------------------------------------------------------------------------------
# data/train

def test_train_data_dir(prepared):
    fx, run, logs = prepared
    d = os.path.join(run, "data", "train")
    p = _sh(run, "utils/validate_data_dir.sh", "--no-feats", d)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "expected 2435 or 2438 data files, found 6" in logs["train"]
    wav = _lines(os.path.join(d, "wav.scp"))
    assert len(wav) == 2 * len(fx.conversations)
    for line in wav:
        m = re.fullmatch(r"(sw0\d{4})-([AB]) (\S*sph2pipe) -f wav -p -c ([12]) (/\S+/(sw0\d{4})\.sph) \|", line)
        assert m, line
        assert m.group(1) == m.group(6) and m.group(4) == "12"["AB".index(m.group(2))]
        assert os.path.isfile(m.group(5)) and os.path.isabs(m.group(5))
    assert _lines(os.path.join(d, "reco2file_and_channel"))[:2] == ["sw02001-A sw02001 A",
                                                                    "sw02001-B sw02001 B"]
    segs = [s.split() for s in _lines(os.path.join(d, "segments"))]
    text = dict(line.split(" ", 1) for line in _lines(os.path.join(d, "text")))
    utt2spk = dict(line.split() for line in _lines(os.path.join(d, "utt2spk")))
    assert len(segs) == len(text) == len(utt2spk) == len(fx.segments)   # [silence] lines dropped
    for utt, reco, start, end in segs:
        m = re.fullmatch(r"(sw0\d{4}-[AB])_(\d{6})-(\d{6})", utt)
        assert m and reco == m.group(1) == utt2spk[utt]
        assert float(start) == int(m.group(2)) / 100 and float(end) == int(m.group(3)) / 100
        for t in (start, end):   # awk's %g: 0.9 not 0.90, 12 not 12.00
            assert not re.search(r"\.\d*0$", t), t
    truth = {f"sw0{s.reco[3:]}-{s.side}_{int(100 * float(f'{s.start:.6f}') + 0.5):06d}-"
             f"{int(100 * float(f'{s.end:.6f}') + 0.5):06d}" for s in fx.segments}
    assert set(text) == truth
    first = [text[u] for u in sorted(text) if u.startswith("sw02001-")]
    expected = ["i worked for t. i. in dallas for ten years",
                "yeah we watch the news on c._n._n. every night",
                "[noise] my brother has an i._b._m. computer",
                "uh i want to fly tomo- tomorrow",
                "[vocalized-noise] call them on monday please",
                "we bought two i._b._m.s [laughter]",
                "-morrow at noon", "[laughter]"]
    for e in expected:
        assert e in first, e
    # every word is in the lexicon, the text is lowercase and free of markup
    lex_words = {line.split()[0] for line in _lines(os.path.join(run, "data", "local", "dict_nosp",
                                                               "lexicon.txt"))}
    words = {w for t in text.values() for w in t.split()}
    assert words <= lex_words, words - lex_words
    assert not any(w in ("[silence]", "<b_aside>", "<e_aside>") or "{" in w or "_1" in w for w in words)
    assert all(t == t.lower() for t in text.values())
    assert os.path.isfile(os.path.join(run, "data", "local", "train", "text"))


def test_train_audio_through_wav_scp(prepared):
    fx, run, _ = prepared
    d = os.path.join(run, "data", "train")
    if shutil.which("sph2pipe") is None:
        # the lines are the exact form pynnet's reader runs itself when sph2pipe is absent
        from pynnet.io.audio import _sph2pipe_fallback
        line = _lines(os.path.join(d, "wav.scp"))[1].split(" ", 1)[1]
        assert _sph2pipe_fallback(line.rstrip(" |")) is not None
    scp = os.path.join(str(fx.root), "wav.scp")
    seg = os.path.join(str(fx.root), "segments")
    keep = ("sw02001-", fx.pcm_conversation + "-")   # a mu-law and the PCM conversation
    with open(scp, "w") as f:
        f.writelines(line + "\n" for line in _lines(os.path.join(d, "wav.scp")) if line.startswith(keep))
    with open(seg, "w") as f:
        f.writelines(line + "\n" for line in _lines(os.path.join(d, "segments")) if line.startswith(keep))
    sph = {}
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for utt, data, rate, _ in iter_utterances(scp, seg):
            reco, side = utt[:7], utt[8]
            if reco not in sph:
                sph[reco] = read_sphere(_sph_path(fx, reco))[0]
            assert rate == 8000 and data.shape[1] == 1
            ch = "AB".index(side)
            s, e = int(utt[10:16]) / 100, int(utt[17:23]) / 100
            ref = sph[reco][int(s * 8000):int(e * 8000)].astype(np.float32)
            assert np.array_equal(data[:, 0], ref[:, ch])
            # the side's speaker talks on its own channel; the other is at the noise floor
            own, other = np.sqrt(np.mean(ref ** 2, axis=0))[[ch, 1 - ch]]
            assert own > 8 * other, (utt, own, other)
            n += 1
    assert n > 40


# ---------------------------------------------------------------------------------------------
# data/eval2000

def test_eval2000_data_dir(prepared):
    fx, run, logs = prepared
    d = os.path.join(run, "data", "eval2000")
    p = _sh(run, "utils/validate_data_dir.sh", "--no-feats", d)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "expected 40 eval2000 conversations" in logs["eval2000"]
    assert _lines(os.path.join(d, "wav.scp"))[0].startswith("en_4156-A ")
    assert "en_4156-A en_4156 A" in _lines(os.path.join(d, "reco2file_and_channel"))
    # segments: the pem's, each end padded by 0.1 s but at most half the gap, never below 0
    segs = {s.split()[0]: s.split()[1:] for s in _lines(os.path.join(d, "segments"))}
    pem = [line.split() for line in _lines(os.path.join(fx.eval2000_audio_dir, "english", "hub5e_00.pem"))
           if not line.startswith(";;")]
    by_reco: dict[str, list[tuple[float, float, str]]] = {}
    for f, ch, _, s, e in pem:
        utt = f"{f}-{ch}_{int(float(s) * 100):06d}-{int(float(e) * 100):06d}"
        by_reco.setdefault(f"{f}-{ch}", []).append((float(s), float(e), utt))
    ignored = [s for s in fx.eval_segments if s.tokens == ["IGNORE_TIME_SEGMENT_IN_SCORING"]]
    assert len(ignored) == 1
    checked = capped = clamped = 0
    for reco, rows in by_reco.items():
        rows.sort()
        for i, (s, e, utt) in enumerate(rows):
            lo = 0.1 if i == 0 else min(0.1, (s - rows[i - 1][1]) / 2)
            hi = 0.1 if i == len(rows) - 1 else min(0.1, (rows[i + 1][0] - e) / 2)
            if utt not in segs:      # the IGNORE_TIME_SEGMENT one (no text: fix_data_dir drops it)
                continue
            r, s2, e2 = segs[utt]
            assert r == reco
            assert float(s2) == pytest.approx(max(0.0, s - lo), abs=0.0051)
            assert float(e2) == pytest.approx(e + hi, abs=0.0051)
            assert re.fullmatch(r"\d+\.\d\d", s2) and re.fullmatch(r"\d+\.\d\d", e2)
            capped += lo < 0.1 or hi < 0.1
            clamped += s - lo < 0
            checked += 1
    assert checked == len(segs) == len(pem) - 1 and capped >= 2 and clamped == 1
    text = _lines(os.path.join(d, "text"))
    assert len(text) == len(segs) and not any("IGNORE_TIME_SEGMENT" in t for t in text)
    text_all = _lines(os.path.join(run, "data", "local", "eval2000", "text.all"))
    assert len(text_all) == len(pem) and sum("IGNORE_TIME_SEGMENT_IN_SCORING" in t for t in text_all) == 1
    assert all(t.split()[0] in segs and t.split(" ", 1)[1] == t.split(" ", 1)[1].upper() for t in text)
    assert {line.split()[1] for line in _lines(os.path.join(d, "utt2spk"))} == \
        {line.split()[0] for line in _lines(os.path.join(d, "wav.scp"))}
    # stm: copied with Kaldi's fixes; glm copied as is
    ref = os.path.join(fx.eval2000_text_dir, "2000_hub5_eng_eval_tr", "reference")
    orig = _lines(os.path.join(ref, "hub5e00.english.000405.stm"))
    stm = _lines(os.path.join(d, "stm"))
    assert len(stm) == len(orig) and any("((" in line for line in orig)
    assert not any("((" in line or "_ASIDE>" in line for line in stm)
    assert [x for x in stm if x.startswith(";;")] == [x for x in orig if x.startswith(";;")]
    for a, b in zip(orig, stm):
        assert b == re.sub("<[BE]_ASIDE>", "", a.replace("((", "(", 1))
    assert "IGNORE_TIME_SEGMENT_IN_SCORING" in "\n".join(stm)
    with open(os.path.join(ref, "en20000405_hub5.glm"), "rb") as a, \
            open(os.path.join(d, "glm"), "rb") as b:
        assert a.read() == b.read()


# ---------------------------------------------------------------------------------------------
# LM

def test_train_lms_with_and_without_fisher(prepared, tmp_path):
    _, run, _ = prepared
    fisher = tmp_path / "fe_03_p1_tran"
    (fisher / "data" / "trans" / "000").mkdir(parents=True)
    (fisher / "data" / "trans" / "000" / "fe_03_00001.txt").write_text(
        "# fe_03_00001.sph\n\n0.36 1.84 A: (( hello )) i want to fly [laugh]\n"
        "2.01 3.50 B: yeah my account number is five\n")
    p = _sh(run, "local/swbd1_train_lms.sh", "data/local/train/text",
            "data/local/dict_nosp/lexicon.txt", "data/local/lm", str(fisher))
    assert p.returncode == 0, p.stdout + p.stderr
    lm = os.path.join(run, "data", "local", "lm")
    n = len(_lines(os.path.join(run, "data", "local", "train", "text")))
    assert len(_lines(os.path.join(lm, "heldout"))) == n // 10
    assert "holding out the first" in p.stdout
    assert re.search(r"PPL for SWBD1 trigram LM:\nfile \S+heldout: \d+ sentences, \d+ words, \d+ OOVs\n"
                     r"0 zeroprobs, logprob= \S+ ppl= [\d.]+", p.stdout), p.stdout
    for name in ("sw1.o3g.kn.gz", "sw1.o4g.kn.gz", "sw1_fsh.o3g.kn.gz", "sw1_fsh.o4g.kn.gz"):
        with gzip.open(os.path.join(lm, name), "rt") as f:
            head = f.read(200)
        assert head.lstrip().startswith("\\data\\"), name
    with gzip.open(os.path.join(lm, "sw1.o3g.kn.gz"), "rt") as f:
        arpa = f.read()
    assert "\t<unk>" in arpa and "\ti._b._m." in arpa
    with gzip.open(os.path.join(lm, "fisher", "text1.gz"), "rt") as f:
        assert f.read().splitlines() == ["hello i want to fly [laughter]",
                                         "yeah my account number is five"]
    bad = _sh(run, "local/swbd1_train_lms.sh", "data/local/train/text",
              "data/local/dict_nosp/lexicon.txt", str(tmp_path / "lm2"), str(tmp_path / "nofisher"))
    assert bad.returncode == 1 and "cannot find transcripts in Fisher directory" in bad.stderr
    assert not os.path.exists(tmp_path / "lm2")


# ---------------------------------------------------------------------------------------------
# wrongly laid-out corpora: one line, exit 1, nothing written

def _one_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 1, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in errors[0], errors[0]
    return errors[0]


def test_bad_layouts(prepared, tmp_path):
    fx, _, _ = prepared
    run = _recipe_dir(tmp_path / "s5c")
    empty = tmp_path / "LDC97S62"
    empty.mkdir()
    # no transcriptions: where to get them
    _one_error(_sh(run, "local/swbd1_prepare_dict.sh", str(empty)),
               "no transcriptions/swb_ms98_transcriptions under", "openslr")
    _one_error(_sh(run, "local/swbd1_prepare_dict.sh", str(tmp_path / "nowhere")),
               "no such directory (expected the LDC97S62 dir)")
    _one_error(_sh(run, "local/swbd1_prepare_dict.sh", "--transcripts", str(empty), str(empty)),
               "no sw-ms98-dict.text in")
    assert not os.path.exists(os.path.join(run, "data", "local", "dict_nosp", "lexicon.txt"))
    # data prep before the dictionary: acronyms.map is missing
    _one_error(_sh(run, "local/swbd1_data_prep.sh", fx.swbd_dir), "acronyms.map",
               "local/swbd1_prepare_dict.sh first")
    p = _sh(run, "local/swbd1_prepare_dict.sh", "--transcripts", fx.transcripts_dir, str(empty))
    assert p.returncode == 0, p.stderr
    # no audio: what is expected where
    _one_error(_sh(run, "local/swbd1_data_prep.sh", "--transcripts", fx.transcripts_dir, str(empty)),
               f"no *.sph under {empty} (expected LDC97S62's swb1_d*/data/sw0*.sph)")
    # transcripts not in the ms98 layout
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(os.path.join(fx.transcripts_dir, "sw-ms98-dict.text"), flat)
    _one_error(_sh(run, "local/swbd1_data_prep.sh", "--transcripts", str(flat), fx.swbd_dir),
               "no */*/*-trans.text under", "<2 digits>/<conversation>/")
    assert not os.path.exists(os.path.join(run, "data", "train"))
    # eval2000
    _one_error(_sh(run, "local/eval2000_data_prep.sh", str(empty), fx.eval2000_text_dir),
               f"no english/ under {empty}", "hub5e_00")
    _one_error(_sh(run, "local/eval2000_data_prep.sh", fx.eval2000_audio_dir, str(empty)),
               f"no reference/ under {empty}", "hub5e00.english.000405.stm")
    # pem and stm disagree
    sdir = tmp_path / "hub5e_00"
    shutil.copytree(fx.eval2000_audio_dir, sdir)
    pem = sdir / "english" / "hub5e_00.pem"
    pem.write_text("".join(line + "\n" for line in _lines(str(pem))[:-1]))
    _one_error(_sh(run, "local/eval2000_data_prep.sh", str(sdir), fx.eval2000_text_dir),
               "segments from the pem file and the stm file do not match")
    assert not os.path.exists(os.path.join(run, "data", "eval2000"))
    # the library raises the same one-line errors
    with pytest.raises(PynnetError, match=r"no \*\.sph under"):
        swbd.find_sph(str(empty), "the LDC97S62 dir", "LDC97S62's swb1_d*/data/sw0*.sph")
