"""NIST STM/CTM scoring with a GLM, as hubscr.pl (Hub-5 English) runs csrfilt.sh and sclite.

What is done, in order (the reference is an STM file, the hypothesis a CTM file):

1. Reading.  STM lines ``file channel speaker start end [<labels>] words...``; ``;;`` lines are
   comments and category definitions.  ``(WORD)`` is optionally deletable, ``{ A B / C / @ }`` an
   alternation (``@``: nothing), a segment whose text is ``IGNORE_TIME_SEGMENT_IN_SCORING`` is
   not scored.  CTM lines ``file channel start dur word [conf]``.  Everything is upper-cased
   (csrfilt without -s); files and channels are matched case-insensitively.
2. The GLM (csrfilt.sh / rfilter1): rules ``LHS => RHS [/ LEFT __ RIGHT]`` are string rewrites.
   A cursor moves over the text padded with a space on each side; at each position the first
   rule in file order whose LHS is there and whose contexts match the *input* around it is
   applied (its RHS appended, the cursor moved past the LHS), else the character is copied
   (``copy_no_hit``).  ``;; INPUT_DEPENDENT_APPLICATION = "<regexp>"`` lines switch the rules
   that follow on for the reference (matched against "stm") or the hypothesis ("ctm").  The
   reference is filtered line by line (words in parentheses are matched inside them); the
   hypothesis word by word (each CTM line alone, as csrfilt filters a CTM).  Then hyphenated
   words are split (csrfilt -dh; fragments ``TH-``, ``-ING`` keep their hyphen).  A rule whose
   RHS is an alternation, e.g. ``HE'S => [{HE IS / HE HAS}]``, gives an alternation the aligner
   may match either way; in the reference ``%HESITATION`` is optionally deletable.
3. Time assignment (per file and channel): a hypothesis word belongs to the reference segment
   that contains its midpoint ``start + dur/2`` (both ends inclusive; a midpoint on the edge
   two segments share goes to the earlier one).  A word in no scored segment is dropped when its
   midpoint is inside an IGNORE_TIME_SEGMENT_IN_SCORING segment, else it is an insertion of the
   nearest scored segment of its file and channel (distance from the midpoint to the segment;
   the earlier one on a tie); words of a file and channel with no scored segment are dropped.
   Words are taken in time order within a segment.
4. Alignment per segment: minimum cost over both sides' alternatives with sclite's weights
   (correct 0, substitution 4, deletion 3, insertion 3); deleting an optional reference word
   costs 0 and is no error, an optional word is never substituted; a reference fragment (``TH-``
   / ``-ING``) is correct against a word that starts (ends) with its spelling (sclite -F).
   Reference words (#Wrd) = correct + substituted + deleted, so an optional word counts only
   when it is matched.
5. Report: an sclite-like ``.sys`` (per-speaker rows, ``Sum/Avg``, ``Mean``, ``S.D.``,
   ``Median``) and a Kaldi ``%WER`` line (2 decimals, compute-wer's format).
"""
from __future__ import annotations

import bisect
import itertools
import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Sequence, Union

from pynnet.io.errors import fail
from pynnet.io.tables import read_text_lines

IGNORE = "IGNORE_TIME_SEGMENT_IN_SCORING"
HESITATION = "%HESITATION"
COST_SUB, COST_DEL, COST_INS = 4, 3, 3     # sclite's default DP weights


# --------------------------------------------------------------------------------------------
# Tokens and alternations
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tok:
    word: str
    optional: bool = False


@dataclass(frozen=True)
class Alt:
    choices: tuple[tuple[Tok, ...], ...]


Item = Union[Tok, Alt]


