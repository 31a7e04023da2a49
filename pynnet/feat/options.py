"""Kaldi ``ParseOptions`` for Python programs: ``--name=value`` options before the positional
arguments, ``--config=FILE`` (one ``--name=value`` per line, ``#`` comments) read first so the
command line overrides it, ``--bool`` alone meaning true, ``_`` and ``-`` interchangeable.

Mistakes (unknown option, bad value, bad config line) raise PynnetError naming the config file
and line, or the command line.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from pynnet.io.errors import fail

_TRUE = {"true", "t", "1", ""}
_FALSE = {"false", "f", "0"}


@dataclass
class Option:
    name: str            # Kaldi spelling, e.g. "sample-frequency"
    type: type           # bool, int, float or str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


class KaldiOptions:
    """Register options, then ``parse(argv)`` -> (values keyed by python name, positional args)."""

    def __init__(self, usage: str) -> None:
        self.usage = usage
        self.options: dict[str, Option] = {}
        self.register("config", str, "", "Configuration file to read (this option may be repeated)")
        self.register("help", bool, False, "Print out usage message")
        self.register("verbose", int, 0, "Verbose level (higher->more logging)")
        self.register("print-args", bool, True, "Print the command line arguments (to stderr)")

    def register(self, name: str, typ: type, default: Any, help: str,
                 choices: Sequence[str] | None = None) -> None:
        self.options[_normalize(name)] = Option(_normalize(name), typ, default, help,
                                                tuple(choices) if choices else None)

    # -- parsing -------------------------------------------------------------------------------
    def _convert(self, opt: Option, value: str | None, where: tuple[str | None, int | None]) -> Any:
        path, line = where
        src = "" if path else "command line: "
        if opt.type is bool:
            v = "" if value is None else value
            if v in _TRUE:
                return True
            if v in _FALSE:
                return False
            fail(f"{src}invalid value for boolean option --{opt.name}: '{value}' (use true or false)", path, line)
        if value is None:
            fail(f"{src}option --{opt.name} needs a value (--{opt.name}=VALUE)", path, line)
        try:
            out = opt.type(value)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(opt.type, opt.type.__name__)
            fail(f"{src}invalid value for --{opt.name}: '{value}' is not {kind}", path, line)
        if opt.choices and out not in opt.choices:
            fail(f"{src}invalid value for --{opt.name}: '{value}' (expected one of: "
                 f"{', '.join(opt.choices)})", path, line)
        return out

    def _set(self, values: dict[str, Any], arg: str, where: tuple[str | None, int | None]) -> None:
        path, line = where
        body = arg[2:]
        name, eq, value = body.partition("=")
        name = _normalize(name)
        if name not in self.options:
            fail(("" if path else "command line: ") + f"unknown option --{name}"
                 + (f" (for {os.path.basename(sys.argv[0])})" if not path else ""), path, line)
        if name == "config" and path is not None:
            fail("--config inside a config file is not supported", path, line)
        values[name.replace("-", "_")] = self._convert(self.options[name], value if eq else None, where)

    def read_config(self, path: str, values: dict[str, Any]) -> None:
        if not os.path.isfile(path):
            fail("cannot open config file", path)
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    fail("not valid UTF-8", path, n)
                # Kaldi's Trim: ASCII whitespace only (a value may end in U+00A0)
                line = line.split("#", 1)[0].strip(" \t\n\r\f\v")
                if not line:
                    continue
                if not line.startswith("--") or len(line) == 2:
                    fail(f"line does not look like an option (expected --name=value): '{line}'", path, n)
                if " " in line.partition("=")[0]:
                    fail(f"expected --name=value without spaces around the name: '{line}'", path, n)
                self._set(values, line, (path, n))

    def parse(self, argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
        values = {o.name.replace("-", "_"): o.default for o in self.options.values()}
        args = list(argv)
        named: list[str] = []
        positional: list[str] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--":
                positional.extend(args[i + 1:])
                break
            if a.startswith("--") and not positional:
                named.append(a)
            elif a.startswith("--"):
                fail(f"command line: option {a} after a positional argument "
                     "(options go before the positional arguments)")
            else:
                positional.append(a)
            i += 1
        # Config files first (in order), so the command line overrides them, as in Kaldi.
        for a in named:
            if _normalize(a[2:].partition("=")[0]) == "config":
                name, eq, value = a[2:].partition("=")
                if not eq or not value:
                    fail("command line: --config needs a file (--config=FILE)")
                self.read_config(value, values)
        for a in named:
            if _normalize(a[2:].partition("=")[0]) != "config":
                self._set(values, a, (None, None))
        if values["help"]:
            print(self.help_text(), file=sys.stderr)
            raise SystemExit(0)
        return values, positional

    def help_text(self) -> str:
        lines = [self.usage.rstrip(), "", "Options:"]
        for o in sorted(self.options.values(), key=lambda o: o.name):
            default = {True: "true", False: "false"}.get(o.default, o.default) if o.type is bool else o.default
            lines.append(f"  --{o.name:<28s}: {o.help} ({o.type.__name__}, default = {default})")
        return "\n".join(lines)

    def usage_error(self, msg: str = "wrong number of arguments") -> None:
        """Print the usage to stderr and fail with ``msg`` (Kaldi exits with its usage too)."""
        print(self.usage.rstrip(), file=sys.stderr)
        fail(f"command line: {msg}")


def _normalize(name: str) -> str:
    return name.strip().replace("_", "-")
