"""Back-off n-gram language models: training (interpolated modified Kneser-Ney or Witten-Bell),
relative-entropy pruning, ARPA read/write and perplexity.

Why our own trainer: there is no maintained PyPI package that trains ARPA LMs (kenlm's ``lmplz``
is a C++ program that is not on PyPI; SRILM is not redistributable). See docs/notes/lang.md.

Modified Kneser-Ney (Chen & Goodman 1998, as SRILM ``-kndiscount -interpolate`` and kenlm):
  * counts: the highest order uses raw counts; a lower-order n-gram uses its number of distinct
    left extensions (continuation count), except n-grams starting with <s>, which keep raw counts;
  * three discounts per order from count-of-counts n1..n4 of those (adjusted) counts:
      Y = n1/(n1+2 n2), D1 = 1-2Y n2/n1, D2 = 2-3Y n3/n2, D3+ = 3-4Y n4/n3;
  * interpolation: P(w|h) = (c(hw)-D(c(hw)))/c(h) + gamma(h) P(w|h'),
      gamma(h) = (D1 N1(h.) + D2 N2(h.) + D3+ N3+(h.)) / c(h);
    unigrams interpolate with the uniform distribution over the vocabulary (without <s>).
  * ARPA: log10 P(w|h) for each seen n-gram, and backoff weight log10 gamma(h) for each context.
"""
from __future__ import annotations

import gzip
import io
import math
import os
import sys
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Iterator, Sequence

from pynnet.io.atomic import DeterministicGzip, atomic_path
from pynnet.io.errors import PynnetError, fail
from pynnet.io.progress import progress_kwargs
from pynnet.io.tables import FIELD_SEPS, ascii_int, split_fields, split_lines

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
# Symbols in a Kaldi words.txt that are not words of the language model.
NON_LM_SYMBOLS = {"<eps>", "#0", BOS, EOS}
LOG10_ZERO = -99.0

Gram = tuple[str, ...]
_LINE_SPACE = FIELD_SEPS + "\r\n"


def _open_text(path: str):
    """A text file (gzipped if ``.gz``) whose lines end at '\n' only, as Kaldi's and our other
    readers of Kaldi files read them (universal newlines also end a line at a lone '\r');
    readers strip a '\r' before the '\n'."""
    if not os.path.exists(path):
        fail("no such file", path)
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="\n")
    return open(path, encoding="utf-8", newline="\n")


def read_vocab(path: str) -> list[str]:
    """Words from a Kaldi words.txt (``word id``) or a plain word list (one per line); the
    symbols <eps>, #0, <s>, </s> and disambiguation symbols are skipped."""
    words: list[str] = []
    seen = set()
    with _open_text(path) as f:
        try:
            for n, line in enumerate(f, 1):
                fields = split_fields(line.rstrip("\r\n"))
                if not fields:
                    continue
                if len(fields) > 2 or (len(fields) == 2 and ascii_int(fields[1]) is None):
                    fail(f"expected 'word' or 'word id' (an integer), got '{' '.join(fields)}'", path, n)
                w = fields[0]
                # disambiguation symbols: '#' and ASCII digits ('#²' is a word)
                if w in NON_LM_SYMBOLS or (w.startswith("#") and w[1:].isascii() and w[1:].isdigit()):
                    continue
                if w not in seen:
                    seen.add(w)
                    words.append(w)
        except UnicodeDecodeError:
            fail("not valid UTF-8", path)
    if not words:
        fail("vocabulary is empty", path)
    return words


def read_sentences(path: str, skip_uttid: bool = False) -> Iterator[list[str]]:
    """Sentences of a text file, one per line (``skip_uttid``: Kaldi ``text`` with utterance ids)."""
    with _open_text(path) as f:
        try:
            n = 0
            for block in iter(lambda: f.readlines(1 << 16), []):
                for words in split_lines(block):
                    n += 1
                    if skip_uttid:
                        words = words[1:]
                    if BOS in words or EOS in words:
                        w = next(w for w in words if w in (BOS, EOS))
                        fail(f"the text must not contain '{w}' (it is added automatically)", path, n)
                    yield words
        except UnicodeDecodeError:
            fail("not valid UTF-8", path)


# ----------------------------------------------------------------------------------------------
# The back-off model
# ----------------------------------------------------------------------------------------------

