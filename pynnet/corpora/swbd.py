"""Switchboard-1 (LDC97S62 + the ms98 transcriptions) and Hub5 eval2000 (LDC2002S09 / LDC2002T43)
data preparation, following Kaldi's egs/swbd/s5c local/ scripts (docs/notes/swbd_s5c.md): the
same ids, files and text normalisation, in our code.

- prepare_dict: sw-ms98-dict.text -> a dict dir (lexicon.txt, phone sets, acronyms.map)
- data_prep: sph files + ms98 transcripts -> data/train (wav.scp with sph2pipe lines, segments,
  text, utt2spk, spk2utt, reco2file_and_channel)
- eval2000_prep: the pem, stm and glm -> data/eval2000 (segments from the pem, padded by 0.1 s)
"""
from __future__ import annotations

import glob
import math
import os
import re
import warnings
from dataclasses import dataclass
from typing import Iterable

from pynnet.io.atomic import atomic_write
from pynnet.io.errors import fail
from pynnet.io.tables import ascii_float, read_text_lines

OPENSLR_5 = "http://www.openslr.org/resources/5/switchboard_word_alignments.tar.gz"
SILENCE_PHONES = ["sil", "spn", "nsn", "lau"]
# Prepended to the lexicon as Kaldi does (noises get their own silence phones).
SPECIAL_ENTRIES = ["!sil sil", "[vocalized-noise] spn", "[noise] nsn", "[laughter] lau", "<unk> spn"]

# Single-letter pronunciations in the ms98 phone set (the role of Kaldi's MSU_single_letter.txt,
# our own list from CMUdict's letter names): the dictionary lacks most letters, and the acronym
# step recognises a word as an acronym when its pronunciation is its letters' in a row.
LETTER_PRONS: dict[str, str] = {
    "A": "ey", "B": "b iy", "C": "s iy", "D": "d iy", "E": "iy", "F": "eh f", "G": "jh iy",
    "H": "ey ch", "I": "ay", "J": "jh ey", "K": "k ey", "L": "eh l", "M": "eh m", "N": "eh n",
    "O": "ow", "P": "p iy", "Q": "k y uw", "R": "aa r", "S": "eh s", "T": "t iy", "U": "y uw",
    "V": "v iy", "W": "d ah b ax l y uw", "X": "eh k s", "Y": "w ay", "Z": "z iy",
}
FULL_SPH_COUNTS = (2435, 2438)
EVAL2000_CONVERSATIONS = 40


class SwbdWarning(UserWarning):
    """A difference from the full release that does not stop the preparation (e.g. file counts)."""


def _warn(msg: str) -> None:
    warnings.warn(msg, SwbdWarning, stacklevel=3)


