"""Feature-transform programs of LDA+MLLT and SAT systems (Kaldi's acc-lda, est-lda, gmm-acc-mllt,
est-mllt, gmm-transform-means, compose-transforms, gmm-est-fmllr[-gpost], gmm-acc-stats-twofeats,
transform-feats, gmm-rescore-lattice).

Features are named as in the other GMM programs: a data dir plus ``--cmvn-opts``/``--delta-order``
and ``--splice-opts``/``--transform``/``--fmllr`` (the exp dir's cmvn_opts, splice_opts, final.mat,
trans.JOB).  Posteriors come from alignments (``ali.JOB.gz``: Kaldi's ali-to-post) or lattices
(``--lattices``: lattice-to-post --acoustic-scale), with the silence phones weighted by
``--silence-weight`` (weight-silence-post).  Matrices are Kaldi's: one object per file
(final.mat), or an ark keyed by speaker (trans.JOB).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from pynnet.bin._cli import cli
from pynnet.bin._opts import (add_transform_opts, feat_transforms_of, float_opt, int_list, int_opt, kaldi_bool, log,
                              parser)
from pynnet.io.errors import PynnetError, fail


# --------------------------------------------------------------------------- shared pieces
def _feat_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cmvn-opts", default="", help="apply-cmvn options (the exp dir's cmvn_opts)")
    p.add_argument("--delta-order", type=int_opt, default=0, help="delta order (default 0: LDA systems splice)")
    p.add_argument("--feats-cache", default="", help="cache file (.npz) of the CMVN features (as the GMM programs)")
    add_transform_opts(p)


def _post_opts(p: argparse.ArgumentParser, silence_weight: float = 0.0) -> None:
    p.add_argument("--silence-weight", type=float_opt, default=silence_weight,
                   help=f"weight of the silence phones' frames (weight-silence-post; default {silence_weight})")
    p.add_argument("--silence-phones", default="", help="colon-separated silence phone ids (lang's "
                   "phones/silence.csl)")
    p.add_argument("--lattices", type=kaldi_bool, default=False,
                   help="<ali> is a lattice rspecifier (lat.JOB.gz): posteriors by forward-backward")
    p.add_argument("--acoustic-scale", type=float_opt, default=0.083333,
                   help="with --lattices: the acoustic scale of the posteriors (lattice-to-post)")


def _features(a, data_dir: str, utts=None):
    from pynnet.hmm.train import gmm_features_batch

    return gmm_features_batch(data_dir, a.cmvn_opts, a.delta_order, utts, a.feats_cache or None,
                              feat_transforms_of(a, data_dir))


def _check_dim(feats: np.ndarray, dim: int, model: str, data_dir: str) -> None:
    if feats.shape[0] and feats.shape[1] != dim:
        fail(f"feature dimension {feats.shape[1]} does not match the model's {dim} ({model}); different "
             "--splice-opts/--transform/--fmllr than the system was trained with?", data_dir)


def _posteriors(a, tm, keys: list[str], lengths: np.ndarray, source: str):
    """Posterior triples over the concatenated features of ``keys``: (frame index, pdf, weight),
    with the silence phones weighted; and the utterances that had them."""
    from pynnet.hmm.ali_io import TransitionTables

    tables = TransitionTables.from_model(tm)
    sil = np.zeros(int(tables.phone.max()) + 1, bool)
    for ph in int_list(a.silence_phones, "--silence-phones"):
        if 0 < ph < sil.size:
            sil[ph] = True
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(keys) else np.zeros(0, np.int64)
    frames, tids, posts, used = [], [], [], []
    if a.lattices:
        from pynnet.decode.lattice import read_lattice_ark
        from pynnet.decode.sequence import lattice_posteriors

        want = {k: i for i, k in enumerate(keys)}
        for key, lat in read_lattice_ark(source):
            i = want.get(key)
            if i is None:
                continue
            f, t, g = lattice_posteriors(lat, a.acoustic_scale)
            if f.size == 0:
                print(f"WARNING: empty lattice for {key}", file=sys.stderr)
                continue
            if f.max() >= lengths[i]:
                fail(f"lattice of '{key}' has {int(f.max()) + 1} frames, the features {int(lengths[i])}", source)
            frames.append(f + offsets[i])
            tids.append(t)
            posts.append(g)
            used.append(key)
    else:
        from pynnet.hmm.ali_io import read_alignments

        alis = read_alignments(source)
        for i, key in enumerate(keys):
            ali = alis.get(key)
            if ali is None:
                continue
            if ali.size != lengths[i]:
                print(f"WARNING: alignment has wrong size {ali.size} vs. {int(lengths[i])} frames for {key}",
                      file=sys.stderr)
                continue
            tables.check(ali, f"{source}: {key}")
            frames.append(offsets[i] + np.arange(ali.size))
            tids.append(np.asarray(ali, np.int64))
            posts.append(np.ones(ali.size))
            used.append(key)
    if not used:
        fail("no utterance has both features and posteriors (alignments or lattices of this data?)", source)
    frames, tids, posts = np.concatenate(frames), np.concatenate(tids), np.concatenate(posts)
    if tids.max() >= tables.pdf.size:
        fail(f"transition id {int(tids.max())} out of range for the model (from another model?)", source)
    posts = np.where(sil[tables.phone[tids]], posts * a.silence_weight, posts)
    keep = posts != 0
    return frames[keep], tables.pdf[tids[keep]].astype(np.int64), posts[keep], used


def _read_am(path: str):
    from pynnet.hmm.gmm import AmGmm
    from pynnet.hmm.model_io import read_model

    tm, am_k = read_model(path)
    return tm, AmGmm.from_khg(am_k)


def _sum(cls, paths: list[str]):
    total = None
    for path in paths:
        acc = cls.read(path)
        if total is None:
            total = acc
        else:
            total.add(acc, path)
    return total


def _write_matrix(path: str, mat: np.ndarray) -> None:
    from pynnet.hmm.train import write_matrix

    write_matrix(path, mat)


# --------------------------------------------------------------------------- LDA
@cli
def acc_lda_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-acc-lda", "Accumulate LDA statistics (pdfs as classes) along alignments, on spliced "
               "features (Kaldi's ali-to-post | weight-silence-post | acc-lda).")
    _feat_opts(p)
    _post_opts(p)
    p.add_argument("model")
    p.add_argument("data_dir")
    p.add_argument("alignments")
    p.add_argument("acc_out")
    a = p.parse_args(argv)
    from pynnet.hmm.adapt import LdaAccs
    from pynnet.hmm.model_io import read_transition_model

    tm = read_transition_model(a.model)
    keys, lengths, feats = _features(a, a.data_dir)
    frames, pdfs, w, used = _posteriors(a, tm, keys, lengths, a.alignments)
    accs = LdaAccs.zeros(int(tm.num_pdfs), feats.shape[1])
    accs.accumulate(feats[frames], pdfs, w)
    accs.write(a.acc_out)
    log(f"Done {len(used)} utterances ({frames.size} frames with nonzero weight)")
    return 0


@cli
def est_lda_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-est-lda", "Estimate an LDA transform from summed statistics (Kaldi's est-lda).")
    p.add_argument("--dim", type=int_opt, default=40, help="output dimension (default 40)")
    p.add_argument("--write-full-matrix", default="", help="also write the full (square) transform here")
    p.add_argument("--within-class-factor", type=float_opt, default=1.0)
    p.add_argument("mat_out")
    p.add_argument("accs", nargs="+")
    a = p.parse_args(argv)
    from pynnet.hmm.adapt import LdaAccs

    accs = _sum(LdaAccs, a.accs)
    lda, full = accs.estimate(a.dim, a.within_class_factor)
    _write_matrix(a.mat_out, lda)
    if a.write_full_matrix:
        _write_matrix(a.write_full_matrix, full)
    log(f"Wrote {lda.shape[0]} x {lda.shape[1]} LDA transform to {a.mat_out}")
    return 0


# --------------------------------------------------------------------------- MLLT
@cli
def acc_mllt_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-acc-mllt", "Accumulate MLLT (semi-tied covariance) statistics along alignments "
               "(Kaldi's ali-to-post | weight-silence-post | gmm-acc-mllt).")
    _feat_opts(p)
    _post_opts(p)
    p.add_argument("model")
    p.add_argument("data_dir")
    p.add_argument("alignments")
    p.add_argument("acc_out")
    a = p.parse_args(argv)
    from pynnet.hmm.adapt import MlltAccs

    tm, am = _read_am(a.model)
    keys, lengths, feats = _features(a, a.data_dir)
    _check_dim(feats, am.dim, a.model, a.data_dir)
    frames, pdfs, w, used = _posteriors(a, tm, keys, lengths, a.alignments)
    accs = MlltAccs.zeros(am.dim)
    like = accs.accumulate(am, feats, frames, pdfs, w)
    accs.write(a.acc_out)
    log(f"Done {len(used)} utterances; average likelihood per frame {like / max(w.sum(), 1e-10):.5f} over "
        f"{w.sum():.0f} frames")
    return 0


@cli
def est_mllt_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-est-mllt", "Estimate an MLLT transform from summed statistics (Kaldi's est-mllt).")
    p.add_argument("--num-iters", type=int_opt, default=100)
    p.add_argument("mat_out")
    p.add_argument("accs", nargs="+")
    a = p.parse_args(argv)
    from pynnet.hmm.adapt import MlltAccs

    mat, impr, count = _sum(MlltAccs, a.accs).update(a.num_iters)
    _write_matrix(a.mat_out, mat)
    log(f"Overall objective function improvement for MLLT is {impr:.5f} over {count:.0f} frames")
    return 0


@cli
def transform_means_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-transform-means", "Transform a GMM's means by a linear or affine matrix "
               "(Kaldi's gmm-transform-means).")
    p.add_argument("--binary", type=kaldi_bool, default=True)
    p.add_argument("matrix")
    p.add_argument("model_in")
    p.add_argument("model_out")
    a = p.parse_args(argv)
    from pynnet.hmm.adapt import transform_means
    from pynnet.hmm.model_io import write_model
    from pynnet.hmm.train import read_matrix

    mat = read_matrix(a.matrix)
    tm, am = _read_am(a.model_in)
    if mat.shape[1] not in (am.dim, am.dim + 1) or mat.shape[0] != am.dim:
        fail(f"matrix is {mat.shape[0]} x {mat.shape[1]}, the model's dimension is {am.dim}", a.matrix)
    write_model(a.model_out, tm, transform_means(am, mat).to_khg(), a.binary)
    return 0


@cli
def compose_transforms_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-compose-transforms", "Compose two transforms, c = a * b (apply b, then a); either may be a "
               "table (ark:FILE, per speaker), then so is c (Kaldi's compose-transforms).")
    p.add_argument("--b-is-affine", type=kaldi_bool, default=False,
                   help="b is affine (d x d+1) although square? (Kaldi's option; size decides otherwise)")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("c")
    a = p.parse_args(argv)
    from pynnet.feat.tables import MatrixWriter
    from pynnet.hmm.adapt import compose_transforms
    from pynnet.hmm.train import read_matrix, read_matrix_table

    def load(spec):
        return read_matrix_table(spec) if spec.startswith(("ark:", "scp:")) else read_matrix(spec)

    ma, mb = load(a.a), load(a.b)
    if not isinstance(ma, dict) and not isinstance(mb, dict):
        _write_matrix(a.c, compose_transforms(ma, mb, a.b_is_affine))
        return 0
    if not a.c.startswith("ark"):
        fail("a table input needs a table output (ark:FILE)", a.c)
    keys = list(ma) if isinstance(ma, dict) else list(mb)
    out = []
    for k in keys:
        x = ma.get(k) if isinstance(ma, dict) else ma
        y = mb.get(k) if isinstance(mb, dict) else mb
        if x is None or y is None:
            print(f"WARNING: no matrix for '{k}' in {a.b if y is None else a.a}", file=sys.stderr)
            continue
        out.append((k, compose_transforms(x, y, a.b_is_affine).astype(np.float32)))
    if not out:   # (an error before anything is written: no empty table left behind)
        fail(f"no key has a matrix in both {a.a} and {a.b}: nothing to compose", a.c)
    with MatrixWriter(a.c) as w:
        for k, m in out:
            w.write(k, m)
    log(f"Composed {len(out)} transforms")
    return 0


# --------------------------------------------------------------------------- fMLLR
@cli
def est_fmllr_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-est-fmllr", "Estimate per-speaker fMLLR transforms (Kaldi's gmm-est-fmllr --spk2utt, "
               "or gmm-post-to-gpost + gmm-est-fmllr-gpost with --gpost-model). With --fmllr the features are "
               "already adapted and the output is the transform to apply on top (compose it).")
    _feat_opts(p)
    _post_opts(p)
    p.add_argument("--fmllr-update-type", default="full", choices=["full", "diag", "offset", "none"])
    p.add_argument("--fmllr-min-count", type=float_opt, default=500.0,
                   help="frames a speaker needs for the full update; fewer: a smaller update (logged)")
    p.add_argument("--fmllr-num-iters", type=int_opt, default=40)
    p.add_argument("--gpost-model", default="", help="Gaussian posteriors from this model (a SAT system's "
                   "final.alimdl on speaker-independent features), statistics with <model>")
    p.add_argument("model")
    p.add_argument("data_dir")
    p.add_argument("posteriors", help="alignments (ali.JOB.gz) or, with --lattices, a lattice rspecifier")
    p.add_argument("trans_wspecifier", help="e.g. ark:exp/tri4/trans.1 (keyed by speaker)")
    a = p.parse_args(argv)
    from pynnet.feat.tables import MatrixWriter
    from pynnet.hmm.adapt import FmllrAccs
    from pynnet.io.datadir import read_data_file

    tm, am = _read_am(a.model)
    gpost_am = None
    if a.gpost_model:
        _, gpost_am = _read_am(a.gpost_model)
        if [w.size for w in gpost_am.weights] != [w.size for w in am.weights]:
            fail(f"does not match {a.model} Gaussian for Gaussian (not its alignment model?)", a.gpost_model)
    t0 = time.time()
    keys, lengths, feats = _features(a, a.data_dir)
    _check_dim(feats, am.dim, a.model, a.data_dir)
    frames, pdfs, w, used = _posteriors(a, tm, keys, lengths, a.posteriors)
    utt2spk = read_data_file(a.data_dir, "utt2spk")
    utt_of_frame = np.repeat(np.arange(len(keys)), lengths)[frames]
    spk_ids: dict[str, int] = {}
    spk_of_utt = np.array([spk_ids.setdefault(utt2spk.get(k, k), len(spk_ids)) for k in keys], np.int64)
    spk_of = spk_of_utt[utt_of_frame] if frames.size else np.zeros(0, np.int64)
    order = np.argsort(spk_of, kind="stable")
    bounds = np.searchsorted(spk_of[order], np.arange(len(spk_ids) + 1))
    tot_impr = tot_count = 0.0
    with MatrixWriter(a.trans_wspecifier) as out:
        for spk, s in sorted(spk_ids.items()):
            sel = order[bounds[s]:bounds[s + 1]]
            accs = FmllrAccs.zeros(am.dim)
            if sel.size:
                accs.accumulate(am, feats, frames[sel], pdfs[sel], w[sel], gpost_am=gpost_am)
            W, impr, count, used_type = accs.estimate(a.fmllr_update_type, a.fmllr_min_count, a.fmllr_num_iters)
            if used_type != a.fmllr_update_type:
                log(f"speaker {spk}: {count:.1f} frames (< --fmllr-min-count {a.fmllr_min_count:g}): "
                    f"'{used_type}' update instead of '{a.fmllr_update_type}'")
            out.write(spk, W.astype(np.float32))
            tot_impr += impr * count
            tot_count += count
    log(f"Estimated {len(spk_ids)} speakers' transforms from {len(used)} utterances in {time.time() - t0:.1f} s; "
        f"auxf improvement {tot_impr / max(tot_count, 1e-10):.4f} per frame over {tot_count:.0f} frames")
    return 0


@cli
def acc_stats_twofeats_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-acc-stats-twofeats", "Accumulate GMM statistics on the features without --fmllr, "
               "with Gaussian posteriors from the features with it (Kaldi's gmm-acc-stats-twofeats: a SAT "
               "system's alignment model).")
    _feat_opts(p)
    p.add_argument("model")
    p.add_argument("data_dir")
    p.add_argument("alignments")
    p.add_argument("acc_out")
    a = p.parse_args(argv)
    from pynnet.hmm.ali_io import TransitionTables, read_alignments
    from pynnet.hmm.gmm import GmmAccs, accumulate

    if not a.fmllr:
        raise PynnetError("--fmllr is required (the adapted features give the posteriors)")
    from pynnet.hmm.train import feat_transforms

    tm, am = _read_am(a.model)
    fmllr, a.fmllr = a.fmllr, ""
    si_keys, si_lengths, si = _features(a, a.data_dir)   # read once; the fMLLR is applied on top
    a.fmllr = fmllr
    keys, lengths, adapted = feat_transforms(a.data_dir, fmllr=fmllr).apply_batch(si_keys, si_lengths, si)
    if keys != si_keys:   # (speakers without a transform: left out, as in the adapted features)
        keep = np.repeat(np.isin(np.array(si_keys), np.array(keys)), si_lengths)
        si = si[keep]
    _check_dim(adapted, am.dim, a.model, a.data_dir)
    tables = TransitionTables.from_model(tm)
    alis = read_alignments(a.alignments)
    ok = np.array([k in alis and alis[k].size == n for k, n in zip(keys, lengths.tolist())], bool)
    if not ok.any():
        fail("no utterance has features and an alignment of the right length", a.alignments)
    keep = np.repeat(ok, lengths)
    tids = np.concatenate([alis[k] for k, o in zip(keys, ok) if o])
    accs = GmmAccs.zeros(am, tables.pdf.size - 1)
    accumulate(am, si[keep], tids, tables.pdf, accs, post_feats=adapted[keep])
    accs.write(a.acc_out)
    log(f"Done {int(ok.sum())} files; average likelihood per frame {accs.tot_like / max(accs.num_frames, 1):.5f} "
        f"over {accs.num_frames} frames")
    return 0


# --------------------------------------------------------------------------- features out, lattice rescoring
@cli
def transform_feats_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-transform-feats", "Write a data dir's features as a GMM system makes them (CMVN, "
               "deltas or splicing, final.mat, fMLLR): Kaldi's transform-feats pipeline, for "
               "steps/nnet/make_fmllr_feats.sh.")
    _feat_opts(p)
    p.add_argument("data_dir")
    p.add_argument("wspecifier", help="e.g. ark,scp:fmllr/feats.1.ark,fmllr/feats.1.scp")
    a = p.parse_args(argv)
    from pynnet.feat.tables import MatrixWriter
    from pynnet.hmm.train import gmm_features

    n = 0
    with MatrixWriter(a.wspecifier) as w:
        for utt, x in gmm_features(a.data_dir, a.cmvn_opts, a.delta_order, transforms=feat_transforms_of(a, a.data_dir)):
            w.write(utt, x)
            n += 1
    if not n:
        fail("no features written", a.data_dir)
    log(f"Wrote {n} utterances")
    return 0


@cli
def rescore_lattice_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-gmm-rescore-lattice", "Replace the acoustic scores of lattices by a GMM's on the given "
               "features (Kaldi's gmm-rescore-lattice): the last pass of fMLLR decoding.")
    _feat_opts(p)
    p.add_argument("model")
    p.add_argument("data_dir")
    p.add_argument("lattice_rspecifier")
    p.add_argument("lattice_wspecifier")
    a = p.parse_args(argv)
    from pynnet.decode.decoder import GmmScorer, tid2pdf
    from pynnet.decode.io import TextArkWriter
    from pynnet.decode.lattice import read_lattice_ark
    from pynnet.decode.sequence import rescore_acoustics
    from pynnet.hmm.model_io import read_model
    from pynnet.hmm.train import gmm_features

    tm, am_k = read_model(a.model)
    scorer, m = GmmScorer(am_k), tid2pdf(tm)
    lats = dict(read_lattice_ark(a.lattice_rspecifier))
    n = 0
    with TextArkWriter(a.lattice_wspecifier) as out:
        for utt, x in gmm_features(a.data_dir, a.cmvn_opts, a.delta_order, lats.keys(),
                                   transforms=feat_transforms_of(a, a.data_dir)):
            if x.shape[1] != scorer.dim:
                fail(f"feature dimension {x.shape[1]} does not match the model's {scorer.dim} ({a.model})", a.data_dir)
            lat = lats.pop(utt)
            out.write(rescore_acoustics(lat, scorer.loglikes(x), m).to_kaldi_text(utt))
            n += 1
    if lats:
        print(f"WARNING: {len(lats)} lattices had no features, e.g. {next(iter(lats))}", file=sys.stderr)
    log(f"Rescored {n} lattices")
    return 0 if n else 1
