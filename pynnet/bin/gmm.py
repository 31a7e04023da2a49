"""GMM-HMM programs (Kaldi's gmm-init-mono, compile-train-graphs, align-equal-compiled,
gmm-acc-stats-ali, gmm-sum-accs, gmm-est, gmm-align-compiled, align-compiled-mapped, gmm-copy,
gmm-info, ali-to-pdf, ali-to-phones).  Each is ``main(argv)``; the steps/ scripts run one per JOB through ``$cmd``.

Features are named by their data dir (``data/train/split2/1``) plus ``--cmvn-opts`` and
``--delta-order`` (as the experiment's cmvn_opts/delta_opts files say), instead of Kaldi's
rspecifier pipelines.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from pynnet.bin._cli import cli
from pynnet.bin._opts import (add_binary_opt, add_transform_opts, feat_transforms_of, float_opt, int_opt, kaldi_bool,
                              log, parser)
from pynnet.io.errors import PynnetError, fail
from pynnet.io.progress import progress_kwargs


def _feat_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cmvn-opts", default="", help="apply-cmvn options (default: per-speaker mean normalisation)")
    p.add_argument("--delta-order", type=int_opt, default=2, help="order of delta features (default 2)")
    p.add_argument("--feats-cache", default="", help="cache file (.npz) of the processed features, reused by "
                   "later passes while the data dir and options are unchanged")
    add_transform_opts(p)


def check_feat_dim(feats: np.ndarray, dim: int | None, model: str, data_dir: str) -> None:
    """The processed features must have the model's dimension (one line naming both)."""
    if dim is not None and feats.shape[0] and feats.shape[1] != dim:
        fail(f"feature dimension {feats.shape[1]} does not match the model's {dim} ({model}); different "
             "--cmvn-opts/--delta-order/--splice-opts/--transform than the system was trained with?", data_dir)


def _text(data_dir: str) -> dict[str, list[str]]:
    """The data dir's transcripts: {utt: words}."""
    from pynnet.io.datadir import read_data_file
    from pynnet.io.tables import split_fields

    return {utt: split_fields(words) for utt, words in read_data_file(data_dir, "text").items()}


def _progress(total: int | None, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="utt", leave=False, **progress_kwargs())


# --------------------------------------------------------------------------- gmm-init-mono
@cli
def init_mono_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-init-mono", "Initialise a monophone GMM (one Gaussian per pdf, global "
               "mean/variance of some features) and write the model and the monophone tree.")
    _feat_opts(p)
    p.add_argument("--shared-phones", default="", help="phones/sets.int: phones in one line share pdfs")
    p.add_argument("--num-utts", type=int_opt, default=200, help="utterances used for the global mean/var")
    add_binary_opt(p)
    p.add_argument("topo")
    p.add_argument("data_dir")
    p.add_argument("model_out")
    p.add_argument("tree_out")
    a = p.parse_args(argv)
    import kaldi_hmm_gmm as khg

    from pynnet.hmm.model_io import write_model
    from pynnet.hmm.train import gmm_features, init_mono, read_int_sets
    from pynnet.hmm.tree_io import write_tree

    if not os.path.isfile(a.topo):
        fail("no such topology file", a.topo)
    topo = khg.HmmTopology()
    try:
        topo.read(open(a.topo).read())
    except Exception as e:  # the C++ reader raises a generic error
        fail(f"cannot read HMM topology: {e}", a.topo)
    shared = read_int_sets(a.shared_phones) if a.shared_phones else None

    def subset():
        for i, (_, x) in enumerate(gmm_features(a.data_dir, a.cmvn_opts, a.delta_order,
                                                transforms=feat_transforms_of(a, a.data_dir))):
            if i >= a.num_utts:
                break
            yield x

    ctx, tm, am = init_mono(topo, subset(), shared)
    write_model(a.model_out, tm, am.to_khg(), a.binary)
    write_tree(a.tree_out, ctx, binary=True)
    log(f"initialised {tm.num_pdfs} pdfs of dimension {am.dim}")
    return 0


def _tree_of(tm, tree_path: str, model_path: str):
    """The tree at ``tree_path``, checked to belong with the model ``tm``."""
    from pynnet.hmm.tree_io import check_tree_matches_model, read_tree
    ctx = read_tree(tree_path)
    check_tree_matches_model(ctx, tm, tree_path, model_path)
    return ctx