def parse_items(text: str, optional_words: frozenset[str] = frozenset(),
                where: tuple[str, int] | None = None) -> list[Item]:
    """Words, ``(optional)`` words (one or several inside a pair of parentheses) and
    ``{ a / b c / @ }`` alternations of an (upper-cased) transcript."""
    def bad(msg: str) -> "NoReturn":  # noqa: F821
        fail(msg, *where) if where else fail(msg)

    toks = text.replace("{", " { ").replace("}", " } ").split()
    items: list[Item] = []
    alt: list[list[Tok]] | None = None
    in_paren = False
    for t in toks:
        if t == "{":
            if alt is not None:
                bad("nested alternation '{'")
            alt = [[]]
            continue
        if t == "}":
            if alt is None:
                bad("'}' without '{'")
            items.append(Alt(tuple(tuple(c) for c in alt)))
            alt = None
            continue
        if t == "/" and alt is not None:
            alt.append([])
            continue
        opt = in_paren
        if t.startswith("("):
            t, opt, in_paren = t[1:], True, True
        if t.endswith(")") and in_paren:
            t, in_paren = t[:-1], False
        if not t:
            continue
        if t == "@" and alt is not None:
            continue                      # the empty alternative
        tok = Tok(t, opt or t in optional_words)
        (alt[-1] if alt is not None else items).append(tok)
    if alt is not None:
        bad("'{' without '}'")
    return items


def split_hyphens(text: str) -> str:
    """csrfilt -dh: a hyphen inside a word becomes a space (not a fragment's leading or trailing
    hyphen, nor one next to a parenthesis)."""
    return " ".join(re.sub(r"([^(])-(?=[^)])", r"\1 ", w) for w in text.split())


# --------------------------------------------------------------------------------------------
# GLM (NIST1 rules)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    lhs: str
    rhs: str
    left: str
    right: str
    kinds: frozenset[str]     # "stm" (reference) / "ctm" (hypothesis)
    line: int


@dataclass
class Glm:
    rules: list[Rule] = field(default_factory=list)
    case_sensitive: bool = False
    copy_no_hit: bool = True
    _index: dict[str, tuple[dict[str, list[int]], dict[str, list[Rule]]]] = field(default_factory=dict)
    _cache: dict[tuple[str, str], str] = field(default_factory=dict)

    def _key(self, s: str) -> str:
        return s if self.case_sensitive else s.upper()

    def _tables(self, kind: str) -> tuple[dict[str, list[int]], dict[str, list[Rule]]]:
        # by first character: the LHS lengths to try; by LHS: its rules in file order
        if kind not in self._index:
            lens: dict[str, set[int]] = {}
            by_lhs: dict[str, list[Rule]] = {}
            for r in self.rules:
                if kind in r.kinds:
                    k = self._key(r.lhs)
                    lens.setdefault(k[0], set()).add(len(k))
                    by_lhs.setdefault(k, []).append(r)
            self._index[kind] = ({c: sorted(v) for c, v in lens.items()}, by_lhs)
        return self._index[kind]

    def rewrite(self, text: str, kind: str) -> str:
        """rfilter1 over ``text`` (already padded as the caller wants)."""
        lens, by_lhs = self._tables(kind)
        if not by_lhs and self.copy_no_hit:
            return text
        key = self._key(text)
        out: list[str] = []
        pos, n = 0, len(text)
        while pos < n:
            best: Rule | None = None
            for L in lens.get(key[pos], ()):
                for r in by_lhs.get(key[pos:pos + L], ()):
                    if best is not None and r.line >= best.line:
                        break
                    if self._context_ok(key, pos, L, r):
                        best = r
                        break
            if best is None:
                if self.copy_no_hit:
                    out.append(text[pos])
                pos += 1
            else:
                out.append(best.rhs)
                pos += len(best.lhs)
        return "".join(out)

    def _context_ok(self, key: str, pos: int, L: int, r: Rule) -> bool:
        left, right = self._key(r.left), self._key(r.right)
        if left and (pos < len(left) or key[pos - len(left):pos] != left):
            return False
        return not right or key[pos + L:pos + L + len(right)] == right

    def apply_ref(self, text: str) -> str:
        """A reference transcript as csrfilt -i stm -dh filters it."""
        t = " " + re.sub(r"[ \t]+", " ", text.upper() if not self.case_sensitive else text) + " "
        t = t.replace("(", "( ").replace(")", " )")
        t = self.rewrite(t, "stm")
        t = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", t))
        return split_hyphens(t)

    def apply_hyp_word(self, word: str) -> str:
        """One CTM word as csrfilt -i ctm -dh filters it (cached: CTMs repeat their words)."""
        k = ("ctm", word)
        if k not in self._cache:
            t = self.rewrite(" " + word.upper() + " ", "ctm")
            self._cache[k] = split_hyphens(t)
        return self._cache[k]