@dataclass
class BackoffLM:
    """An ARPA-style back-off model: ``probs[k][gram]`` = log10 P(w|h) for listed k-grams,
    ``bows[h]`` = log10 backoff weight of context h (absent means 0)."""
    order: int
    probs: list[dict[Gram, float]]          # index 0 unused; probs[k] for k = 1..order
    bows: dict[Gram, float] = field(default_factory=dict)

    @property
    def vocab(self) -> list[str]:
        return [g[0] for g in self.probs[1]]

    def logprob(self, word: str, history: Gram) -> float:
        """log10 P(word | history), backing off as ARPA prescribes. Unknown words score as <unk>
        (or LOG10_ZERO when the model has no <unk>)."""
        if (word,) not in self.probs[1]:
            if (UNK,) not in self.probs[1]:
                return LOG10_ZERO
            word = UNK
        h = tuple(history[-(self.order - 1):]) if self.order > 1 else ()
        bo = 0.0
        while True:
            g = h + (word,)
            p = self.probs[len(g)].get(g)
            if p is not None:
                return bo + p
            bo += self.bows.get(h, 0.0)
            h = h[1:]

    def sentence_logprob(self, words: list[str]) -> tuple[float, list[float]]:
        h: Gram = (BOS,)
        per_word = []
        for w in list(words) + [EOS]:
            lp = self.logprob(w, h)
            per_word.append(lp)
            h = (h + (w,))[-(self.order - 1):] if self.order > 1 else ()
        return sum(per_word), per_word

    def contexts(self) -> list[Gram]:
        """Every context the model conditions on: () and each listed gram with a backoff weight."""
        return [()] + [h for k in range(1, self.order) for h in self.probs[k] if h[-1] != EOS]

    def num_ngrams(self) -> list[int]:
        return [len(self.probs[k]) for k in range(1, self.order + 1)]

    # ---------------------------------------------------------------- ARPA
    def write_arpa(self, path: str) -> None:
        """Write ARPA text (gzip when ``path`` ends in .gz), atomically."""
        with atomic_path(path) as tmp:
            raw = (io.TextIOWrapper(DeterministicGzip(tmp), encoding="utf-8") if path.endswith(".gz")
                   else open(tmp, "w", encoding="utf-8"))
            with raw as f:
                f.write("\n\\data\\\n")
                for k in range(1, self.order + 1):
                    f.write(f"ngram {k}={len(self.probs[k])}\n")
                for k in range(1, self.order + 1):
                    f.write(f"\n\\{k}-grams:\n")
                    for g in sorted(self.probs[k]):
                        p = self.probs[k][g]
                        line = f"{p:.7g}\t{' '.join(g)}"
                        if k < self.order and g[-1] != EOS:
                            line += f"\t{self.bows.get(g, 0.0):.7g}"
                        f.write(line + "\n")
                f.write("\n\\end\\\n")

    @classmethod
    def read_arpa(cls, path: str) -> "BackoffLM":
        """The LM of an ARPA file (gzipped if ``.gz``), checked as ``iter_arpa`` checks it."""
        probs: list[dict[Gram, float]] = [{}]
        bows: dict[Gram, float] = {}
        for k, fields, logp, bow in iter_arpa(path):
            while k >= len(probs):
                probs.append({})
            g = tuple(fields[1:k + 1])
            probs[k][g] = logp
            if bow is not None:
                bows[g] = bow
        return cls(len(probs) - 1, probs, bows)


_FLT_MAX = 3.4028234663852886e38
# Symbols kaldilm's arpa2fst aborts on as words of an n-gram (epsilon, the back-off symbol).
_NOT_ARPA_WORDS = ("<eps>", "#0")


def _arpa_number(x: str) -> float | None:
    """A number as Kaldi's ARPA reader takes it (ascii_float, inlined: it runs per n-gram): a
    finite float32 (kaldilm aborts on NaN, inf and 1e39)."""
    try:
        v = float(x)
    except ValueError:
        return None
    return v if -_FLT_MAX <= v <= _FLT_MAX and x.isascii() and "_" not in x else None