# --------------------------------------------------------------------------- compile-train-graphs
@cli
def compile_graphs_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-compile-train-graphs", "Compile per-utterance training graphs from the transcripts "
               "(words not in words.txt map to the lang dir's OOV word).")
    p.add_argument("tree")
    p.add_argument("model")
    p.add_argument("lang_dir")
    p.add_argument("data_dir", help="data dir whose 'text' is compiled")
    p.add_argument("graphs_out", help="output fst archive (Kaldi ark)")
    a = p.parse_args(argv)
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.hmm.train import GraphCompiler, write_graphs

    tm = read_transition_model(a.model)
    gc = GraphCompiler(tm, _tree_of(tm, a.tree, a.model), a.lang_dir)
    text = _text(a.data_dir)
    failed = 0

    def gen():
        nonlocal failed
        with _progress(len(text), "graphs") as bar:
            for utt, words in text.items():
                bar.update()
                g = gc.compile(words, f"{a.data_dir}/text: {utt}: ")
                if g.num_states == 0:
                    print(f"WARNING: empty training graph for utterance {utt}", file=sys.stderr)
                    failed += 1
                    continue
                yield utt, g

    n = write_graphs(a.graphs_out, gen())
    log(f"compiled {n} graphs, {failed} failed; {gc.num_oov} word tokens mapped to OOV")
    return 0 if n else 1


# --------------------------------------------------------------------------- align-equal-compiled
@cli
def align_equal_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-align-equal-compiled", "Equal (flat-start) alignment: frames spread evenly "
               "along a random path through each training graph.")
    _feat_opts(p)
    p.add_argument("graphs")
    p.add_argument("data_dir")
    p.add_argument("ali_out")
    a = p.parse_args(argv)
    from pynnet.hmm.ali_io import write_alignments
    from pynnet.hmm.train import equal_align, gmm_features, read_graphs

    graphs = dict(read_graphs(a.graphs))
    out, failed = {}, []
    for utt, x in gmm_features(a.data_dir, a.cmvn_opts, 0, graphs.keys()):  # only lengths matter
        ali = equal_align(graphs[utt], x.shape[0])
        if ali is None:
            failed.append(utt)
            print(f"WARNING: equal alignment failed for {utt} ({x.shape[0]} frames: too short for its transcript?)",
                  file=sys.stderr)
            continue
        out[utt] = ali
    missing = len(graphs) - len(out) - len(failed)
    write_alignments(a.ali_out, out)
    log(f"Done {len(out)}, failed {len(failed)}, no features for {missing}")
    return 0 if out else 1


# --------------------------------------------------------------------------- gmm-acc-stats-ali
@cli
def acc_stats_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-acc-stats-ali", "Accumulate GMM and transition statistics along alignments.")
    _feat_opts(p)
    p.add_argument("model")
    p.add_argument("data_dir")
    p.add_argument("alignments", help="ali.JOB.gz file (or alignment dir)")
    p.add_argument("acc_out")
    a = p.parse_args(argv)
    from pynnet.hmm.ali_io import read_alignments, TransitionTables
    from pynnet.hmm.gmm import AmGmm, GmmAccs, accumulate
    from pynnet.hmm.model_io import read_model
    from pynnet.hmm.train import gmm_features_batch

    tm, am_k = read_model(a.model)
    am = AmGmm.from_khg(am_k)
    tables = TransitionTables.from_model(tm)
    alis = read_alignments(a.alignments)
    accs = GmmAccs.zeros(am, tables.pdf.size - 1)
    t0 = time.time()
    keys, lengths, feats = gmm_features_batch(a.data_dir, a.cmvn_opts, a.delta_order, alis.keys(),
                                              a.feats_cache or None, feat_transforms_of(a, a.data_dir))
    check_feat_dim(feats, am.dim, a.model, a.data_dir)
    keep = np.ones(feats.shape[0], bool)
    ts = []
    bad_len = 0
    done = 0
    offset = 0
    for utt, n in zip(keys, lengths.tolist()):
        ali = alis[utt]
        if ali.size != n:
            print(f"WARNING: alignment has wrong size {ali.size} vs. {n} frames for {utt}", file=sys.stderr)
            bad_len += 1
            keep[offset:offset + n] = False
        else:
            tables.check(ali, f"{a.alignments}: {utt}")
            ts.append(ali)
            done += 1
        offset += n
    if not ts:
        fail("no utterance has both features and an alignment of the right length", a.alignments)
    xs = [feats[keep] if bad_len else feats]
    accumulate(am, xs[0], np.concatenate(ts), tables.pdf, accs)
    accs.write(a.acc_out)
    log(f"Done {done} files, {len(alis) - done - bad_len} with no features, {bad_len} with wrong length")
    log(f"Overall avg like per frame (Gaussian only) = {accs.tot_like / accs.num_frames:.5f} over "
         f"{accs.num_frames} frames ({time.time() - t0:.1f} s, process CPU {time.process_time():.1f} s)")
    return 0