_HEADER = re.compile(r"^\*\s*([A-Za-z_]+)\s*[=:]?\s*(['\"])(.*)\2\s*(;;.*)?$")
_IDA = re.compile(r'^;;\s+INPUT_DEPENDENT_APPLICATION\s*=\s*"([^"]*)"')


def _field(s: str, pos: int, stop: str, path: str, n: int) -> tuple[str, int]:
    """One string of a rule from ``pos``: ``[...]``, ``'...'`` / ``"..."`` (literal, inner
    spaces kept) or bare text up to ``stop`` outside ``{...}`` (trimmed)."""
    while pos < len(s) and s[pos] in " \t":
        pos += 1
    if pos < len(s) and s[pos] == "[":
        end = s.find("]", pos + 1)
        if end < 0:
            fail("unterminated [ in a rule", path, n)
        return s[pos + 1:end], end + 1
    if pos < len(s) and s[pos] in "'\"":
        # quoted only when the quote closes before the next delimiter: 'CAUSE is a word
        end, stop_at = s.find(s[pos], pos + 1), s.find(stop, pos) if stop else -1
        if end > 0 and (stop_at < 0 or end < stop_at):
            return s[pos + 1:end], end + 1
    depth, i = 0, pos
    while i < len(s):
        if s[i] == "{":
            depth += 1
        elif s[i] == "}":
            depth -= 1
        elif depth == 0 and stop and s.startswith(stop, i):
            break
        i += 1
    return s[pos:i].strip(), i


def _strip_comment(s: str) -> str:
    """The rule without its ``;;`` comment (one inside [...] is text)."""
    inside = False
    for i, c in enumerate(s):
        if c == "[":
            inside = True
        elif c == "]":
            inside = False
        elif not inside and s.startswith(";;", i):
            return s[:i]
    return s


def parse_rule(s: str, kinds: frozenset[str], path: str, n: int) -> Rule:
    """``LHS => RHS [/ LEFT __ RIGHT]``."""
    lhs, pos = _field(s, 0, "=>", path, n)
    pos += len(s[pos:]) - len(s[pos:].lstrip())
    if not s.startswith("=>", pos):
        fail("expected 'LHS => RHS [/ LEFT __ RIGHT]'", path, n)
    if not lhs:
        fail("empty LHS", path, n)
    rhs, pos = _field(s, pos + 2, "/", path, n)
    rest = s[pos:].strip()
    left = right = ""
    if rest:
        if not rest.startswith("/"):
            fail(f"unexpected '{rest}' after the RHS", path, n)
        ctx = rest[1:]
        left, p = _field(ctx, 0, "__", path, n)
        p += len(ctx[p:]) - len(ctx[p:].lstrip())
        if not ctx.startswith("__", p):
            fail("the context needs '__' (LEFT __ RIGHT)", path, n)
        right, p = _field(ctx, p + 2, "", path, n)
        if ctx[p:].strip():
            fail(f"unexpected '{ctx[p:].strip()}' after the right context", path, n)
    return Rule(lhs, rhs, left, right, kinds, n)


def read_glm(path: str) -> Glm:
    """A NIST1 GLM: ``*`` header lines (format, copy_no_hit, case_sensitive), ``;;`` comments,
    ``;; INPUT_DEPENDENT_APPLICATION = "<regexp>"`` sections, rules."""
    g = Glm()
    kinds = frozenset({"stm", "ctm"})
    for n, line in read_text_lines(path):
        s = line.strip()
        m = _IDA.match(s)
        if m:
            try:
                rx = re.compile(m.group(1), re.I)
            except re.error as e:
                fail(f"bad INPUT_DEPENDENT_APPLICATION regexp: {e}", path, n)
            kinds = frozenset(k for k in ("stm", "ctm") if rx.search(k))
            continue
        if s.startswith("*"):
            h = _HEADER.match(s)
            if not h:
                fail("expected a header line like \"* format = 'NIST1'\"", path, n)
            key, val = h.group(1).lower(), h.group(3).strip().upper()
            if key == "format" and val not in ("NIST1", "NIST2"):
                fail(f"unsupported GLM format '{h.group(3)}' (NIST1 or NIST2)", path, n)
            if key in ("copy_no_hit", "case_sensitive"):
                if val not in ("T", "TRUE", "YES", "F", "FALSE", "NO"):
                    fail(f"{key}: expected T or F, got '{h.group(3)}'", path, n)
                setattr(g, key, val in ("T", "TRUE", "YES"))
            continue
        s = _strip_comment(s).strip()
        if s:
            g.rules.append(parse_rule(s, kinds, path, n))
    return g