def iter_arpa(path: str, copy_to: BinaryIO | None = None, prog: str = "arpa"
              ) -> Iterator[tuple[int, list[str], float, float | None]]:
    """The n-gram lines of the ARPA LM ``path`` (gzipped if ``.gz``) as (order k, fields: log10-prob,
    k words, optional back-off; log10-prob and back-off as numbers, None without one), streamed
    and checked as Kaldi's ARPA reader (arpa2fst) checks them: anything malformed is one error
    ``path:line: what`` (kaldilm aborts the process on it). Lines end at LF; a CR before it is
    dropped. As arpa2fst: what comes before \\data\\ is skipped; a section with more n-grams than
    \\data\\ announces is an error, with fewer a warning (a pruned LM that kept its old header).
    <s> and </s> must be unigrams; n-grams of the highest order have no back-off weight, and
    <eps> and #0 are no words (kaldilm aborts on both). ``copy_to`` (a binary file) gets the
    file from \\data\\ to \\end\\ with LF line ends."""
    if not os.path.exists(path):
        fail("no such file", path)
    counts: dict[int, int] = {}
    bos_eos: set[str] = set()
    section, k, nk, n, end1, top = "start", 0, 0, 0, 0, 0

    def end_section(at: int) -> None:
        if k and counts.get(k) != nk:
            if k not in counts:
                fail(f"section \\{k}-grams: is not listed in \\data\\", path, at)
            msg = f"\\data\\ says ngram {k}={counts[k]} but the \\{k}-grams: section has {nk}"
            if nk > counts[k]:
                fail(msg, path, at)
            print(f"WARNING ({prog}): {path}:{at}: {msg}", file=sys.stderr)

    raw = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    try:
        with raw as f:
            # blocks of lines, split in C where they allow it (see split_lines)
            for block in iter(lambda: f.readlines(1 << 16), []):
                try:
                    joined = b"".join(block)
                    lines = joined.decode("utf-8").split("\n")   # one more when it ends in '\n'
                except UnicodeDecodeError:
                    bad = next(i for i, b in enumerate(block) if not _is_utf8(b))
                    fail("not valid UTF-8", path, n + bad + 1)
                has_nul = b"\0" in joined
                for b, line, fields in zip(block, lines, split_lines(lines)):
                    n += 1
                    if has_nul and section != "start" and "\0" in line:
                        fail("NUL byte in the LM (kaldilm aborts on it; not a text file?)", path, n)
                    if section == "grams" and fields and not fields[0].startswith("\\"):
                        nf = len(fields)
                        if nf != k + 1 and nf != k + 2:
                            fail(f"expected log10-prob, {k} word{'s' if k > 1 else ''} and optional "
                                 f"backoff, got '{line.strip(_LINE_SPACE)}'", path, n)
                        if nf == k + 2 and k == top:
                            fail(f"a back-off weight on an n-gram of the highest order ({k}): "
                                 f"'{line.strip(_LINE_SPACE)}'", path, n)
                        if ("<eps>" in line or "#0" in line) and \
                                any(w in _NOT_ARPA_WORDS for w in fields[1:k + 1]):
                            fail(f"'<eps>' and '#0' cannot be words of an ARPA LM: '{line.strip(_LINE_SPACE)}'",
                                 path, n)
                        logp = _arpa_number(fields[0])
                        bow = _arpa_number(fields[k + 1]) if nf == k + 2 else 0.0
                        if logp is None or bow is None:
                            bad = fields[0] if logp is None else fields[k + 1]
                            fail(f"bad number '{bad}' in '{line.strip(_LINE_SPACE)}'", path, n)
                        if k == 1 and fields[1] in (BOS, EOS):
                            bos_eos.add(fields[1])
                        nk += 1
                        if copy_to is not None:
                            copy_to.write(b.rstrip(b"\r\n") + b"\n")
                        yield k, fields, logp, bow if nf == k + 2 else None
                        continue
                    s = line.strip(_LINE_SPACE)
                    if section == "start":
                        if fields == ["\\data\\"]:
                            if not line.startswith("\\"):
                                fail("\\data\\ must begin its line (arpa2fst does not find it otherwise)", path, n)
                            section = "data"
                            if copy_to is not None:
                                copy_to.write(b.rstrip(b"\r\n") + b"\n")
                        continue
                    if copy_to is not None:
                        copy_to.write(b.rstrip(b"\r\n") + b"\n")
                    if not fields:
                        continue
                    if s.startswith("\\") and not line.startswith("\\"):
                        fail(f"'{s}' must begin its line (arpa2fst reads it as an n-gram otherwise)", path, n)
                    if s == "\\end\\":
                        end_section(n)
                        if k == 1:
                            end1 = n
                        section = "end"
                        break
                    if len(fields) == 1 and s.startswith("\\") and s.endswith("-grams:"):
                        j = ascii_int(s[1:-len("-grams:")])
                        if j is None:
                            fail(f"bad section header '{s}'", path, n)
                        if section == "data" and not counts:
                            fail("\\data\\ lists no 'ngram N=count' lines", path, n)
                        end_section(n)
                        if k == 1:
                            end1 = n
                        if j != k + 1:
                            fail(f"section \\{j}-grams: out of order (expected \\{k + 1}-grams:)", path, n)
                        section, k, nk, top = "grams", j, 0, max(counts, default=0)
                        continue
                    if section == "data":
                        # as Kaldi's ARPA reader: '=' is a field of its own, N and count ASCII integers
                        col = split_fields(s.replace("=", " = ", 1))
                        if len(col) != 4 or col[0] != "ngram" or col[2] != "=":
                            fail(f"expected 'ngram N=count' in \\data\\, got '{s}'", path, n)
                        order, count = ascii_int(col[1]), ascii_int(col[3])
                        if order is None or count is None or order < 1 or count < 0:
                            fail(f"bad ngram count line '{s}'", path, n)
                        counts[order] = count
                        continue
                    fail(f"expected log10-prob, {k} words and optional backoff, got '{s}'", path, n)
                if section == "end":
                    break
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        fail(f"corrupt or truncated gzip file ({e})", path, n + 1 if n else None)
    if section == "start":
        fail("no \\data\\ section: not an ARPA file", path)
    if section != "end":
        fail("missing \\end\\ (truncated ARPA file?)", path, n)
    if k < 1 or set(counts) != set(range(1, k + 1)):
        fail(f"\\data\\ lists orders {sorted(counts)} but the file has {k} n-gram section(s)", path, n)
    for w in (BOS, EOS):
        if w not in bos_eos:
            fail(f"no unigram {w} in the \\1-grams: section", path, end1)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------