# --------------------------------------------------------------------------- gmm-sum-accs / gmm-est
def _sum_accs(paths: list[str]):
    from pynnet.hmm.gmm import GmmAccs

    total = None
    for path in paths:
        acc = GmmAccs.read(path)
        if total is None:
            total = acc
        else:
            total.add(acc, path)
    return total


@cli
def sum_accs_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-sum-accs", "Sum GMM accumulators.")
    p.add_argument("acc_out")
    p.add_argument("accs", nargs="+")
    a = p.parse_args(argv)
    _sum_accs(a.accs).write(a.acc_out)
    return 0


@cli
def est_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-est", "ML re-estimation of a GMM model (and transitions) from summed "
               "accumulators, then mixing-up.")
    p.add_argument("--mix-up", type=int_opt, default=0, help="increase the total number of Gaussians to this")
    p.add_argument("--power", type=float_opt, default=0.2, help="Gaussians per pdf ~ occupancy^power")
    p.add_argument("--min-count", type=float_opt, default=20.0, help="minimum frames per Gaussian when mixing up")
    p.add_argument("--perturb-factor", type=float_opt, default=0.01)
    p.add_argument("--min-gaussian-occupancy", type=float_opt, default=10.0)
    p.add_argument("--min-gaussian-weight", type=float_opt, default=1e-5)
    p.add_argument("--min-variance", type=float_opt, default=0.001)
    p.add_argument("--remove-low-count-gaussians", type=kaldi_bool, default=True,
                   help="remove Gaussians below the occupancy/weight thresholds (false: keep them, as a SAT "
                   "alignment model must)")
    p.add_argument("--transition-floor", type=float_opt, default=0.01)
    p.add_argument("--transition-min-count", type=float_opt, default=5.0)
    p.add_argument("--write-occs", default="", help="write per-pdf occupancies (Kaldi vector)")
    add_binary_opt(p)
    p.add_argument("--seed", type=int_opt, default=0, help="random seed of the mix-up perturbation")
    p.add_argument("model_in")
    p.add_argument("accs", nargs="+", help="accumulator file(s); several are summed")
    p.add_argument("model_out")
    a = p.parse_args(argv)
    from pynnet.hmm.gmm import AmGmm, mixup, mle_update, transition_update
    from pynnet.hmm.model_io import KaldiOutput, read_model, write_model
    from pynnet.io.atomic import atomic_write

    tm, am_k = read_model(a.model_in)
    am = AmGmm.from_khg(am_k)
    accs = _sum_accs(a.accs)
    if len(accs.occ) != am.num_pdfs or any(o.size != w.size for o, w in zip(accs.occ, am.weights)):
        fail("accumulators do not match the model", a.accs[0])
    tm, t_impr, t_count = transition_update(tm, accs.trans, a.transition_floor, a.transition_min_count)
    log(f"Transition model update: average {t_impr / max(t_count, 1):.5f} log-like improvement per frame "
         f"over {t_count:.0f} frames")
    st = mle_update(am, accs, a.min_gaussian_occupancy, a.min_gaussian_weight, a.min_variance,
                    a.remove_low_count_gaussians)
    log(f"GMM update: objf improvement {st.objf_impr / max(st.count, 1):.5f} per frame over {st.count:.0f} frames; "
         f"{st.floored} variances floored, {st.removed} Gaussians removed")
    log(f"Overall avg like per frame (Gaussian only) = {accs.tot_like / max(accs.num_frames, 1):.5f} "
         f"over {accs.num_frames} frames")
    occs = accs.pdf_occs()
    if a.mix_up:
        before = am.num_gauss
        after = mixup(am, occs, a.mix_up, a.power, a.min_count, a.perturb_factor, a.seed)
        log(f"Mixed up from {before} to {after} Gaussians (target {a.mix_up})")
    write_model(a.model_out, tm, am.to_khg(), a.binary)
    if a.write_occs:
        w = KaldiOutput(True)
        w.float_vector(occs)
        with atomic_write(a.write_occs, "wb") as f:
            f.write(w.getvalue())
    log(f"Written model with {am.num_pdfs} pdfs, {am.num_gauss} Gaussians to {a.model_out}")
    return 0