# --------------------------------------------------------------------------------------------
# STM and CTM
# --------------------------------------------------------------------------------------------

@dataclass
class Segment:
    file: str
    channel: str
    speaker: str
    start: float
    end: float
    items: list[Item]
    ignore: bool
    line: int


@dataclass
class Word:
    file: str
    channel: str
    start: float
    dur: float
    items: list[Item]
    line: int

    @property
    def mid(self) -> float:
        return self.start + self.dur / 2


def _float(s: str, what: str, path: str, n: int) -> float:
    try:
        x = float(s)
    except ValueError:
        fail(f"{what} '{s}' is not a number", path, n)
    if not math.isfinite(x):
        fail(f"{what} '{s}' is not a finite number", path, n)
    return x


def _excluded(file: str, exclude: Sequence[str]) -> bool:
    return any(file.startswith(p) for p in exclude)


def read_stm(path: str, glm: Glm | None = None, exclude: Sequence[str] = (),
             optional_words: frozenset[str] = frozenset({HESITATION})) -> list[Segment]:
    segs = []
    for n, line in read_text_lines(path):
        f = line.split()
        if not f or line.lstrip().startswith(";;"):
            continue
        if len(f) < 5:
            fail("expected 'file channel speaker start end [<labels>] words...'", path, n)
        if _excluded(f[0], exclude):
            continue
        start, end = _float(f[3], "start time", path, n), _float(f[4], "end time", path, n)
        if end < start:
            fail(f"end time {f[4]} is before start time {f[3]}", path, n)
        rest = f[5:]
        if rest and rest[0].startswith("<"):
            if not rest[0].endswith(">"):
                fail(f"bad label field '{rest[0]}' (expected <...> without spaces)", path, n)
            rest = rest[1:]
        text = " ".join(rest)
        ignore = text.upper() == IGNORE
        if not ignore and glm is not None:
            text = glm.apply_ref(text)
        items = [] if ignore else parse_items(text.upper(), optional_words, (path, n))
        segs.append(Segment(f[0], f[1], f[2], start, end, items, ignore, n))
    return segs


def read_ctm(path: str, glm: Glm | None = None, exclude: Sequence[str] = ()) -> list[Word]:
    words = []
    memo: dict[str, list[Item]] = {}   # word -> its items (the GLM rewrite is the slow part)
    for n, line in read_text_lines(path):
        f = line.split()
        if not f or line.lstrip().startswith(";;"):
            continue
        if len(f) not in (5, 6):
            fail("expected 'file channel start duration word [confidence]'", path, n)
        if _excluded(f[0], exclude):
            continue
        if f[2] == "*" or f[3] == "*":
            fail("alternations in the hypothesis CTM (<ALT_BEGIN> lines) are not supported", path, n)
        start, dur = _float(f[2], "start time", path, n), _float(f[3], "duration", path, n)
        if dur < 0:
            fail(f"negative duration {f[3]}", path, n)
        if len(f) == 6 and f[5].upper() != "NA":
            _float(f[5], "confidence", path, n)
        items = memo.get(f[4])
        if items is None:
            text = glm.apply_hyp_word(f[4]) if glm is not None else split_hyphens(f[4].upper())
            # a hypothesis word has no optional words, and '(' is a character like any other
            items = memo[f[4]] = parse_items(text.upper().replace("(", " ").replace(")", " "), where=(path, n))
        words.append(Word(f[0], f[1], start, dur, items, n))
    return words