def unigram_grammar_text(sentences: Iterable[Sequence[str]]) -> str:
    """Kaldi's utils/make_unigram_grammar.pl: a one-state G in OpenFst text form, a self-loop per
    word with cost -ln(count / total) and final cost -ln(sentences / total), the end of each
    sentence counted in the total (so the grammar is stochastic).  Words in order of first use
    (Kaldi's perl prints them in hash order; the FST is the same); costs with perl's 15 digits."""
    counts: dict[str, int] = {}
    total = sentences_seen = 0
    for words in sentences:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        total += len(words) + 1
        sentences_seen += 1
    if not sentences_seen:
        raise ValueError("no sentences")
    lines = [f"0\t0\t{w}\t{w}\t{-math.log(c / total):.15g}\n" for w, c in counts.items()]
    return "".join(lines) + f"0\t{-math.log(sentences_seen / total):.15g}\n"


# A training text with more OOV tokens than this is warned about (a text that still holds its
# utterance ids has one per line: often half of all tokens).
OOV_WARN_RATE = 0.05


@dataclass
class OovStats:
    """What count_ngrams saw of the words outside the vocabulary."""
    tokens: int = 0                   # all tokens (without <s>, </s>)
    lines: int = 0                    # non-empty lines
    words: Counter = field(default_factory=Counter)   # OOV word -> count
    first: Counter = field(default_factory=Counter)   # OOV first word of a line -> count

    def warning(self, name: str, unk: str, rate: float = OOV_WARN_RATE) -> str | None:
        """The warning for a high OOV rate, naming the file, the rate and the most frequent OOV
        words, with a hint when most lines start with an OOV word of their own (an utterance id);
        None when the rate is at most ``rate``."""
        noov = sum(self.words.values())
        if not self.tokens or noov <= rate * self.tokens:
            return None
        top = ", ".join(f"{w} ({c})" for w, c in self.words.most_common(5))
        msg = (f"{noov} of the {self.tokens} tokens of {name} ({100 * noov / self.tokens:.1f}%) are not in the "
               f"vocabulary and were mapped to {unk}; the most frequent: {top}")
        nfirst = sum(self.first.values())
        if nfirst > self.lines / 2 and len(self.first) >= 0.9 * nfirst:
            msg += (f". The first word of {nfirst} of the {self.lines} lines is out of the vocabulary, a "
                    "different one on almost every line: does the text still hold utterance ids? "
                    "(strip them, or use --text-has-uttid true)")
        return msg


