"""Text-ark writers for decoder outputs (lattices, word sequences, alignments).

wspecifiers as Kaldi users write them: ``ark:|gzip -c > exp/x/lat.1.gz`` (a pipe),
``ark,t:exp/x/words.1.txt``, ``ark:exp/x/lat.1.gz`` (gzipped because of the name), ``ark,t:-``.
Files are written atomically (temp file renamed on success); a pipe's command must succeed.
"""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from typing import IO

from pynnet.io.atomic import make_temp_file
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
        self._tmp: str | None = None
        self._f: IO[bytes] | None = None
        self._raw: IO[bytes] | None = None

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
            fd, self._tmp = make_temp_file(d, "." + os.path.basename(t) + ".")
            self._raw = os.fdopen(fd, "wb")
            # (no name or time stamp in the header: identical lattices, identical files)
            self._f = gzip.GzipFile(filename="", fileobj=self._raw, mode="wb", mtime=0) if t.endswith(".gz") else self._raw
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
        try:
            if self._f is not self._raw:
                self._f.close()
            self._raw.flush()
            os.fsync(self._raw.fileno())
            self._raw.close()
            if exc_type is None:
                os.replace(self._tmp, t)
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)
        return False


__all__ = ["TextArkWriter"]