def assign_words(segs: Sequence[Segment], words: Sequence[Word], ctm_path: str = "ctm") -> list[list[Word]]:
    """The hypothesis words of each segment (see the module docstring, 3.)."""
    by_key: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(segs):
        by_key.setdefault((s.file.upper(), s.channel.upper()), []).append(i)
    # per file and channel, in (start, end) order: the starts and the running maximum of the
    # ends, so that the segments holding a midpoint are found by bisection, not a scan
    tables: dict[tuple[str, str], tuple[list[int], list[float], list[float]]] = {}
    for key, v in by_key.items():
        v.sort(key=lambda i: (segs[i].start, segs[i].end, i))
        ends = [segs[i].end for i in v]
        tables[key] = (v, [segs[i].start for i in v], list(itertools.accumulate(ends, max)))
    out: list[list[Word]] = [[] for _ in segs]
    for w in words:
        t = tables.get((w.file.upper(), w.channel.upper()))
        if t is None:
            fail(f"file '{w.file}' channel '{w.channel}' is not in the reference", ctm_path, w.line)
        idx, starts, max_end = t
        m = w.mid
        # the segments with start <= m are idx[:k]; none before idx[j] ends at m or later
        k = bisect.bisect_right(starts, m)
        j = bisect.bisect_left(max_end, m, 0, k)
        inside = [i for i in idx[j:k] if m <= segs[i].end]
        scored = [i for i in inside if not segs[i].ignore]
        if scored:
            out[scored[0]].append(w)
            continue
        if inside:
            continue                                  # in an IGNORE_TIME_SEGMENT_IN_SCORING region
        cands = [i for i in idx if not segs[i].ignore]
        if not cands:
            continue
        best = min(cands, key=lambda i: (max(segs[i].start - m, m - segs[i].end), segs[i].start))
        out[best].append(w)
    for ws in out:
        ws.sort(key=lambda w: (w.start, w.line))
    return out


# --------------------------------------------------------------------------------------------
# Alignment
# --------------------------------------------------------------------------------------------

def _graph(items: Iterable[Item]) -> list[list[tuple[int, Tok | None]]]:
    """A DAG of the items: edges[n] = [(next node, token or None for epsilon)]; nodes are
    numbered in topological order and the last one is the end."""
    edges: list[list[tuple[int, Tok | None]]] = [[]]
    cur = 0
    for it in items:
        if isinstance(it, Tok):
            edges.append([])
            edges[cur].append((len(edges) - 1, it))
            cur = len(edges) - 1
            continue
        ends: list[tuple[int, Tok | None]] = []   # (node, token) edges still to point at the end
        for choice in it.choices:
            if not choice:
                ends.append((cur, None))
                continue
            prev = cur
            for tok in choice[:-1]:
                edges.append([])
                edges[prev].append((len(edges) - 1, tok))
                prev = len(edges) - 1
            ends.append((prev, choice[-1]))
        edges.append([])
        end = len(edges) - 1
        for node, tok in ends:
            edges[node].append((end, tok))
        cur = end
    return edges


def words_match(ref: str, hyp: str) -> bool:
    if ref == hyp:
        return True
    if len(ref) > 1 and ref.endswith("-"):                # fragment: sclite -F
        return hyp.startswith(ref[:-1])
    if len(ref) > 1 and ref.startswith("-"):
        return hyp.endswith(ref[1:])
    return False


@dataclass
class Counts:
    corr: int = 0
    sub: int = 0
    dele: int = 0
    ins: int = 0

    @property
    def words(self) -> int:
        return self.corr + self.sub + self.dele

    @property
    def errors(self) -> int:
        return self.sub + self.dele + self.ins


