"""Character tokenization for CER scoring (Kaldi's steps/scoring/score_kaldi_cer.sh): every word
of a transcript becomes its characters (Unicode code points); the utterance id and the
whitespace between words are kept out.  Words that look like markup -- ``[noise]``,
``<unk>``, anything with ``!SIL`` in it -- stay whole, as in Kaldi's script."""
from __future__ import annotations

import os
import re
import subprocess

from pynnet.io.errors import fail
from pynnet.score.wer import read_transcripts

# What Kaldi's tokenizer (perl -a on UTF-8 text) separates words at: Perl's Unicode \s -- Python's
# str.split() whitespace less the information separators U+001C..U+001F.
_PERL_SPACE = re.compile("[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_KEEP_WHOLE = re.compile(r"\[.*\]|<.*>|!SIL")


def char_tokens(words: list[str]) -> list[str]:
    """The character tokens of a word sequence (the utterance id not included)."""
    out: list[str] = []
    for word in words:
        for w in _PERL_SPACE.split(word):
            if not w:
                continue
            if _KEEP_WHOLE.search(w):
                out.append(w)
            else:
                out.extend(w)
    return out


def chars_name(path: str) -> str:
    """Where the character form of a transcript goes: ``x.txt`` -> ``x.chars.txt`` (Kaldi's name)."""
    return (path[:-4] if path.endswith(".txt") else path) + ".chars.txt"


def tokenize_file(src: str, dst: str, tokenizer: str | None = None) -> None:
    """Write the character form of transcript ``src`` to ``dst`` (atomically): ``utt c1 c2 ...``
    per line, or the output of the shell command ``tokenizer`` (stdin: ``src``) when given, as
    Kaldi's script runs local/character_tokenizer."""
    from pynnet.io.atomic import atomic_path, atomic_write

    if tokenizer:
        with atomic_path(dst) as tmp, open(src, "rb") as fin, open(tmp, "wb") as fout:
            r = subprocess.run(tokenizer, shell=True, stdin=fin, stdout=fout)
            if r.returncode != 0:
                fail(f"character tokenizer '{tokenizer}' failed with status {r.returncode}", src)
            fout.flush()
            os.fsync(fout.fileno())
        return
    table = read_transcripts(src)
    with atomic_write(dst) as f:
        f.write("".join(" ".join([key] + char_tokens(words)) + "\n" for key, words in table.items()))


__all__ = ["char_tokens", "chars_name", "tokenize_file"]
