"""User-facing errors: one line naming the file (and line), never a traceback."""
from __future__ import annotations

import os


class PynnetError(Exception):
    """An error caused by the user's input or configuration; the CLI prints it on one line."""


def fail(msg: str, path: str | os.PathLike | None = None, line: int | None = None) -> "NoReturn":  # noqa: F821
    """Raise a PynnetError formatted as ``path:line: msg`` (Kaldi users grep logs for this)."""
    where = ""
    if path is not None:
        where = f"{os.fspath(path)}:{line}: " if line is not None else f"{os.fspath(path)}: "
    raise PynnetError(where + msg)