def _c_key(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _c_sorted(lines: Iterable[str], unique: bool = False) -> list[str]:
    """``LC_ALL=C sort`` (and ``sort -u``)."""
    return sorted(set(lines) if unique else lines, key=_c_key)


# ---------------------------------------------------------------------------------------------
# word mapping (Kaldi's local/swbd1_map_words.pl, token by token)

_LAUGHTER_WORD = re.compile(r"^\[LAUGHTER-(.+)\](|-)$", re.I)
_MISPRONOUNCED = re.compile(r"^\[(.+)/.+\](|-)$")
_LEADING_PART = re.compile(r"^(|-)\[[^\]\[]+\](.+)$")
_TRAILING_PART = re.compile(r"^(.+)\[[^\]\[]+\](|-)$")
_TRAILING_BRACKET = re.compile(r"([^\]\[]+)\[.+\]$")
_CURLY = re.compile(r"^\{(.+)\}$")
_INNER_PART = re.compile(r"[A-Z]\[([^\]\[])+\][A-Z]", re.I)
_NUMBERED = re.compile(r"_\d")


def map_word(token: str) -> str:
    """One transcript or lexicon word as Kaldi's swbd1_map_words.pl rewrites it: each rule once,
    in order: [laughter-story] -> story; [it'n/isn't] -> it'n; -[th]e -> -e; th[e]- and
    ab[solute] -> th-, ab-; {yuppiedom} -> yuppiedom; ammu[n]it- -> ammn-t- (Kaldi's rule has a
    bug we keep: its third group never exists); them_1 -> them. Anything else is unchanged."""
    a = _LAUGHTER_WORD.sub(lambda m: m.group(1) + m.group(2), token, count=1)
    a = _MISPRONOUNCED.sub(lambda m: m.group(1) + m.group(2), a, count=1)
    a = _LEADING_PART.sub(lambda m: "-" + m.group(2), a, count=1)
    a = _TRAILING_PART.sub(lambda m: m.group(1) + "-", a, count=1)
    a = _TRAILING_BRACKET.sub(lambda m: m.group(1), a, count=1)
    a = _CURLY.sub(lambda m: m.group(1), a, count=1)
    a = _INNER_PART.sub(lambda m: m.group(1) + "-", a, count=1)
    return _NUMBERED.sub("", a, count=1)


# ---------------------------------------------------------------------------------------------
# acronyms (Kaldi's format_acronyms_dict.py and map_acronyms_transcripts.py)

_ACRONYM_CANDIDATE = re.compile(r"^[A-Za-z]+$|^[A-Za-z]+'s$|^[A-Za-z]+s$")


def _spelt(letters: str, prons: dict[str, str]) -> str:
    return " ".join(prons[c.upper()] for c in letters)


def acronym_form(word: str, pron: str, letters: dict[str, str] = LETTER_PRONS) -> tuple[str, str] | None:
    """(mapped, spelt) if ``word`` with ``pron`` is an acronym, i.e. pronounced as its letters:
    IBM 'ay b iy eh m' -> ('i._b._m.', 'i b m'); IBMs -> 'i._b._m.s', IBM's -> 'i._b._m.'s' (a
    final s/z phone); single letters too (A 'ey' -> 'a.'). None otherwise."""
    if not _ACRONYM_CANDIDATE.match(word) or not pron:
        return None
    if word.endswith("'s") and pron[-1] in "sz":
        stem, suffix, back = word[:-2], ".'s", "'s"
        stem_pron = pron[:-2]
    elif word.endswith("s") and pron[-1] in "sz":
        stem, suffix, back = word[:-1], ".s", "'s"
        stem_pron = pron[:-2]
    elif "'" not in word and not word.endswith("s"):
        stem, suffix, back = word, ".", ""
        stem_pron = pron
    else:
        return None
    if not stem or _spelt(stem, letters) != stem_pron.strip():
        return None
    low = stem.lower()
    return "._".join(low[:-1]) + ("._" if len(low) > 1 else "") + low[-1] + suffix, \
        " ".join(low) + back


def read_acronyms_map(path: str) -> dict[str, str]:
    """acronyms.map (``word<TAB>mapped<TAB>spelt``) -> {word: mapped}."""
    out: dict[str, str] = {}
    if not os.path.isfile(path):
        fail("no such file (run local/swbd1_prepare_dict.sh first: the data prep needs its "
             "acronyms.map)", path)
    for n, line in read_text_lines(path):
        parts = line.split("\t")
        if len(parts) != 3:
            fail("expected 'word<TAB>mapped<TAB>spelt'", path, n)
        out[parts[0]] = parts[1]
    return out


def map_acronyms(words: list[str], acronyms: dict[str, str]) -> list[str]:
    """Acronyms of a transcript in the Fisher convention, as map_acronyms_transcripts.py: a
    capital 'I' with single capital letters next to it is a letter (T I -> t. i.); then every
    word in the map but 'I'/'i' (the pronoun) is mapped. Not lowercased here."""
    out = list(words)
    single = re.compile(r"^[A-Z]$")
    for i in range(len(out)):
        if out[i] != "I":
            continue
        lo = i
        while lo - 1 >= 0 and single.match(out[lo - 1]):
            lo -= 1
        hi = i
        while hi + 1 < len(out) and single.match(out[hi + 1]):
            hi += 1
        if hi > lo:
            for j in range(lo, hi + 1):
                out[j] = acronyms.get(out[j], out[j])
    return [acronyms[w] if w in acronyms and w not in ("I", "i") else w for w in out]


# ---------------------------------------------------------------------------------------------
# the LDC layouts

def transcripts_dir(swbd_dir: str, given: str | None = None) -> str:
    """The swb_ms98_transcriptions dir: ``given``, else <LDC97S62>/transcriptions/
    swb_ms98_transcriptions (where Kaldi's swbd1_data_download.sh looks first)."""
    if given:
        d = given
        if not os.path.isdir(d):
            fail(f"no such directory (--transcripts: the swb_ms98_transcriptions dir, from "
                 f"{OPENSLR_5})", d)
        # the unpacked tarball has the dir one level down
        if not os.path.isfile(os.path.join(d, "sw-ms98-dict.text")) and \
                os.path.isfile(os.path.join(d, "swb_ms98_transcriptions", "sw-ms98-dict.text")):
            d = os.path.join(d, "swb_ms98_transcriptions")
    else:
        d = os.path.join(swbd_dir, "transcriptions", "swb_ms98_transcriptions")
        if not os.path.isdir(d):
            fail(f"no transcriptions/swb_ms98_transcriptions under {swbd_dir}; download "
                 f"{OPENSLR_5} (openslr.org resource 5), unpack it and pass "
                 f"--transcripts <dir>/swb_ms98_transcriptions", swbd_dir)
    return os.path.abspath(d)


def ms98_dict_path(trans_dir: str) -> str:
    p = os.path.join(trans_dir, "sw-ms98-dict.text")
    if not os.path.isfile(p):
        fail(f"no sw-ms98-dict.text in {trans_dir} (expected the swb_ms98_transcriptions dir of "
             f"{OPENSLR_5})", p)
    return p


def find_sph(top: str, what: str, expected: str) -> list[str]:
    """Every *.sph under ``top`` (any case, any depth, as Kaldi's ``find -iname``), sorted."""
    if not os.path.isdir(top):
        fail(f"no such directory (expected {what})", top)
    found = []
    for d, _dirs, files in os.walk(top, followlinks=True):
        found += [os.path.abspath(os.path.join(d, f)) for f in files if f.lower().endswith(".sph")]
    if not found:
        fail(f"no *.sph under {top} (expected {expected})", top)
    return _c_sorted(found)


def _reco_name(path: str) -> str:
    name = os.path.basename(path)
    return name[:-4] if name.lower().endswith(".sph") else name


def wav_scp_lines(sph_files: list[str], sph2pipe: str = "sph2pipe") -> list[str]:
    """Two entries per file, side A = channel 1, side B = channel 2, sorted (Kaldi's lines:
    ``sw02001-A sph2pipe -f wav -p -c 1 /abs/sw02001.sph |``)."""
    lines = []
    for p in sph_files:
        r = _reco_name(p)
        lines.append(f"{r}-A {sph2pipe} -f wav -p -c 1 {p} |")
        lines.append(f"{r}-B {sph2pipe} -f wav -p -c 2 {p} |")
    return _c_sorted(lines)


def reco2file_and_channel(wav_lines: list[str]) -> list[str]:
    out = []
    for line in wav_lines:
        reco = line.split(" ", 1)[0]
        m = re.match(r"^(\S+)-([AB])$", reco)
        if not m:
            fail(f"bad recording id '{reco}' (expected <file>-A or <file>-B)")
        out.append(f"{reco} {m.group(1)} {m.group(2)}")
    return out


def _awk_g(x: float) -> str:
    """A number as awk prints it (%.6g): 0.98, 11.56, 0."""
    s = f"{x:.6g}"
    return s


# ---------------------------------------------------------------------------------------------
# dictionary (local/swbd1_prepare_dict.sh)

@dataclass
class DictResult:
    lexicon: list[str]          # final lexicon lines
    nonsilence: list[str]
    acronyms: list[str]         # acronyms.map lines


def build_dict(ms98_dict: str, letters: dict[str, str] = LETTER_PRONS) -> DictResult:
    """Kaldi's steps on sw-ms98-dict.text. Kaldi first applies local/dict.patch (about 150 fixed
    or added pronunciations of the real dictionary); we do not have it (it is Kaldi's, and only
    fits the real file), so we only do its first hunk, the removal of the ' file: ...' line."""
    lines = []
    for n, line in read_text_lines(ms98_dict):
        if n == 1 and line.split()[:1] == ["file:"]:
            continue
        if line.startswith("#") or not line.split():
            continue
        if len(line.split()) < 2:
            fail(f"expected 'word phone ...', got '{line}'", ms98_dict, n)
        lines.append(line)
    if not lines:
        fail("no dictionary entries", ms98_dict)
    lexicon1 = _c_sorted(lines)
    phones = {p for line in lexicon1 for p in line.split()[1:]}
    nonsil = _c_sorted(p for p in phones if "sil" not in p)     # Kaldi: grep -v sil
    missing = _c_sorted({p for v in letters.values() for p in v.split()} - phones)
    if missing:
        fail(f"the single-letter pronunciations use phones the dictionary lacks: {' '.join(missing)}",
             ms98_dict)
    lexicon2 = SPECIAL_ENTRIES + lexicon1 + [f"{c} {p}" for c, p in letters.items()]
    lexicon3 = _c_sorted((" ".join([map_word(line.split()[0])] + line.split()[1:])
                          for line in lexicon2), unique=True)
    lexicon4, acr = [], []
    for line in lexicon3:
        word, pron = line.split(" ", 1)
        form = acronym_form(word, pron, letters)
        if form is None:
            lexicon4.append(line)
        else:
            acr.append(f"{word}\t{form[0]}\t{form[1]}")
            lexicon4.append(f"{form[0]} {pron}")
    # the pronoun 'i' went to 'i.' with the letters: put it back; then everything lowercase
    lexicon5 = _c_sorted((line.lower() for line in ["i ay"] + lexicon4), unique=True)
    return DictResult(lexicon5, nonsil, _c_sorted(acr, unique=True))


def prepare_dict(swbd_dir: str, dict_dir: str, transcripts: str | None = None) -> DictResult:
    """Write <dict_dir>/{lexicon.txt, silence_phones.txt, nonsilence_phones.txt,
    optional_silence.txt, extra_questions.txt (empty: no stress or tone), acronyms.map,
    MSU_single_letter.txt (our letter list under Kaldi's name)}."""
    if not os.path.isdir(swbd_dir) and not transcripts:
        fail("no such directory (expected the LDC97S62 dir)", swbd_dir)
    src = ms98_dict_path(transcripts_dir(swbd_dir, transcripts))
    res = build_dict(src)
    os.makedirs(dict_dir, exist_ok=True)
    files = {
        "lexicon.txt": res.lexicon,
        "nonsilence_phones.txt": res.nonsilence,
        "silence_phones.txt": SILENCE_PHONES,
        "optional_silence.txt": ["sil"],
        "extra_questions.txt": [],
        "acronyms.map": res.acronyms,
        "MSU_single_letter.txt": [f"{c} {p}" for c, p in LETTER_PRONS.items()],
    }
    for name, lines in files.items():
        with atomic_write(os.path.join(dict_dir, name)) as f:
            f.writelines(line + "\n" for line in lines)
    return res


# ---------------------------------------------------------------------------------------------
# training data (local/swbd1_data_prep.sh)

def ms98_utt_id(ms98_id: str, start: str, end: str) -> str:
    """sw2001A-ms98-a-0002 0.977625 11.561375 -> sw02001-A_000098-001156 (centiseconds, rounded)."""
    name = ms98_id[:6]
    if name.startswith("sw"):
        name = "sw0" + name[2:]
    side = ms98_id[6:7]
    return f"{name}-{side}_{int(100 * float(start) + 0.5):06d}-{int(100 * float(end) + 0.5):06d}"


_SILENCE = re.compile(r"\s\[SILENCE\](\s|$)", re.I)
_ASIDE = re.compile(r"<[BE]_ASIDE>", re.I)


def normalise_transcript(words: str, acronyms: dict[str, str]) -> str | None:
    """The words of one ms98 line as Kaldi's data prep leaves them: [silence], <b_aside> and
    <e_aside> removed, swbd1_map_words, acronyms, lowercase. None: nothing left (line dropped)."""
    # ' [silence]' needs the space before it: the line still starts with its id here
    text = _ASIDE.sub("", _SILENCE.sub(lambda m: m.group(1), " " + words))
    toks = text.split()
    if not toks:
        return None
    toks = map_acronyms([map_word(t) for t in toks], acronyms)
    return " ".join(toks).lower()


def read_ms98(trans_dir: str) -> list[tuple[str, str, str, str, str, int]]:
    """(ms98 id, start, end, words, file, line) of every ``*/*/*-trans.text``, files in C order."""
    files = _c_sorted(glob.glob(os.path.join(glob.escape(trans_dir), "*", "*", "*-trans.text")))
    if not files:
        fail(f"no */*/*-trans.text under {trans_dir} (expected the ms98 layout "
             f"<2 digits>/<conversation>/sw2001A-ms98-a-trans.text, from {OPENSLR_5})", trans_dir)
    rows = []
    for path in files:
        for n, line in read_text_lines(path):
            parts = line.split(None, 3)
            if not parts:
                continue
            if len(parts) < 3 or not re.match(r"^sw\d{4}[AB]", parts[0]):
                fail(f"expected '<sw2001A-ms98-a-0001> <start> <end> <words...>', got '{line}'",
                     path, n)
            s, e = ascii_float(parts[1]), ascii_float(parts[2])
            if s is None or e is None or not (math.isfinite(s) and math.isfinite(e)):
                fail(f"bad start/end times in '{line}'", path, n)
            if s < 0 or e < s:
                fail(f"bad segment times {parts[1]} {parts[2]}", path, n)
            rows.append((parts[0], parts[1], parts[2], parts[3] if len(parts) > 3 else "",
                         path, n))
    return rows


@dataclass
class DataPrepResult:
    text: list[str]
    segments: list[str]
    wav_scp: list[str]
    reco2file_and_channel: list[str]
    utt2spk: list[str]
    spk2utt: list[str]
    sph_count: int


def spk2utt_lines(utt2spk: list[str]) -> list[str]:
    by: dict[str, list[str]] = {}
    for line in utt2spk:
        u, s = line.split()
        by.setdefault(s, []).append(u)
    return [f"{s} {' '.join(us)}" for s, us in sorted(by.items(), key=lambda kv: _c_key(kv[0]))]


def build_train(swbd_dir: str, trans_dir: str, acronyms: dict[str, str],
                sph2pipe: str = "sph2pipe") -> DataPrepResult:
    sph = find_sph(swbd_dir, "the LDC97S62 dir", "LDC97S62's swb1_d*/data/sw0*.sph")
    if len(sph) not in FULL_SPH_COUNTS:
        _warn(f"expected 2435 or 2438 data files, found {len(sph)} under {swbd_dir}")
    rows = read_ms98(trans_dir)
    transcripts1 = []
    for ms98_id, s, e, words, path, n in rows:
        transcripts1.append((ms98_utt_id(ms98_id, s, e), words, path, n))
    for (a, _, _, _), (b, _, path, n) in zip(transcripts1, transcripts1[1:]):
        if _c_key(b) < _c_key(a):       # Kaldi: sort -c on the renamed lines
            fail(f"transcripts are not in sorted order: '{b}' after '{a}'", path, n)
    text, seen = [], set()
    for utt, words, path, n in transcripts1:
        norm = normalise_transcript(words, acronyms)
        if norm is None:
            continue
        if utt in seen:
            fail(f"duplicate utterance id '{utt}' (two segments with the same times)", path, n)
        seen.add(utt)
        text.append(f"{utt} {norm}")
    if not text:
        fail("no transcript lines with words", trans_dir)
    segments = []
    for line in text:
        utt = line.split(" ", 1)[0]
        f = re.split(r"[_-]", utt)
        segments.append(f"{utt} {f[0]}-{f[1]} {_awk_g(int(f[2]) / 100)} {_awk_g(int(f[3]) / 100)}")
    wav = wav_scp_lines(sph, sph2pipe)
    utt2spk = [f"{line.split(' ', 1)[0]} {line[:9]}" for line in segments]
    return DataPrepResult(text, segments, wav, reco2file_and_channel(wav), utt2spk,
                          spk2utt_lines(utt2spk), len(sph))


def _write_lines(path: str, lines: list[str]) -> None:
    with atomic_write(path) as f:
        f.writelines(line + "\n" for line in lines)


def data_prep(swbd_dir: str, dict_dir: str, local_dir: str, data_dir: str,
              transcripts: str | None = None, sph2pipe: str = "sph2pipe") -> DataPrepResult:
    """Write <local_dir>/{sph.flist, text, segments, wav.scp, ...} and the same data-dir files in
    <data_dir> (Kaldi then runs utils/fix_data_dir.sh on it)."""
    trans = transcripts_dir(swbd_dir, transcripts)
    acronyms = read_acronyms_map(os.path.join(dict_dir, "acronyms.map"))
    res = build_train(swbd_dir, trans, acronyms, sph2pipe)
    files = {"text": res.text, "segments": res.segments, "wav.scp": res.wav_scp,
             "reco2file_and_channel": res.reco2file_and_channel, "utt2spk": res.utt2spk,
             "spk2utt": res.spk2utt}
    for d in (local_dir, data_dir):
        os.makedirs(d, exist_ok=True)
        for name, lines in files.items():
            _write_lines(os.path.join(d, name), lines)
    return res


# ---------------------------------------------------------------------------------------------
# eval2000 (local/eval2000_data_prep.sh)

def extend_segments(segs: list[tuple[str, str, float, float]], extend: float,
                    ) -> list[tuple[str, str, float, float]]:
    """Kaldi's extend_segments.pl: every segment grows by ``extend`` seconds at both ends, but
    two neighbours of a recording each take at most half the gap between them (already
    overlapping ones are left alone), and no start goes below 0. Input order is kept."""
    out = [list(s) for s in segs]
    by_reco: dict[str, list[int]] = {}
    for i, s in enumerate(out):
        by_reco.setdefault(s[1], []).append(i)
    for idx in by_reco.values():
        idx.sort(key=lambda i: out[i][2])
        first, last = idx[0], idx[-1]
        out[first][2] = max(0.0, out[first][2] - extend)
        out[last][3] = out[last][3] + extend
        for a, b in zip(idx, idx[1:]):
            end, start = out[a][3], out[b][2]
            if end > start:
                _warn(f"for utterances {out[a][0]} and {out[b][0]}, segments already overlap; "
                      "leaving these times unchanged")
                continue
            e = min(extend, 0.5 * (start - end))
            out[a][3] = end + e
            out[b][2] = start - e
    return [(u, r, s, e) for u, r, s, e in out]


def _hub5_id(file: str, channel: str, start: str, end: str) -> str:
    # awk's %06d of $4*100 truncates (Kaldi's training ids round): keep both as Kaldi has them
    return f"{file}-{channel}_{int(float(start) * 100):06d}-{int(float(end) * 100):06d}"


@dataclass
class Eval2000Result:
    wav_scp: list[str]
    segments: list[str]
    text: list[str]
    utt2spk: list[str]
    spk2utt: list[str]
    reco2file_and_channel: list[str]
    stm: list[str]
    glm: bytes
    text_all: list[str]         # text with the IGNORE_TIME_SEGMENT_* segments (local dir only)


def build_eval2000(sdir: str, tdir: str, sph2pipe: str = "sph2pipe") -> Eval2000Result:
    eng = os.path.join(sdir, "english")
    if not os.path.isdir(eng):
        fail(f"no english/ under {sdir} (expected LDC2002S09's hub5e_00 dir, with "
             "english/{en_*,sw_*}.sph and english/hub5e_00.pem)", sdir)
    if os.path.isdir(os.path.join(tdir, "2000_hub5_eng_eval_tr")):
        tdir = os.path.join(tdir, "2000_hub5_eng_eval_tr")
    ref = os.path.join(tdir, "reference")
    if not os.path.isdir(ref):
        fail(f"no reference/ under {tdir} (expected LDC2002T43's 2000_hub5_eng_eval_tr dir, with "
             "reference/hub5e00.english.000405.stm and reference/en20000405_hub5.glm)", tdir)
    stm_path = os.path.join(ref, "hub5e00.english.000405.stm")
    glm_path = os.path.join(ref, "en20000405_hub5.glm")
    pem_path = os.path.join(eng, "hub5e_00.pem")
    for p, what in ((pem_path, "LDC2002S09's pem"), (stm_path, "LDC2002T43's stm"),
                    (glm_path, "LDC2002T43's glm")):
        if not os.path.isfile(p):
            fail(f"no such file (expected {what} here)", p)
    sph = find_sph(eng, "LDC2002S09's hub5e_00/english dir", "hub5e_00/english/{en_*,sw_*}.sph")
    if len(sph) != EVAL2000_CONVERSATIONS:
        _warn(f"expected {EVAL2000_CONVERSATIONS} eval2000 conversations (80 wav.scp lines), "
              f"found {len(sph)} under {eng}")
    wav = wav_scp_lines(sph, sph2pipe)

    def records(path: str, min_fields: int) -> list[tuple[list[str], int]]:
        out = []
        for n, line in read_text_lines(path):
            if ";;" in line or not line.split():    # Kaldi: grep -v ';;'
                continue
            f_ = line.split()
            if len(f_) < min_fields:
                fail(f"expected at least {min_fields} fields, got {len(f_)}: '{line}'", path, n)
            for t in f_[3:5]:
                try:
                    float(t)
                except ValueError:
                    fail(f"bad time '{t}'", path, n)
            out.append((f_, n))
        return out

    pem_segs = _c_sorted({f"{_hub5_id(f[0], f[1], f[3], f[4])} {f[0]}-{f[1]} {f[3]} {f[4]}"
                          for f, _ in records(pem_path, 5)})
    seg_tuples = [(p[0], p[1], float(p[2]), float(p[3])) for p in (s.split() for s in pem_segs)]
    segments = [f"{u} {r} {s:.2f} {e:.2f}" for u, r, s, e in extend_segments(seg_tuples, 0.1)]
    text_all = _c_sorted(" ".join([_hub5_id(f[0], f[1], f[3], f[4])] + f[6:])
                         for f, _ in records(stm_path, 6))
    ids_text = [t.split(" ", 1)[0] for t in text_all]
    ids_seg = [s.split(" ", 1)[0] for s in segments]
    if ids_text != ids_seg:
        diff = next((a, b) for a, b in zip(ids_text + [""] * len(ids_seg), ids_seg + [""] * len(ids_text))
                    if a != b)
        fail(f"segments from the pem file and the stm file do not match (first difference: stm "
             f"'{diff[0] or '(none)'}', pem '{diff[1] or '(none)'}')", stm_path)
    text = [t for t in text_all if "IGNORE_TIME_SEGMENT_" not in t]
    utt2spk = [" ".join(s.split()[:2]) for s in segments]
    with open(stm_path, encoding="utf-8", errors="surrogateescape") as f:
        # hubscr.pl trips over '((' and the aside markers (Kaldi's sed: the first '((' of a line)
        stm = [_ASIDE_CASED.sub("", line.rstrip("\n").replace("((", "(", 1)) for line in f]
    with open(glm_path, "rb") as f:
        glm = f.read()
    recos = {s.split()[1] for s in segments}
    missing = _c_sorted(recos - {w.split(" ", 1)[0] for w in wav})
    if missing:
        fail(f"the pem has segments of recordings with no .sph file under {eng}: "
             f"{' '.join(missing[:5])}", pem_path)
    return Eval2000Result(wav, segments, text, utt2spk, spk2utt_lines(utt2spk),
                          reco2file_and_channel(wav), stm, glm, text_all)


_ASIDE_CASED = re.compile(r"<[BE]_ASIDE>")


def eval2000_prep(sdir: str, tdir: str, local_dir: str, data_dir: str,
                  sph2pipe: str = "sph2pipe") -> Eval2000Result:
    res = build_eval2000(sdir, tdir, sph2pipe)
    for d in (local_dir, data_dir):
        os.makedirs(d, exist_ok=True)
        for name, lines in (("wav.scp", res.wav_scp), ("segments", res.segments),
                            ("text", res.text), ("utt2spk", res.utt2spk), ("spk2utt", res.spk2utt),
                            ("reco2file_and_channel", res.reco2file_and_channel), ("stm", res.stm)):
            _write_lines(os.path.join(d, name), lines)
        with atomic_write(os.path.join(d, "glm"), "wb") as f:
            f.write(res.glm)
    _write_lines(os.path.join(local_dir, "text.all"), res.text_all)
    return res


# ---------------------------------------------------------------------------------------------
# Fisher transcripts for the LM (local/fisher_map_words.pl, its main rules)

_FISHER_NOISE = {"[breath]": "[noise]", "[cough]": "[noise]", "[lipsmack]": "[noise]",
                 "[sigh]": "[noise]", "[sneeze]": "[noise]", "[mn]": "[vocalized-noise]",
                 "[laugh]": "[laughter]"}


def fisher_map_words(line: str) -> str | None:
    """A Fisher transcript line in the Switchboard conventions: lowercase; '*', parentheses,
    '<...>' tags, '?', [[skip]] and [pause] removed; breath/cough/lipsmack/sigh/sneeze ->
    [noise], [mn] -> [vocalized-noise], [laugh] -> [laughter]; a leading quote -> '-'
    (word fragment). None for an empty line. (Kaldi's script also fixes a few known words and
    quoted fragments; those rules are not here.)"""
    s = line.lower().replace("*", "").replace("(", "").replace(")", "")
    if not s.strip():
        return None
    s = re.sub(r"<[^>]*>", "", s).replace("?", "")
    s = re.sub(r"(\w),(\w| )", r"\1 \2", s)
    words = []
    for w in s.split():
        if w in ("[[skip]]", "[pause]", "-"):
            continue
        w = _FISHER_NOISE.get(w, w)
        words.append("-" + w[1:] if w.startswith("'") else w)
    return " ".join(words) if words else None
