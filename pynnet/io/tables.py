"""Kaldi text tables: one ``key value...`` per line (wav.scp, text, utt2spk, segments, ...).

Readers check what Kaldi's validate_data_dir.pl checks and report the file and line.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator

from pynnet.io.atomic import atomic_write
from pynnet.io.errors import fail


def read_table_lines(path: str | os.PathLike, *, min_fields: int = 2, max_fields: int | None = None,
                     allow_empty: bool = False) -> Iterator[tuple[int, str, str]]:
    """Yield (line_number, key, rest) for each line; rest is the remainder after the key, stripped.

    Empty lines, lines with too few/many fields and non-UTF-8 bytes are errors naming file:line.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such file", path)
    n = 0
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                fail("not valid UTF-8", path, n)
            fields = line.split()
            if not fields:
                fail("empty line", path, n)
            if len(fields) < min_fields:
                fail(f"expected at least {min_fields} fields, got {len(fields)}: '{line}'", path, n)
            if max_fields is not None and len(fields) > max_fields:
                fail(f"expected at most {max_fields} fields, got {len(fields)}: '{line}'", path, n)
            key = fields[0]
            rest = line.strip()[len(key):].strip()
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