def align(ref: Sequence[Item], hyp: Sequence[Item]) -> tuple[Counts, list[tuple[str, str, str]]]:
    """Minimum-cost alignment (module docstring, 4.): the counts and the path as
    (op, ref word, hyp word), op one of C S D I, and O for a skipped optional word."""
    R, H = _graph(ref), _graph(hyp)
    nr, nh = len(R), len(H)
    INF = math.inf
    cost = [[INF] * nh for _ in range(nr)]
    back: list[list[tuple[int, int, str, str, str] | None]] = [[None] * nh for _ in range(nr)]
    cost[0][0] = 0

    def relax(r: int, h: int, c: float, br: tuple[int, int, str, str, str]) -> None:
        if c < cost[r][h]:
            cost[r][h] = c
            back[r][h] = br

    for r in range(nr):
        for h in range(nh):
            c0 = cost[r][h]
            if c0 == INF:
                continue
            for r2, rt in R[r]:
                if rt is None:
                    relax(r2, h, c0, (r, h, "", "", ""))
                    continue
                for h2, ht in H[h]:
                    if ht is not None:
                        if words_match(rt.word, ht.word):
                            relax(r2, h2, c0, (r, h, "C", rt.word, ht.word))
                        elif not rt.optional:
                            relax(r2, h2, c0 + COST_SUB, (r, h, "S", rt.word, ht.word))
                if rt.optional:
                    relax(r2, h, c0, (r, h, "O", rt.word, ""))
                else:
                    relax(r2, h, c0 + COST_DEL, (r, h, "D", rt.word, ""))
            for h2, ht in H[h]:
                if ht is None:
                    relax(r, h2, c0, (r, h, "", "", ""))
                else:
                    relax(r, h2, c0 + COST_INS, (r, h, "I", "", ht.word))
    path = []
    r, h = nr - 1, nh - 1
    while (r, h) != (0, 0):
        b = back[r][h]
        assert b is not None
        if b[2]:
            path.append(b[2:])
        r, h = b[0], b[1]
    path.reverse()
    c = Counts()
    for op, _, _ in path:
        if op == "C":
            c.corr += 1
        elif op == "S":
            c.sub += 1
        elif op == "D":
            c.dele += 1
        elif op == "I":
            c.ins += 1
    return c, path


# --------------------------------------------------------------------------------------------
# Scoring and the report
# --------------------------------------------------------------------------------------------

@dataclass
class SpeakerStats:
    snt: int = 0
    serr: int = 0
    counts: Counts = field(default_factory=Counts)

    def add(self, c: Counts) -> None:
        self.snt += 1
        self.serr += int(c.errors > 0)
        self.counts.corr += c.corr
        self.counts.sub += c.sub
        self.counts.dele += c.dele
        self.counts.ins += c.ins


def score(segs: Sequence[Segment], words: Sequence[Word], ctm_path: str = "ctm",
          cache: dict | None = None) -> dict[str, SpeakerStats]:
    """Per-speaker statistics over the scored segments.  ``cache``: (reference, hypothesis) ->
    counts, kept by the caller across hypotheses of the same references (a grid of LM weights
    mostly repeats each segment's hypothesis)."""
    stats: dict[str, SpeakerStats] = {}
    for seg, ws in zip(segs, assign_words(segs, words, ctm_path)):
        if seg.ignore:
            continue
        hyp = [it for w in ws for it in w.items]
        if cache is None:
            c, _ = align(seg.items, hyp)
        else:
            key = (tuple(seg.items), tuple(hyp))
            c = cache.get(key)
            if c is None:
                c = cache[key] = align(seg.items, hyp)[0]
        stats.setdefault(seg.speaker, SpeakerStats()).add(c)
    return stats


def total(stats: dict[str, SpeakerStats]) -> SpeakerStats:
    t = SpeakerStats()
    for s in stats.values():
        t.snt += s.snt
        t.serr += s.serr
        for k in ("corr", "sub", "dele", "ins"):
            setattr(t.counts, k, getattr(t.counts, k) + getattr(s.counts, k))
    return t


def _pct(num: int, den: int) -> float:
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return 100.0 * num / den


def percentages(s: SpeakerStats) -> list[float]:
    """Corr Sub Del Ins Err (of the reference words) and S.Err (of the segments), in %."""
    c, n = s.counts, s.counts.words
    return [_pct(c.corr, n), _pct(c.sub, n), _pct(c.dele, n), _pct(c.ins, n), _pct(c.errors, n),
            _pct(s.serr, s.snt)]


