"""GMM training pieces: features for GMMs, monophone initialisation, training graphs, equal alignment.

Kaldi's gmm-init-mono, compile-train-graphs and align-equal-compiled, as library functions
(the pynnet-* programs in pynnet/bin/gmm.py are thin wrappers).
"""
from __future__ import annotations

import contextlib
import gzip
import os
import shlex
import shutil
import sys
import tempfile
import zlib
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from pynnet.hmm.lang import _read_int_rows, read_symbol_table
from pynnet.io.errors import PynnetError, fail

__all__ = ["parse_cmvn_opts", "parse_splice_opts", "FeatTransforms", "feat_transforms", "read_matrix",
           "write_matrix", "read_matrix_table",
           "gmm_features", "feature_dim", "init_mono", "monophone_tree",
           "GraphCompiler", "write_graphs", "read_graphs", "equal_align",
           "read_int_sets", "silence_pdfs"]


# --------------------------------------------------------------------------- features
def parse_cmvn_opts(cmvn_opts: str) -> tuple[bool, bool]:
    """Kaldi apply-cmvn options (``--norm-means=true --norm-vars=false``) -> (norm_means, norm_vars)."""
    norm_means, norm_vars = True, False
    try:
        opts = shlex.split(cmvn_opts or "")
    except ValueError as e:   # an unbalanced quote
        raise PynnetError(f"cannot parse the CMVN options '{cmvn_opts}': {e}") from None
    for o in opts:
        name, _, val = o.partition("=")
        if name not in ("--norm-means", "--norm-vars") or val not in ("true", "false"):
            raise PynnetError(f"unsupported CMVN option '{o}' (only --norm-means=true|false, --norm-vars=true|false)")
        if name == "--norm-means":
            norm_means = val == "true"
        else:
            norm_vars = val == "true"
    return norm_means, norm_vars


def parse_splice_opts(splice_opts: str) -> tuple[int, int]:
    """Kaldi splice-feats options (``--left-context=3 --right-context=3``; defaults 4 and 4) ->
    (left, right)."""
    ctx = {"--left-context": 4, "--right-context": 4}
    try:
        opts = shlex.split(splice_opts or "")
    except ValueError as e:
        raise PynnetError(f"cannot parse the splice options '{splice_opts}': {e}") from None
    i = 0
    while i < len(opts):
        name, eq, val = opts[i].partition("=")
        if not eq and name in ctx and i + 1 < len(opts):
            val, i = opts[i + 1], i + 1
        if name not in ctx or not val.isascii() or not val.isdigit():
            raise PynnetError(f"unsupported splice option '{opts[i]}' (only --left-context=N, --right-context=N)")
        ctx[name] = int(val)
        i += 1
    return ctx["--left-context"], ctx["--right-context"]


def read_matrix(path: str, what: str = "matrix") -> np.ndarray:
    """A Kaldi matrix file (``final.mat``, ``full.mat``: binary or text, one object, as
    est-lda / est-mllt / compose-transforms write them) as float64."""
    import kaldiio

    if not os.path.isfile(path):
        fail(f"no such {what} file", path)
    try:
        m = np.asarray(kaldiio.load_mat(path), dtype=np.float64)
    except Exception as e:  # kaldiio raises assorted errors on bad input
        fail(f"not a Kaldi matrix ({type(e).__name__}: {e})", path)
    if m.ndim != 2 or m.size == 0:
        fail(f"not a Kaldi matrix (shape {m.shape})", path)
    return m


def write_matrix(path: str, mat: np.ndarray) -> None:
    """A Kaldi binary float matrix file (as est-lda / est-mllt write ``final.mat``), atomically."""
    import kaldiio

    from pynnet.io.atomic import atomic_path

    with atomic_path(path) as tmp:
        kaldiio.save_mat(tmp, np.asarray(mat, dtype=np.float32))