# --------------------------------------------------------------------------- alignment
def _align_search_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=float_opt, default=10.0)
    p.add_argument("--retry-beam", type=float_opt, default=40.0)
    p.add_argument("--careful", type=kaldi_bool, default=False)
    p.add_argument("--acoustic-scale", type=float_opt, default=0.1)
    p.add_argument("--transition-scale", type=float_opt, default=1.0)
    p.add_argument("--self-loop-scale", type=float_opt, default=0.1)


def _align_common(p: argparse.ArgumentParser) -> None:
    _feat_opts(p)
    _align_search_opts(p)
    p.add_argument("--boost-silence", type=float_opt, default=1.0, help="scale silence pdfs' likelihoods")
    p.add_argument("--silence-phones", default="", help="colon-separated silence phone ids (for --boost-silence)")
    p.add_argument("--acc-out", default="", help="also accumulate GMM stats of the (unboosted) model along the "
                   "new alignments into this file (saves the gmm-acc-stats-ali pass)")


def _make_aligner(a, tm, am_k):
    from pynnet.hmm.align import Aligner, AlignOptions
    from pynnet.hmm.gmm import AmGmm, boost_silence
    from pynnet.hmm.train import silence_pdfs

    if a.boost_silence != 1.0:
        if not a.silence_phones:
            raise PynnetError("--boost-silence needs --silence-phones")
        try:
            sil = [int(x) for x in a.silence_phones.split(":") if x]
        except ValueError:
            raise PynnetError(f"--silence-phones: expected colon-separated integers, got '{a.silence_phones}'")
        boosted = boost_silence(AmGmm.from_khg(am_k), silence_pdfs(tm, sil), a.boost_silence).to_khg()
    else:
        boosted = am_k
    opts = AlignOptions(a.beam, a.retry_beam, a.careful, a.acoustic_scale, a.transition_scale, a.self_loop_scale)
    aligner = Aligner(tm, boosted, opts)
    aligner.unboosted_am = am_k
    return aligner


def _run_alignment(a, aligner, graph_for, utts, data_dir: str, out_path: str) -> int:
    from pynnet.hmm.ali_io import write_alignments
    from pynnet.hmm.train import gmm_features_batch

    out = {}
    t0 = time.time()
    keys, lengths, feats = gmm_features_batch(data_dir, a.cmvn_opts, a.delta_order, utts, a.feats_cache or None,
                                              feat_transforms_of(a, data_dir))
    check_feat_dim(feats, aligner.dim, a.model, data_dir)
    seen = set(keys)
    ends = np.cumsum(lengths)
    with _progress(len(keys), "align") as bar:
        for utt, end, n in zip(keys, ends.tolist(), lengths.tolist()):
            bar.update()
            g = graph_for(utt)
            if g is None:
                continue
            ali = aligner.align(utt, g, feats[end - n:end])
            if ali is None:
                print(f"WARNING: alignment failed for utterance {utt} even with retry beam {a.retry_beam}",
                      file=sys.stderr)
                continue
            out[utt] = ali
    write_alignments(out_path, out)
    if a.acc_out:
        _acc_from_alignments(a, aligner, keys, lengths, feats, out)
    s = aligner.stats
    no_feats = sorted(set(utts) - seen)
    if no_feats:
        print(f"WARNING: {len(no_feats)} utterances have a graph but no features, e.g. {no_feats[0]}",
              file=sys.stderr)
    if s.failed:
        print(f"WARNING: {len(s.failed)} utterances failed to align: {' '.join(s.failed[:20])}"
              f"{' ...' if len(s.failed) > 20 else ''}", file=sys.stderr)
    log(s.summary() + f" ({time.time() - t0:.1f} s, process CPU {time.process_time():.1f} s)")
    return 0 if out else 1


