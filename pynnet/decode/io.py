"""Text-ark writers for decoder outputs (lattices, word sequences, alignments).

wspecifiers as Kaldi users write them: ``ark:|gzip -c > exp/x/lat.1.gz`` (a pipe),
``ark,t:exp/x/words.1.txt``, ``ark:exp/x/lat.1.gz`` (gzipped because of the name), ``ark,t:-``.
Files are written atomically (temp file renamed on success); a pipe's command must succeed.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import IO

from pynnet.io.atomic import DeterministicGzip, atomic_path
from pynnet.io.errors import fail


def _target(wspec: str) -> str:
    head, sep, rest = wspec.partition(":")
    if sep and head.split(",")[0] in ("ark", "scp"):
        if head.split(",")[0] == "scp":
            fail(f"only ark wspecifiers are supported here, got '{wspec}'")
        return rest.strip()
    return wspec.strip()


class TextArkWriter:
    """Write text entries to a wspecifier; use as a context manager, call ``write(text)``."""

    def __init__(self, wspec: str):
        self.wspec = wspec
        self.target = _target(wspec)
        self._proc: subprocess.Popen | None = None
        self._f: IO[bytes] | None = None
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> "TextArkWriter":
        t = self.target
        if t == "-":
            self._f = sys.stdout.buffer
        elif t.startswith("|"):
            self._proc = subprocess.Popen(t[1:], shell=True, stdin=subprocess.PIPE)
            self._f = self._proc.stdin
        else:
            d = os.path.dirname(t) or "."
            if not os.path.isdir(d):
                fail("output directory does not exist", d)
            self._stack = contextlib.ExitStack()
            tmp = self._stack.enter_context(atomic_path(t))
            self._f = self._stack.enter_context(DeterministicGzip(tmp) if t.endswith(".gz") else open(tmp, "wb"))
        return self

    def write(self, text: str) -> None:
        self._f.write(text.encode("utf-8"))

    def __exit__(self, exc_type, exc, tb) -> bool:
        t = self.target
        if t == "-":
            sys.stdout.flush()
            return False
        if self._proc is not None:
            try:
                self._f.close()
            except BrokenPipeError:
                pass
            rc = self._proc.wait()
            if exc_type is None and rc != 0:
                fail(f"output command failed with status {rc}", t)
            return False
        if exc_type is None:
            self._f.flush()
            os.fsync(self._f.fileno())
        # closes the file; renames it onto the target, or removes it after an error
        self._stack.__exit__(exc_type, exc, tb)
        return False


__all__ = ["TextArkWriter"]