def read_matrix_table(spec: str, what: str = "transforms") -> dict[str, np.ndarray]:
    """Per-speaker (or per-utterance) matrices, e.g. fMLLR ``trans.JOB``: an ark file, or any
    rspecifier (``ark:...``, ``scp:...``)."""
    from pynnet.feat.tables import read_matrices

    rspec = spec if ":" in spec.split("/")[0] else f"ark:{spec}"
    if rspec.startswith("ark:") and not rspec.rstrip().endswith("|") and not os.path.isfile(rspec[4:]):
        fail(f"no such {what} file", rspec[4:])
    out = {}
    for key, m in read_matrices(rspec):
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2:
            fail(f"entry '{key}' is not a matrix", spec)
        out[key] = m
    return out


def _splice_batch(x: np.ndarray, lengths: np.ndarray, left: int, right: int) -> np.ndarray:
    """splice-feats of many utterances concatenated in ``x``, each clamped at its own edges."""
    lengths = np.asarray(lengths, dtype=np.int64)
    ends = np.cumsum(lengths)
    first = np.repeat(ends - lengths, lengths)
    last = np.repeat(ends - 1, lengths)
    t = np.arange(x.shape[0])
    cols = [x[np.clip(t + k, first, last)] for k in range(-left, right + 1)]
    return np.hstack(cols).astype(np.float32, copy=False)


@dataclass
class FeatTransforms:
    """What a GMM system does after CMVN (and deltas): Kaldi's ``splice-feats``, ``transform-feats
    final.mat`` (LDA+MLLT) and ``transform-feats --utt2spk trans.JOB`` (per-speaker fMLLR), in
    that order.  Applied after the feature cache, so every system shares the cached CMVN features."""
    splice: tuple[int, int] | None = None
    matrix: np.ndarray | None = None
    matrix_path: str = ""
    fmllr: dict[str, np.ndarray] | None = None
    fmllr_path: str = ""
    utt2spk: dict[str, str] | None = None

    def _check_dims(self, dim: int) -> int:
        if self.splice:
            dim *= self.splice[0] + 1 + self.splice[1]
        if self.matrix is not None:
            if self.matrix.shape[1] not in (dim, dim + 1):
                fail(f"transform is {self.matrix.shape[0]} x {self.matrix.shape[1]} but the features are "
                     f"{dim}-dimensional (wrong --splice-opts, or a final.mat of another system?)", self.matrix_path)
            dim = self.matrix.shape[0]
        if self.fmllr:
            m = next(iter(self.fmllr.values()))
            if m.shape not in ((dim, dim + 1), (dim, dim)):
                fail(f"fMLLR transforms are {m.shape[0]} x {m.shape[1]} but the features are {dim}-dimensional "
                     "(transforms made with another system?)", self.fmllr_path)
        return dim

    def _fmllr_of(self, utt: str) -> np.ndarray | None:
        spk = self.utt2spk.get(utt, utt) if self.utt2spk else utt
        m = self.fmllr.get(spk)
        return self.fmllr.get(utt) if m is None else m

    def apply(self, utt: str, x: np.ndarray) -> np.ndarray | None:
        """One utterance; None when fMLLR is on and its speaker has no transform (Kaldi's
        transform-feats skips it with a warning)."""
        keys, _, y = self.apply_batch([utt], np.array([x.shape[0]]), np.asarray(x, np.float32))
        return y if keys else None

    def apply_batch(self, keys: list[str], lengths: np.ndarray, feats: np.ndarray
                    ) -> tuple[list[str], np.ndarray, np.ndarray]:
        from pynnet.hmm.adapt import apply_transform

        if not keys:
            return keys, lengths, feats
        self._check_dims(feats.shape[1])
        x = _splice_batch(feats, lengths, *self.splice) if self.splice else feats
        if self.matrix is not None:
            x = apply_transform(x, self.matrix)
        if not self.fmllr:
            return keys, lengths, np.asarray(x, dtype=np.float32)
        mats = [self._fmllr_of(k) for k in keys]
        missing = [k for k, m in zip(keys, mats) if m is None]
        if missing:
            print(f"WARNING: no fMLLR transform in {self.fmllr_path} for {len(missing)} utterance(s) "
                  f"(e.g. '{missing[0]}', speaker '{(self.utt2spk or {}).get(missing[0], '?')}'): left out",
                  file=sys.stderr)
        out = np.empty((x.shape[0], x.shape[1]), np.float32)
        ends = np.cumsum(lengths)
        keep = np.ones(len(keys), bool)
        for i, (m, end, n) in enumerate(zip(mats, ends.tolist(), lengths.tolist())):
            if m is None:
                keep[i] = False
            else:
                out[end - n:end] = apply_transform(x[end - n:end], m)
        if keep.all():
            return keys, lengths, out
        return [k for k, s in zip(keys, keep) if s], lengths[keep], out[np.repeat(keep, lengths)]