def _acc_from_alignments(a, aligner, keys, lengths, feats, alis) -> None:
    from pynnet.hmm.ali_io import TransitionTables
    from pynnet.hmm.gmm import AmGmm, GmmAccs, accumulate

    am = AmGmm.from_khg(aligner.unboosted_am)
    tables = TransitionTables.from_model(aligner.tm)
    accs = GmmAccs.zeros(am, tables.pdf.size - 1)
    keep = np.repeat(np.array([k in alis for k in keys], dtype=bool), lengths)
    tids = np.concatenate([alis[k] for k in keys if k in alis]) if alis else np.zeros(0, np.int32)
    accumulate(am, feats[keep], tids, tables.pdf, accs)
    accs.write(a.acc_out)
    log(f"Overall avg like per frame (Gaussian only) = {accs.tot_like / max(accs.num_frames, 1):.5f} over "
         f"{accs.num_frames} frames")


@cli
def align_compiled_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-align-compiled", "Viterbi-align utterances to precompiled training graphs.")
    _align_common(p)
    p.add_argument("model")
    p.add_argument("graphs")
    p.add_argument("data_dir")
    p.add_argument("ali_out")
    a = p.parse_args(argv)
    from pynnet.hmm.model_io import read_model
    from pynnet.hmm.train import read_graphs

    tm, am_k = read_model(a.model)
    aligner = _make_aligner(a, tm, am_k)
    graphs = dict(read_graphs(a.graphs))
    return _run_alignment(a, aligner, graphs.get, list(graphs), a.data_dir, a.ali_out)


@cli
def align_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-align", "Viterbi-align utterances, compiling their training graphs from the "
               "transcripts on the fly (Kaldi's gmm-align).")
    _align_common(p)
    p.add_argument("tree")
    p.add_argument("model")
    p.add_argument("lang_dir")
    p.add_argument("data_dir")
    p.add_argument("ali_out")
    a = p.parse_args(argv)
    from pynnet.hmm.model_io import read_model
    from pynnet.hmm.train import GraphCompiler

    tm, am_k = read_model(a.model)
    aligner = _make_aligner(a, tm, am_k)
    gc = GraphCompiler(tm, _tree_of(tm, a.tree, a.model), a.lang_dir)
    text = _text(a.data_dir)
    return _run_alignment(a, aligner, lambda u: gc.compile(text[u], f"{a.data_dir}/text: {u}: "),
                          list(text), a.data_dir, a.ali_out)


def _plain_file_spec(spec: str, what: str) -> str:
    """The file of a Kaldi ``ark:FILE`` specifier (or a bare file name); pipes, stdin/stdout, scp
    and text output are refused in one line."""
    head, sep, rest = spec.partition(":")
    opts = set(head.split(",")) if sep else set()
    if opts and opts <= {"ark", "scp", "t", "b", "o", "s", "cs", "p", "f", "nf"} and opts & {"ark", "scp"}:
        if "scp" in opts or "t" in opts:
            raise PynnetError(f"{what} '{spec}': give ark:FILE or a file name (no scp, no text output)")
        path = rest
    else:
        path = spec
    p = path.strip()
    if not p or p == "-" or p.startswith("|") or p.endswith("|"):
        raise PynnetError(f"{what} '{spec}': give a file name (a name ending in .gz is gzipped); "
                          "pipes are not supported here")
    return path


