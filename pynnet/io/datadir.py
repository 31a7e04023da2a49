"""Kaldi data directories: load, validate, fix, subset, split, combine, copy.

A data dir holds text tables keyed by utterance (utt2spk, text, feats.scp, segments, utt2dur, ...),
by speaker (spk2utt, cmvn.scp, spk2gender, ...) or by recording (wav.scp, reco2file_and_channel,
reco2dur; keyed by utterance when there is no segments file).  The checks follow Kaldi's
utils/validate_data_dir.sh and the fixes utils/fix_data_dir.sh, so a directory that passes here
passes there.  Every user mistake is a one-line ``file:line: what`` PynnetError.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random
import shutil
import sys
import tempfile
from typing import Callable, Iterable, NamedTuple

from pynnet.io.atomic import atomic_write, make_temp_dir
from pynnet.io.errors import fail
from pynnet.io.tables import (FIELD_SEPS, ascii_float, has_other_space, read_table_lines, split_fields,
                              split_key)

UTT, SPK, RECO = "utt", "spk", "reco"


def _positive_float(v: str) -> str | None:
    x = ascii_float(v)
    if x is None:
        return f"expected a number, got '{v}'"
    return None if x > 0 and math.isfinite(x) else f"expected a positive duration, got '{v}'"


def _positive_int(v: str) -> str | None:
    # ASCII digits only: '²'.isdigit() is True, but int('²') raises
    return None if v.isascii() and v.isdigit() and int(v) > 0 else f"expected a positive integer, got '{v}'"


def _gender(v: str) -> str | None:
    return None if v in ("m", "f") else f"gender must be 'm' or 'f', got '{v}'"


def _warp(v: str) -> str | None:
    x = ascii_float(v)
    if x is None:
        return f"expected a warp factor, got '{v}'"
    return None if 0.5 < x < 1.5 else f"warp factor must be in (0.5, 1.5), got '{v}'"


def _channel(v: str) -> str | None:
    ch = split_fields(v)[-1]
    return None if ch in ("A", "B", "1") else f"channel must be A or B, got '{ch}'"


def _segment(v: str) -> str | None:
    reco, start, end = split_fields(v)
    s, e = ascii_float(start), ascii_float(end)
    if s is None or e is None:
        return f"start and end times must be numbers, got '{start} {end}'"
    if not (math.isfinite(s) and math.isfinite(e)):
        return f"start and end times must be finite, got '{start} {end}'"
    if s < 0:
        return f"negative start time {start}"
    if e <= s:
        return f"end time {end} is not after start time {start}"
    return None


def _text(v: str) -> str | None:
    for sym in ("<s>", "</s>", "#0"):
        if sym in split_fields(v):
            return f"transcript contains the illegal symbol {sym}"
    return None


def _wav(v: str) -> str | None:
    return "do not use tilde (~) in wav.scp: fopen does not expand it" if v.startswith("~") else None


@dataclasses.dataclass(frozen=True)
class FileSpec:
    keyed_by: str
    min_fields: int
    max_fields: int | None = None
    check: Callable[[str], str | None] | None = None


# Every table Kaldi's data-dir scripts know about, in the order validate_data_dir.sh checks them.
FILES: dict[str, FileSpec] = {
    "utt2spk": FileSpec(UTT, 2, 2),
    "spk2utt": FileSpec(SPK, 2),
    "text": FileSpec(UTT, 1, check=_text),
    "wav.scp": FileSpec(RECO, 2, check=_wav),
    "segments": FileSpec(UTT, 4, 4, check=_segment),
    "reco2file_and_channel": FileSpec(RECO, 3, 3, check=_channel),
    "feats.scp": FileSpec(UTT, 2),
    "cmvn.scp": FileSpec(SPK, 2),
    "spk2gender": FileSpec(SPK, 2, 2, check=_gender),
    "spk2warp": FileSpec(SPK, 2, 2, check=_warp),
    "utt2warp": FileSpec(UTT, 2, 2, check=_warp),
    "vad.scp": FileSpec(UTT, 2),
    "utt2lang": FileSpec(UTT, 2, 2),
    "utt2uniq": FileSpec(UTT, 2, 2),
    "utt2dur": FileSpec(UTT, 2, 2, check=_positive_float),
    "utt2num_frames": FileSpec(UTT, 2, 2, check=_positive_int),
    "reco2dur": FileSpec(RECO, 2, 2, check=_positive_float),
}
# Copied verbatim by copy/subset/split/combine (Kaldi keeps them alongside the tables), as are
# the files of conf/ (make_mfcc.sh leaves the feature config there).
PLAIN_FILES = ("frame_shift",)
# Files whose utterance lists fix_data_dir intersects (Kaldi's filter_utts); the other
# utterance-keyed files are only filtered to the result.
_INTERSECT_UTT = ("utt2spk", "feats.scp", "text", "segments", "utt2lang")


class Segment(NamedTuple):
    recording: str
    start: float
    end: float


def _c_sorted(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=lambda k: k.encode())


def _warn(prog: str, msg: str) -> None:
    print(f"WARNING ({prog}): {msg}", file=sys.stderr)


class DataDir:
    """An in-memory data dir: ``tables[name] = {key: rest-of-line}`` plus the line each key came
    from (for error messages).  spk2utt is always derived from utt2spk when written."""

    def __init__(self, path: str, tables: dict[str, dict[str, str]],
                 lines: dict[str, dict[str, int]] | None = None,
                 plain: dict[str, bytes] | None = None, extra_kinds: dict[str, str] | None = None):
        self.path = path
        self.tables = tables
        self.lines = lines or {}
        self.plain = plain or {}
        # user-named extra tables (fix_data_dir --utt-extra-files ...): name -> UTT or SPK
        self.extra_kinds = dict(extra_kinds or {})

    # --- typed views -------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.tables

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def where(self, name: str, key: str) -> tuple[str, int | None]:
        """(path, line) of ``key`` in table ``name``, for error messages."""
        return self.file(name), self.lines.get(name, {}).get(key)

    @property
    def utt2spk(self) -> dict[str, str]:
        return self.tables["utt2spk"]

    @property
    def spk2utt(self) -> dict[str, list[str]]:
        """Speakers in C order, each with its utterances in C order (derived from utt2spk)."""
        out: dict[str, list[str]] = {}
        for utt in _c_sorted(self.utt2spk):
            out.setdefault(self.utt2spk[utt], []).append(utt)
        return {s: out[s] for s in _c_sorted(out)}

    @property
    def utts(self) -> list[str]:
        return _c_sorted(self.utt2spk)

    @property
    def speakers(self) -> list[str]:
        return _c_sorted(set(self.utt2spk.values()))

    @property
    def text(self) -> dict[str, str] | None:
        return self.tables.get("text")

    @property
    def wav_scp(self) -> dict[str, str] | None:
        return self.tables.get("wav.scp")

    @property
    def feats_scp(self) -> dict[str, str] | None:
        return self.tables.get("feats.scp")

    @property
    def cmvn_scp(self) -> dict[str, str] | None:
        return self.tables.get("cmvn.scp")

    @property
    def spk2gender(self) -> dict[str, str] | None:
        return self.tables.get("spk2gender")

    @property
    def segments(self) -> dict[str, Segment] | None:
        t = self.tables.get("segments")
        if t is None:
            return None
        out = {}
        for utt, rest in t.items():
            reco, start, end = split_fields(rest)
            out[utt] = Segment(reco, float(start), float(end))
        return out

    @property
    def utt2dur(self) -> dict[str, float] | None:
        t = self.tables.get("utt2dur")
        return None if t is None else {k: float(v) for k, v in t.items()}

    @property
    def utt2num_frames(self) -> dict[str, int] | None:
        t = self.tables.get("utt2num_frames")
        return None if t is None else {k: int(v) for k, v in t.items()}

    @property
    def recordings(self) -> list[str]:
        """Recording ids: those named in segments, or the utterances when there is none."""
        seg = self.tables.get("segments")
        if seg is None:
            return self.utts
        return _c_sorted({split_fields(rest)[0] for rest in seg.values()})

    def keyed_by(self, name: str) -> str:
        kind = self.extra_kinds.get(name) or FILES[name].keyed_by
        return UTT if kind == RECO and "segments" not in self.tables else kind

    # --- derived data dirs --------------------------------------------------------------------
    def restrict(self, utts: Iterable[str], path: str | None = None) -> "DataDir":
        """A data dir with only ``utts`` (which must be in utt2spk), their speakers and recordings."""
        keep = set(utts)
        spks = {self.utt2spk[u] for u in keep}
        recos = keep
        if "segments" in self.tables:
            recos = {split_fields(self.tables["segments"][u])[0] for u in keep if u in self.tables["segments"]}
        tables: dict[str, dict[str, str]] = {}
        for name, t in self.tables.items():
            if name == "spk2utt":
                continue
            kind = self.keyed_by(name)
            allowed = keep if kind == UTT else spks if kind == SPK else recos
            tables[name] = {k: v for k, v in t.items() if k in allowed}
        return DataDir(path or self.path, tables, plain=dict(self.plain), extra_kinds=self.extra_kinds)

    def partition(self, parts: list[list[str]]) -> list["DataDir"]:
        """One data dir per utterance list, in one pass over each table (split_data on a 300k
        utterance dir would otherwise filter every table once per part).  Speakers and
        recordings go to every part that has one of their utterances."""
        n = len(parts)
        utt_part = {u: k for k, us in enumerate(parts) for u in us}
        spk_parts: dict[str, set[int]] = {}
        for u, k in utt_part.items():
            spk_parts.setdefault(self.utt2spk[u], set()).add(k)
        reco_parts: dict[str, set[int]] = {}
        seg = self.tables.get("segments")
        if seg is not None:
            for u, k in utt_part.items():
                if u in seg:
                    reco_parts.setdefault(split_fields(seg[u])[0], set()).add(k)
        out = [DataDir(self.path, {}, plain=dict(self.plain), extra_kinds=self.extra_kinds) for _ in range(n)]
        for name, t in self.tables.items():
            if name == "spk2utt":
                continue
            dst = [o.tables.setdefault(name, {}) for o in out]
            kind = self.keyed_by(name)
            if kind == UTT:
                for key, v in t.items():
                    k = utt_part.get(key)
                    if k is not None:
                        dst[k][key] = v
            else:
                owners = spk_parts if kind == SPK else reco_parts
                for key, v in t.items():
                    for k in owners.get(key, ()):
                        dst[k][key] = v
        return out

    def utt_durations(self) -> dict[str, float]:
        """Length of each utterance, for --shortest: utt2num_frames (frames), else the frame
        counts of feats.scp (as Kaldi), else utt2dur, else segment lengths (seconds)."""
        if "utt2num_frames" in self.tables:
            return {k: float(v) for k, v in self.utt2num_frames.items()}
        if "feats.scp" in self.tables:
            # Kaldi's subset_data_dir.sh --shortest: feat-to-len scp:feats.scp when there is no
            # utt2num_frames (frame counts tie where durations do not; ties go by utterance-id)
            from pynnet.feat.tables import read_matrices
            try:
                return {u: float(len(x)) for u, x in read_matrices("scp:" + self.file("feats.scp"))}
            except (OSError, ValueError) as e:
                fail(f"cannot read the features to find the shortest utterances: {e}", self.file("feats.scp"))
        if "utt2dur" in self.tables:
            return dict(self.utt2dur)
        if "segments" in self.tables:
            return {u: s.end - s.start for u, s in self.segments.items()}
        fail("need utt2num_frames, feats.scp, utt2dur or segments to find the shortest utterances "
             "(run utils/data/get_utt2dur.sh)", self.path)


# --- reading ---------------------------------------------------------------------------------

def _read_fast(path: str, spec: FileSpec, sorted_keys: bool) -> tuple[dict[str, str], dict[str, int]] | None:
    """Read a well-formed table in a few C-level passes; None if anything at all looks wrong, and
    then the line-by-line reader finds the problem and reports its line (300k-line files are
    common, and the line-by-line reader is ~10x slower)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text or "\r" in text:
        return None
    rows = text.split("\n")
    if rows[-1] == "":
        rows.pop()
    # Where the text has no space but ASCII space and tab, str.split() splits as Kaldi does, in C;
    # otherwise (U+00A0 ...) Kaldi's rule line by line.
    odd_space = has_other_space(text)
    split = split_fields if odd_space else str.split
    if odd_space:
        parts = [[k, r] if r else [k] if k else [] for k, r in map(split_key, rows)]
    else:
        parts = [r.split(None, 1) for r in rows]
    if not all(parts):
        return None
    keys = [p[0] for p in parts]
    if spec.min_fields == 1:
        rests = [p[1].strip(FIELD_SEPS) if len(p) > 1 else "" for p in parts]
    else:
        if not all(len(p) == 2 for p in parts):
            return None
        rests = [p[1].strip(FIELD_SEPS) for p in parts]
        if spec.min_fields > 2 or spec.max_fields is not None:
            lo, hi = spec.min_fields - 1, (spec.max_fields or 10**9) - 1
            if spec.max_fields == 2:
                if any(" " in r or "\t" in r for r in rests):
                    return None
            elif not all(lo <= len(split(r)) <= hi for r in rests):
                return None
    if spec.check is _text:
        if "<s>" in text or "</s>" in text or "#0" in text:
            return None
    elif spec.check is _wav:
        if any(r.startswith("~") for r in rests):
            return None
    elif spec.check is not None and any(spec.check(r) is not None for r in rests):
        return None
    if sorted_keys:
        kb = [k.encode() for k in keys]
        if not all(map(bytes.__lt__, kb, kb[1:])):
            return None
    elif len(set(keys)) != len(keys):
        return None
    return dict(zip(keys, rests)), dict(zip(keys, range(1, len(keys) + 1)))


