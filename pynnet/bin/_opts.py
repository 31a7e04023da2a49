"""Option and message plumbing shared by the pynnet-* programs (Kaldi conventions): true/false
option values, the argument parser, ``LOG (prog) ...`` lines on stderr, colon-separated integer
lists, and the option groups several programs take (--binary, tree context)."""
from __future__ import annotations

import argparse
import logging
import sys

from pynnet.bin._cli import prog_name
from pynnet.io.errors import PynnetError, fail


def kaldi_bool(v: str) -> bool:
    """Kaldi boolean option value: exactly ``true`` or ``false``."""
    if v not in ("true", "false"):
        raise argparse.ArgumentTypeError("expected true or false")
    return v == "true"


def parser(prog: str, desc: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=desc)


def log(msg: str) -> None:
    """Kaldi's ``LOG (prog) msg`` line on stderr."""
    print(f"LOG ({prog_name()}) {msg}", file=sys.stderr, flush=True)


def setup_logging() -> None:
    """Library warnings (module loggers under ``pynnet``) as Kaldi prints them:
    ``WARNING (prog) message`` on stderr; installed once per process."""
    root = logging.getLogger("pynnet")
    if not any(getattr(h, "_pynnet_cli", False) for h in root.handlers):
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter(f"%(levelname)s ({prog_name()}) %(message)s"))
        h._pynnet_cli = True  # type: ignore[attr-defined]
        root.addHandler(h)
        root.setLevel(logging.INFO)


def int_list(spec: str, what: str) -> list[int]:
    """Kaldi colon-separated integer list (``--ci-phones=1:2:3``); commas are accepted too."""
    if not spec:
        return []
    try:
        return [int(x) for x in spec.replace(",", ":").split(":") if x != ""]
    except ValueError:
        raise PynnetError(f"{what}: expected colon-separated integers, got '{spec}'") from None


def add_binary_opt(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--binary true|false`` (default true): Kaldi binary or text output."""
    p.add_argument("--binary", type=kaldi_bool, default=True, help=help)


def add_context_opts(p: argparse.ArgumentParser, checked: bool = False) -> None:
    """Phonetic context: ``--context-width`` (3: triphones) and ``--central-position`` (1).
    ``checked``: the program compares them with its tree stats (see ``check_stats_context``)."""
    note = "must match acc-tree-stats (checked)" if checked else None
    p.add_argument("--context-width", type=int, default=3, help=note)
    p.add_argument("--central-position", type=int, default=1, help=note)


def check_stats_context(stats, a: argparse.Namespace, path: str) -> None:
    """Tree stats must have the context that the options (``add_context_opts``) say."""
    if (stats.context_width, stats.central_position) != (a.context_width, a.central_position):
        fail(f"stats have context width {stats.context_width} / central position {stats.central_position}, "
             f"options say {a.context_width} / {a.central_position}", path)