@cli
def align_compiled_mapped_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-align-compiled-mapped",
               "Viterbi-align utterances to precompiled training graphs, reading log-likelihoods per pdf "
               "as matrices (a DNN's pseudo-log-likelihoods from pynnet-nnet-forward --prior-subtract); "
               "Kaldi's align-compiled-mapped. Only the transition model of <trans-model> is used.",
               usage="%(prog)s [options] <trans-model> <graphs> <loglikes-rspecifier> <alignments-out>\n"
                     "  e.g. pynnet-nnet-forward --prior-subtract exp/dnn/final.nnet scp:data/train/feats.scp ark:- |\n"
                     "       %(prog)s exp/dnn/final.mdl exp/dnn_ali/fsts.1.gz ark:- exp/dnn_ali/ali.1.gz")
    _align_search_opts(p)
    p.add_argument("model", help="final.mdl (a GMM's or an nnet's: only its transition model is read)")
    p.add_argument("graphs", help="training graphs (pynnet-compile-train-graphs' fst archive, e.g. fsts.1.gz)")
    p.add_argument("loglikes", help="log-likelihood matrices [frames x pdfs] (ark:-, ark:FILE, scp:FILE)")
    p.add_argument("ali_out", help="alignments (Kaldi binary int32 vectors; gzipped if it ends in .gz)")
    a = p.parse_args(argv)
    from pynnet.feat.tables import read_matrices
    from pynnet.hmm.ali_io import write_alignments
    from pynnet.hmm.align import Aligner, AlignOptions
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.hmm.train import read_graphs

    if a.beam <= 0 or a.retry_beam < 0 or a.acoustic_scale <= 0:
        raise PynnetError("--beam and --acoustic-scale must be positive, --retry-beam not negative")
    graphs_path = _plain_file_spec(a.graphs, "<graphs>")
    ali_path = _plain_file_spec(a.ali_out, "<alignments-out>")
    tm = read_transition_model(a.model)
    opts = AlignOptions(a.beam, a.retry_beam, a.careful, a.acoustic_scale, a.transition_scale, a.self_loop_scale)
    aligner = Aligner(tm, None, opts)
    graphs = dict(read_graphs(graphs_path))
    out: dict[str, np.ndarray] = {}
    seen: set[str] = set()
    no_graph = 0
    t0 = time.time()
    with _progress(len(graphs), "align") as bar:
        for utt, x in read_matrices(a.loglikes):
            bar.update()
            if utt in seen:
                raise PynnetError(f"utterance '{utt}' appears twice in the log-likelihoods {a.loglikes}")
            seen.add(utt)
            g = graphs.pop(utt, None)   # (each graph is aligned to once, so it is not copied)
            if g is None:
                print(f"WARNING: no training graph for utterance {utt}", file=sys.stderr)
                no_graph += 1
                continue
            if g.num_states == 0:
                print(f"WARNING: empty training graph for utterance {utt}", file=sys.stderr)
                no_graph += 1
                continue
            ali = aligner.align_loglikes(utt, g, x)
            if ali is None and x.size == 0:   # (Kaldi's: "Empty loglikes matrix", counted as an error)
                print(f"WARNING: alignment failed for utterance {utt} (empty log-likelihood matrix)", file=sys.stderr)
                continue
            if ali is None:
                print(f"WARNING: alignment failed for utterance {utt} even with retry beam {a.retry_beam}",
                      file=sys.stderr)
                continue
            out[utt] = ali
    if not seen:
        raise PynnetError(f"no utterances in the log-likelihoods {a.loglikes}")
    write_alignments(ali_path, out)
    s = aligner.stats
    if no_graph:
        print(f"WARNING: {no_graph} utterances have log-likelihoods but no training graph", file=sys.stderr)
    if s.failed:
        print(f"WARNING: {len(s.failed)} utterances failed to align: {' '.join(s.failed[:20])}"
              f"{' ...' if len(s.failed) > 20 else ''}", file=sys.stderr)
    log(s.summary() + f"; {no_graph} without a graph ({time.time() - t0:.1f} s, "
        f"process CPU {time.process_time():.1f} s)")
    return 0 if out else 1


# --------------------------------------------------------------------------- model tools
@cli
def copy_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-copy", "Copy a GMM model file (e.g. --binary false to get text).")
    add_binary_opt(p)
    p.add_argument("model_in")
    p.add_argument("model_out")
    a = p.parse_args(argv)
    from pynnet.hmm.model_io import read_model, write_model

    tm, am = read_model(a.model_in)
    write_model(a.model_out, tm, am, a.binary)
    return 0


@cli
def info_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-info", "Print the sizes of a GMM model.")
    p.add_argument("model")
    a = p.parse_args(argv)
    from pynnet.hmm.model_io import read_model

    tm, am = read_model(a.model)
    print(f"number of phones {len(tm.phones)}")
    print(f"number of pdfs {am.num_pdfs}")
    print(f"number of transition-ids {tm.num_transition_ids}")
    print(f"number of transition-states {tm.num_transition_states}")
    print(f"feature dimension {am.dim}")
    print(f"number of gaussians {am.num_gauss}")
    return 0


