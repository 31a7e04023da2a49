"""Kaldi text tables: one ``key value...`` per line (wav.scp, text, utt2spk, segments, ...).

Readers check what Kaldi's validate_data_dir.pl checks and report the file and line.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator

from pynnet.io.atomic import atomic_write
from pynnet.io.errors import fail

# Kaldi splits the fields of a line on ASCII space and tab only (SplitStringToVector(line, " \t")).
# Python's str.split() and str.strip() also take these for whitespace: U+00A0 would make
# 'caf\u00a0e' two words here and one in Kaldi (lexicons, transcripts, WER).
FIELD_SEPS = " \t"
_OTHER_SPACE_ASCII = "\v\f\r\x1c\x1d\x1e\x1f"
_OTHER_SPACE = _OTHER_SPACE_ASCII + ("\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                                     "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def split_fields(line: str) -> list[str]:
    """The fields of ``line`` (without its line end), separated by runs of spaces and tabs, as
    Kaldi splits them; every other character, Unicode spaces included, belongs to a field.
    About as fast as str.split()."""
    if "\t" in line:
        line = line.replace("\t", " ")
    fields = line.split(" ")
    if "" in fields:
        fields = [f for f in fields if f]
    return fields


def split_key(line: str) -> tuple[str, str]:
    """(first field, the rest of ``line`` without surrounding spaces and tabs), by the rule of
    split_fields; ('', '') for a blank line."""
    line = line.strip(FIELD_SEPS)
    i = line.find(" ")
    j = line.find("\t")
    if j >= 0 and (i < 0 or j < i):
        i = j
    if i < 0:
        return line, ""
    return line[:i], line[i + 1:].lstrip(FIELD_SEPS)


def has_other_space(text: str) -> bool:
    """Whether ``text`` holds a character that str.split() takes for whitespace but Kaldi does
    not (anything besides space, tab and newline); where it holds none, str.split() on its
    lines gives Kaldi's fields, a fast path for whole files."""
    chars = _OTHER_SPACE_ASCII if text.isascii() else _OTHER_SPACE
    return any(c in text for c in chars)


def split_lines(lines: list[str]) -> Iterator[list[str]]:
    """split_fields of each of ``lines`` (a block of a file, line ends kept or not), lazily.  A
    block with no space but ASCII space, tab and newline goes through str.split() in C:
    streaming readers split blocks (``f.readlines(1 << 16)``) rather than lines for speed."""
    if has_other_space("".join(lines)):
        return (split_fields(line.rstrip("\r\n")) for line in lines)
    return map(str.split, lines)


def ascii_int(s: str) -> int | None:
    """``s`` as an integer if it is one written in ASCII (``-``? digits), else None: how Kaldi
    reads the integers of its text files and options.  ``int()`` alone is not enough: it takes
    '1_0', '\u0663' (as 3) and surrounding Unicode spaces, and ``str.isdigit()`` is true of '²',
    which ``int()`` rejects."""
    digits = s[1:] if s.startswith("-") else s
    return int(s) if digits.isascii() and digits.isdigit() else None


def ascii_float(v: str) -> float | None:
    """``v`` as a number as Kaldi (strtod) reads it, else None: Python's float() also takes
    '1_0', non-ASCII digits and surrounding Unicode spaces."""
    if not v.isascii() or "_" in v:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def read_text_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of a UTF-8 file; bytes that are not UTF-8 are an
    error naming file:line."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                fail("not valid UTF-8", path, n)


def read_table_lines(path: str | os.PathLike, *, min_fields: int = 2, max_fields: int | None = None,
                     allow_empty: bool = False) -> Iterator[tuple[int, str, str]]:
    """Yield (line_number, key, rest) for each line; rest is the remainder after the key, stripped.

    Empty lines, lines with too few/many fields and non-UTF-8 bytes are errors naming file:line.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such file", path)
    n = 0
    for n, line in read_text_lines(path):
        key, rest = split_key(line)
        if not key:
            fail("empty line", path, n)
        # the fields after the key are only counted when it matters
        nf = 1 if not rest else 2 if min_fields <= 2 and max_fields is None else 1 + len(split_fields(rest))
        if nf < min_fields:
            fail(f"expected at least {min_fields} fields, got {nf}: '{line}'", path, n)
        if max_fields is not None and nf > max_fields:
            fail(f"expected at most {max_fields} fields, got {nf}: '{line}'", path, n)
        yield n, key, rest
    if n == 0 and not allow_empty:
        fail("file is empty", path)


def read_table(path: str | os.PathLike, *, min_fields: int = 2, max_fields: int | None = None,
               check_sorted: bool = False, allow_empty: bool = False) -> dict[str, str]:
    """Read a table into an insertion-ordered dict; duplicate keys (and, optionally, unsorted keys
    in ``LC_ALL=C`` order) are errors naming file and line."""
    out: dict[str, str] = {}
    prev: bytes | None = None
    for n, key, rest in read_table_lines(path, min_fields=min_fields, max_fields=max_fields,
                                         allow_empty=allow_empty):
        if key in out:
            fail(f"duplicate key '{key}'", path, n)
        kb = key.encode()
        if check_sorted and prev is not None and kb < prev:
            fail(f"not sorted (LC_ALL=C): '{key}' after '{prev.decode()}'", path, n)
        prev = kb
        out[key] = rest
    return out


def write_table(path: str | os.PathLike, items: Iterable[tuple[str, str]] | dict[str, str],
                sort: bool = True) -> None:
    """Write ``key value`` lines atomically, sorted in LC_ALL=C (byte) order by default."""
    pairs = list(items.items()) if isinstance(items, dict) else list(items)
    if sort:
        pairs.sort(key=lambda kv: kv[0].encode())
    with atomic_write(path) as f:
        for k, v in pairs:
            f.write(f"{k} {v}\n" if v != "" else f"{k}\n")