def kaldi_wer_line(s: SpeakerStats) -> str:
    """``%WER x.xx [ E / N, I ins, D del, S sub ]`` as compute-wer prints it."""
    from pynnet.score.wer import WerStats

    c = s.counts
    return WerStats(num_words=c.words, word_errs=c.errors, num_ins=c.ins, num_del=c.dele,
                    num_sub=c.sub, num_sent=s.snt, sent_errs=s.serr).lines()[0]


def _fmt_pcts(xs: Sequence[float]) -> str:
    return "".join(("%5.1f" if i == 0 else "%7.1f") % x for i, x in enumerate(xs))


def sys_report(stats: dict[str, SpeakerStats], title: str) -> str:
    """The sclite ``sum`` (.sys) report, then the Kaldi %WER line."""
    spks = sorted(stats)
    tot = total(stats)
    sw = max([8] + [len(s) + 1 for s in spks])
    w1 = max(5, len(str(tot.snt)))
    w2 = max(6, len(str(tot.counts.words)))

    def row(name: str, a: str, b: str, pcts: str) -> str:
        return f"| {name:<{sw}}| {a:>{w1}}  {b:>{w2}} |{pcts} |"

    rows = [(s, stats[s]) for s in spks]
    head = row("SPKR", "# Snt", "# Wrd", " Corr    Sub    Del    Ins    Err  S.Err")
    width = len(head)
    dash = "|" + "-" * (width - 2) + "|"
    sep = "|" + "".join("+" if c == "|" else "-" for c in head[1:-1]) + "|"
    eq = "|" + "=" * (width - 2) + "|"
    out = ["", "                     SYSTEM SUMMARY PERCENTAGES by SPEAKER", "",
           "," + "-" * (width - 2) + ".", "|" + title[:width - 2].center(width - 2) + "|", dash, head, sep]
    for i, (name, s) in enumerate(rows):
        out.append(row(name, str(s.snt), str(s.counts.words), _fmt_pcts(percentages(s))))
        out.append(sep if i < len(rows) - 1 else eq)
    if not rows:
        out.append(eq)
    out.append(row("Sum/Avg", str(tot.snt), str(tot.counts.words), _fmt_pcts(percentages(tot))))
    out.append(eq)
    if rows:
        cols = [[float(s.snt) for _, s in rows], [float(s.counts.words) for _, s in rows]]
        cols += [list(x) for x in zip(*(percentages(s) for _, s in rows))]
        sd = [statistics.stdev(c) if len(c) > 1 else 0.0 for c in cols]
        for name, vals in (("  Mean", [statistics.fmean(c) for c in cols]), ("  S.D.", sd),
                           (" Median", [statistics.median(c) for c in cols])):
            out.append(row(name, f"{vals[0]:.1f}", f"{vals[1]:.1f}", _fmt_pcts(vals[2:])))
    out.append("`" + "-" * (width - 2) + "'")
    out.append("")
    out.append(kaldi_wer_line(tot))
    return "\n".join(out) + "\n"


def filtered_ctm_lines(words: Sequence[Word]) -> list[str]:
    """The hypothesis after the GLM, as csrfilt writes a CTM: a word that became several shares
    its duration; an alternation is bracketed by ``* * <ALT_BEGIN>`` / ``<ALT>`` / ``<ALT_END>``."""
    out = []
    for w in words:
        def emit(toks: Sequence[Tok], head: str) -> None:
            d = w.dur / max(1, len(toks))
            for i, t in enumerate(toks):
                out.append(f"{head} {w.start + d * i:.3f} {d:.3f} {t.word}")

        head = f"{w.file.upper()} {w.channel.upper()}"
        plain: list[Tok] = []
        for it in w.items:
            if isinstance(it, Tok):
                plain.append(it)
                continue
            emit(plain, head)
            plain = []
            out.append(f"{head} * * <ALT_BEGIN>")
            for k, choice in enumerate(it.choices):
                emit(choice, head)
                out.append(f"{head} * * " + ("<ALT>" if k < len(it.choices) - 1 else "<ALT_END>"))
        emit(plain, head)
    return out
