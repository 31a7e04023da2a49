"""Shared CLI plumbing: user errors become one line on stderr and exit status 1."""
from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from typing import Callable

from pynnet.io.errors import PynnetError


def prog_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "pynnet"


class Terminated(BaseException):
    """SIGTERM (run.pl killing its jobs, ``timeout``, ``kill``) as an exception that unwinds: a
    BaseException, so ``except Exception`` does not stop it and ``atomic_path`` removes its temp."""


_handler_pid = 0  # the process that installed _on_sigterm


def _on_sigterm(signum: int, frame: object) -> None:
    # A second SIGTERM (cleanup stuck in a slow read) ends the process at once, as it used to.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if os.getpid() != _handler_pid:
        # a forked child (a multiprocessing worker, which its pool stops with SIGTERM) dies as
        # before: raising there would unwind the worker's loop and leave the pool waiting on it
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise Terminated


def _sigterm_unwinds() -> bool:
    """Python's default SIGTERM exits without unwinding, leaving the temp files of atomic outputs
    behind (.x.ark.<random>.tmp): while a program runs, SIGTERM raises Terminated instead. Only from
    the main thread (signal handlers can be set nowhere else) and only when SIGTERM has its
    default action (an ignored SIGTERM stays ignored; a program run by another keeps its handler).
    True when it installed the handler."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    global _handler_pid
    _handler_pid = os.getpid()
    signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def cli(main: Callable[[list[str] | None], int | None]) -> Callable[[list[str] | None], int]:
    """Wrap a ``main(argv)``: PynnetError/OSError -> ``ERROR (prog): msg`` and exit 1; SIGTERM
    unwinds (atomic outputs remove their temp files) and is ``ERROR (prog): terminated``, exit 143."""

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None) -> int:
        owns_sigterm = _sigterm_unwinds()
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
        except OSError as e:
            # the machine's, not the program's: disk full, quota, file size limit, I/O error
            where = f": {e.filename}" if e.filename else ""
            print(f"ERROR ({prog_name()}): {e.strerror or e}{where}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"ERROR ({prog_name()}): interrupted", file=sys.stderr)
            return 130
        except Terminated:
            if not owns_sigterm:
                raise           # for the wrapper that set the handler
            print(f"ERROR ({prog_name()}): terminated", file=sys.stderr)
            return 128 + signal.SIGTERM
        finally:
            if owns_sigterm:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return wrapper


def run(main: Callable[[list[str] | None], int]) -> None:
    sys.exit(main(None))