def feat_transforms(data_dir: str, splice_opts: str = "", transform: str = "", fmllr: str = ""
                    ) -> FeatTransforms | None:
    """The ``FeatTransforms`` the programs' ``--splice-opts``/``--transform``/``--fmllr`` options
    name (None: plain CMVN + delta features)."""
    if not (splice_opts or transform or fmllr):
        return None
    ft = FeatTransforms()
    if splice_opts:
        ft.splice = parse_splice_opts(splice_opts)
    if transform:
        ft.matrix, ft.matrix_path = read_matrix(transform, "transform"), transform
    if fmllr:
        from pynnet.io.datadir import read_data_file

        ft.fmllr, ft.fmllr_path = read_matrix_table(fmllr, "fMLLR transforms"), fmllr
        if not ft.fmllr:
            fail("no fMLLR transforms in the file", fmllr)
        shapes = {m.shape for m in ft.fmllr.values()}
        if len(shapes) > 1:
            fail(f"fMLLR transforms of different sizes {sorted(shapes)}", fmllr)
        ft.utt2spk = read_data_file(data_dir, "utt2spk", required=False) or {}
    return ft


def _delta_scales(order: int, window: int = 2) -> list[np.ndarray]:
    """Kaldi's DeltaFeatures filter taps per order (each a convolution of the previous)."""
    scales = [np.array([1.0])]
    denom = sum(j * j for j in range(-window, window + 1))
    for _ in range(order):
        prev = scales[-1]
        cur = np.zeros(prev.size + 2 * window)
        for j in range(-window, window + 1):
            cur[j + window: j + window + prev.size] += j * prev / denom
        scales.append(cur)
    return scales


def add_deltas(x: np.ndarray, order: int = 2, window: int = 2) -> np.ndarray:
    """Kaldi add-deltas: [x, delta, delta-delta], frames clamped at the edges."""
    if order == 0:
        return x
    scales = _delta_scales(order, window)
    maxw = (scales[-1].size - 1) // 2
    pad = np.pad(x.astype(np.float64), ((maxw, maxw), (0, 0)), mode="edge")
    n = x.shape[0]
    out = [x.astype(np.float64)]
    for s in scales[1:]:
        w = (s.size - 1) // 2
        acc = np.zeros_like(out[0])
        for k, c in enumerate(s):
            if c != 0.0:
                off = maxw - w + k
                acc += c * pad[off:off + n]
        out.append(acc)
    return np.hstack(out).astype(np.float32)


