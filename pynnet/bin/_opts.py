"""Option and message plumbing shared by the pynnet-* programs (Kaldi conventions): the argument
parser (one-line usage errors; option values that start with "-"), true/false option values,
integers written in ASCII, ``LOG (prog) ...`` lines on stderr, colon-separated integer lists, and
the option groups several programs take (--binary, tree context)."""
from __future__ import annotations

import argparse
import logging
import sys

from pynnet.bin._cli import prog_name
from pynnet.io.errors import PynnetError, fail
from pynnet.io.tables import ascii_float, ascii_int  # the programs' numbers; one rule with the file readers


def kaldi_bool(v: str) -> bool:
    """Kaldi boolean option value: exactly ``true`` or ``false``."""
    if v not in ("true", "false"):
        raise argparse.ArgumentTypeError("expected true or false")
    return v == "true"


def int_opt(v: str) -> int:
    """``type=`` of an integer option: ASCII digits (``int()`` also takes '\u0663' and '1_000');
    anything else is a one-line usage error."""
    n = ascii_int(v)
    if n is None:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{v}'")
    return n


def float_opt(v: str) -> float:
    """``type=`` of a real option: a number written in ASCII, as Kaldi (strtod) reads it
    (``float()`` also takes '\u0660.25' and '1_0'); anything else is a one-line usage error."""
    x = ascii_float(v)
    if x is None:
        raise argparse.ArgumentTypeError(f"expected a number, got '{v}'")
    return x


class Parser(argparse.ArgumentParser):
    """The pynnet programs' argument parser.

    Bad usage is a user mistake: one line ``ERROR (prog): <what>; usage: <usage>`` and exit 1
    (via ``PynnetError`` and ``@cli``), not argparse's multi-line usage and exit 2; ``--help``
    still prints the full usage and exits 0.

    The word after an option that takes one value is its value, even when it starts with "-"
    (as getopt and utils/parse_options.sh read it): ``--cmvn-opts --norm-vars=true`` is
    ``--cmvn-opts=--norm-vars=true``, where argparse alone would take ``--norm-vars=true`` for
    an option of its own."""

    def parse_known_args(self, args=None, namespace=None):
        return super().parse_known_args(self._glue_values(sys.argv[1:] if args is None else list(args)),
                                         namespace)

    def _glue_values(self, argv: list[str]) -> list[str]:
        takes_value = {o for a in self._actions if a.nargs is None
                       for o in a.option_strings if o.startswith("--")}
        # Kaldi's boolean options (nargs="?", const=True, type=kaldi_bool): a bare --flag is
        # --flag=true and never takes the next word (Kaldi reads "--flag true" as the flag plus a
        # positional argument)
        bare_true = {o for a in self._actions if a.nargs == "?" and a.const is True and a.type is kaldi_bool
                     for o in a.option_strings}
        out, i = [], 0
        while i < len(argv):
            if argv[i] in bare_true:
                out.append(f"{argv[i]}=true")
                i += 1
                continue
            if argv[i] in takes_value and i + 1 < len(argv):
                out.append(f"{argv[i]}={argv[i + 1]}")
                i += 2
                continue
            if argv[i] == "--":  # the rest are positional
                return out + argv[i:]
            out.append(argv[i])
            i += 1
        return out

    def error(self, message: str) -> "NoReturn":  # noqa: F821
        usage = self.format_usage().removeprefix("usage: ")
        # argparse wraps a generated usage over several lines; a hand-written one has the
        # synopsis on its first line
        usage_error(message, usage if self.usage else " ".join(usage.split()))


def usage_error(message: str, usage: str) -> "NoReturn":  # noqa: F821
    """Bad usage (a user mistake): ``PynnetError('<message>; usage: <synopsis>')``, on one line:
    the synopsis is the first line of ``usage`` (variants and examples follow it, for --help)."""
    synopsis = usage.split("\n")[0].strip()
    raise PynnetError(f"{message}; usage: {synopsis}")


def parser(prog: str, desc: str, usage: str | None = None, **kwargs) -> Parser:
    """The argument parser of a pynnet program (see ``Parser``); ``kwargs`` go to argparse."""
    return Parser(prog=prog, description=desc, usage=usage, **kwargs)


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
    out = [ascii_int(x) for x in spec.replace(",", ":").split(":") if x != ""]
    if None in out:
        raise PynnetError(f"{what}: expected colon-separated integers, got '{spec}'")
    return out


def add_binary_opt(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--binary true|false`` (default true): Kaldi binary or text output."""
    p.add_argument("--binary", type=kaldi_bool, default=True, help=help)


def add_context_opts(p: argparse.ArgumentParser, checked: bool = False) -> None:
    """Phonetic context: ``--context-width`` (3: triphones) and ``--central-position`` (1).
    ``checked``: the program compares them with its tree stats (see ``check_stats_context``)."""
    note = "must match acc-tree-stats (checked)" if checked else None
    p.add_argument("--context-width", type=int_opt, default=3, help=note)
    p.add_argument("--central-position", type=int_opt, default=1, help=note)


def check_stats_context(stats, a: argparse.Namespace, path: str) -> None:
    """Tree stats must have the context that the options (``add_context_opts``) say."""
    if (stats.context_width, stats.central_position) != (a.context_width, a.central_position):
        fail(f"stats have context width {stats.context_width} / central position {stats.central_position}, "
             f"options say {a.context_width} / {a.central_position}", path)


def add_transform_opts(p: argparse.ArgumentParser) -> None:
    """The options of LDA+MLLT and SAT systems' features (after CMVN and deltas)."""
    p.add_argument("--splice-opts", default="", help="splice-feats options, e.g. '--left-context=3 --right-context=3' "
                   "(LDA+MLLT systems: the exp dir's splice_opts, with --delta-order 0)")
    p.add_argument("--transform", default="", help="feature transform applied after splicing (final.mat)")
    p.add_argument("--fmllr", default="", help="per-speaker fMLLR transforms (trans.JOB ark, keyed by the data "
                   "dir's speakers) applied last")


def feat_transforms_of(a: argparse.Namespace, data_dir: str):
    """The ``FeatTransforms`` of the options ``add_transform_opts`` adds (None: none given)."""
    from pynnet.hmm.train import feat_transforms

    return feat_transforms(data_dir, a.splice_opts, a.transform, a.fmllr)