def count_ngrams(sentences: Iterable[list[str]], order: int, vocab: set[str] | None,
                 unk: str = UNK, oov_stats: OovStats | None = None) -> tuple[list[dict[Gram, int]], int, int]:
    """Raw counts of every k-gram (k <= order) in <s> w1..wn </s>; words outside ``vocab`` become
    ``unk`` (and are recorded in ``oov_stats`` if given). Returns (counts, number of sentences,
    number of OOV tokens)."""
    from tqdm import tqdm

    counts: list[dict[Gram, int]] = [dict() for _ in range(order + 1)]
    nsent = noov = 0
    for words in tqdm(sentences, desc="counting n-grams", unit=" sentences", leave=False, **progress_kwargs()):
        nsent += 1
        if vocab is not None:
            mapped = []
            for w in words:
                if w not in vocab:
                    noov += 1
                    if oov_stats is not None:
                        oov_stats.words[w] += 1
                        if not mapped:
                            oov_stats.first[w] += 1
                    w = unk
                mapped.append(w)
            if oov_stats is not None:
                oov_stats.tokens += len(words)
                oov_stats.lines += bool(words)
            words = mapped
        s = [BOS] + words + [EOS]
        for i in range(1, len(s)):
            for k in range(1, min(order, i + 1) + 1):
                g = tuple(s[i - k + 1:i + 1])
                c = counts[k]
                c[g] = c.get(g, 0) + 1
    return counts, nsent, noov


def _kn_discounts(counts: Iterable[int], order: int, warn: bool = True) -> tuple[float, float, float]:
    n = [0, 0, 0, 0, 0]
    for c in counts:
        if c <= 4:
            n[c] += 1
    try:
        y = n[1] / (n[1] + 2 * n[2])
        d = (1 - 2 * y * n[2] / n[1], 2 - 3 * y * n[3] / n[2], 3 - 4 * y * n[4] / n[3])
        if all(0.0 <= x <= i + 1 for i, x in enumerate(d)):
            return d
    except ZeroDivisionError:
        pass
    if warn:
        print(f"pynnet-train-lm: WARNING: the counts-of-counts n1..n4 = {n[1:]} of order {order} give "
              f"Kneser-Ney discounts outside [0, 1], [0, 2], [0, 3] (too little or unusual data); "
              f"using 0.5 1 1.5 (kenlm's --discount_fallback)", file=sys.stderr)
    return (0.5, 1.0, 1.5)