def add_deltas_batch(x: np.ndarray, lengths: np.ndarray, order: int = 2, window: int = 2) -> np.ndarray:
    """``add_deltas`` of many utterances concatenated in ``x`` (lengths given), in one vectorised
    pass: frames are clamped at each utterance's own edges."""
    if order == 0:
        return np.asarray(x, dtype=np.float32)
    lengths = np.asarray(lengths, dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    first = np.repeat(starts, lengths)
    last = np.repeat(ends - 1, lengths)
    t = np.arange(x.shape[0])
    xf = np.asarray(x, dtype=np.float32)
    out = [xf]
    for s in _delta_scales(order, window)[1:]:
        w = (s.size - 1) // 2
        acc = np.zeros(xf.shape, dtype=np.float32)
        for k, c in enumerate(s):
            if c != 0.0:
                idx = np.clip(t + (k - w), first, last)
                acc += np.float32(c) * xf[idx]
        out.append(acc)
    return np.hstack(out)


def _apply_cmvn(x: np.ndarray, stats: np.ndarray, norm_means: bool, norm_vars: bool) -> np.ndarray:
    count = stats[0, -1]
    if count <= 0:
        raise PynnetError("CMVN stats have zero count")
    mean = stats[0, :-1] / count
    out = x.astype(np.float64)
    if norm_means or norm_vars:
        out = out - mean
    if norm_vars:
        var = stats[1, :-1] / count - mean * mean
        out = out / np.sqrt(np.maximum(var, 1e-10))
        if not norm_means:
            out = out + mean / np.sqrt(np.maximum(var, 1e-10))
    return out.astype(np.float32)


def _features_shim(data_dir: str, norm_means: bool, norm_vars: bool, delta_order: int,
                   utts: set[str] | None) -> Iterator[tuple[str, np.ndarray]]:
    # TEMPORARY SHIM until pynnet.feat.read_features lands: feats.scp + per-speaker cmvn.scp + deltas.
    import kaldiio

    from pynnet.io.datadir import read_data_file

    feats_scp = os.path.join(data_dir, "feats.scp")
    feats = read_data_file(data_dir, "feats.scp")
    cmvn = None
    utt2spk = None
    if norm_means or norm_vars:
        cmvn_scp = os.path.join(data_dir, "cmvn.scp")
        if not os.path.exists(cmvn_scp):
            fail("no cmvn.scp (run steps/compute_cmvn_stats.sh, or use --cmvn-opts '--norm-means=false')", data_dir)
        cmvn = read_data_file(data_dir, "cmvn.scp")
        utt2spk = read_data_file(data_dir, "utt2spk")
    cache: dict[str, np.ndarray] = {}
    for utt, rx in feats.items():
        if utts is not None and utt not in utts:
            continue
        try:
            x = np.asarray(kaldiio.load_mat(rx), dtype=np.float32)
        except Exception as e:  # kaldiio raises assorted errors for bad specifiers
            fail(f"cannot read features of '{utt}' ({rx}): {e}", feats_scp)
        if cmvn is not None:
            spk = utt2spk.get(utt)
            if spk is None or spk not in cmvn:
                fail(f"no CMVN stats for utterance '{utt}' (speaker '{spk}')", os.path.join(data_dir, "cmvn.scp"))
            if spk not in cache:
                cache = {spk: np.asarray(kaldiio.load_mat(cmvn[spk]), dtype=np.float64)}
            if cache[spk].shape[1] != x.shape[1] + 1:
                fail(f"CMVN stats dimension {cache[spk].shape[1] - 1} does not match features {x.shape[1]}",
                     os.path.join(data_dir, "cmvn.scp"))
            x = _apply_cmvn(x, cache[spk], norm_means, norm_vars)
        yield utt, add_deltas(x, delta_order)


def gmm_features(data_dir: str, cmvn_opts: str = "", delta_order: int = 2,
                 utts: Iterable[str] | None = None, transforms: FeatTransforms | None = None
                 ) -> Iterator[tuple[str, np.ndarray]]:
    """(utt, float32 matrix) of a data dir as the GMM stages use them: per-speaker CMVN then deltas,
    then ``transforms`` (splicing, LDA+MLLT, fMLLR)."""
    if transforms is not None:
        for utt, x in gmm_features(data_dir, cmvn_opts, delta_order, utts):
            y = transforms.apply(utt, x)
            if y is not None:
                yield utt, y
        return
    norm_means, norm_vars = parse_cmvn_opts(cmvn_opts)
    want = set(utts) if utts is not None else None
    if not os.path.exists(os.path.join(data_dir, "feats.scp")):
        fail("no feats.scp (run steps/make_mfcc.sh first)", data_dir)
    try:
        from pynnet.feat import read_features  # the features engineer's reader, once it lands
    except ImportError:
        read_features = None
    if read_features is not None and norm_means:
        for utt, x in read_features(data_dir, cmvn=True, norm_vars=norm_vars, delta_order=delta_order):
            if want is None or utt in want:
                yield utt, np.asarray(x, dtype=np.float32)
        return
    yield from _features_shim(data_dir, norm_means, norm_vars, delta_order, want)


def _cache_signature(data_dir: str, cmvn_opts: str, delta_order: int) -> str:
    """What the cached features depend on: the feature/CMVN/speaker files (path, size, mtime)
    and the options."""
    parts = [f"cmvn_opts={cmvn_opts!r}", f"delta_order={delta_order}"]
    for name in ("feats.scp", "cmvn.scp", "utt2spk"):
        f = os.path.join(data_dir, name)
        if os.path.exists(f):
            st = os.stat(f)
            parts.append(f"{os.path.abspath(f)}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _select(keys, lengths, feats, utts):
    if utts is None:
        return keys, lengths, feats
    want = set(utts)
    sel = np.array([k in want for k in keys], dtype=bool)
    if sel.all():
        return keys, lengths, feats
    frame_sel = np.repeat(sel, lengths)
    return [k for k, s in zip(keys, sel) if s], lengths[sel], feats[frame_sel]


def gmm_features_batch(data_dir: str, cmvn_opts: str = "", delta_order: int = 2,
                       utts: Iterable[str] | None = None, cache: str | None = None,
                       transforms: FeatTransforms | None = None
                       ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """All (selected) utterances at once: (utt ids, frame counts, concatenated float32 features).
    Same values as ``gmm_features``; the deltas are computed in one vectorised pass (fast).

    ``cache``: an .npz file holding the processed features of the whole data dir; reused while
    the data dir's feats.scp/cmvn.scp/utt2spk and the options are unchanged, else rewritten.
    Training passes read the same features 40 times: this makes each read ~50x cheaper.
    ``transforms`` are applied after the cache (it holds the CMVN + delta features)."""
    if transforms is not None:
        keys, lengths, feats = gmm_features_batch(data_dir, cmvn_opts, delta_order, utts, cache)
        return transforms.apply_batch(keys, lengths, feats)
    if cache:
        sig = _cache_signature(data_dir, cmvn_opts, delta_order)
        if os.path.exists(cache):
            try:
                with np.load(cache) as z:
                    if str(z["signature"]) == sig:
                        return _select(list(z["keys"]), z["lengths"], z["feats"], utts)
            except (OSError, ValueError, KeyError):
                pass  # unreadable or stale: recompute below
    keys, mats = [], []
    for utt, x in gmm_features(data_dir, cmvn_opts, 0, None if cache else utts):
        keys.append(utt)
        mats.append(x)
    if not mats:
        return keys, np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    lengths = np.array([m.shape[0] for m in mats], dtype=np.int64)
    feats = add_deltas_batch(np.concatenate(mats), lengths, delta_order)
    if cache:
        from pynnet.io.atomic import atomic_path

        with atomic_path(cache) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, signature=np.array(sig), keys=np.array(keys), lengths=lengths, feats=feats)
        return _select(keys, lengths, feats, utts)
    return keys, lengths, feats


def feature_dim(data_dir: str, cmvn_opts: str = "", delta_order: int = 2,
                transforms: FeatTransforms | None = None) -> int:
    for _, x in gmm_features(data_dir, cmvn_opts, delta_order, transforms=transforms):
        return int(x.shape[1])
    fail("no features", data_dir)


# --------------------------------------------------------------------------- lang helpers
def read_int_sets(path: str) -> list[list[int]]:
    """Integer rows of a lang file (phones/sets.int, disambig.int ...), blank lines skipped."""
    return [r for r in _read_int_rows(path) if r]


def silence_pdfs(tm, silence_phones: Iterable[int]) -> list[int]:
    """Pdfs used by the silence phones (as gmm-boost-silence finds them)."""
    from pynnet.hmm.ali_io import TransitionTables

    t = TransitionTables.from_model(tm)
    sil = np.zeros(max(int(t.phone.max()) + 1, 1), bool)
    for p in silence_phones:
        if 0 <= p < sil.size:
            sil[p] = True
    mask = sil[t.phone]
    mask[0] = False
    return sorted(set(t.pdf[mask].tolist()))


# --------------------------------------------------------------------------- monophone init
def monophone_tree(topo, shared_phones: list[list[int]] | None = None):
    """Kaldi's monophone ContextDependency (one pdf per pdf-class of each phone, or per set)."""
    import kaldi_hmm_gmm as khg

    p2n = topo.get_phone_to_num_pdf_classes()
    if shared_phones:
        return khg.monophone_context_dependency_shared(shared_phones, p2n)
    return khg.monophone_context_dependency(list(topo.phones), p2n)


def init_mono(topo, feats: Iterable[np.ndarray], shared_phones: list[list[int]] | None = None,
              perturb_factor: float = 0.0):
    """gmm-init-mono: every pdf gets one Gaussian with the global mean and variance of ``feats``.
    Returns (ContextDependency, TransitionModel, AmGmm)."""
    import kaldi_hmm_gmm as khg

    from pynnet.hmm.gmm import AmGmm

    n, s1, s2 = 0, None, None
    for x in feats:
        x = np.asarray(x, dtype=np.float64)
        if s1 is None:
            s1, s2 = np.zeros(x.shape[1]), np.zeros(x.shape[1])
        if x.shape[1] != s1.size:
            raise PynnetError(f"feature dimension changes between utterances ({s1.size} vs {x.shape[1]})")
        n += x.shape[0]
        s1 += x.sum(0)
        s2 += (x * x).sum(0)
    if n == 0:
        raise PynnetError("no feature frames to initialise the model from")
    mean = s1 / n
    var = np.maximum(s2 / n - mean * mean, 1e-3)
    ctx = monophone_tree(topo, shared_phones)
    tm = khg.TransitionModel(ctx, topo)
    am = AmGmm.from_params([np.ones(1)] * tm.num_pdfs, [mean[None]] * tm.num_pdfs, [var[None]] * tm.num_pdfs)
    return ctx, tm, am


class GraphCompiler:
    """compile-train-graphs: per-utterance HCLG-like graphs (no transition probs) from transcripts."""

    def __init__(self, tm, ctx, lang_dir: str):
        import kaldi_hmm_gmm as khg
        import kaldifst

        lfst = os.path.join(lang_dir, "L.fst")
        if not os.path.isfile(lfst):
            fail("no L.fst in lang dir", lang_dir)
        lex = kaldifst.StdVectorFst.read(lfst)
        kaldifst.arcsort(lex, sort_type="olabel")
        disambig_path = os.path.join(lang_dir, "phones", "disambig.int")
        disambig = [x for r in read_int_sets(disambig_path) for x in r] if os.path.exists(disambig_path) else []
        # The C++ compiler keeps references to these: hold them for its lifetime.
        self._keep = (tm, ctx, lex)
        # As Kaldi's compile-train-graphs: no transition or self-loop probabilities in the graphs
        # (scales 0); the aligner adds the current model's probabilities on every pass.
        opts = khg.TrainingGraphCompilerOptions(transition_scale=0.0, self_loop_scale=0.0)
        self.compiler = khg.TrainingGraphCompiler(tm, ctx, lex, disambig, opts)
        self.words = read_symbol_table(os.path.join(lang_dir, "words.txt"))[0]
        oov_path = os.path.join(lang_dir, "oov.int")
        self.oov = None
        if os.path.exists(oov_path):
            oov = [i for r in read_int_sets(oov_path) for i in r]
            if len(oov) != 1:
                fail("must contain exactly one word id", oov_path)
            self.oov = oov[0]
        self.num_oov = 0

    def word_ids(self, words: list[str], where: str = "") -> list[int]:
        ids = []
        for w in words:
            i = self.words.get(w)
            if i is None:
                if self.oov is None:
                    raise PynnetError(f"{where}word '{w}' not in words.txt and the lang dir has no oov.int")
                i = self.oov
                self.num_oov += 1
            ids.append(i)
        return ids

    def compile(self, words: list[str], where: str = ""):
        return self.compiler.compile_graph_from_text(self.word_ids(words, where))


def write_graphs(path: str, graphs: Iterable[tuple[str, object]]) -> int:
    """Write FSTs as a Kaldi fst archive (readable by Kaldi as ark:path), gzipped when ``path``
    ends in .gz (Kaldi's fsts.JOB.gz: ``ark:gunzip -c path|``). Atomic."""
    import kaldi_hmm_gmm  # noqa: F401
    import kaldifst

    from pynnet.io.atomic import DeterministicGzip, atomic_path

    n = 0
    with atomic_path(path) as tmp:
        ark = tmp + ".ark" if path.endswith(".gz") else tmp
        w = kaldifst.VectorFstWriter(f"ark:{ark}")
        for key, g in graphs:
            w.write(key, g)
            n += 1
        w.close()
        if ark != tmp:
            with open(ark, "rb") as fi, DeterministicGzip(tmp, compresslevel=1) as fo:
                shutil.copyfileobj(fi, fo, 1 << 20)
            os.unlink(ark)
    return n


def read_graphs(path: str) -> Iterator[tuple[str, object]]:
    """The FSTs of a Kaldi fst archive (gzipped if ``path`` ends in .gz)."""
    import kaldi_hmm_gmm  # noqa: F401
    import kaldifst

    if not os.path.isfile(path):
        fail("no such graph archive", path)
    with contextlib.ExitStack() as stack:
        ark = path
        if path.endswith(".gz"):
            # unpacked by Python, whose gzip checks the CRC and length (a truncated file is an error)
            tmp = stack.enter_context(tempfile.NamedTemporaryFile(suffix=".ark"))
            try:
                with gzip.open(path, "rb") as fi:
                    shutil.copyfileobj(fi, tmp, 1 << 20)
            except (OSError, EOFError, zlib.error) as e:
                fail(f"corrupt or truncated gzip file ({e})", path)
            tmp.flush()
            ark = tmp.name
        try:
            r = kaldifst.SequentialVectorFstReader(f"ark:{ark}")
            while not r.done:
                yield r.key, r.value.copy()
                r.next()
            r.close()
        except RuntimeError as e:
            fail(f"cannot read as a Kaldi fst archive ({str(e).strip().splitlines()[-1]})", path)


def equal_align(graph, num_frames: int, seed: int = 3) -> np.ndarray | None:
    """align-equal-compiled: a random path through the graph with frames spread evenly over its
    states; None if the utterance is too short for the graph."""
    import kaldi_hmm_gmm  # noqa: F401
    import kaldifst

    ok, path = kaldifst.equal_align(ifst=graph, length=num_frames, rand_seed=seed, num_retries=10)
    if not ok:
        return None
    ok, ilabels, _olabels, _w = kaldifst.get_linear_symbol_sequence(path)
    if not ok:
        return None
    ali = np.asarray([i for i in ilabels if i != 0], dtype=np.int32)
    return ali if ali.size == num_frames else None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
