"""Tree questions: automatic phone clustering (Kaldi cluster-phones) and compiled questions
(Kaldi compile-questions, the ``questions.qst`` file read by build-tree).

``cluster_phones`` pools the tree stats of each phone set (phones/sets.int) over the listed
pdf-classes (default: the central state, 1, as Kaldi), then clusters the sets top-down with
binary k-means on the diagonal-Gaussian objective (Kaldi TreeCluster); every cluster of the
hierarchy, plus every original set, becomes a question (a line of questions.int).

``Questions`` maps each event key to its candidate yes-sets: the phone questions for every
context position 0..N-1 and, for the pdf-class key -1, ``[0], [0 1], ...`` up to the largest
number of pdf-classes in the topology.  It reads and writes Kaldi's ``Questions`` object
(binary or text), so Kaldi's build-tree can read our questions.qst and vice versa.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable, Sequence

import numpy as np

from pynnet.hmm.tree import TreeStats, gauss_objf, segment_sum
from pynnet.hmm.tree_io import PDF_CLASS_KEY, _Reader, _Writer
from pynnet.io.atomic import atomic_write
from pynnet.io.errors import PynnetError, fail

log = logging.getLogger(__name__)


class Questions:
    """Per-key question sets (Kaldi ``Questions``); refine options are kept for round-trips only."""

    def __init__(self) -> None:
        self._q: dict[int, list[tuple[int, ...]]] = {}
        self._refine: dict[int, tuple[int, int]] = {}

    def set_questions(self, key: int, questions: Iterable[Iterable[int]], num_iters_refine: int = 0,
                      top_n: int = 5) -> None:
        self._q[int(key)] = [tuple(sorted(set(int(v) for v in q))) for q in questions]
        self._refine[int(key)] = (int(num_iters_refine), int(top_n))

    def keys(self) -> list[int]:
        return sorted(self._q)

    def questions_of(self, key: int) -> list[tuple[int, ...]]:
        return self._q.get(int(key), [])

    def serialize(self, binary: bool = True) -> bytes:
        w = _Writer(binary)
        w.token("<Questions>")
        for key in self.keys():
            w.token("<Key>")
            w.int32(key)
            w.token("<QuestionsForKey>")
            qs = self._q[key]
            w.int32(len(qs))
            for q in qs:
                w.int_vector(q)
            iters, top_n = self._refine[key]
            w.token("<RefineClustersOptions>")
            w.int32(iters)
            w.int32(top_n)
            w.token("</RefineClustersOptions>")
            w.token("</QuestionsForKey>")
        w.token("</Questions>")
        return w.getvalue()

    def write(self, path: str | os.PathLike, binary: bool = True) -> None:
        with atomic_write(path, "wb") as f:
            f.write((b"\0B" if binary else b"") + self.serialize(binary))

    @staticmethod
    def read(path: str | os.PathLike) -> "Questions":
        path = os.fspath(path)
        if not os.path.exists(path):
            fail("no such file", path)
        with open(path, "rb") as f:
            data = f.read()
        binary = data.startswith(b"\0B")
        r = _Reader(data, binary, path, 2 if binary else 0)
        r.expect("<Questions>")
        q = Questions()
        while True:
            tok = r.token()
            if tok == "</Questions>":
                break
            if tok != "<Key>":
                r.fail(f"expected <Key> or </Questions>, got '{tok}'")
            key = r.int32()
            r.expect("<QuestionsForKey>")
            nq = r.int32()
            qs = [r.int_vector() for _ in range(nq)]
            r.expect("<RefineClustersOptions>")
            iters, top_n = r.int32(), r.int32()
            r.expect("</RefineClustersOptions>")
            r.expect("</QuestionsForKey>")
            q.set_questions(key, qs, iters, top_n)
        if any(it > 0 for it, _ in q._refine.values()):
            log.warning("%s: questions ask for refinement (num-iters-refine > 0); pynnet's build-tree "
                        "uses the questions as given", path)
        return q


def compile_questions(phone_questions: Sequence[Sequence[int]], num_pdf_classes: dict[int, int], *,
                      context_width: int = 3, central_position: int = 1, num_iters_refine: int = 0
                      ) -> Questions:
    """Kaldi compile-questions: phone questions for every position, pdf-class questions from the
    topology (``[0], [0 1], ...``).  Phones asked about must all be in the topology."""
    qs = sorted({tuple(sorted(set(q))) for q in phone_questions if len(q)})
    if len(qs) != len([q for q in phone_questions if len(q)]):
        log.warning("%d duplicate questions removed", len([q for q in phone_questions if len(q)]) - len(qs))
    seen = sorted({p for q in qs for p in q})
    topo_phones = sorted(num_pdf_classes)
    if seen != topo_phones:
        extra = sorted(set(seen) - set(topo_phones))
        if extra:
            raise PynnetError(f"questions ask about phones not in the topology: {extra[:20]}")
        log.warning("phones in the topology but in no question: %s", sorted(set(topo_phones) - set(seen))[:20])
    max_pdf_classes = max(num_pdf_classes.values()) if num_pdf_classes else 1
    q = Questions()
    for pos in range(context_width):
        q.set_questions(pos, qs, num_iters_refine)
    q.set_questions(PDF_CLASS_KEY, [list(range(i + 1)) for i in range(max_pdf_classes - 1)], num_iters_refine)
    return q


# ----------------------------------------------------------------------------------------------
# Phone clustering
def _phone_set_stats(stats: TreeStats, phone_sets: Sequence[Sequence[int]], pdf_classes: Sequence[int]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = stats.central_position
    keep = np.isin(stats.events[:, 0], np.asarray(list(pdf_classes)))
    central = stats.events[keep, 1 + p]
    maxp = max(max(s) for s in phone_sets)
    set_of_phone = np.full(max(maxp, int(central.max(initial=0))) + 1, -1)
    for i, s in enumerate(phone_sets):
        set_of_phone[list(s)] = i
    sid = set_of_phone[central]
    ok = sid >= 0
    if (~ok).any():
        log.warning("phones %s have stats but are in no phone set", sorted(set(central[~ok].tolist()))[:20])
    n = len(phone_sets)
    cnt = np.bincount(sid[ok], weights=stats.counts[keep][ok], minlength=n)
    s = segment_sum(sid[ok], n, stats.sums[keep][ok])
    sq = segment_sum(sid[ok], n, stats.sumsq[keep][ok])
    for i in np.flatnonzero(cnt == 0):
        log.warning("no stats for phone set %s", list(phone_sets[i]))
    return cnt, s, sq


def _two_means(c: np.ndarray, s: np.ndarray, sq: np.ndarray, var_floor: float, rng: np.random.Generator,
               num_tries: int = 10, max_iters: int = 100) -> tuple[np.ndarray, float]:
    """Split points into two clusters maximising the summed Gaussian objf (several random starts,
    then moves of single points while they improve: Kaldi ClusterKMeans + RefineClusters)."""
    k = c.shape[0]
    base = float(gauss_objf(np.array(c.sum()), s.sum(0), sq.sum(0), var_floor))
    best_assign, best_gain = None, -np.inf
    for _ in range(num_tries):
        a = rng.integers(0, 2, size=k)
        if a.min() == a.max():
            a[rng.integers(0, k)] ^= 1
        cc = np.array([c[a == cl].sum() for cl in (0, 1)])
        cs = np.vstack([s[a == cl].sum(0) for cl in (0, 1)])
        csq = np.vstack([sq[a == cl].sum(0) for cl in (0, 1)])
        sizes = np.bincount(a, minlength=2)
        for _ in range(max_iters):
            moved = False
            for i in rng.permutation(k):
                src = a[i]
                if sizes[src] == 1:
                    continue
                dst = 1 - src
                before = gauss_objf(cc, cs, csq, var_floor).sum()
                sign = np.zeros(2)
                sign[src], sign[dst] = -1.0, 1.0
                nc, ns, nsq = cc + sign * c[i], cs + sign[:, None] * s[i], csq + sign[:, None] * sq[i]
                after = gauss_objf(nc, ns, nsq, var_floor).sum()
                if after > before + 1e-9 * abs(before):
                    a[i] = dst
                    cc, cs, csq = nc, ns, nsq
                    sizes[src] -= 1
                    sizes[dst] += 1
                    moved = True
            if not moved:
                break
        parts = [(c[a == cl].sum(), s[a == cl].sum(0), sq[a == cl].sum(0)) for cl in (0, 1)]
        gain = float(gauss_objf(np.array([parts[0][0], parts[1][0]]), np.vstack([parts[0][1], parts[1][1]]),
                                np.vstack([parts[0][2], parts[1][2]]), var_floor).sum()) - base
        if gain > best_gain:
            best_gain, best_assign = gain, a.copy()
    return best_assign, best_gain


def cluster_phones(stats: TreeStats, phone_sets: Sequence[Sequence[int]], *, pdf_classes: Sequence[int] = (1,),
                   var_floor: float = 0.01, num_tries: int = 10, seed: int = 0) -> list[list[int]]:
    """Kaldi cluster-phones (questions mode): the phone-set hierarchy as a list of questions."""
    sets = [sorted(set(int(p) for p in s)) for s in phone_sets if len(s)]
    if not sets:
        raise PynnetError("cluster_phones: no phone sets")
    allp = [p for s in sets for p in s]
    if len(allp) != len(set(allp)):
        raise PynnetError("cluster_phones: a phone is in more than one phone set")
    cnt, s, sq = _phone_set_stats(stats, sets, pdf_classes)
    rng = np.random.default_rng(seed)
    out: set[tuple[int, ...]] = {tuple(x) for x in sets}
    stack = [np.arange(len(sets))]
    while stack:
        members = stack.pop()
        out.add(tuple(sorted(p for i in members for p in sets[i])))
        if members.size < 2:
            continue
        assign, gain = _two_means(cnt[members], s[members], sq[members], var_floor, rng, num_tries)
        if gain <= 0:  # Kaldi TreeCluster threshold 0: nothing to gain (e.g. sets without stats)
            continue
        stack.append(members[assign == 0])
        stack.append(members[assign == 1])
    return [list(q) for q in sorted(out)]


def kmeans_cluster_phones(stats: TreeStats, phone_sets: Sequence[Sequence[int]], num_classes: int, *,
                          pdf_classes: Sequence[int] = (1,), var_floor: float = 0.01, seed: int = 0
                          ) -> list[list[int]]:
    """Kaldi cluster-phones --mode=k-means: partition the sets into num_classes classes
    (top-down binary splits of the class with the largest gain)."""
    sets = [sorted(set(int(p) for p in s)) for s in phone_sets if len(s)]
    if num_classes < 1 or num_classes > len(sets):
        raise PynnetError(f"--num-classes must be in 1..{len(sets)}")
    cnt, s, sq = _phone_set_stats(stats, sets, pdf_classes)
    rng = np.random.default_rng(seed)
    classes = [np.arange(len(sets))]
    while len(classes) < num_classes:
        best = None
        for ci, m in enumerate(classes):
            if m.size < 2:
                continue
            a, g = _two_means(cnt[m], s[m], sq[m], var_floor, rng)
            if best is None or g > best[0]:
                best = (g, ci, a)
        if best is None:
            break
        _, ci, a = best
        m = classes.pop(ci)
        classes += [m[a == 0], m[a == 1]]
    return sorted(sorted(p for i in m for p in sets[i]) for m in classes)


def write_int_sets(path: str | os.PathLike, sets: Iterable[Sequence[int]]) -> None:
    with atomic_write(path) as f:
        for q in sets:
            f.write(" ".join(str(int(p)) for p in q) + "\n")