def train_lm(sentences: Iterable[list[str]], order: int = 3, vocab: list[str] | None = None,
             discount: str = "kn", unk: str = UNK, verbose: bool = True, text_name: str = "the text") -> BackoffLM:
    """Train an interpolated back-off LM (``discount`` 'kn': modified Kneser-Ney; 'wb': Witten-Bell).

    The vocabulary is ``vocab`` (all other words become ``unk``) or, if None, the training words;
    unigrams are interpolated with the uniform distribution over vocabulary + </s> + unk, so every
    vocabulary word gets a probability even if it never occurs."""
    if order < 1:
        raise PynnetError(f"--order must be >= 1, got {order}")
    if discount not in ("kn", "wb"):
        raise PynnetError(f"--discount must be kn or wb, got '{discount}'")
    vset = set(vocab) if vocab is not None else None
    oov_stats = OovStats()
    raw, nsent, noov = count_ngrams(sentences, order, vset, unk, oov_stats)
    if nsent == 0 or not raw[1]:
        raise PynnetError("the training text is empty")
    if verbose:
        print(f"pynnet-train-lm: {nsent} sentences, {sum(raw[1].values()) - nsent} words, "
              f"{noov} OOV tokens mapped to {unk}", file=sys.stderr)
        warning = oov_stats.warning(text_name, unk)
        if warning:
            print(f"pynnet-train-lm: WARNING: {warning}", file=sys.stderr)

    # Counts the estimator uses at each order.
    if discount == "kn":
        adj: list[dict[Gram, int]] = [dict() for _ in range(order + 1)]
        adj[order] = raw[order]
        for k in range(order - 1, 0, -1):
            a = {g: c for g, c in raw[k].items() if g[0] == BOS}
            for g in raw[k + 1]:
                s = g[1:]
                a[s] = a.get(s, 0) + 1
            adj[k] = a
    else:
        adj = raw

    # Vocabulary of the unigram distribution (<s> is never predicted).
    words = set(g[0] for g in raw[1]) | {EOS, unk}
    if vocab is not None:
        words |= set(vocab)
    words.discard(BOS)
    V = len(words)

    # alpha (discounted mass of seen n-grams) and gamma (back-off mass) per context, order by order.
    probs: list[dict[Gram, float]] = [dict() for _ in range(order + 1)]
    bows: dict[Gram, float] = {}
    lin: list[dict[Gram, float]] = [dict() for _ in range(order + 1)]  # interpolated P, linear
    for k in range(1, order + 1):
        by_ctx: dict[Gram, list[tuple[str, int]]] = defaultdict(list)
        for g, c in adj[k].items():
            by_ctx[g[:-1]].append((g[-1], c))
        if discount == "kn":
            d1, d2, d3 = _kn_discounts(adj[k].values(), k, verbose)
        gamma_of: dict[Gram, float] = {}
        for h, items in by_ctx.items():
            total = sum(c for _, c in items)
            if discount == "kn":
                dsum = 0.0
                for w, c in items:
                    d = d1 if c == 1 else d2 if c == 2 else d3
                    dsum += d
                    lin[k][h + (w,)] = (c - d) / total
                gamma_of[h] = dsum / total
            else:
                t = len(items)
                for w, c in items:
                    lin[k][h + (w,)] = c / (total + t)
                gamma_of[h] = t / (total + t)
        if k == 1:
            g0 = gamma_of.get((), 1.0)
            for w in words:
                lin[1][(w,)] = lin[1].get((w,), 0.0) + g0 / V
        else:
            for g in list(lin[k]):
                lin[k][g] += gamma_of[g[:-1]] * lin[k - 1][g[1:]]
        for h, gm in gamma_of.items():
            if k > 1:
                bows[h] = math.log10(gm) if gm > 0 else LOG10_ZERO
        for g, p in lin[k].items():
            probs[k][g] = math.log10(p) if p > 0 else LOG10_ZERO
    probs[1][(BOS,)] = LOG10_ZERO
    # Contexts that are never extended (e.g. order-1 model) keep no backoff weight.
    return BackoffLM(order, probs, bows)


# ----------------------------------------------------------------------------------------------
# Relative-entropy pruning (Stolcke 1998; SRILM ngram -prune)
# ----------------------------------------------------------------------------------------------

