"""A recipe's exp/RESULTS: every system in training order, test scored at the LM weight and
insertion penalty chosen on dev (beside test's own best and dev's, Kaldi's habit), per-speaker
%WER, and a warning for a system worse than the one it was built from.

It reads what the scoring scripts leave in a decode dir (steps/score_kaldi.sh and
egs/swbd/local/score_sclite.sh write the same files):
  scoring_kaldi/best_wer                  the best %WER line over the grid
  scoring_kaldi/wer_details/{lmwt,wip}    the best grid point
  wer_<LMWT>_<WIP>                        each grid point's %WER line
  scoring_kaldi/test_filt.txt, scoring_kaldi/penalty_<WIP>/<LMWT>.txt   (per-speaker %WER)
  rtf                                     the decode's real-time factor, when written
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from pynnet.io.errors import fail
from pynnet.io.tables import read_table
from pynnet.score.wer import compute_wer, parse_wer_line, read_transcripts


@dataclass
class System:
    name: str
    exp_dir: str
    parent: str | None = None      # the system it was built from (its alignments or its tree)


@dataclass
class Scored:
    """One decode dir's figures."""
    decode_dir: str
    best_line: str                   # test's own best (%WER ... file)
    best_wer: float
    lmwt: str
    wip: str
    rtf: str | None = None
    at: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)  # grid point -> WER, line


def parse_system(spec: str) -> System:
    """``name=exp-dir[:parent]``."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        fail(f"--system must be NAME=EXP-DIR[:PARENT], not '{spec}'")
    exp_dir, _, parent = rest.partition(":")
    return System(name, exp_dir, parent or None)


def _read_first(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip() or None
    except FileNotFoundError:
        return None


def _rtf(path: str) -> str | None:
    """The real-time factor of a decode (first line of <decode-dir>/rtf: '... real-time factor X (...)')."""
    m = re.search(r"real-time factor ([0-9.]+)", _read_first(path) or "")
    return m.group(1) if m else None


def read_decode_dir(decode_dir: str) -> Scored | None:
    """The figures of a scored decode dir; None when it has not been scored (not decoded yet)."""
    best = _read_first(os.path.join(decode_dir, "scoring_kaldi", "best_wer"))
    if best is None:
        return None
    p = parse_wer_line(best)
    if p is None:
        fail("no %WER in the best line", os.path.join(decode_dir, "scoring_kaldi", "best_wer"))
    details = os.path.join(decode_dir, "scoring_kaldi", "wer_details")
    lmwt = _read_first(os.path.join(details, "lmwt")) or ""
    wip = _read_first(os.path.join(details, "wip")) or ""
    sc = Scored(decode_dir, best, p[0], lmwt, wip, _rtf(os.path.join(decode_dir, "rtf")))
    for name in os.listdir(decode_dir):
        parts = name.split("_")
        if len(parts) == 3 and parts[0] == "wer":
            with open(os.path.join(decode_dir, name), encoding="utf-8") as f:
                for line in f:
                    q = parse_wer_line(line)
                    if q is not None:
                        sc.at[(parts[1], parts[2])] = (q[0], line.strip())
                        break
    return sc


def per_speaker(decode_dir: str, utt2spk_path: str, lmwt: str, wip: str) -> list[tuple[str, float, int]]:
    """(speaker, %WER, words) at one grid point, worst first; [] when the hypotheses are not
    kept per grid point (sclite scoring)."""
    sk = os.path.join(decode_dir, "scoring_kaldi")
    ref_path, hyp_path = os.path.join(sk, "test_filt.txt"), os.path.join(sk, f"penalty_{wip}", f"{lmwt}.txt")
    if not (os.path.isfile(ref_path) and os.path.isfile(hyp_path) and os.path.isfile(utt2spk_path)):
        return []
    ref, hyp = read_transcripts(ref_path), read_transcripts(hyp_path)
    utt2spk = read_table(utt2spk_path)
    by_spk: dict[str, tuple[dict, dict]] = {}
    for utt, words in ref.items():
        r, h = by_spk.setdefault(utt2spk.get(utt, "?"), ({}, {}))
        r[utt] = words
        h[utt] = hyp.get(utt, [])
    out = []
    for spk, (r, h) in by_spk.items():
        st = compute_wer(r, h, mode="all")
        out.append((spk, st.wer, st.num_words))
    return sorted(out, key=lambda x: (-x[1], x[0]))


def results_text(systems: list[System], test: str, dev: str | None, data_dir: str | None,
                 header: str = "") -> tuple[str, list[str]]:
    """The RESULTS text and the warnings (also in the text, as comments)."""
    names = {s.name for s in systems}
    for s in systems:
        if s.parent and s.parent not in names:
            fail(f"--system {s.name}: its parent '{s.parent}' is not one of the systems")
    lines = [header.rstrip("\n")] if header else []
    warnings: list[str] = []
    chosen: dict[str, float] = {}
    lines.append(f"# In training order. test = {test}, dev = {dev}. Per system: test at the LM weight and "
                 f"insertion penalty chosen on dev (the figure to quote), test's own best, dev's best; "
                 f"RTF: the test decode's real-time factor."
                 if dev else f"# In training order: each system's best %WER on {test} over the scoring grid.")
    table = [f"# {'system':<16} {'test@dev' if dev else 'test':>10} {'test best':>10}"
             + (f" {'dev best':>10} {'lmwt/wip':>9}" if dev else "") + f" {'RTF':>7}"]
    body: list[str] = []
    for s in systems:
        t = read_decode_dir(os.path.join(s.exp_dir, f"decode_{test}"))
        if t is None:
            continue
        d = read_decode_dir(os.path.join(s.exp_dir, f"decode_{dev}")) if dev else None
        quote_wer, quote_line, point = t.best_wer, t.best_line, (t.lmwt, t.wip)
        if d is not None:
            if (d.lmwt, d.wip) in t.at:
                point = (d.lmwt, d.wip)
                quote_wer, quote_line = t.at[point]
                quote_line = f"{quote_line} {t.decode_dir}/wer_{d.lmwt}_{d.wip}"
            else:
                warnings.append(f"{s.name}: dev's best point (LM weight {d.lmwt}, penalty {d.wip}) is "
                                f"not on {test}'s grid: quoting {test}'s own best")
            body.append(f"{quote_line}   # {s.name}, {test} at {dev}'s choice")
            body.append(f"{t.best_line}   # {s.name}, {test}'s own best")
            body.append(f"{d.best_line}   # {s.name}, {dev}")
        else:
            body.append(f"{t.best_line}   # {s.name}")
        chosen[s.name] = quote_wer
        row = f"# {s.name:<16} {quote_wer:>10.2f} {t.best_wer:>10.2f}"
        if dev:
            row += (f" {d.best_wer:>10.2f} {d.lmwt + '/' + d.wip:>9}" if d else f" {'-':>10} {'-':>9}")
        table.append(row + f" {t.rtf or '-':>7}")
        if data_dir:
            spk = per_speaker(t.decode_dir, os.path.join(data_dir, "utt2spk"), *point)
            if spk:
                body.append(f"#   per speaker ({test}, worst first): "
                            + ", ".join(f"{n} {w:.1f}" for n, w, _ in spk))
    for s in systems:
        if s.parent and s.name in chosen and s.parent in chosen and chosen[s.name] > chosen[s.parent]:
            warnings.append(f"{s.name} ({chosen[s.name]:.2f}) is worse than {s.parent} "
                            f"({chosen[s.parent]:.2f}), the system it was built from")
    lines += table + body
    lines += [f"# WARNING: {w}" for w in warnings]
    return "\n".join(lines) + "\n", warnings
