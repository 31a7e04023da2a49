"""Word error rate as Kaldi's compute-wer, align-text and the wer_details scripts compute it.

Alignment and edit counts come from kaldialign (a port of Kaldi's LevenshteinEditDistance /
LevenshteinAlignment), so ins/del/sub splits match Kaldi's for the same pair of sentences.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import IO, Iterator, Sequence

import kaldialign
import numpy as np

from pynnet.io.errors import fail
from pynnet.io.tables import split_fields, split_lines

MODES = ("present", "all", "strict")
SPECIAL_SYMBOL = "***"  # what score_kaldi.sh passes to align-text and the wer_*_details scripts


# --------------------------------------------------------------------------------------------
# Reading transcripts: Kaldi text "token vector" tables (``utt w1 w2 ...``; a key alone = empty)
# --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def open_rspecifier(spec: str) -> Iterator[tuple[IO[bytes], str]]:
    """Open a Kaldi-style text rspecifier for reading: ``ark[,opts]:path``, ``-`` (stdin),
    ``ark:cmd |`` (a pipe) or a plain path.  Yields (binary stream, name for messages)."""
    target = spec
    if ":" in spec and spec.split(":", 1)[0].split(",")[0] in ("ark", "scp"):
        kind, target = spec.split(":", 1)
        if kind.split(",")[0] == "scp":
            fail(f"scp tables are not supported for transcripts, use ark: '{spec}'")
    if target == "-":
        yield sys.stdin.buffer, "stdin"
        return
    if target.rstrip().endswith("|"):
        cmd = target.rstrip()[:-1]
        proc = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE)
        try:
            yield proc.stdout, cmd + "|"
        finally:
            proc.stdout.close()
            if proc.wait() != 0:
                fail(f"command failed with status {proc.returncode}", cmd + "|")
        return
    if not os.path.exists(target):
        fail("no such file", target)
    if os.path.isdir(target):
        fail("is a directory, expected a transcript file", target)
    with open(target, "rb") as f:
        yield f, target


def read_transcripts(spec: str) -> dict[str, list[str]]:
    """Read ``utt w1 w2 ...`` lines into an ordered dict; duplicate keys and bad bytes are errors
    naming file:line.  Blank lines are an error too (Kaldi's text reader rejects them)."""
    out: dict[str, list[str]] = {}
    with open_rspecifier(spec) as (f, name):
        n = 0
        for block in iter(lambda: f.readlines(1 << 16), []):
            try:
                # a newline byte never falls inside a UTF-8 character: the block decodes as its lines do
                lines = b"".join(block).decode("utf-8").split("\n")
            except UnicodeDecodeError:
                for i, raw in enumerate(block, n + 1):
                    try:
                        raw.decode("utf-8")
                    except UnicodeDecodeError:
                        fail("not valid UTF-8", name, i)
                raise
            if lines[-1] == "":
                lines.pop()
            for fields in split_lines(lines):
                n += 1
                if not fields:
                    fail("empty line (expected 'utterance-id word ...')", name, n)
                key = fields[0]
                if key in out:
                    fail(f"duplicate utterance id '{key}'", name, n)
                out[key] = fields[1:]
    return out


# --------------------------------------------------------------------------------------------
# compute-wer
# --------------------------------------------------------------------------------------------

@dataclass
class WerStats:
    """Totals as compute-wer keeps them."""
    num_words: int = 0
    word_errs: int = 0
    num_ins: int = 0
    num_del: int = 0
    num_sub: int = 0
    num_sent: int = 0
    sent_errs: int = 0
    num_absent: int = 0
    per_utt: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def wer(self) -> float:
        return _percent(self.word_errs, self.num_words)

    @property
    def ser(self) -> float:
        return _percent(self.sent_errs, self.num_sent)

    def lines(self) -> list[str]:
        """The three lines compute-wer prints (without newlines)."""
        partial = " [PARTIAL]" if self.num_absent else ""
        return [
            f"%WER {_fixed2(self.wer)} [ {self.word_errs} / {self.num_words}, {self.num_ins} ins, "
            f"{self.num_del} del, {self.num_sub} sub ]{partial}",
            f"%SER {_fixed2(self.ser)} [ {self.sent_errs} / {self.num_sent} ]",
            f"Scored {self.num_sent} sentences, {self.num_absent} not present in hyp.",
        ]


def _percent(num: int, den: int) -> float:
    # compute-wer divides in float with no guard: 0/0 is NaN and k/0 is inf.
    if den == 0:
        return math.inf if num > 0 else math.nan
    return 100.0 * num / den


def _fixed2(x: float) -> str:
    """std::fixed with precision 2, as glibc prints it (0.0f/0.0f on x86 is the negative
    default NaN, which glibc prints as '-nan')."""
    if math.isnan(x):
        return "-nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    # compute-wer works in single precision (BaseFloat); round the float32 value as C++ would.
    return "%.2f" % float(np.float32(x))


def compute_wer(ref: dict[str, Sequence[str]], hyp: dict[str, Sequence[str]],
                mode: str = "strict") -> WerStats:
    """Score ``hyp`` against ``ref`` as compute-wer does.  ``mode``: "present" scores only
    utterances that have a hypothesis, "all" scores absent ones as empty, "strict" makes an
    absent hypothesis an error.  Order follows ``ref``."""
    if mode not in MODES:
        fail(f"--mode option invalid: expected \"present\"|\"all\"|\"strict\", got {mode}")
    st = WerStats()
    for key, ref_words in ref.items():
        if key not in hyp:
            if mode == "strict":
                fail(f"No hypothesis for key {key} and strict mode specifier.")
            st.num_absent += 1
            if mode == "present":
                continue
            hyp_words: Sequence[str] = []
        else:
            hyp_words = hyp[key]
        ed = kaldialign.edit_distance(list(ref_words), list(hyp_words))
        st.num_words += len(ref_words)
        st.word_errs += ed["total"]
        st.num_ins += ed["ins"]
        st.num_del += ed["del"]
        st.num_sub += ed["sub"]
        st.num_sent += 1
        st.sent_errs += int(list(ref_words) != list(hyp_words))
        st.per_utt[key] = {"ins": ed["ins"], "del": ed["del"], "sub": ed["sub"],
                           "ref_len": len(ref_words)}
    return st


# --------------------------------------------------------------------------------------------
# align-text and the wer_details files (per_utt, per_spk, ops)
# --------------------------------------------------------------------------------------------

def align_words(ref: Sequence[str], hyp: Sequence[str], eps: str = SPECIAL_SYMBOL) -> list[tuple[str, str]]:
    """Levenshtein alignment as align-text produces it: pairs (ref, hyp), ``eps`` for a gap."""
    if eps in ref or eps in hyp:
        fail(f"the special symbol '{eps}' occurs in a transcript")
    return [(r, h) for r, h in kaldialign.align(list(ref), list(hyp), eps)]


def align_text_line(key: str, pairs: list[tuple[str, str]]) -> str:
    """One line of ``align-text`` output: ``utt r1 h1 ; r2 h2 ; ...``."""
    return key + " " + " ; ".join(f"{r} {h}" for r, h in pairs) if pairs else key


def _op(r: str, h: str, eps: str) -> str:
    if h == eps:
        return "D"
    if r == eps:
        return "I"
    return "S" if r != h else "C"


def _center(s: str, width: int) -> str:
    # wer_per_utt_details.pl: the extra space goes on the left when the padding is odd.
    right = (width - len(s)) // 2
    left = width - len(s) - right
    return " " * left + s + " " * right


def per_utt_lines(key: str, pairs: list[tuple[str, str]], eps: str = SPECIAL_SYMBOL) -> list[str]:
    """The four lines wer_per_utt_details.pl writes for one utterance (ref, hyp, op, #csid)."""
    ops = [_op(r, h, eps) for r, h in pairs]
    widths = [max(len(r), len(h), len(o)) for (r, h), o in zip(pairs, ops)]
    ref_s = "  ".join(_center(r, w) for (r, _), w in zip(pairs, widths))
    hyp_s = "  ".join(_center(h, w) for (_, h), w in zip(pairs, widths))
    op_s = "  ".join(_center(o, w) for o, w in zip(ops, widths))
    c, s, i, d = (ops.count(x) for x in "CSID")
    return [f"{key} ref  {ref_s}", f"{key} hyp  {hyp_s}", f"{key} op   {op_s}",
            f"{key} #csid {c} {s} {i} {d}"]


def per_spk_lines(csid: dict[str, tuple[int, int, int, int]], utt2spk: dict[str, str],
                  field_width: int = 10, spk_width: int = 15) -> list[str]:
    """wer_per_spk_details.pl: raw counts and percentages per speaker, then SUM."""
    spk_width = max([spk_width] + [len(s) for s in utt2spk.values()])
    stats: dict[str, list[int]] = {}
    for utt, (c, s, i, d) in csid.items():
        if utt not in utt2spk:
            fail(f"utterance '{utt}' is not in utt2spk")
        st = stats.setdefault(utt2spk[utt], [0, 0, 0, 0, 0, 0])  # C S I D SENT SERR
        st[0] += c; st[1] += s; st[2] += i; st[3] += d; st[4] += 1
        st[5] += int(s + i + d != 0)
    W = field_width
    head = ("%-*s id  " % (spk_width, "SPEAKER")) + " ".join(
        "%*s" % (W, x) for x in ("#SENT", "#WORD", "Corr", "Sub", "Ins", "Del", "Err", "S.Err"))
    out = [head]

    def rows(name: str, c: int, s: int, i: int, d: int, sent: int, serr: int) -> list[str]:
        word, err = c + s + d, s + d + i
        r = [("%-*s raw " % (spk_width, name)) + " ".join(
            "%*d" % (W, x) for x in (sent, word, c, s, i, d, err, serr))]
        if word != 0:
            w = float(word)
            r.append(("%-*s sys " % (spk_width, name)) + " ".join(
                ["%*d" % (W, sent), "%*d" % (W, word)]
                + ["%*.2f" % (W, x) for x in (100 * c / w, 100 * s / w, 100 * i / w, 100 * d / w,
                                              100 * err / w, 100.0 * serr / sent)]))
        return r

    tot = [0] * 6
    for spk in sorted(stats):
        st = stats[spk]
        out += rows(spk, st[0], st[1], st[2], st[3], st[4], st[5])
        tot = [a + b for a, b in zip(tot, st)]
    out += rows("SUM", *tot)
    return out


def ops_lines(all_pairs: dict[str, list[tuple[str, str]]], eps: str = SPECIAL_SYMBOL,
              max_size: int = 16) -> list[str]:
    """wer_ops_details.pl followed by score_kaldi.sh's ``sort -b -i -k 1,1 -k 4,4rn -k 2,2 -k 3,3``:
    one line per (ref word, hyp word) pair with its count."""
    counts: dict[tuple[str, str], int] = {}
    for pairs in all_pairs.values():
        for r, h in pairs:
            counts[(r, h)] = counts.get((r, h), 0) + 1
    if not counts:
        return []
    word_len = min(max(max(len(r), len(h)) for r, h in counts), max_size)
    ops_len = max(len(str(n)) for n in counts.values())
    rows = []
    for (r, h), n in counts.items():
        kind = ("correct" if r == h else "insertion" if r == eps else
                "deletion" if h == eps else "substitution")
        rows.append((kind, r, h, n))
    rows.sort(key=lambda x: (x[0], -x[3], x[1].encode(), x[2].encode()))
    return ["%-14s%*s    %*s    %*d" % (k, word_len, r, word_len, h, ops_len, n) for k, r, h, n in rows]


def write_wer_details(out_dir: str, ref: dict[str, Sequence[str]], hyp: dict[str, Sequence[str]],
                      utt2spk: dict[str, str] | None, eps: str = SPECIAL_SYMBOL) -> None:
    """Write ``per_utt``, ``per_spk`` (when utt2spk is given) and ``ops`` into ``out_dir`` as
    score_kaldi.sh does (``--mode present``: utterances without a hypothesis are left out)."""
    from pynnet.io.atomic import atomic_write

    pairs = {k: align_words(r, hyp[k], eps) for k, r in ref.items() if k in hyp}
    csid = {}
    with atomic_write(os.path.join(out_dir, "per_utt")) as f:
        for k, p in pairs.items():
            lines = per_utt_lines(k, p, eps)
            f.write("\n".join(lines) + "\n")
            c, s, i, d = (int(x) for x in split_fields(lines[3])[-4:])  # utt-id #csid c s i d
            csid[k] = (c, s, i, d)
    if utt2spk is not None:
        with atomic_write(os.path.join(out_dir, "per_spk")) as f:
            f.write("\n".join(per_spk_lines(csid, utt2spk)) + "\n")
    with atomic_write(os.path.join(out_dir, "ops")) as f:
        lines = ops_lines(pairs, eps)
        f.write("".join(x + "\n" for x in lines))


# --------------------------------------------------------------------------------------------
# best_wer
# --------------------------------------------------------------------------------------------

_RATE = re.compile(r"[0-9]+(\.[0-9]*)?|inf")
_WS = "[ \t\n\r\f\v]"  # Kaldi's perl/sed \s (ASCII whitespace)
_NS = "[^ \t\n\r\f\v]"
# an sclite .sys row: | <speaker, Sum/Avg or Mean> | #Snt #Wrd | Corr Sub Del Ins Err S.Err |
_SCLITE = re.compile(rf" (?:Mean|Sum/Avg)?{_WS}*\|{_WS}*{_NS}+{_WS}+{_NS}+{_WS}+\|"
                     rf"{_WS}+{_NS}+{_WS}+{_NS}+{_WS}+{_NS}+{_WS}+{_NS}+{_WS}+({_NS}+){_WS}+{_NS}+{_WS}+\|")


def _space_bars(line: str) -> str:
    """``|5`` -> ``| 5`` and ``5|`` -> ``5 |`` (sclite squeezes large counts against the bars)."""
    return re.sub(r"([0-9])\|", r"\1 |", re.sub(r"\|([0-9])", r"| \1", line))


def parse_wer_line(line: str) -> tuple[float, str] | None:
    """The error rate of a best_wer.sh input line: ``[file:]%WER x ...`` (compute-wer) or an
    sclite summary row (its Err column).  Return (rate, the line with its bars spaced) or None
    when it is neither or the rate is not a number (-nan)."""
    line = _space_bars(line.rstrip("\r\n"))
    pos = line.find("%WER ")
    if pos >= 0:
        m = re.match(f"{_NS}+", line[pos + 5:])
        if m and _RATE.fullmatch(m.group(0)):
            return float(m.group(0)), line
    m = _SCLITE.search(line)
    if m and _RATE.fullmatch(m.group(1)):
        return float(m.group(1)), line
    return None


def _best_wer_format(line: str) -> str:
    """The chosen line as Kaldi's best_wer.sh prints it: the grep file prefix moved after the
    %WER part (or a Sum/Avg row's), ``%WER <9th field>`` put first when the line does not start
    with %WER, whitespace squeezed, a trailing ``:`` or ``:|`` dropped."""
    parts = line.split("%WER")
    if len(parts) == 2:
        line = "%WER" + parts[1] + " " + parts[0]
    parts = line.split("Sum/Avg")
    if len(parts) == 2:
        line = parts[1] + " " + parts[0]
    fields = re.split("[ \t\n]+", line.strip(" \t\n"))  # awk's fields
    if "%WER" not in fields[0]:
        line = "%WER " + (fields[8] if len(fields) > 8 else "") + " " + line
    line = re.sub(f"{_WS}+", " ", line)
    line = re.sub(r":$", "", line)
    return re.sub(rf":{_WS}*\|{_WS}*$", "", line)


def best_wer(lines: Sequence[str] | IO[str]) -> str | None:
    """utils/best_wer.sh: the line with the lowest error rate (first one on ties) among
    compute-wer ``[file:]%WER ...`` lines and sclite summary rows, printed as Kaldi's script
    prints it (``%WER ... <file>``); None when no line has a numeric rate."""
    best = None
    for line in lines:
        p = parse_wer_line(line)
        if p is not None and (best is None or p[0] < best[0]):
            best = p
    if best is None:
        return None
    return _best_wer_format(best[1])


__all__ = ["MODES", "SPECIAL_SYMBOL", "WerStats", "compute_wer", "read_transcripts", "align_words",
           "align_text_line", "per_utt_lines", "per_spk_lines", "ops_lines", "write_wer_details",
           "parse_wer_line", "best_wer", "open_rspecifier"]