def prune_lm(lm: BackoffLM, threshold: float, min_order: int = 2, verbose: bool = True) -> BackoffLM:
    """Remove n-grams (order >= min_order) whose removal raises perplexity by less than
    ``threshold`` (relative), highest order first, then recompute the backoff weights so every
    context still sums to one. N-grams that are contexts of kept higher-order n-grams are kept."""
    order = lm.order
    probs = [dict(p) for p in lm.probs]
    bows = dict(lm.bows)
    ctx_prob_cache: dict[Gram, float] = {}

    def context_log10prob(h: Gram) -> float:
        # Marginal probability of the context under the unpruned model; <s> is given (prob 1).
        if h in ctx_prob_cache:
            return ctx_prob_cache[h]
        lp = 0.0
        for i, w in enumerate(h):
            if i == 0 and w == BOS:
                continue
            lp += lm.logprob(w, h[:i])
        ctx_prob_cache[h] = lp
        return lp

    before = lm.num_ngrams()
    for k in range(order, max(min_order, 2) - 1, -1):
        by_ctx: dict[Gram, list[Gram]] = defaultdict(list)
        for g in probs[k]:
            by_ctx[g[:-1]].append(g)
        has_children = set(g[:-1] for g in probs[k + 1]) if k < order else set()
        for h, grams in by_ctx.items():
            lo = h[1:]

            def lower(w: str) -> float:
                return _logprob_in(probs, bows, order, w, lo)

            num = 1.0 - sum(10 ** probs[k][g] for g in grams)
            den = 1.0 - sum(10 ** lower(g[-1]) for g in grams)
            if num <= 0 or den <= 0:
                continue
            bow = math.log10(num / den)
            p_h = 10 ** context_log10prob(h)
            for g in grams:
                if g in has_children:
                    continue
                lp = probs[k][g]
                lpl = lower(g[-1])
                new_bow = math.log10((num + 10 ** lp) / (den + 10 ** lpl))
                delta_prob = lpl + new_bow - lp
                delta_entropy = -p_h * (10 ** lp * delta_prob + num * (new_bow - bow))
                if 10 ** delta_entropy - 1.0 < threshold:
                    # Each n-gram is judged against the unpruned context, as SRILM does.
                    del probs[k][g]
    # A pruned n-gram is no context any more: its backoff weight is 0 (ARPA lists none), so a
    # stale one must not leak into the lower-order distributions used below (a kept (<s> a e)
    # backs off through a pruned (a e)).
    bows = {h: b for h, b in bows.items() if h in probs[len(h)]}
    # Pruning changed lower-order probabilities too: recompute every backoff weight, lowest order
    # first (a context's weight depends only on those of its shorter suffixes, which are final by
    # then), so that each context again sums to one (SRILM recomputes them the same way).
    for k in range(2, order + 1):
        children: dict[Gram, list[str]] = defaultdict(list)
        for g in probs[k]:
            children[g[:-1]].append(g[-1])
        for h in probs[k - 1]:
            if h[-1] == EOS:
                continue
            ws = children.get(h, [])
            if not ws:
                bows.pop(h, None)
                continue
            num = 1.0 - sum(10 ** probs[k][h + (w,)] for w in ws)
            den = 1.0 - sum(10 ** _logprob_in(probs, bows, order, w, h[1:]) for w in ws)
            bows[h] = math.log10(num / den) if num > 0 and den > 0 else LOG10_ZERO
    if verbose:
        print(f"pynnet-train-lm: pruning with threshold {threshold:g}: n-grams {before} -> "
              f"{[len(probs[k]) for k in range(1, order + 1)]}", file=sys.stderr)
    return BackoffLM(order, probs, bows)


def _logprob_in(probs, bows, order, w: str, h: Gram) -> float:
    bo = 0.0
    while True:
        g = h + (w,)
        p = probs[len(g)].get(g)
        if p is not None:
            return bo + p
        if not h:
            return LOG10_ZERO
        bo += bows.get(h, 0.0)
        h = h[1:]


# ----------------------------------------------------------------------------------------------
# Perplexity
# ----------------------------------------------------------------------------------------------

@dataclass
class PplStats:
    sentences: int = 0
    words: int = 0
    oovs: int = 0
    logprob: float = 0.0
    zeroprobs: int = 0
    oovs_excluded: bool = False   # no <unk> in the LM: OOVs are left out, as SRILM does

    def _scored(self) -> int:
        return self.words - self.zeroprobs - (self.oovs if self.oovs_excluded else 0)

    @property
    def ppl(self) -> float:
        n = self._scored() + self.sentences
        return 10 ** (-self.logprob / n) if n else float("inf")

    @property
    def ppl1(self) -> float:
        n = self._scored()
        return 10 ** (-self.logprob / n) if n else float("inf")

    def srilm_lines(self, name: str) -> str:
        return (f"file {name}: {self.sentences} sentences, {self.words} words, {self.oovs} OOVs\n"
                f"{self.zeroprobs} zeroprobs, logprob= {self.logprob:.6g} ppl= {self.ppl:.6g} ppl1= {self.ppl1:.6g}")


def perplexity(lm: BackoffLM, sentences: Iterable[list[str]]) -> PplStats:
    """Perplexity as SRILM prints it. If the LM has <unk>, OOV words (not in the LM) are scored as
    <unk> (``ngram -unk -ppl``) and still counted in ``oovs``; otherwise they are left out of the
    score and of the word count (``ngram -ppl``). Zero-probability words are left out (``zeroprobs``)."""
    st = PplStats()
    known = lm.probs[1]
    st.oovs_excluded = (UNK,) not in known
    for words in sentences:
        st.sentences += 1
        st.words += len(words)
        is_oov = [(w,) not in known for w in words] + [False]
        st.oovs += sum(is_oov)
        _, per = lm.sentence_logprob(words)
        for lp, oov in zip(per, is_oov):
            if oov and st.oovs_excluded:
                continue
            if lp <= LOG10_ZERO:
                st.zeroprobs += 1
            else:
                st.logprob += lp
    return st
