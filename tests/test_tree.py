"""Phonetic decision trees: Kaldi tree I/O, tree stats, questions, tree building, convert-ali,
model init from tree stats, and the CLIs -- on small generated data with planted structure."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import kaldi_hmm_gmm as khg  # noqa: I001  (before kaldifst)
import kaldifst

from pynnet.hmm.convert import AlignmentConverter, convert_alignments, init_model_from_tree_stats
from pynnet.hmm.questions import (Questions, cluster_phones, compile_questions, kmeans_cluster_phones,
                                  write_int_sets)
from pynnet.hmm.tree import (Root, TransitionTables, TreeStats, _cluster_bottom_up, accumulate_tree_stats,
                             build_tree, gauss_objf, iter_items, objf_given_map, phone_to_num_pdf_classes,
                             read_roots, split_to_phones, sum_tree_stats)
from pynnet.hmm.tree_io import (ConstantEventMap, ContextDependencyTree, SplitEventMap, TableEventMap,
                                from_kaldi_context_dependency, read_tree, read_tree_py, write_tree)
from pynnet.io.errors import PynnetError

PHONES = list(range(1, 9))
SIL = [1]                       # context-independent, 1-state topology
GROUP_A = [5, 6, 7, 8]          # right context in this set shifts the mean (planted)
DIM = 4


def topo_text() -> str:
    s = "<Topology>\n<TopologyEntry>\n<ForPhones> 2 3 4 5 6 7 8 </ForPhones>\n"
    for i in range(3):
        s += f"<State> {i} <PdfClass> {i} <Transition> {i} 0.75 <Transition> {i + 1} 0.25 </State>\n"
    s += "<State> 3 </State>\n</TopologyEntry>\n<TopologyEntry>\n<ForPhones> 1 </ForPhones>\n"
    s += "<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State>\n<State> 1 </State>\n"
    return s + "</TopologyEntry>\n</Topology>\n"


def make_topo():
    t = khg.HmmTopology()
    t.read(topo_text())
    return t


def mono_tm(topo):
    npc = phone_to_num_pdf_classes(topo)
    ctx = khg.monophone_context_dependency(PHONES, [0] + [npc[p] for p in PHONES])
    return ctx, khg.TransitionModel(ctx, topo)


def tid_lookup(tt: TransitionTables):
    out = {}
    for tid in range(1, tt.num_tids + 1):
        out[(int(tt.phone[tid]), int(tt.hmm_state[tid]), bool(tt.is_self_loop[tid]))] = tid
    return out


def planted_mean(phone: int, hs: int, right: int, means: np.ndarray) -> np.ndarray:
    shift = 10.0 if (right in GROUP_A and phone not in SIL) else 0.0
    return means[phone] + 3.0 * hs + shift


def generate(num_utts: int, seed: int, reordered: bool = False):
    """Monophone alignments + features whose means depend on (phone, state, right context in A)."""
    topo = make_topo()
    ctx, tm = mono_tm(topo)
    tt = TransitionTables(tm)
    tids = tid_lookup(tt)
    npc = phone_to_num_pdf_classes(topo)
    rng = np.random.default_rng(seed)
    means = np.random.default_rng(0).normal(size=(max(PHONES) + 1, DIM)) * 8.0
    alis, feats, lens = {}, {}, {}
    for u in range(num_utts):
        seq = [1] + [int(x) for x in rng.choice(PHONES[1:], size=rng.integers(4, 9))] + [1]
        ali, x, durs = [], [], []
        for i, ph in enumerate(seq):
            right = seq[i + 1] if i + 1 < len(seq) else 0
            d = []
            for hs in range(npc[ph]):
                n = int(rng.integers(1, 4))
                loops = [tids[(ph, hs, True)]] * (n - 1)
                fwd = [tids[(ph, hs, False)]]
                ali += (fwd + loops) if reordered else (loops + fwd)
                x.append(planted_mean(ph, hs, right, means) + 0.5 * rng.normal(size=(n, DIM)))
                d.append(n)
            durs.append((ph, d))
        key = f"utt{u:03d}"
        alis[key] = np.array(ali, np.int32)
        feats[key] = np.concatenate(x).astype(np.float32)
        lens[key] = durs
    return topo, ctx, tm, alis, feats, lens


@pytest.fixture(scope="module")
def data():
    return generate(120, seed=1)


@pytest.fixture(scope="module")
def stats(data):
    topo, ctx, tm, alis, feats, _ = data
    st, counts = accumulate_tree_stats(tm, iter_items(alis, feats), ci_phones=SIL)
    assert counts["done"] == len(alis)
    return st


def questions_for(st, topo, extra=(GROUP_A,)):
    qs = cluster_phones(st, [[p] for p in PHONES])
    return compile_questions(qs + [list(e) for e in extra], phone_to_num_pdf_classes(topo))


# ----------------------------------------------------------------------------------------------
# tree I/O
def test_monophone_tree_round_trips_byte_identical(tmp_path):
    ctx = khg.monophone_context_dependency([1, 2, 3, 7], [0, 1, 3, 3, 0, 0, 0, 5])
    kaldi_bytes = np.asarray(ctx.__getstate__()[0], np.int8).tobytes()
    p1, p2, t1, t2 = (tmp_path / n for n in ("a", "b", "a.txt", "b.txt"))
    write_tree(p1, ctx)
    assert p1.read_bytes() == b"\0B" + kaldi_bytes
    write_tree(p2, read_tree(p1))
    assert p2.read_bytes() == p1.read_bytes()
    write_tree(t1, ctx, binary=False)
    assert t1.read_text() == str(ctx)  # Kaldi's own text writer
    write_tree(t2, read_tree(t1), binary=False)
    assert t2.read_bytes() == t1.read_bytes()
    k = read_tree(t1)
    assert k.num_pdfs == 1 + 3 + 3 + 5 and k.compute([7], 4) == (True, 11)


KALDI_TEXT_TREE = """ContextDependency 3 1 ToPdf TE 1 4 ( NULL CE 0
TE -1 3 ( CE 1 CE 2 CE 3 )
SE 2 [ 1 2 ]
{ SE -1 [ 0 ]
{ CE 4 CE 5 }
CE 6 }
)
EndContextDependency
"""


def test_reads_handwritten_kaldi_text_tree(tmp_path):
    p = tmp_path / "tree.txt"
    p.write_text(KALDI_TEXT_TREE)
    t = read_tree_py(p)
    assert (t.context_width, t.central_position, t.num_pdfs) == (3, 1, 7)
    assert t.compute([2, 1, 3], 0) == 0           # phone 1: one pdf, no context
    assert t.compute([0, 2, 0], 2) == 3           # phone 2: per pdf-class
    assert t.compute([4, 3, 2], 0) == 4 and t.compute([4, 3, 2], 1) == 5
    assert t.compute([4, 3, 4], 0) == 6 and t.compute([4, 3, 0], 2) == 6
    assert t.compute([1, 5, 1], 0) is None        # phone 5 not in the table
    k = read_tree(p)
    assert k.num_pdfs == 7 and k.compute([4, 3, 2], 1) == (True, 5) and k.compute([4, 3, 0], 0) == (True, 6)
    # binary and back to text give the same tree
    write_tree(tmp_path / "b", t)
    assert read_tree_py(tmp_path / "b") == t
    write_tree(tmp_path / "t2", read_tree(tmp_path / "b"), binary=False)
    assert read_tree_py(tmp_path / "t2") == t


def test_bad_tree_files_name_the_file(tmp_path):
    good = ContextDependencyTree(3, 1, SplitEventMap(2, [1], ConstantEventMap(0), ConstantEventMap(1)))
    write_tree(tmp_path / "g", good)
    data = (tmp_path / "g").read_bytes()
    (tmp_path / "trunc").write_bytes(data[:-9])
    (tmp_path / "junk").write_text("ContextDependency 3 1 ToPdf XE 3 EndContextDependency")
    (tmp_path / "empty").write_text("")
    for name in ("trunc", "junk", "empty"):
        with pytest.raises(PynnetError, match=name):
            read_tree_py(tmp_path / name)
    with pytest.raises(PynnetError, match="junk:1:"):
        read_tree_py(tmp_path / "junk")
    with pytest.raises(PynnetError, match="no such file"):
        read_tree(tmp_path / "missing")


def test_deep_tree_round_trips(tmp_path):
    m = ConstantEventMap(0)
    for i in range(1, 2500):  # a degenerate greedy tree, deeper than Python's recursion limit
        m = SplitEventMap(2, [i], ConstantEventMap(i), m)
    t = ContextDependencyTree(3, 1, m)
    write_tree(tmp_path / "deep", t)
    back = read_tree_py(tmp_path / "deep")
    assert back.num_pdfs == 2500 and back.compute([0, 1, 7], 0) == 7 and back.compute([0, 1, 9999], 2) == 0
    assert read_tree(tmp_path / "deep").compute([0, 1, 2000], 1) == (True, 2000)


def test_eventmap_vectorised_lookup_matches_scalar():
    m = TableEventMap(1, [None, ConstantEventMap(0),
                          SplitEventMap(2, [1, 3], TableEventMap(-1, [ConstantEventMap(1), None, ConstantEventMap(2)]),
                                        ConstantEventMap(3))])
    rng = np.random.default_rng(0)
    ev = rng.integers(-1, 5, size=(500, 4))
    got = m.map_events([-1, 0, 1, 2], ev)
    for row, g in zip(ev, got):
        d = {k: int(v) for k, v in zip([-1, 0, 1, 2], row) if v >= 0}
        want = m.lookup(d)
        assert g == (-1 if want is None else want)


# ----------------------------------------------------------------------------------------------
# crafted ContextDependency inside kaldi-hmm-gmm
def _arcs(fst):
    for s in range(fst.num_states):
        it = kaldifst.ArcIterator(fst, s)
        while not it.done:
            yield s, it.value
            it.next()


def test_crafted_tree_works_with_transition_model_graph_compiler_and_h(data, stats):
    topo = data[0]
    tree, _ = build_tree(stats, [Root([p], True, True) for p in PHONES], questions_for(stats, topo),
                         phone_to_num_pdf_classes(topo), thresh=100.0)
    ctx = tree.to_kaldi()
    assert (ctx.context_width, ctx.central_position, ctx.num_pdfs) == (3, 1, tree.num_pdfs)
    tm = khg.TransitionModel(ctx, topo)
    assert tm.num_pdfs == tree.num_pdfs
    # every triphone's pdfs as the Python tree says
    for w in ([2, 3, 5], [0, 4, 0], [6, 7, 2]):
        for k in range(3):
            assert ctx.compute(w, k) == (True, tree.compute(w, k))
    # word 1 = phones 3 4; graph for the word: its tids are those of 3 and 4 in context
    lex = kaldifst.compile(s="0 1 3 1\n1 2 4 0\n2\n", acceptor=False)
    gc = khg.TrainingGraphCompiler(tm, ctx, lex, [], khg.TrainingGraphCompilerOptions())
    g = gc.compile_graph_from_text([1])
    tids = {a.ilabel for _, a in _arcs(g) if a.ilabel > 0}
    pdfs = {tm.transition_id_to_pdf(t) for t in tids}
    want = {tree.compute([0, 3, 4], k) for k in range(3)} | {tree.compute([3, 4, 0], k) for k in range(3)}
    assert {tm.transition_id_to_phone(t) for t in tids} == {3, 4}
    assert pdfs == want
    # H transducer for two context windows
    ilabel_info = [[], [0, 3, 4], [3, 4, 0]]
    h, disambig = khg.get_h_transducer(ilabel_info, ctx, tm, khg.HTransducerConfig())
    hpdfs = {tm.transition_id_to_pdf(a.ilabel) for _, a in _arcs(h) if a.ilabel > 0}
    assert hpdfs == want
    assert {a.olabel for _, a in _arcs(h)} - {0} == {1, 2}


# ----------------------------------------------------------------------------------------------
# statistics
def reference_stats(tm, alis, feats, ci):
    """Slow per-frame reference following Kaldi's AccumulateTreeStats."""
    acc = {}
    for utt, ali in alis.items():
        # split into phones: a phone ends at a transition into the final state (plus its self-loops
        # when reordered: we only use non-reordered input here)
        phones, cur = [], []
        for t in ali:
            cur.append(int(t))
            if tm.is_final(int(t)):
                phones.append(cur)
                cur = []
        seq = [tm.transition_id_to_phone(p[0]) for p in phones]
        f = 0
        topo = tm.topo
        for i, tidlist in enumerate(phones):
            central = seq[i]
            window = [seq[i + j - 1] if 0 <= i + j - 1 < len(seq) else 0 for j in range(3)]
            for tid in tidlist:
                ts = tm.id2state[tid]
                phone, hs, _, _ = tm.tuples[ts - 1].__getstate__()
                entry = topo.topology_for_phone(phone)
                pc = entry[hs].self_loop_pdf_class if tm.is_self_loop(tid) else entry[hs].forward_pdf_class
                ev = [pc] + [window[j] if (j == 1 or central not in ci) else -1 for j in range(3)]
                c, s, sq = acc.get(tuple(ev), (0.0, 0.0, 0.0))
                x = feats[utt][f].astype(np.float64)
                acc[tuple(ev)] = (c + 1, s + x, sq + x * x)
                f += 1
    return acc