def _read_file(path: str, name: str, strict: bool, prog: str, spec: FileSpec | None = None, *,
               sorted_keys: bool | None = None) -> tuple[dict[str, str], dict[str, int]]:
    """``strict``: duplicate keys are errors (else dropped with a warning), and so are keys out of
    C order unless ``sorted_keys`` says otherwise."""
    spec = spec or FILES[name]
    sorted_keys = strict if sorted_keys is None else sorted_keys
    fast = _read_fast(path, spec, sorted_keys)
    if fast is not None:
        table, lines = fast
        if name == "reco2file_and_channel" and any(split_fields(v)[-1] == "1" for v in table.values()):
            _warn(prog, f"{path}: the channel should be marked A or B, not 1")
        return fast
    table: dict[str, str] = {}
    lines: dict[str, int] = {}
    prev: bytes | None = None
    for n, key, rest in read_table_lines(path, min_fields=spec.min_fields, max_fields=spec.max_fields):
        if spec.check is not None:
            msg = spec.check(rest)
            if msg is not None:
                fail(msg, path, n)
        if key in table:
            if strict:
                fail(f"duplicate key '{key}' (first on line {lines[key]})", path, n)
            _warn(prog, f"{path}:{n}: dropping duplicate key '{key}' (keeping line {lines[key]})")
            continue
        kb = key.encode()
        if sorted_keys and prev is not None and kb < prev:
            fail(f"not sorted (LC_ALL=C): '{key}' after '{prev.decode()}' (run utils/fix_data_dir.sh)",
                 path, n)
        prev = kb
        table[key] = rest
        lines[key] = n
    if name == "reco2file_and_channel" and any(split_fields(v)[-1] == "1" for v in table.values()):
        _warn(prog, f"{path}: the channel should be marked A or B, not 1")
    return table, lines