def _ali_convert(argv, prog: str, desc: str, per_frame_fn) -> int:
    p = parser(prog, desc)
    p.add_argument("model")
    p.add_argument("alignments", help="alignment dir (ali.*.gz) or file")
    p.add_argument("out", help="text output file ('-' for stdout): utt id then integers")
    a = p.parse_args(argv)
    from pynnet.hmm.ali_io import TransitionTables, read_alignments
    from pynnet.hmm.model_io import read_model
    from pynnet.io.atomic import atomic_write

    tm, _ = read_model(a.model)
    t = TransitionTables.from_model(tm)
    alis = read_alignments(a.alignments)
    lines = []
    for utt in sorted(alis, key=lambda u: u.encode()):
        try:
            vals = per_frame_fn(t, alis[utt])
        except PynnetError as e:
            fail(f"utterance {utt}: {e}", a.alignments)
        lines.append(utt + " " + " ".join(map(str, vals)) + "\n")
    if a.out == "-":
        try:
            sys.stdout.writelines(lines)
            sys.stdout.flush()
        except BrokenPipeError:  # e.g. piped into head
            os._exit(0)
    else:
        with atomic_write(a.out) as f:
            f.writelines(lines)
    return 0


@cli
def ali_to_pdf_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.ali_io import tids_to_pdfs

    return _ali_convert(argv, "pynnet-ali-to-pdf", "Alignments -> pdf id per frame (text).",
                        lambda t, ali: tids_to_pdfs(t, ali).tolist())


@cli
def ali_to_phones_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.ali_io import split_to_phones

    def phones(t, ali):
        ok, pieces = split_to_phones(t, ali)
        if not ok:
            raise PynnetError("alignment is not a valid phone sequence for this model")
        return [int(t.phone[x[0]]) for x in pieces]

    return _ali_convert(argv, "pynnet-ali-to-phones", "Alignments -> phone sequence (text).", phones)


@cli
def boost_silence_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-boost-silence", "Multiply the Gaussian weights of the pdfs of the given (silence) "
               "phones by --boost, scaling their likelihoods (Kaldi gmm-boost-silence).")
    p.add_argument("--boost", type=float_opt, default=1.5)
    add_binary_opt(p)
    p.add_argument("silence_phones", help="colon-separated phone ids, e.g. $(cat lang/phones/optional_silence.csl)")
    p.add_argument("model_in")
    p.add_argument("model_out")
    a = p.parse_args(argv)
    from pynnet.hmm.gmm import AmGmm, boost_silence
    from pynnet.hmm.model_io import read_model, write_model
    from pynnet.hmm.train import silence_pdfs

    try:
        sil = [int(x) for x in a.silence_phones.split(":") if x]
    except ValueError:
        fail(f"expected colon-separated phone ids, got '{a.silence_phones}'")
    tm, am = read_model(a.model_in)
    pdfs = silence_pdfs(tm, sil)
    if not pdfs:
        fail(f"no pdfs for phones {a.silence_phones} in the model", a.model_in)
    write_model(a.model_out, tm, boost_silence(AmGmm.from_khg(am), pdfs, a.boost).to_khg(), a.binary)
    log(f"Boosted weights for {len(pdfs)} pdfs by {a.boost}")
    return 0


def _read_occs(path: str) -> np.ndarray:
    from pynnet.hmm.model_io import KaldiInput

    if not os.path.isfile(path):
        fail("no such occupancy file", path)
    return KaldiInput(open(path, "rb").read(), path).float_vector().astype(np.float64)


@cli
def mixup_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-mixup", "Increase the number of Gaussians of a model, allocated by occupancy^power "
               "(Kaldi gmm-mixup).")
    p.add_argument("--mix-up", type=int_opt, required=True, help="target total number of Gaussians")
    p.add_argument("--power", type=float_opt, default=0.2)
    p.add_argument("--min-count", type=float_opt, default=20.0)
    p.add_argument("--perturb-factor", type=float_opt, default=0.01)
    p.add_argument("--seed", type=int_opt, default=0)
    add_binary_opt(p)
    p.add_argument("model_in")
    p.add_argument("occs_in", help="per-pdf occupancies (gmm-est/gmm-init-model --write-occs)")
    p.add_argument("model_out")
    a = p.parse_args(argv)
    from pynnet.hmm.gmm import AmGmm, mixup
    from pynnet.hmm.model_io import read_model, write_model

    tm, am_k = read_model(a.model_in)
    occs = _read_occs(a.occs_in)
    if occs.size != am_k.num_pdfs:
        fail(f"{occs.size} occupancies but the model has {am_k.num_pdfs} pdfs", a.occs_in)
    am = AmGmm.from_khg(am_k)
    before = am.num_gauss
    after = mixup(am, occs, a.mix_up, a.power, a.min_count, a.perturb_factor, a.seed)
    write_model(a.model_out, tm, am.to_khg(), a.binary)
    log(f"Mixed up from {before} to {after} Gaussians (target {a.mix_up})")
    return 0