def test_vectorised_stats_equal_reference_loop(data):
    _, _, tm, alis, feats, _ = data
    small = {k: alis[k] for k in list(alis)[:12]}
    st, counts = accumulate_tree_stats(tm, iter_items(small, feats), ci_phones=SIL)
    ref = reference_stats(tm, small, feats, SIL)
    assert st.num_events == len(ref)
    for row, c, s, sq in zip(st.events, st.counts, st.sums, st.sumsq):
        rc, rs, rsq = ref[tuple(int(v) for v in row)]
        assert c == rc
        np.testing.assert_allclose(s, rs, rtol=1e-9)
        np.testing.assert_allclose(sq, rsq, rtol=1e-9)
    # ci phone (silence) events carry no context keys; others all keys
    sil = st.events[:, 2] == 1
    assert sil.any() and np.all(st.events[sil][:, [1, 3]] == -1) and np.all(st.events[~sil] >= 0)


def test_reordered_alignments_and_jobs_give_the_same_stats(data, stats, tmp_path):
    _, _, tm, alis, feats, _ = data
    _, _, _, alis_r, feats_r, _ = generate(120, seed=1, reordered=True)
    for u in alis:
        np.testing.assert_array_equal(feats[u], feats_r[u])
    st_r, _ = accumulate_tree_stats(tm, iter_items(alis_r, feats_r), ci_phones=SIL)
    np.testing.assert_array_equal(st_r.events, stats.events)
    np.testing.assert_allclose(st_r.sums, stats.sums)
    # two jobs, saved and summed == one job (and chunked flushing inside a job changes nothing)
    keys = list(alis)
    parts = []
    for j, ks in enumerate((keys[:50], keys[50:])):
        st, _ = accumulate_tree_stats(tm, iter_items({k: alis[k] for k in ks}, feats), ci_phones=SIL,
                                      chunk_frames=300)
        st.save(tmp_path / f"{j}.treeacc")
        parts.append(TreeStats.load(tmp_path / f"{j}.treeacc"))
    tot = sum_tree_stats(parts)
    np.testing.assert_array_equal(tot.events, stats.events)
    np.testing.assert_allclose(tot.counts, stats.counts)
    np.testing.assert_allclose(tot.sumsq, stats.sumsq)