def load_data_dir(path: str | os.PathLike, *, strict: bool = True, prog: str = "datadir",
                  extra: dict[str, str] | None = None) -> DataDir:
    """Read every known table in ``path``.  ``strict``: unsorted files and duplicate keys are
    errors (validate); otherwise duplicates are dropped with a warning (fix).  Malformed lines
    are always errors.  Needs utt2spk (or, when not strict, spk2utt to derive it from).
    ``extra``: more tables to carry along, {file name: UTT or SPK} (Kaldi's --utt-extra-files)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        fail("no such data directory", path)
    tables: dict[str, dict[str, str]] = {}
    lines: dict[str, dict[str, int]] = {}
    for name in FILES:
        f = os.path.join(path, name)
        if os.path.exists(f):
            tables[name], lines[name] = _read_file(f, name, strict, prog)
    extra = _extra_tables(extra)
    for name, kind in extra.items():
        f = os.path.join(path, name)
        if os.path.exists(f):
            tables[name], lines[name] = _read_file(f, name, strict, prog, FileSpec(kind, 1))
    if "utt2spk" not in tables:
        if strict or "spk2utt" not in tables:
            fail("no such file (every data dir needs utt2spk)", os.path.join(path, "utt2spk"))
        tables["utt2spk"], lines["utt2spk"] = _utt2spk_from_spk2utt(
            tables["spk2utt"], lines["spk2utt"], os.path.join(path, "spk2utt"))
    plain = {}
    conf = os.path.join(path, "conf")
    conf_files = [f"conf/{n}" for n in sorted(os.listdir(conf))] if os.path.isdir(conf) else []
    for name in list(PLAIN_FILES) + conf_files:
        f = os.path.join(path, name)
        if os.path.isfile(f):
            with open(f, "rb") as fh:
                plain[name] = fh.read()
    return DataDir(path, tables, lines, plain, extra)


# Optional standard tables that Kaldi's scripts also take as extra files (recipes pass
# `combine_data.sh --extra-files utt2uniq` or "utt2num_frames", and Kaldi's fix_data_dir.sh
# filters its own list and then the extras, so naming one twice is harmless): named as an extra
# of the kind they are keyed by, they are dropped from the extras and handled as standard tables.
# The defining tables (utt2spk, spk2utt, text, feats.scp, wav.scp, segments) and the recording
# tables are still refused as extras.
OPTIONAL_STANDARD = {n: FILES[n].keyed_by for n in ("utt2lang", "utt2uniq", "utt2dur", "utt2num_frames",
                                                      "utt2warp", "vad.scp", "cmvn.scp", "spk2gender",
                                                      "spk2warp")}
_KIND_WORDS = {UTT: "utterance", SPK: "speaker", RECO: "recording"}


def _extra_tables(extra: dict[str, str] | None) -> dict[str, str]:
    """The user-named extra tables {name: UTT or SPK} to carry besides the standard ones: names
    of optional standard tables of the same kind are dropped (see OPTIONAL_STANDARD); any other
    standard name, a path, or a standard table named with the wrong kind is an error."""
    out: dict[str, str] = {}
    for name, kind in (extra or {}).items():
        if "/" in name or kind not in (UTT, SPK):
            fail(f"cannot use '{name}' as an extra {kind}-keyed file")
        if name in FILES:
            if OPTIONAL_STANDARD.get(name) == kind:
                continue
            if FILES[name].keyed_by != kind:
                fail(f"cannot use '{name}' as an extra {kind}-keyed file: it is a standard file keyed by "
                     f"{_KIND_WORDS[FILES[name].keyed_by]}")
            fail(f"cannot use '{name}' as an extra {kind}-keyed file: it is one of the defining files of a "
                 f"data dir, always handled (leave it out)")
        out[name] = kind
    return out


def read_data_file(data_dir: str | os.PathLike, name: str, *, required: bool = True,
                   check_sorted: bool = False, prog: str = "datadir") -> dict[str, str] | None:
    """One table of a data dir, e.g. ``read_data_file(d, "utt2spk")`` -> {utt: spk}, in file
    order, checked as ``load_data_dir`` checks it (fields and values as FILES says; duplicate keys
    are errors, and so are keys out of C order with ``check_sorted``).  For programs that need a
    table or two of a data dir, not all of it.  A missing file is an error, or None when not
    ``required``."""
    if name not in FILES:
        raise ValueError(f"not a data-dir table: {name}")
    path = os.path.join(os.fspath(data_dir), name)
    if not os.path.exists(path):
        if required:
            fail("no such file", path)
        return None
    table, _ = _read_file(path, name, True, prog, sorted_keys=check_sorted)
    return table


def _utt2spk_from_spk2utt(spk2utt: dict[str, str], lines: dict[str, int], path: str
                          ) -> tuple[dict[str, str], dict[str, int]]:
    u2s: dict[str, str] = {}
    u2l: dict[str, int] = {}
    for spk, rest in spk2utt.items():
        for utt in split_fields(rest):
            if utt in u2s:
                fail(f"utterance '{utt}' is listed under speakers '{u2s[utt]}' and '{spk}'", path, lines[spk])
            u2s[utt] = spk
            u2l[utt] = lines[spk]
    return u2s, u2l


# --- validation ------------------------------------------------------------------------------

def _check_same_keys(dd: DataDir, name: str, ref_name: str, ref_keys: dict[str, object] | list[str],
                     what: str, ref_where: Callable[[str], tuple[str, int | None]] | None = None) -> None:
    """Table ``name`` must have exactly the keys of the reference; report the first difference
    with its file and line."""
    table = dd.tables[name]
    ref = set(ref_keys)
    if table.keys() == ref:
        return
    for key in table:
        if key not in ref:
            fail(f"{what} '{key}' is not in {ref_name}", *dd.where(name, key))
    for key in ref_keys:
        if key not in table:
            path, line = ref_where(key) if ref_where else dd.where(ref_name, key)
            fail(f"{what} '{key}' has no entry in {name}", path, line)


def _diagnose_spk2utt(dd: DataDir, expected: dict[str, list[str]]) -> None:
    """spk2utt disagrees with utt2spk: report the first disagreement with its file and line."""
    u2s = dd.utt2spk
    seen: set[str] = set()
    for spk, rest in dd.tables["spk2utt"].items():
        path, line = dd.where("spk2utt", spk)
        for utt in split_fields(rest):
            if utt in seen:
                fail(f"utterance '{utt}' listed twice", path, line)
            seen.add(utt)
            if utt not in u2s:
                fail(f"utterance '{utt}' is not in utt2spk", path, line)
            if u2s[utt] != spk:
                fail(f"utterance '{utt}' is listed under speaker '{spk}' but utt2spk says '{u2s[utt]}'", path, line)
    for utt, spk in u2s.items():
        if utt not in seen:
            fail(f"utterance '{utt}' of speaker '{spk}' is missing from spk2utt", *dd.where("utt2spk", utt))
    for spk, rest in dd.tables["spk2utt"].items():
        if split_fields(rest) != expected[spk]:
            fail(f"utterances of speaker '{spk}' are not in the order of utt2spk", *dd.where("spk2utt", spk))
    fail("spk2utt does not match utt2spk", dd.file("spk2utt"))  # not reached: one check above fires


def _printable(s: str) -> bool:
    """No character outside [:print:] and [:space:] (what Kaldi's validate_data_dir.sh greps for)."""
    return s.isprintable() or all(c.isprintable() or c.isspace() for c in s)


def validate(dd: DataDir, *, no_feats: bool = False, no_text: bool = False, no_wav: bool = False,
             no_spk_sort: bool = False, non_print: bool = False) -> list[str]:
    """Check a strictly loaded data dir as Kaldi's validate_data_dir.sh does.  Raises on the
    first error; returns the warnings (one speaker, speaker-ids that are not prefixes, ...)."""
    warnings: list[str] = []
    u2s = dd.utt2spk
    if "spk2utt" not in dd.tables:
        fail("no such file", dd.file("spk2utt"))

    # utt2spk must also be sorted when sorted on speaker-id (Kaldi: `sort -k2 utt2spk | cmp`),
    # else splitting by speaker breaks; speaker-id prefixes of utterance-ids guarantee it.
    # With unique C-sorted utterance-ids that is: the speaker column never decreases (a line
    # "utt spk" sorts as its utt does, since no id holds a byte below ' ').
    if not no_spk_sort:
        utt_list = list(u2s)
        sb = [s.encode() for s in u2s.values()]
        ok = list(map(bytes.__le__, sb, sb[1:]))
        if not all(ok):
            i = ok.index(False) + 1
            utt = utt_list[i]
            fail(f"utt2spk is not sorted when sorted on speaker-id: '{utt} {u2s[utt]}' comes after speaker "
                 f"'{sb[i - 1].decode()}' (make speaker-ids prefixes of utterance-ids, or use --no-spk-sort)",
                 *dd.where("utt2spk", utt))
    not_prefix = [u for u, s in u2s.items() if not u.startswith(s)]
    if not_prefix:
        u = not_prefix[0]
        warnings.append(f"{len(not_prefix)} of {len(u2s)} utterance-ids do not start with their speaker-id "
                        f"(e.g. '{u}' of speaker '{u2s[u]}'); Kaldi recommends speaker-id prefixes")

    # spk2utt must be exactly what utt2spk_to_spk2utt.pl makes of utt2spk.
    expected: dict[str, list[str]] = {}
    for utt, spk in u2s.items():
        expected.setdefault(spk, []).append(utt)
    s2u = dd.tables["spk2utt"]
    if s2u.keys() != expected.keys() or any(split_fields(rest) != expected[spk] for spk, rest in s2u.items()):
        _diagnose_spk2utt(dd, expected)
    if len(s2u) == 1:
        warnings.append("you have only one speaker; this is probably a bad idea (see 'bold' in "
                        "http://kaldi-asr.org/doc/data_prep.html)")


    utts = list(u2s)
    spks = list(dd.tables["spk2utt"])
    for name, flag, opt in (("text", no_text, "--no-text"), ("wav.scp", no_wav, "--no-wav"),
                            ("feats.scp", no_feats, "--no-feats")):
        if name not in dd.tables and not flag:
            fail(f"no such file (if this is by design, specify {opt})", dd.file(name))
    if "segments" in dd.tables and "wav.scp" not in dd.tables:
        fail("segments file exists but there is no wav.scp", dd.file("segments"))

    if "text" in dd.tables and not non_print:
        bad = [u for u, rest in dd.tables["text"].items() if not (_printable(u) and _printable(rest))]
        if bad:
            fail(f"text contains {len(bad)} lines with non-printable characters (e.g. utterance '{bad[0]}'; "
                 f"--non-print allows them)", *dd.where("text", bad[0]))
    for name in ("text", "feats.scp", "vad.scp", "utt2lang", "utt2uniq", "utt2warp", "utt2dur",
                 "utt2num_frames", "segments"):
        if name in dd.tables:
            _check_same_keys(dd, name, "utt2spk", utts, "utterance")
    if "wav.scp" in dd.tables:
        recos = dd.recordings
        what = "recording" if "segments" in dd.tables else "utterance"
        if "segments" in dd.tables:
            first_seg: dict[str, str] = {}
            for utt, rest in dd.tables["segments"].items():
                first_seg.setdefault(split_fields(rest)[0], utt)
            seg_where = lambda reco: dd.where("segments", first_seg[reco])  # noqa: E731
            for utt, rest in dd.tables["segments"].items():
                reco = split_fields(rest)[0]
                if reco not in dd.tables["wav.scp"]:
                    fail(f"recording '{reco}' is not in wav.scp", *dd.where("segments", utt))
            for reco in dd.tables["wav.scp"]:
                if reco not in first_seg:
                    fail(f"recording '{reco}' has no segments", *dd.where("wav.scp", reco))
            ref_name = "segments"
        else:
            seg_where = None
            ref_name = "utt2spk"
            _check_same_keys(dd, "wav.scp", "utt2spk", utts, "utterance")
        for name in ("reco2file_and_channel", "reco2dur"):
            if name in dd.tables:
                _check_same_keys(dd, name, ref_name, recos, what, seg_where)
    for name in ("cmvn.scp", "spk2gender", "spk2warp"):
        if name in dd.tables:
            _check_same_keys(dd, name, "spk2utt", spks, "speaker")
    return warnings


def validate_data_dir(path: str | os.PathLike, **opts: bool) -> list[str]:
    """Load ``path`` strictly and validate it; returns the warnings."""
    return validate(load_data_dir(path, strict=True, prog="validate_data_dir"), **opts)


# --- writing ---------------------------------------------------------------------------------

def write_data_dir(dd: DataDir, dest: str | os.PathLike) -> None:
    """Write all tables of ``dd`` (C-sorted, spk2utt from utt2spk) into ``dest``.  Each file is
    written atomically; known data-dir files in ``dest`` that ``dd`` lacks are removed, so no
    stale feats.scp or segments survive from an earlier run."""
    dest = os.fspath(dest)
    os.makedirs(dest, exist_ok=True)
    out = {name: t for name, t in dd.tables.items() if name != "spk2utt"}
    for name, t in out.items():
        _write_sorted(os.path.join(dest, name), t)
    with atomic_write(os.path.join(dest, "spk2utt")) as f:
        for spk, us in dd.spk2utt.items():
            f.write(f"{spk} {' '.join(us)}\n")
    for name, data in dd.plain.items():
        with atomic_write(os.path.join(dest, name), "wb") as f:
            f.write(data)
    for name in list(FILES) + list(PLAIN_FILES):
        if name not in out and name != "spk2utt" and name not in dd.plain:
            p = os.path.join(dest, name)
            if os.path.isfile(p):
                os.unlink(p)


def _write_sorted(path: str, table: dict[str, str]) -> None:
    with atomic_write(path) as f:
        for k in _c_sorted(table):
            v = table[k]
            f.write(f"{k} {v}\n" if v != "" else f"{k}\n")


# --- fix -------------------------------------------------------------------------------------

def fix(dd: DataDir, prog: str = "fix_data_dir") -> tuple[DataDir, list[str]]:
    """Kaldi's fix_data_dir.sh in memory: keep the utterances present in utt2spk, text,
    feats.scp, segments (or wav.scp without segments) and utt2lang, and with a positive value in
    utt2dur and utt2num_frames where those exist; keep speakers that have
    utterances (and cmvn/spk2gender entries, when those files exist); keep recordings that have
    segments and audio.  Returns the fixed dir and notes for the user."""
    notes: list[str] = []
    t = dd.tables
    n_before = len(t["utt2spk"])
    seg = t.get("segments")
    # Recordings come from segments and wav.scp only: reco2dur and reco2file_and_channel are
    # filtered to them, never decide them (Kaldi's filter_recordings).
    recos: set[str] | None = None
    if seg is not None:
        recos = {split_fields(v)[0] for v in seg.values()}
        if "wav.scp" in t:
            recos &= set(t["wav.scp"])
    utts = set(t["utt2spk"])
    for name in _INTERSECT_UTT:
        if name in t:
            utts &= set(t[name])
    for name in ("utt2dur", "utt2num_frames"):   # (Kaldi: those with a duration or length > 0)
        if name in t:
            utts &= {u for u, v in t[name].items() if (ascii_float(split_fields(v)[0] if v else "") or 0.0) > 0.0}
    if seg is None:
        if "wav.scp" in t:
            utts &= set(t["wav.scp"])
    else:
        utts = {u for u in utts if split_fields(seg[u])[0] in recos}
    # Speakers without cmvn.scp / spk2gender entries are dropped with their utterances (Kaldi).
    spks = {t["utt2spk"][u] for u in utts}
    for name in ("cmvn.scp", "spk2gender", "spk2warp"):
        if name in t:
            spks &= set(t[name])
    utts = {u for u in utts if t["utt2spk"][u] in spks}
    if not utts:
        fail("no utterances remained: not proceeding further (are the utterance-ids in utt2spk, "
             "text, feats.scp and wav.scp/segments the same?)", dd.path)
    out = dd.restrict(utts)
    for name in ("utt2dur", "utt2num_frames", "utt2uniq", "vad.scp", "utt2warp"):
        if name in out.tables and len(out.tables[name]) < len(utts):
            notes.append(f"{name} lacks {len(utts) - len(out.tables[name])} of the kept utterances; "
                         f"re-create it")
    n_recos = len(out.recordings)
    for name in ("reco2dur", "reco2file_and_channel"):
        if name in out.tables and len(out.tables[name]) < n_recos:
            what = "recordings" if seg is not None else "utterances"
            notes.append(f"{name} lacks {n_recos - len(out.tables[name])} of the kept {what}; re-create it")
    # The one thing we cannot fix: speaker-ids that sort differently from utterance-ids.
    u2s = out.utt2spk
    order = out.utts
    by_spk = sorted(order, key=lambda u: (u2s[u].encode(), f"{u} {u2s[u]}".encode()))
    if by_spk != order:
        bad = next(u for u, v in zip(order, by_spk) if u != v)
        fail(f"utt2spk is not sorted when sorted on speaker-id (first at utterance '{bad}' of speaker "
             f"'{u2s[bad]}'): fix this yourself by making speaker-ids prefixes of utterance-ids",
             *dd.where("utt2spk", bad))
    notes.insert(0, f"kept {len(utts)} utterances out of {n_before}")
    return out, notes


def fix_data_dir(path: str | os.PathLike, utt_extra_files: Iterable[str] = (),
                 spk_extra_files: Iterable[str] = ()) -> list[str]:
    """Fix ``path`` in place, first copying every table to ``path/.backup/`` as Kaldi does.
    The extra files (keyed by utterance / speaker) are filtered to what is kept."""
    path = os.fspath(path)
    extra = {**{n: UTT for n in utt_extra_files}, **{n: SPK for n in spk_extra_files}}
    dd = load_data_dir(path, strict=False, prog="fix_data_dir", extra=extra)
    fixed, notes = fix(dd)
    backup = os.path.join(path, ".backup")
    os.makedirs(backup, exist_ok=True)
    for name in list(FILES) + list(dd.extra_kinds):
        src = os.path.join(path, name)
        if os.path.isfile(src):
            shutil.copy2(src, os.path.join(backup, name))
    write_data_dir(fixed, path)
    notes.append(f"old files are kept in {backup}")
    return notes


# --- subset ----------------------------------------------------------------------------------

def evenly_spaced(items: list[str], n: int) -> list[str]:
    """``n`` of ``items`` spread through the list, exactly the ones Kaldi's subset_scp.pl picks
    (its default mode): halve the range [start, end) and the count needed (the first half gets
    ``floor(need/2)``, the second the rest) until a range is one item long; that item is kept if
    one is still needed.  Ranges needing none or all of their items are settled at once (the
    same choice, without visiting every item)."""
    m = len(items)
    if not 0 <= n <= m:
        raise ValueError(f"cannot pick {n} of {m} items")
    out: list[str] = []
    stack = [(0, m, n)]
    while stack:
        start, end, need = stack.pop()
        if need == 0:
            continue
        if need == end - start:
            out.extend(items[start:end])
            continue
        half = (end - start) // 2
        # second half pushed first: the first half is visited (and output) first
        stack.append((start + half, end, need - need // 2))
        stack.append((start, start + half, need // 2))
    return out


def per_speaker_spaced(utts: list[str], n: int) -> list[str]:
    """Up to ``n`` of one speaker's utterances, as Kaldi's subset_data_dir.sh --per-spk picks them:
    every ``skip``-th from the first, ``skip`` being the largest stride (at least 1) that still
    gives ``n`` (so all of them when the speaker has ``n`` or fewer)."""
    skip = max(1, len(utts) // n)
    return utts[:n * skip:skip]


def perl_shuffle(lines: list[str], seed: int = 0) -> list[str]:
    """``lines`` in the order Kaldi's utils/shuffle_list.pl gives them (``--srand seed``; it seeds
    0 by default): perl's rand() (perl's own drand48 since 5.20, seeded ``(seed << 16) + 0x330E``,
    the seed taken modulo 2**32) draws a key per line in input order, and the lines are sorted by
    the keys *as strings* (perl's ``cmp`` on its 15-significant-digit "%.15g" form), stably."""
    x = ((seed & 0xFFFFFFFF) << 16) + 0x330E
    keyed = []
    for line in lines:
        x = (0x5DEECE66D * x + 0xB) & 0xFFFFFFFFFFFF
        keyed.append(("%.15g" % math.ldexp(x, -48), line))
    keyed.sort(key=lambda kv: kv[0].encode())
    return [line for _, line in keyed]


def subset(dd: DataDir, *, first: int | None = None, last: int | None = None,
           shortest: int | None = None, random_n: int | None = None, evenly: int | None = None,
           speakers: int | None = None, per_spk: int | None = None, utt_list: str | None = None,
           spk_list: str | None = None, seed: int = 0) -> DataDir:
    """Select utterances by exactly one criterion (Kaldi subset_data_dir.sh modes)."""
    modes = {k: v for k, v in dict(first=first, last=last, shortest=shortest, random_n=random_n,
                                   evenly=evenly, speakers=speakers, per_spk=per_spk,
                                   utt_list=utt_list, spk_list=spk_list).items() if v is not None}
    if len(modes) != 1:
        fail(f"subset needs exactly one selection mode, got {sorted(modes) or 'none'}")
    (mode, arg), = modes.items()
    utts = dd.utts
    if mode in ("first", "last", "shortest", "random_n", "evenly", "speakers", "per_spk"):
        # Kaldi's subset_data_dir.sh refuses <num-utt> above the utterance count in every mode
        if not isinstance(arg, int) or arg <= 0:
            fail(f"number of utterances must be a positive integer, got '{arg}'")
        if arg > len(utts):
            fail(f"cannot subset to {arg} utterances: the data dir has only {len(utts)}", dd.file("utt2spk"))
    if mode == "first":
        keep = utts[:arg]
    elif mode == "last":
        keep = utts[-arg:]
    elif mode == "evenly":
        keep = evenly_spaced(utts, arg)
    elif mode == "random_n":
        keep = random.Random(seed).sample(utts, arg)
    elif mode == "shortest":
        # Kaldi: `sort -n -k2` of the lengths (ties: by utterance-id, C order), the first <num>
        dur = dd.utt_durations()
        missing = [u for u in utts if u not in dur]
        if missing:
            fail(f"utterance '{missing[0]}' has no length (incomplete utt2dur/utt2num_frames/segments)", dd.path)
        keep = sorted(utts, key=lambda u: (dur[u], u.encode()))[:arg]
    elif mode == "per_spk":
        keep = [u for us in dd.spk2utt.values() for u in per_speaker_spaced(us, arg)]
    elif mode == "speakers":
        # Kaldi: shuffle_list.pl (seed 0; --seed S = its --srand S) on spk2utt, then whole speakers
        # in that order while fewer than <num> utterances are taken.
        s2u = dd.spk2utt
        spks = perl_shuffle(list(s2u), seed)
        keep, total = [], 0
        for s in spks:
            if total >= arg:
                break
            keep.extend(s2u[s])
            total += len(s2u[s])
    elif mode == "utt_list":
        wanted = _read_id_list(arg)
        keep = [u for u in wanted if u in dd.utt2spk]
        if len(keep) < len(wanted):
            miss = [u for u in wanted if u not in dd.utt2spk]
            _warn("subset_data_dir", f"{len(miss)} of {len(wanted)} utterances in {arg} are not in "
                                     f"{dd.path} (e.g. '{miss[0]}')")
    else:  # spk_list
        wanted = _read_id_list(arg)
        s2u = dd.spk2utt
        keep = [u for s in wanted if s in s2u for u in s2u[s]]
        miss = [s for s in wanted if s not in s2u]
        if miss:
            _warn("subset_data_dir", f"{len(miss)} of {len(wanted)} speakers in {arg} are not in "
                                     f"{dd.path} (e.g. '{miss[0]}')")
    if not keep:
        fail("the subset is empty", dd.path)
    return dd.restrict(keep)


def split_tr_cv(dd: DataDir, cv_spk_percent: float = 10.0, seed: int = 777,
                cv_spk_list: str | None = None) -> tuple[DataDir, DataDir]:
    """(training, CV) data dirs by speaker, as Kaldi's utils/nnet/subset_data_tr_cv.sh (nnet1):
    the first int(cv_spk_percent * speakers / 100) speakers in shuffle_list.pl's order (``--srand
    seed``) hold out, the rest train; or ``cv_spk_list`` names the held-out speakers."""
    spks = list(dd.spk2utt)
    if cv_spk_list is not None:
        cv = _read_id_list(cv_spk_list)
        miss = [s for s in cv if s not in dd.spk2utt]
        if miss:
            fail(f"{len(miss)} of its {len(cv)} speakers are not in {dd.path} (e.g. '{miss[0]}')", cv_spk_list)
        held = set(cv)
        trn = [s for s in spks if s not in held]
    else:
        order = perl_shuffle(spks, seed)
        n_cv = int(cv_spk_percent * len(spks) / 100)
        cv, trn = order[:n_cv], order[n_cv:]
    if not cv or not trn:
        fail(f"{len(cv)} CV and {len(trn)} training speakers of {len(spks)}: both sets need one "
             f"(--cv-spk-percent {cv_spk_percent:g})", dd.file("spk2utt"))
    s2u = dd.spk2utt
    pick = lambda ss: dd.restrict([u for s in sorted(ss, key=str.encode) for u in s2u[s]])  # noqa: E731
    return pick(trn), pick(cv)


def remove_dup_utts(dd: DataDir, max_count: int) -> DataDir:
    """Keep at most ``max_count`` utterances with the same transcript (in utterance order), as
    Kaldi's utils/data/remove_dup_utts.sh does (e.g. the many "uh-huh"s of Switchboard)."""
    if max_count <= 0:
        fail(f"<max-count> must be positive, got {max_count}")
    if dd.text is None:
        fail("no such file (needed to find duplicate transcripts)", dd.file("text"))
    count: dict[str, int] = {}
    keep = []
    for utt in dd.utts:
        if utt not in dd.text:
            fail(f"utterance '{utt}' has no entry in text", *dd.where("utt2spk", utt))
        words = " ".join(split_fields(dd.text[utt]))
        count[words] = count.get(words, 0) + 1
        if count[words] <= max_count:
            keep.append(utt)
    return dd.restrict(keep)


def _read_id_list(path: str) -> list[str]:
    """First field of each line of a list file (utterance or speaker ids)."""
    seen: dict[str, int] = {}
    for n, key, _ in read_table_lines(path, min_fields=1):
        if key in seen:
            fail(f"duplicate id '{key}' (first on line {seen[key]})", path, n)
        seen[key] = n
    return list(seen)


# --- split -----------------------------------------------------------------------------------

def split_line_counts(m: int, n: int) -> list[int]:
    """Lines in each of ``n`` parts of ``m`` lines, Kaldi's split_scp.pl without --utt2spk: the
    first ``m mod n`` parts get one line more."""
    if m < n:
        raise ValueError(f"{m} lines cannot make {n} non-empty parts")
    q, r = divmod(m, n)
    return [q + 1 if k < r else q for k in range(n)]


def split_counts(sizes: list[int], n: int) -> list[int]:
    """Cut a sequence of groups (speakers; ``sizes`` = their utterance counts) into ``n``
    contiguous parts exactly as Kaldi's split_scp.pl --utt2spk does; returns the number of groups
    in each part.

    Group i starts in part floor(i*n/G) (G groups), so the parts have equal numbers of groups.
    Then, until a whole sweep changes nothing, for each part k in turn: its last group moves to
    part k+1 if that makes |count(k+1) - count(k)| strictly smaller, then its first group moves to
    part k-1 on the same test (counts in utterances).  Each move lowers the sum of squared
    deviations from the mean, so this ends; a part with one group can never lose it."""
    g = len(sizes)
    if g < n:
        raise ValueError(f"{g} groups cannot make {n} non-empty parts")
    # part k = groups [bound[k], bound[k+1]); floor(i*n/g) >= k  <=>  i >= ceil(k*g/n)
    bound = [-(-k * g // n) for k in range(n + 1)]
    tot = [sum(sizes[bound[k]:bound[k + 1]]) for k in range(n)]
    changed = True
    while changed:
        changed = False
        for k in range(n):
            if k < n - 1 and bound[k + 1] > bound[k]:
                c = sizes[bound[k + 1] - 1]
                if abs((tot[k + 1] + c) - (tot[k] - c)) < abs(tot[k + 1] - tot[k]):
                    tot[k + 1] += c
                    tot[k] -= c
                    bound[k + 1] -= 1
                    changed = True
            if k > 0 and bound[k + 1] > bound[k]:
                c = sizes[bound[k]]
                if abs((tot[k] - c) - (tot[k - 1] + c)) < abs(tot[k] - tot[k - 1]):
                    tot[k - 1] += c
                    tot[k] -= c
                    bound[k] += 1
                    changed = True
    counts = [bound[k + 1] - bound[k] for k in range(n)]
    if min(counts) == 0:  # Kaldi: "producing empty .scp file"; cannot happen (see above)
        raise ValueError(f"a part came out empty splitting {g} groups into {n} parts")
    return counts


def speaker_groups(utts: Iterable[str], utt2spk: dict[str, str]) -> dict[str, list[str]]:
    """Utterances by speaker, speakers in order of first appearance, each speaker's utterances in
    input order (split_scp.pl --utt2spk's grouping: a speaker's lines need not be adjacent)."""
    out: dict[str, list[str]] = {}
    for u in utts:
        out.setdefault(utt2spk[u], []).append(u)
    return out


def split_by_speaker(dd: DataDir, n: int) -> list[list[str]]:
    """Utterance lists of ``n`` parts, no speaker in two parts: exactly Kaldi's split_data.sh
    (split_scp.pl --utt2spk=utt2spk on utt2spk, whose lines are in utterance order)."""
    groups = speaker_groups(dd.utts, dd.utt2spk)
    spks = list(groups)
    if len(spks) < n:
        fail(f"cannot split into {n} parts: there are only {len(spks)} speakers (use --per-utt, or fewer jobs)",
             dd.file("spk2utt"))
    counts = split_counts([len(groups[s]) for s in spks], n)
    out, i = [], 0
    for c in counts:
        out.append([u for s in spks[i:i + c] for u in groups[s]])
        i += c
    return out


def split_by_utt(dd: DataDir, n: int) -> list[list[str]]:
    """Kaldi's split_data.sh --per-utt: utt2spk's lines cut into ``n`` runs (split_scp.pl)."""
    utts = dd.utts
    if len(utts) < n:
        fail(f"cannot split into {n} parts: there are only {len(utts)} utterances", dd.file("utt2spk"))
    out, i = [], 0
    for c in split_line_counts(len(utts), n):
        out.append(utts[i:i + c])
        i += c
    return out


def _split_is_current(path: str, final: str, n: int) -> bool:
    """Kaldi split_data.sh's test: the split has parts 1..n and no table of the data dir is newer
    than its copy in part 1 (then splitting again would write the same files)."""
    if not all(os.path.isdir(os.path.join(final, str(k))) for k in range(1, n + 1)) or \
            os.path.isdir(os.path.join(final, str(n + 1))):
        return False
    for name in FILES:
        src, dst = os.path.join(path, name), os.path.join(final, "1", name)
        if os.path.exists(src) and (not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(src)):
            return False
    return True


def split_data_dir(path: str | os.PathLike, n: int, per_utt: bool = False, force: bool = False) -> str:
    """Write ``<path>/split<n>[utt]/<1..n>/`` (Kaldi split_data.sh); returns the split dir.
    Does nothing if the split is newer than the data (unless ``force``).  Concurrent calls (two
    decodes of one test set) are serialised by a lock, and a new split replaces an old one only
    when complete."""
    import fcntl

    path = os.fspath(path)
    if n <= 0:
        fail(f"number of splits must be positive, got {n}")
    if not os.path.isdir(path):
        fail("no such data directory", path)
    final = os.path.join(path, f"split{n}{'utt' if per_utt else ''}")
    with open(os.path.join(path, ".split_data.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and _split_is_current(path, final, n):
            return final
        dd = load_data_dir(path, strict=True, prog="split_data")
        parts = split_by_utt(dd, n) if per_utt else split_by_speaker(dd, n)
        tmp = make_temp_dir(path, f".split{n}.")
        try:
            for k, part in enumerate(dd.partition(parts), 1):
                write_data_dir(part, os.path.join(tmp, str(k)))
            if os.path.isdir(final):
                old = tempfile.mkdtemp(dir=path, prefix=f".old_split{n}.")
                os.rename(final, os.path.join(old, "x"))
                os.rename(tmp, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


# --- combine and copy ------------------------------------------------------------------------

def combine(dirs: list[DataDir], dest: str, prog: str = "combine_data") -> tuple[DataDir, list[str]]:
    """Union of data dirs (Kaldi combine_data.sh).  A table is kept only if every source has it,
    except segments and utt2uniq: sources without segments get whole-recording segments from
    utt2dur, and when some source has utt2uniq, those without it get the identity map (each
    utterance its own original, as Kaldi's `awk '{print $1, $1}' utt2spk`).  An utterance in two
    sources is an error."""
    notes: list[str] = []
    if not dirs:
        fail("nothing to combine")
    if any(d.has("segments") for d in dirs):
        with_seg = []
        for d in dirs:
            if not d.has("segments"):
                if not d.has("utt2dur"):
                    fail("has no segments file and no utt2dur to make one from (run utils/data/get_utt2dur.sh)", d.path)
                d = DataDir(d.path, dict(d.tables), d.lines, d.plain, d.extra_kinds)
                d.tables["segments"] = {u: f"{u} 0 {v}" for u, v in d.tables["utt2dur"].items()}
                notes.append(f"made segments for {d.path} from its utt2dur")
            with_seg.append(d)
        dirs = with_seg
    if any(d.has("utt2uniq") for d in dirs):
        with_uniq = []
        for d in dirs:
            if not d.has("utt2uniq"):
                d = DataDir(d.path, dict(d.tables), d.lines, d.plain, d.extra_kinds)
                d.tables["utt2uniq"] = {u: u for u in d.utt2spk}
                notes.append(f"made utt2uniq for {d.path}: each of its utterances is its own original")
            with_uniq.append(d)
        dirs = with_uniq
    extra_kinds = {k: v for d in dirs for k, v in d.extra_kinds.items()}
    names = [n for n in list(FILES) + list(extra_kinds) if n != "spk2utt" and any(d.has(n) for d in dirs)]
    tables: dict[str, dict[str, str]] = {}
    origin: dict[str, dict[str, DataDir]] = {}
    for name in names:
        have = [d for d in dirs if d.has(name)]
        if len(have) < len(dirs):
            notes.append(f"not combining {name}: {len(dirs) - len(have)} of {len(dirs)} sources lack it")
            continue
        t: dict[str, str] = {}
        o: dict[str, DataDir] = {}
        for d in dirs:
            for k, v in d.tables[name].items():
                if k in t:
                    kind = d.keyed_by(name)
                    if kind == UTT:
                        fail(f"utterance '{k}' is also in {o[k].path}", *d.where(name, k))
                    if t[k] != v and kind == RECO:
                        fail(f"recording '{k}' is also in {o[k].path} with a different value", *d.where(name, k))
                    if t[k] != v:
                        notes.append(f"speaker '{k}' has different {name} entries; keeping the one from {o[k].path}")
                    continue
                t[k] = v
                o[k] = d
        tables[name] = t
        origin[name] = o
    plain = {}
    for name in PLAIN_FILES:
        vals = {d.plain.get(name) for d in dirs}
        if len(vals) == 1 and None not in vals:
            plain[name] = vals.pop()
    return DataDir(dest, tables, plain=plain, extra_kinds=extra_kinds), notes


def copy_with_prefix(dd: DataDir, dest: str, utt_prefix: str = "", utt_suffix: str = "",
                     spk_prefix: str = "", spk_suffix: str = "") -> DataDir:
    """Kaldi copy_data_dir.sh: rename utterances and speakers; recording ids stay unless the
    recordings are the utterances (no segments)."""
    umap = lambda u: f"{utt_prefix}{u}{utt_suffix}"  # noqa: E731
    smap = lambda s: f"{spk_prefix}{s}{spk_suffix}"  # noqa: E731
    tables: dict[str, dict[str, str]] = {}
    for name, t in dd.tables.items():
        if name == "spk2utt":
            continue
        kind = dd.keyed_by(name)
        f = umap if kind == UTT else smap if kind == SPK else (lambda r: r)
        new = {f(k): v for k, v in t.items()}
        if name == "utt2spk":
            new = {umap(k): smap(v) for k, v in t.items()}
        tables[name] = new
    return DataDir(dest, tables, plain=dict(dd.plain), extra_kinds=dd.extra_kinds)


# --- scp helpers (split_scp.pl, filter_scp.pl, utt2spk <-> spk2utt) --------------------------

def utt2spk_to_spk2utt(lines: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Speakers in order of first appearance, utterances in input order (utt2spk_to_spk2utt.pl)."""
    out: dict[str, list[str]] = {}
    for utt, spk in lines:
        out.setdefault(spk, []).append(utt)
    return list(out.items())


def spk2utt_to_utt2spk(lines: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(utt, spk) for each utterance of each ``spk utt1 utt2 ...`` line (spk2utt_to_utt2spk.pl)."""
    return [(utt, spk) for spk, rest in lines for utt in split_fields(rest)]


def split_scp_lines(keys: list[str], n: int, utt2spk: dict[str, str] | None = None,
                    where: Callable[[int], tuple[str, int]] | None = None) -> list[list[int]]:
    """Indices of the lines of each of ``n`` parts, as Kaldi's split_scp.pl makes them.  Without
    ``utt2spk``: contiguous runs of lines.  With it: the lines grouped by speaker (speakers in
    order of first appearance, a speaker's lines in input order, so a part lists its speakers'
    lines one speaker after another), no speaker cut across parts (see split_counts)."""
    where = where or (lambda i: ("<input>", i + 1))
    if utt2spk is None:
        if len(keys) < n:
            fail(f"refusing to split: {len(keys)} lines is fewer than the {n} output files", where(0)[0])
        out, i = [], 0
        for c in split_line_counts(len(keys), n):
            out.append(list(range(i, i + c)))
            i += c
        return out
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if key not in utt2spk:
            fail(f"'{key}' has no speaker in utt2spk", *where(i))
        groups.setdefault(utt2spk[key], []).append(i)
    if len(groups) < n:
        fail(f"refusing to split: {len(groups)} speakers is fewer than the {n} output files", where(0)[0])
    lines = list(groups.values())
    out, g = [], 0
    for c in split_counts([len(x) for x in lines], n):
        out.append([i for grp in lines[g:g + c] for i in grp])
        g += c
    return out
