"""Decision-tree programs (Kaldi's acc-tree-stats, sum-tree-stats, cluster-phones,
compile-questions, build-tree, gmm-init-model, convert-ali, tree-info, copy-tree).

As Kaldi's, with the same argument order; features are named by their data dir plus
``--cmvn-opts``/``--delta-order`` (as the GMM programs), or by a Kaldi rspecifier
(``scp:feats.scp``, ``ark:x.ark``) used as is.  Alignments are ``ali.N.gz`` files (or an
alignment dir).  Tree stats files are pynnet's ``.npz`` format (see pynnet.hmm.tree).
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from pynnet.bin._cli import cli
from pynnet.bin._opts import (add_binary_opt, add_context_opts, add_transform_opts, check_stats_context, feat_transforms_of,
                              float_opt, int_list, int_opt, kaldi_bool, log, parser, setup_logging)
from pynnet.io.errors import PynnetError, fail


def _features(spec: str, a: argparse.Namespace):
    """(utt, matrix) from a data dir (CMVN + deltas or LDA+MLLT/fMLLR, as the GMM stages) or a
    Kaldi rspecifier."""
    if os.path.isdir(spec):
        from pynnet.hmm.train import gmm_features
        return gmm_features(spec, a.cmvn_opts, a.delta_order, transforms=feat_transforms_of(a, spec))
    if ":" in spec:
        from pynnet.feat.tables import read_matrices
        return read_matrices(spec)
    fail("features must be a data directory or an rspecifier (scp:..., ark:...)", spec)


def _read_phone_map(path: str) -> np.ndarray:
    """Kaldi --phone-map file: lines ``old new``."""
    from pynnet.io.tables import read_table_lines
    pairs = []
    for n, key, rest in read_table_lines(path, min_fields=2, max_fields=2):
        try:
            a, b = int(key), int(rest)
        except ValueError:
            fail("expected '<old-phone> <new-phone>' integers", path, n)
        if a <= 0 or b <= 0:
            fail("phone ids must be positive", path, n)
        pairs.append((a, b))
    m = np.full(max(a for a, _ in pairs) + 1, -1, np.int64)
    m[0] = 0
    for a, b in pairs:
        m[a] = b
    return m


def _stats_format_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kaldi-format", type=kaldi_bool, default=False, help="write Kaldi's treeacc format instead "
                   "of pynnet's .npz (both are read by every program)")
    add_binary_opt(p, "with --kaldi-format: binary or text")


def _topology(path: str):
    from pynnet.hmm.tree import load_topology
    return load_topology(path)


def _load_stats(a: argparse.Namespace):
    """``a.stats_in`` as TreeStats, with the context that ``add_context_opts(p, checked=True)`` gave."""
    from pynnet.hmm.tree import TreeStats
    stats = TreeStats.load(a.stats_in, a.context_width, a.central_position)
    check_stats_context(stats, a, a.stats_in)
    return stats


# --------------------------------------------------------------------------- acc-tree-stats
@cli
def acc_tree_stats_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-acc-tree-stats", "Accumulate statistics for phonetic-context tree building "
               "(Kaldi acc-tree-stats).  Usage: pynnet-acc-tree-stats [options] <model-in> "
               "<features: data-dir | rspecifier> <alignments: ali.N.gz | ali-dir> <tree-accs-out>")
    p.add_argument("--ci-phones", default="", help="colon-separated context-independent phones, e.g. 1:2:3 "
                   "(their context is not recorded)")
    add_context_opts(p)
    p.add_argument("--phone-map", default="", help="file mapping phones (old new) before recording context")
    p.add_argument("--var-floor", type=float_opt, default=0.01, help="accepted for Kaldi compatibility; the "
                   "variance floor is applied by build-tree/gmm-init-model")
    p.add_argument("--cmvn-opts", default="", help="apply-cmvn options when features is a data dir")
    p.add_argument("--delta-order", type=int_opt, default=2, help="delta order when features is a data dir")
    add_transform_opts(p)
    _stats_format_opts(p)
    p.add_argument("model")
    p.add_argument("features")
    p.add_argument("alignments")
    p.add_argument("accs_out")
    a = p.parse_args(argv)
    setup_logging()
    from pynnet.hmm.ali_io import read_alignments
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.hmm.tree import accumulate_tree_stats

    tm = read_transition_model(a.model)
    alis = read_alignments(a.alignments)
    phone_map = _read_phone_map(a.phone_map) if a.phone_map else None
    ci = int_list(a.ci_phones, "--ci-phones")
    items = ((utt, alis.get(utt), x) for utt, x in _features(a.features, a))
    stats, counts = accumulate_tree_stats(tm, items, context_width=a.context_width,
                                          central_position=a.central_position, ci_phones=ci,
                                          phone_map=phone_map, progress=True)
    failed = counts["bad_length"] + counts["bad_ali"] + counts["no_feats"]
    log(f"Accumulated stats for {counts['done']} files, {counts['no_ali']} failed due to no alignment, "
         f"{failed} failed for other reasons.")
    if counts["done"] == 0:
        fail("no utterances accumulated (do the alignments match the features?)", a.alignments)
    log(f"Number of separate stats (context-dependent states) is {stats.num_events}")
    stats.save(a.accs_out, kaldi=a.kaldi_format, binary=a.binary)
    return 0


# --------------------------------------------------------------------------- sum-tree-stats
@cli
def sum_tree_stats_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-sum-tree-stats", "Sum tree statistics (Kaldi sum-tree-stats).  "
               "Usage: pynnet-sum-tree-stats <stats-out> <stats-in1> [<stats-in2> ...]")
    _stats_format_opts(p)
    p.add_argument("stats_out")
    p.add_argument("stats_in", nargs="+")
    a = p.parse_args(argv)
    from pynnet.hmm.tree import TreeStats, sum_tree_stats
    parts = [TreeStats.load(f) for f in a.stats_in]
    try:
        total = sum_tree_stats(parts)
    except PynnetError as e:
        fail(str(e), a.stats_in[-1])
    log(f"Wrote summed accs ({total.num_events} separate stats, {total.total_count():.0f} frames)")
    total.save(a.stats_out, kaldi=a.kaldi_format, binary=a.binary)
    return 0


# --------------------------------------------------------------------------- cluster-phones
@cli
def cluster_phones_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-cluster-phones", "Cluster phones (or sets of phones) into a tree of sets for "
               "automatic question generation (Kaldi cluster-phones).  Usage: pynnet-cluster-phones "
               "[options] <tree-stats-in> <phone-sets-in> <clustered-phones-out>")
    p.add_argument("--pdf-class-list", default="1", help="colon-separated pdf-classes whose stats are "
                   "pooled per phone (default 1, the middle state)")
    p.add_argument("--mode", choices=["questions", "k-means"], default="questions")
    p.add_argument("--num-classes", type=int_opt, default=1, help="number of classes for --mode=k-means")
    p.add_argument("--var-floor", type=float_opt, default=0.01)
    add_context_opts(p, checked=True)
    p.add_argument("stats_in")
    p.add_argument("sets_in")
    p.add_argument("out")
    a = p.parse_args(argv)
    setup_logging()
    from pynnet.hmm.questions import cluster_phones, kmeans_cluster_phones, write_int_sets
    from pynnet.hmm.tree import read_int_sets
    stats = _load_stats(a)
    sets = read_int_sets(a.sets_in)
    if not sets:
        fail("no phone sets", a.sets_in)
    allp = [x for s in sets for x in s]
    if len(allp) != len(set(allp)):
        fail("a phone is in more than one set", a.sets_in)
    pdf_classes = int_list(a.pdf_class_list, "--pdf-class-list")
    if a.mode == "questions":
        out = cluster_phones(stats, sets, pdf_classes=pdf_classes, var_floor=a.var_floor)
    else:
        out = kmeans_cluster_phones(stats, sets, a.num_classes, pdf_classes=pdf_classes, var_floor=a.var_floor)
    write_int_sets(a.out, out)
    log(f"Wrote {len(out)} phone sets to {a.out}")
    return 0


# --------------------------------------------------------------------------- compile-questions
@cli
def compile_questions_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-compile-questions", "Compile questions (Kaldi compile-questions).  "
               "Usage: pynnet-compile-questions [options] <topo> <questions-text-file> <questions-out>")
    add_binary_opt(p)
    add_context_opts(p)
    p.add_argument("--num-iters-refine", type=int_opt, default=0, help="kept in the file; pynnet's build-tree "
                   "does not refine questions")
    p.add_argument("topo")
    p.add_argument("questions_in")
    p.add_argument("questions_out")
    a = p.parse_args(argv)
    setup_logging()
    from pynnet.hmm.questions import compile_questions
    from pynnet.hmm.tree import phone_to_num_pdf_classes, read_int_sets
    topo = _topology(a.topo)
    qs = read_int_sets(a.questions_in, "question")
    if not qs:
        fail("no questions", a.questions_in)
    try:
        q = compile_questions(qs, phone_to_num_pdf_classes(topo), context_width=a.context_width,
                              central_position=a.central_position, num_iters_refine=a.num_iters_refine)
    except PynnetError as e:
        fail(str(e), a.questions_in)
    q.write(a.questions_out, a.binary)
    log(f"Wrote questions to {a.questions_out}")
    return 0


# --------------------------------------------------------------------------- build-tree
@cli
def build_tree_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-build-tree", "Build a phonetic decision tree (Kaldi build-tree).  Usage: "
               "pynnet-build-tree [options] <tree-stats-in> <roots-file> <questions-file> <topo-file> <tree-out>")
    add_binary_opt(p)
    p.add_argument("--thresh", type=float_opt, default=300.0, help="minimum log-likelihood gain of a split")
    p.add_argument("--max-leaves", type=int_opt, default=0, help="maximum number of leaves (0: no limit)")
    p.add_argument("--cluster-thresh", type=float_opt, default=-1.0, help="merge leaves whose merge costs less "
                   "than this (-1: the smallest split made; 0: no clustering)")
    p.add_argument("--var-floor", type=float_opt, default=0.01)
    add_context_opts(p, checked=True)
    p.add_argument("stats_in")
    p.add_argument("roots")
    p.add_argument("questions")
    p.add_argument("topo")
    p.add_argument("tree_out")
    a = p.parse_args(argv)
    setup_logging()
    import time

    from pynnet.hmm.questions import Questions
    from pynnet.hmm.tree import build_tree, phone_to_num_pdf_classes, read_roots
    from pynnet.hmm.tree_io import write_tree
    stats = _load_stats(a)
    if stats.num_events == 0:
        fail("no statistics", a.stats_in)
    roots = read_roots(a.roots)
    questions = Questions.read(a.questions)
    topo = _topology(a.topo)
    npc = phone_to_num_pdf_classes(topo)
    missing = sorted(ph for r in roots for ph in r.phones if ph not in npc)
    if missing:
        fail(f"phones {missing[:10]} are in the roots but not in the topology {a.topo}", a.roots)
    if a.thresh <= 0 and a.max_leaves <= 0:
        fail("need --thresh > 0 or --max-leaves > 0", None)
    t0 = time.time()
    tree, info = build_tree(stats, roots, questions, npc, thresh=a.thresh, max_leaves=a.max_leaves,
                            cluster_thresh=a.cluster_thresh, var_floor=a.var_floor, progress=True)
    log(f"BuildTree: {info.summary()} ({time.time() - t0:.1f} s)")
    # Kaldi warns about pdfs with little data (they will be poorly trained)
    from pynnet.hmm.tree import leaf_stats
    cnt, _, _, _ = leaf_stats(stats, tree.to_pdf, tree.num_pdfs)
    low = np.flatnonzero(cnt < 100.0)
    if low.size:
        log(f"{low.size} pdfs have a count below 100 (e.g. pdf {int(low[0])}: {cnt[low[0]]:.0f})")
    write_tree(a.tree_out, tree, a.binary)
    log(f"Wrote tree with {tree.num_pdfs} pdfs to {a.tree_out}")
    return 0


# --------------------------------------------------------------------------- gmm-init-model
@cli
def gmm_init_model_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-init-model", "Initialise a GMM from a decision tree and tree stats (Kaldi "
               "gmm-init-model).  Usage: pynnet-gmm-init-model [options] <tree-in> <tree-stats-in> "
               "<topo-file> <model-out> [<old-tree> <old-model>]")
    add_binary_opt(p)
    p.add_argument("--var-floor", type=float_opt, default=0.01)
    p.add_argument("--write-occs", default="", help="write the per-pdf occupation counts (Kaldi vector) here")
    p.add_argument("tree")
    p.add_argument("stats_in")
    p.add_argument("topo")
    p.add_argument("model_out")
    p.add_argument("old", nargs="*", metavar="old-tree old-model")
    a = p.parse_args(argv)
    setup_logging()
    from pynnet.hmm.convert import init_model_from_tree_stats
    from pynnet.hmm.model_io import write_model
    from pynnet.hmm.tree import TreeStats
    from pynnet.hmm.tree_io import read_tree_py
    if len(a.old) not in (0, 2):
        fail("give both <old-tree> and <old-model>, or neither", None)
    tree = read_tree_py(a.tree)
    stats = TreeStats.load(a.stats_in)
    topo = _topology(a.topo)
    old_tree = old_am = None
    if a.old:
        from pynnet.hmm.model_io import read_model
        old_tree = read_tree_py(a.old[0])
        _, old_am = read_model(a.old[1])
        if old_tree.num_pdfs != old_am.num_pdfs:
            fail(f"old tree has {old_tree.num_pdfs} pdfs but the old model {old_am.num_pdfs}", a.old[1])
        if old_am.dim != stats.dim:
            fail(f"old model has dimension {old_am.dim}, the stats {stats.dim}", a.old[1])
    try:
        tm, am, occs = init_model_from_tree_stats(tree, topo, stats, var_floor=a.var_floor, old_tree=old_tree,
                                                  old_am=old_am)
    except PynnetError as e:
        fail(str(e), a.stats_in)
    write_model(a.model_out, tm, am, a.binary)
    if a.write_occs:
        _write_vector(a.write_occs, occs, a.binary)
    log(f"Wrote model with {am.num_pdfs} pdfs ({tm.num_transition_ids} transition-ids) to {a.model_out}")
    return 0


def _write_vector(path: str, v: np.ndarray, binary: bool) -> None:
    """A Kaldi Vector<BaseFloat> file (what gmm-init-model --write-occs writes)."""
    from pynnet.hmm.model_io import KaldiOutput
    from pynnet.io.atomic import atomic_write
    w = KaldiOutput(binary)
    w.float_vector(np.asarray(v, dtype=np.float32))
    with atomic_write(path, "wb") as f:
        f.write(w.getvalue())


# --------------------------------------------------------------------------- convert-ali
@cli
def convert_ali_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-convert-ali", "Convert alignments from one decision tree / model to another, "
               "keeping phones and HMM states (Kaldi convert-ali).  Usage: pynnet-convert-ali [options] "
               "<old-model> <new-model> <new-tree> <alignments-in: ali.N.gz> <alignments-out: ali.N.gz>")
    p.add_argument("--phone-map", default="", help="map the old model's phones to the new model's (lines "
                   "'old new'), as Kaldi convert-ali --phone-map")
    p.add_argument("old_model")
    p.add_argument("new_model")
    p.add_argument("new_tree")
    p.add_argument("ali_in")
    p.add_argument("ali_out")
    a = p.parse_args(argv)
    setup_logging()
    from pynnet.hmm.ali_io import read_alignments, write_alignments
    from pynnet.hmm.convert import convert_alignments
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.hmm.tree_io import read_tree_py
    old_tm = read_transition_model(a.old_model)
    new_tm = read_transition_model(a.new_model)
    tree = read_tree_py(a.new_tree)
    if tree.num_pdfs != new_tm.num_pdfs:
        fail(f"tree has {tree.num_pdfs} pdfs but the new model {new_tm.num_pdfs}", a.new_tree)
    alis = read_alignments(a.ali_in)
    phone_map = _read_phone_map(a.phone_map) if a.phone_map else None
    out = list(convert_alignments(old_tm, new_tm, tree, alis, phone_map))
    write_alignments(a.ali_out, out)
    log(f"Succeeded converting alignments for {len(out)} files, failed for {len(alis) - len(out)}")
    if not out and alis:
        fail("no alignment could be converted", a.ali_in)
    return 0


# --------------------------------------------------------------------------- tree-info / copy-tree
@cli
def tree_info_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-tree-info", "Print information about a tree (Kaldi tree-info).  Usage: pynnet-tree-info <tree>")
    p.add_argument("tree")
    a = p.parse_args(argv)
    from pynnet.hmm.tree_io import read_tree_py
    t = read_tree_py(a.tree)
    print(f"num-pdfs {t.num_pdfs}")
    print(f"context-width {t.context_width}")
    print(f"central-position {t.central_position}")
    return 0


@cli
def copy_tree_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-copy-tree", "Copy a tree, e.g. to text form (Kaldi copy-tree).  "
               "Usage: pynnet-copy-tree [--binary=false] <tree-in> <tree-out>")
    add_binary_opt(p)
    p.add_argument("tree_in")
    p.add_argument("tree_out")
    a = p.parse_args(argv)
    from pynnet.hmm.tree_io import read_tree_py, write_tree
    write_tree(a.tree_out, read_tree_py(a.tree_in), a.binary)
    return 0