def test_kaldi_treeacc_format_round_trips(stats, tmp_path):
    for binary in (True, False):
        stats.save(tmp_path / "k.treeacc", kaldi=True, binary=binary)
        head = (tmp_path / "k.treeacc").read_bytes()[:6]
        assert head == (b"\0BBTS " if binary else b"BTS " + str(stats.num_events).encode()[:2])
        back = TreeStats.load(tmp_path / "k.treeacc")
        assert (back.context_width, back.central_position) == (3, 1)
        np.testing.assert_array_equal(back.events, stats.events)
        np.testing.assert_array_equal(back.counts, stats.counts)
        np.testing.assert_array_equal(back.sums, stats.sums)      # repr/doubles: exact
        np.testing.assert_array_equal(back.sumsq, stats.sumsq)
    data = (tmp_path / "k.treeacc").read_bytes()
    (tmp_path / "cut").write_bytes(data[:len(data) // 2])
    with pytest.raises(PynnetError, match="cut"):
        TreeStats.load(tmp_path / "cut")
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(PynnetError, match="junk.npz"):
        TreeStats.load(tmp_path / "junk.npz")


def test_objective_matches_kaldi_gauss_clusterable():
    rng = np.random.default_rng(0)
    for n, scale in ((7, [1.0, 0.05, 2.0]), (1, [1.0, 1.0, 1.0]), (50, [3.0, 0.001, 0.2])):
        x = rng.normal(size=(n, 3)) * scale + 5.0
        g = khg.GaussClusterable(x.sum(0), (x * x).sum(0), 0.01, float(n))
        ours = gauss_objf(np.array(float(n)), x.sum(0), (x * x).sum(0), 0.01)
        assert ours == pytest.approx(g.objf(), rel=1e-5, abs=1e-4)


def test_bad_utterances_are_skipped(data):
    _, _, tm, alis, feats, _ = data
    k = list(alis)[:4]
    bad = {k[0]: alis[k[0]][:-1],            # cut inside a phone
           k[1]: alis[k[1]],                 # fine
           k[2]: alis[k[2]]}                 # features too short below
    f = {k[0]: feats[k[0]][:-1], k[1]: feats[k[1]], k[2]: feats[k[2]][:-2]}
    items = list(iter_items(bad, f)) + [(k[3], alis[k[3]], None), ("x", None, feats[k[3]])]
    st, counts = accumulate_tree_stats(tm, items)
    assert counts == {"done": 1, "no_ali": 1, "no_feats": 1, "bad_length": 1, "bad_ali": 1}
    assert st.total_count() == len(alis[k[1]])


def test_split_to_phones_boundaries(data):
    _, _, tm, alis, _, lens = data
    tt = TransitionTables(tm)
    for u in list(alis)[:20]:
        ok, starts, ends = split_to_phones(tt, alis[u])
        assert ok
        assert [int(e - s) for s, e in zip(starts, ends)] == [sum(d) for _, d in lens[u]]
        assert [int(tt.phone[alis[u][s]]) for s in starts] == [p for p, _ in lens[u]]


# ----------------------------------------------------------------------------------------------
# questions
def test_cluster_phones_finds_planted_groups_and_qst_round_trip(tmp_path):
    # phone means: 2,3,4 near one point, 5..8 near another (pdf-class 1 only counts)
    rng = np.random.default_rng(3)
    ev, c, s, sq = [], [], [], []
    for ph in PHONES[1:]:
        centre = np.zeros(DIM) if ph < 5 else np.full(DIM, 10.0)
        x = centre + rng.normal(size=(200, DIM)) + 0.3 * rng.normal(size=DIM)
        ev.append([1, 0, ph, 0])
        c.append(200.0)
        s.append(x.sum(0))
        sq.append((x * x).sum(0))
    st = TreeStats(3, 1, np.array(ev, np.int32), np.array(c), np.array(s), np.array(sq))
    qs = cluster_phones(st, [[p] for p in PHONES[1:]])
    assert [2, 3, 4] in qs and [5, 6, 7, 8] in qs and [2, 3, 4, 5, 6, 7, 8] in qs
    assert all([p] in qs for p in PHONES[1:])
    assert kmeans_cluster_phones(st, [[p] for p in PHONES[1:]], 2) == [[2, 3, 4], [5, 6, 7, 8]]
    npc = {p: 3 for p in PHONES[1:]}
    q = compile_questions(qs, npc)
    assert q.keys() == [-1, 0, 1, 2] and q.questions_of(-1) == [(0,), (0, 1)]
    for binary in (True, False):
        q.write(tmp_path / "q.qst", binary)
        back = Questions.read(tmp_path / "q.qst")
        assert back.serialize(binary) == q.serialize(binary)
        assert back.questions_of(2) == q.questions_of(2)
    with pytest.raises(PynnetError, match="not in the topology"):
        compile_questions(qs + [[99]], npc)


# ----------------------------------------------------------------------------------------------
# tree building
def planted_label(ev):
    pc, _, ph, right = (int(v) for v in ev)
    return (ph, pc, ph not in SIL and right in GROUP_A)


def test_build_tree_recovers_planted_clusters(data, stats):
    topo = data[0]
    roots = [Root([p], True, True) for p in PHONES]
    # (Kaldi's default cluster threshold, the smallest split, may merge two small planted leaves
    # on this little data; a modest fixed threshold keeps exactly the planted structure)
    tree, info = build_tree(stats, roots, questions_for(stats, topo), phone_to_num_pdf_classes(topo),
                            thresh=200.0, cluster_thresh=50.0)
    pdf = tree.to_pdf.map_events(stats.keys, stats.events)
    assert (pdf >= 0).all()
    labels = [planted_label(e) for e in stats.events]
    # same pdf <=> same planted group
    by_label, by_pdf = {}, {}
    for lab, p in zip(labels, pdf):
        by_label.setdefault(lab, set()).add(int(p))
        by_pdf.setdefault(int(p), set()).add(lab)
    assert all(len(v) == 1 for v in by_label.values()), by_label
    assert all(len(v) == 1 for v in by_pdf.values()), by_pdf
    assert tree.num_pdfs == len(by_label) == 1 + 7 * 3 * 2
    assert sorted(set(pdf.tolist())) == list(range(tree.num_pdfs))
    # the context question asked is exactly the planted right-context set, on key 2
    context_splits = set()
    stack = [tree.to_pdf]
    while stack:
        n = stack.pop()
        if isinstance(n, SplitEventMap) and n.key in (0, 2):
            context_splits.add((n.key, n.yes_set))
        stack.extend(n.children())
    assert context_splits == {(2, tuple(GROUP_A))}
    assert info.like_impr > 0 and objf_given_map(stats, tree.to_pdf) > objf_given_map(
        stats, ConstantEventMap(0))


def test_build_tree_max_leaves_and_clustering(data, stats):
    topo = data[0]
    npc = phone_to_num_pdf_classes(topo)
    q = questions_for(stats, topo)
    roots = [Root([p], True, True) for p in PHONES]
    small, info = build_tree(stats, roots, q, npc, thresh=0.0, max_leaves=20, cluster_thresh=0)
    assert small.num_pdfs == 20 and info.num_removed == 0
    # tiny split threshold: noise splits, which post-clustering merges back (within roots)
    big, info = build_tree(stats, roots, q, npc, thresh=1.0, cluster_thresh=150.0)
    assert info.num_removed > 0 and info.num_pdfs == info.num_leaves_split - info.num_removed
    pdf = big.to_pdf.map_events(stats.keys, stats.events)
    # merging never crosses roots (central phones)
    for p in np.unique(pdf):
        assert len(set(stats.events[pdf == p, 2].tolist())) == 1
    # a not-split root keeps one leaf per pdf-class; a shared root of two phones one tree
    roots2 = [Root([1], False, False), Root([2, 3], True, True)] + [Root([p], True, True) for p in PHONES[3:]]
    stub, info = build_tree(stats, roots2, q, npc, thresh=1e12)
    assert info.num_splits == 0 and stub.num_pdfs == info.num_leaves_stub == 1 + 1 + 5
    assert {stub.compute([a, ph, b], k) for a in (0, 4) for b in (0, 6) for ph in (2, 3) for k in range(3)} \
        == {stub.compute([0, 2, 0], 0)}
    assert stub.compute([4, 1, 4], 0) == stub.compute([0, 1, 0], 0) != stub.compute([0, 4, 0], 0)
    # with splitting, the shared root {2, 3} is split by a question about the central phone
    t2, _ = build_tree(stats, roots2, q, npc, thresh=200.0)
    assert t2.compute([0, 2, 0], 0) != t2.compute([0, 3, 0], 0)
    stack, central_q = [t2.to_pdf], []
    while stack:
        n = stack.pop()
        if isinstance(n, SplitEventMap) and n.key == 1 and len(set(n.yes_set) & {2, 3}) == 1:
            central_q.append(n.yes_set)
        stack.extend(n.children())
    assert central_q


def test_cluster_bottom_up_merges_identical_pairs():
    rng = np.random.default_rng(0)
    c, s, sq = [], [], []
    for centre in (0.0, 0.0, 20.0, 20.0):
        x = centre + rng.normal(size=(500, 3))
        c.append(500.0), s.append(x.sum(0)), sq.append((x * x).sum(0))
    assign, change = _cluster_bottom_up(np.array(c), np.array(s), np.array(sq), 50.0, 0.01)
    assert assign.tolist() == [0, 0, 2, 2] and -50.0 * 2 <= change <= 0


def test_build_tree_bad_input(tmp_path, stats, data):
    topo = data[0]
    (tmp_path / "roots").write_text("shared split 1 2\nshared maybe 3\n")
    with pytest.raises(PynnetError, match="roots:2:"):
        read_roots(tmp_path / "roots")
    (tmp_path / "roots").write_text("shared split 1 2\nshared split 2 3\n")
    with pytest.raises(PynnetError, match="roots:2: phone"):
        read_roots(tmp_path / "roots")
    with pytest.raises(PynnetError, match="not in the topology"):
        build_tree(stats, [Root([1, 99], True, True)], questions_for(stats, topo),
                   phone_to_num_pdf_classes(topo))


def test_roots_and_sets_split_at_spaces_and_tabs_only(tmp_path):
    # Kaldi splits these lines at spaces and tabs: '1\u00a02' is no phone id (str.split() made it
    # 1 and 2), nor is '\u0661' (int() read it as 1)
    from pynnet.hmm.tree import read_int_sets

    p = tmp_path / "roots"
    p.write_text("shared\tsplit  1 2\r\n\nnot-shared not-split 3\n", encoding="utf-8")
    assert read_roots(p) == [Root([1, 2], True, True), Root([3], False, False)]
    for bad in ("1\u00a02", "\u0661", "1_0"):
        p.write_text(f"shared split 3\nshared split {bad}\n", encoding="utf-8")
        with pytest.raises(PynnetError, match="roots:2: phones must be integer ids"):
            read_roots(p)
    q = tmp_path / "questions.int"
    q.write_text("1\t2  3\r\n\n4\n", encoding="utf-8")
    assert read_int_sets(q, "question") == [[1, 2, 3], [4]]
    q.write_text("1 2\n3\u00a04\n", encoding="utf-8")
    with pytest.raises(PynnetError, match="questions.int:2: expected integer ids in each question: '3\u00a04'"):
        read_int_sets(q, "question")


# ----------------------------------------------------------------------------------------------
# convert-ali and gmm-init-model
def test_convert_alignments_keeps_phones_states_and_lengths(data, stats):
    topo, _, tm, alis, _, lens = data
    tree, _ = build_tree(stats, [Root([p], True, True) for p in PHONES], questions_for(stats, topo),
                         phone_to_num_pdf_classes(topo), thresh=200.0)
    new_tm = khg.TransitionModel(tree.to_kaldi(), topo)
    new = dict(convert_alignments(tm, new_tm, tree, alis))
    assert new.keys() == alis.keys()
    old_t, new_t = TransitionTables(tm), TransitionTables(new_tm)
    for u in alis:
        a, b = alis[u], new[u]
        assert a.shape == b.shape
        np.testing.assert_array_equal(old_t.phone[a], new_t.phone[b])
        np.testing.assert_array_equal(old_t.hmm_state[a], new_t.hmm_state[b])
        np.testing.assert_array_equal(old_t.is_self_loop[a], new_t.is_self_loop[b])
        ok, starts, ends = split_to_phones(new_t, b)
        assert ok and [int(e - s) for s, e in zip(starts, ends)] == [sum(d) for _, d in lens[u]]
        # pdfs are the new tree's for each triphone
        seq = [p for p, _ in lens[u]]
        for i, (s0, e0) in enumerate(zip(starts, ends)):
            w = [seq[i - 1] if i else 0, seq[i], seq[i + 1] if i + 1 < len(seq) else 0]
            for t in range(s0, e0):
                assert new_t.pdf[b[t]] == tree.compute(w, int(new_t.pdf_class[b[t]]))
    # and back to the monophone model: exactly the original alignments
    mono = from_kaldi_context_dependency(data[1])
    back = dict(convert_alignments(new_tm, tm, mono, new))
    for u in alis:
        np.testing.assert_array_equal(back[u], alis[u])
    # reordered alignments (self-loops after the forward transition) convert and stay reordered
    _, _, _, alis_r, _, _ = generate(10, seed=1, reordered=True)
    conv_r = dict(convert_alignments(tm, new_tm, tree, alis_r))
    for u in alis_r:
        np.testing.assert_array_equal(new_t.is_self_loop[conv_r[u]], old_t.is_self_loop[alis_r[u]])
        np.testing.assert_array_equal(new_t.pdf[conv_r[u]], new_t.pdf[new[u]])
    # a tree that does not match the model is refused
    with pytest.raises(PynnetError):
        AlignmentConverter(tm, tm, tree).convert(alis["utt000"])


def test_phone_map_in_stats_and_conversion(data):
    """--phone-map: phone 8 merged into 7 (a new phone set) in both acc-tree-stats and convert-ali."""
    topo, _, tm, alis, feats, _ = data
    pmap = np.arange(9)
    pmap[8] = 7
    st, _ = accumulate_tree_stats(tm, iter_items(alis, feats), ci_phones=SIL, phone_map=pmap)
    assert 8 not in set(st.events[:, 1:].ravel().tolist()) and 7 in set(st.events[:, 2].tolist())
    topo7 = khg.HmmTopology()
    topo7.read(topo_text().replace("2 3 4 5 6 7 8 </ForPhones>", "2 3 4 5 6 7 </ForPhones>"))
    npc = phone_to_num_pdf_classes(topo7)
    q = compile_questions(cluster_phones(st, [[p] for p in range(1, 8)]) + [[5, 6, 7]], npc)
    tree, _ = build_tree(st, [Root([p], True, True) for p in range(1, 8)], q, npc, thresh=200.0)
    new_tm = khg.TransitionModel(tree.to_kaldi(), topo7)
    new = dict(convert_alignments(tm, new_tm, tree, alis, phone_map=pmap))
    old_t, new_t = TransitionTables(tm), TransitionTables(new_tm)
    for u in alis:
        np.testing.assert_array_equal(pmap[old_t.phone[alis[u]]], new_t.phone[new[u]])
        np.testing.assert_array_equal(old_t.hmm_state[alis[u]], new_t.hmm_state[new[u]])
    with pytest.raises(PynnetError, match="phone"):  # without the map, phone 8 has no place in the new model
        AlignmentConverter(tm, new_tm, tree).convert_many(list(alis.values()))


def test_init_model_from_tree_stats(data, stats):
    topo, _, tm, _, _, _ = data
    tree, _ = build_tree(stats, [Root([p], True, True) for p in PHONES], questions_for(stats, topo),
                         phone_to_num_pdf_classes(topo), thresh=200.0)
    new_tm, am, occs = init_model_from_tree_stats(tree, topo, stats, old_tm=tm)
    assert am.num_pdfs == new_tm.num_pdfs == tree.num_pdfs and am.dim == DIM
    pdf = tree.to_pdf.map_events(stats.keys, stats.events)
    for p in range(tree.num_pdfs):
        m = pdf == p
        c = stats.counts[m].sum()
        assert occs[p] == c
        mean = stats.sums[m].sum(0) / c
        var = np.maximum(stats.sumsq[m].sum(0) / c - mean ** 2, 0.01)
        g = am.get_pdf(p)
        np.testing.assert_allclose(np.asarray(g.means)[0], mean, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(np.asarray(g.vars)[0], var, rtol=1e-4)
    # transition probabilities copied from the old model: the silence self-loop is 0.5 in topo,
    # the mono model's was 0.5 too -> unchanged; all log-probs finite and normalised
    lp = np.exp(np.asarray(new_tm.log_probs[1:]))
    ts = np.asarray(new_tm.id2state[1:])
    tot = np.bincount(ts, weights=lp)
    np.testing.assert_allclose(tot[1:], 1.0, rtol=1e-5)
    assert gauss_objf(np.array([0.0]), np.zeros((1, 2)), np.zeros((1, 2)), 0.01)[0] == 0.0
    # from an old (monophone) tree + model: each new pdf copies its phone/state's old GMM
    mono = from_kaldi_context_dependency(data[1])
    st1, _ = accumulate_tree_stats(tm, iter_items(data[3], data[4]), context_width=1, central_position=0)
    _, mono_am, _ = init_model_from_tree_stats(mono, topo, st1)
    _, am2, _ = init_model_from_tree_stats(tree, topo, stats, old_tree=mono, old_am=mono_am)
    votes = {}
    for ev, p, c in zip(stats.events, pdf, stats.counts):
        old = mono.compute([int(ev[2])], int(ev[0]))
        votes.setdefault(int(p), {}).setdefault(old, 0.0)
        votes[int(p)][old] += c
    for p, v in votes.items():  # the old pdf most of the new pdf's data maps to
        old = max(v, key=v.get)
        np.testing.assert_array_equal(np.asarray(am2.get_pdf(p).means), np.asarray(mono_am.get_pdf(old).means))


# ----------------------------------------------------------------------------------------------
# programs
def _run(args, ok=True):
    """Run an installed console script (a real process: exit status and stderr as users see them)."""
    bindir = os.path.dirname(sys.executable)
    r = subprocess.run([os.path.join(bindir, args[0])] + [str(a) for a in args[1:]], capture_output=True, text=True)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def _main(capsys, args, ok=True):
    """Run a program's main(argv) in this process (same code as the console script, no start-up cost)."""
    from pynnet.bin import tree as bin_tree
    entry = {"pynnet-acc-tree-stats": bin_tree.acc_tree_stats_main, "pynnet-sum-tree-stats": bin_tree.sum_tree_stats_main,
             "pynnet-cluster-phones": bin_tree.cluster_phones_main,
             "pynnet-compile-questions": bin_tree.compile_questions_main,
             "pynnet-build-tree": bin_tree.build_tree_main, "pynnet-gmm-init-model": bin_tree.gmm_init_model_main,
             "pynnet-convert-ali": bin_tree.convert_ali_main, "pynnet-copy-tree": bin_tree.copy_tree_main,
             "pynnet-tree-info": bin_tree.tree_info_main}[args[0]]
    capsys.readouterr()
    rc = entry([str(a) for a in args[1:]])
    out = capsys.readouterr()
    if ok:
        assert rc == 0, out.err
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def test_programs_end_to_end(data, tmp_path, capsys):
    import kaldiio

    from pynnet.hmm.ali_io import read_alignments, write_alignments
    from pynnet.hmm.model_io import read_model, write_model
    topo, ctx, tm, alis, feats, _ = data
    d = tmp_path
    (d / "topo").write_text(topo_text())
    mono = from_kaldi_context_dependency(ctx)
    st_mono, _ = accumulate_tree_stats(tm, iter_items(alis, feats), context_width=1, central_position=0)
    _, am, _ = init_model_from_tree_stats(mono, topo, st_mono)
    write_model(d / "mono.mdl", tm, am)
    with kaldiio.WriteHelper(f"ark,scp:{d}/feats.ark,{d}/feats.scp") as w:
        for u in sorted(feats):
            w(u, feats[u])
    keys = sorted(alis)
    write_alignments(d / "ali.1.gz", {k: alis[k] for k in keys[:60]})
    write_alignments(d / "ali.2.gz", {k: alis[k] for k in keys[60:]})
    write_int_sets(d / "sets.int", [[p] for p in PHONES])
    (d / "extra_questions.int").write_text(" ".join(map(str, GROUP_A)) + "\n")
    (d / "roots.int").write_text("".join(f"shared split {p}\n" for p in PHONES))
    for j in (1, 2):
        _main(capsys, ["pynnet-acc-tree-stats", "--ci-phones=1", d / "mono.mdl", f"scp:{d}/feats.scp", d / f"ali.{j}.gz",
              d / f"{j}.treeacc"])
    # Kaldi-format treeacc from sum-tree-stats is read by the later programs
    _main(capsys, ["pynnet-sum-tree-stats", "--kaldi-format=true", d / "treeacc", d / "1.treeacc", d / "2.treeacc"])
    assert (d / "treeacc").read_bytes().startswith(b"\0BBTS ")
    _main(capsys, ["pynnet-cluster-phones", d / "treeacc", d / "sets.int", d / "questions.int"])
    with open(d / "questions.int", "a") as f:
        f.write((d / "extra_questions.int").read_text())
    _main(capsys, ["pynnet-compile-questions", d / "topo", d / "questions.int", d / "questions.qst"])
    r = _main(capsys, ["pynnet-build-tree", "--thresh=200", "--max-leaves=200", "--cluster-thresh=50", d / "treeacc", d / "roots.int",
              d / "questions.qst", d / "topo", d / "tree"])
    assert "BuildTree" in r.stderr
    info = _run(["pynnet-tree-info", d / "tree"]).stdout.split()
    assert info == ["num-pdfs", "43", "context-width", "3", "central-position", "1"]
    _main(capsys, ["pynnet-gmm-init-model", "--write-occs", d / "1.occs", d / "tree", d / "treeacc", d / "topo",
          d / "1.mdl"])
    write_tree(d / "mono.tree", ctx)
    _main(capsys, ["pynnet-gmm-init-model", d / "tree", d / "treeacc", d / "topo", d / "1b.mdl", d / "mono.tree",
                   d / "mono.mdl"])
    assert read_model(d / "1b.mdl")[1].num_pdfs == 43
    tm1, am1 = read_model(d / "1.mdl")
    assert am1.num_pdfs == 43 and (d / "1.occs").read_bytes().startswith(b"\0BFV ")
    _main(capsys, ["pynnet-convert-ali", d / "mono.mdl", d / "1.mdl", d / "tree", d / "ali.1.gz", d / "new.1.gz"])
    new = read_alignments(d / "new.1.gz")
    assert sorted(new) == keys[:60] and all(len(new[k]) == len(alis[k]) for k in new)
    _main(capsys, ["pynnet-copy-tree", "--binary=false", d / "tree", d / "tree.txt"])
    assert (d / "tree.txt").read_text().startswith("ContextDependency 3 1 ToPdf ")
    # user mistakes: one line naming the file, exit 1, nothing written
    (d / "bad_roots.int").write_text("shared split 1\nshared 2\n")
    r = _run(["pynnet-build-tree", d / "treeacc", d / "bad_roots.int", d / "questions.qst", d / "topo",
              d / "tree2"], ok=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "bad_roots.int:2:" in r.stderr
    assert not (d / "tree2").exists()
    r = _main(capsys, ["pynnet-sum-tree-stats", d / "x", d / "1.treeacc", d / "topo"], ok=False)
    assert r.returncode == 1 and "topo" in r.stderr and not (d / "x").exists()
    r = _main(capsys, ["pynnet-acc-tree-stats", d / "mono.mdl", f"scp:{d}/feats.scp", d / "missing.gz", d / "y"], ok=False)
    assert r.returncode == 1 and "missing.gz" in r.stderr and not (d / "y").exists()
