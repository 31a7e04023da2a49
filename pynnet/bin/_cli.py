"""Shared CLI plumbing: user errors become one line on stderr and exit status 1."""
from __future__ import annotations

import functools
import os
import sys
from typing import Callable

from pynnet.io.errors import PynnetError


def prog_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "pynnet"


def cli(main: Callable[[list[str] | None], int | None]) -> Callable[[list[str] | None], int]:
    """Wrap a ``main(argv)``: PynnetError/OSError -> ``ERROR (prog): msg`` and exit 1."""

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None) -> int:
        try:
            rc = main(argv)
            return int(rc or 0)
        except PynnetError as e:
            print(f"ERROR ({prog_name()}): {e}", file=sys.stderr)
            return 1
        except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
            print(f"ERROR ({prog_name()}): {e.strerror}: {e.filename}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            # the reader of our stdout went away (e.g. the decoder after a pipe into it failed):
            # its own error says why; ours is one line, and nothing more is written to the pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            print(f"ERROR ({prog_name()}): the output pipe was closed by its reader", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"ERROR ({prog_name()}): interrupted", file=sys.stderr)
            return 130

    return wrapper


def run(main: Callable[[list[str] | None], int]) -> None:
    sys.exit(main(None))
