"""Where progress bars go: the terminal, never a log file.

A program run from a terminal draws its bars on stderr. A script that copies the program's stderr
into a log (``2> >(tee log)``, steps/nnet/train.sh) sets PYNNET_PROGRESS_TTY=1 when its own stderr
is a terminal: the bars then go straight to the controlling terminal, and the log keeps only the
messages."""
from __future__ import annotations

import os
import sys
from typing import TextIO

_tty: TextIO | None = None


def progress_stream() -> TextIO | None:
    """The stream for progress bars, or None for no bars."""
    global _tty
    if sys.stderr.isatty():
        return sys.stderr
    if os.environ.get("PYNNET_PROGRESS_TTY") != "1":
        return None
    if _tty is None:
        try:
            _tty = open("/dev/tty", "w")
        except OSError:   # no controlling terminal (a batch job)
            return None
    return _tty


def progress_kwargs(enabled: bool = True) -> dict:
    """tqdm's ``file`` and ``disable`` for a bar drawn where progress_stream() says (or not at all)."""
    stream = progress_stream() if enabled else None
    return {"file": stream, "disable": stream is None}
