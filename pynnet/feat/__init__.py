"""Features: MFCC/fbank exactly as Kaldi (kaldi-native-fbank), CMVN, deltas, splicing, and the
reader the GMM and DNN stages use.

    for utt, x in read_features("data/train", cmvn=True, delta_order=2):   # float32 (T, 39)
        ...
    feature_dim("data/train", delta_order=2)                               # 39

The pipeline is Kaldi's: ``apply-cmvn --utt2spk=ark:utt2spk scp:cmvn.scp scp:feats.scp ark:- |
add-deltas ark:- ark:- | splice-feats --left-context=N --right-context=N ark:- ark:-``.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator

import numpy as np

from pynnet.feat.cmvn import acc_cmvn_stats, apply_cmvn, cmvn_stats
from pynnet.feat.tables import load_scp, load_scp_sequential
from pynnet.feat.transforms import add_deltas, delta_scales, splice_feats
from pynnet.io.errors import fail
from pynnet.io.tables import split_key

__all__ = ["read_features", "feature_dim", "transform_features", "apply_cmvn", "cmvn_stats",
           "acc_cmvn_stats", "add_deltas", "delta_scales", "splice_feats", "FeatureComputer",
           "default_values"]


def __getattr__(name: str):  # lazy: kaldi_native_fbank is only needed to compute features
    if name in ("FeatureComputer", "default_values"):
        from pynnet.feat import compute
        return getattr(compute, name)
    raise AttributeError(name)


def _check_opts(delta_order: int, splice: int) -> None:
    if delta_order < 0 or delta_order > 3:
        raise ValueError(f"delta_order must be 0..3, got {delta_order}")
    if splice < 0:
        raise ValueError(f"splice must be >= 0, got {splice}")


def transform_features(x: np.ndarray, *, stats: np.ndarray | None = None, norm_vars: bool = False,
                       delta_order: int = 0, splice: int = 0, name: str = "") -> np.ndarray:
    """CMVN (if ``stats``), then deltas, then splicing ±``splice`` frames; float32 out."""
    if stats is not None:
        x = apply_cmvn(x, stats, norm_vars, name=name)
    else:
        x = np.asarray(x, dtype=np.float32)
    if delta_order:
        x = add_deltas(x, delta_order, 2)
    if splice:
        x = splice_feats(x, splice, splice)
    return x


def _feats_scp(data_dir: str) -> str:
    path = os.path.join(data_dir, "feats.scp")
    if not os.path.isdir(data_dir):
        fail("no such data directory", data_dir)
    if not os.path.exists(path):
        fail("no feats.scp (run steps/make_mfcc.sh or steps/make_fbank.sh first)", data_dir)
    return path


def read_features(data_dir: str | os.PathLike, *, cmvn: bool = True, norm_vars: bool = False,
                  delta_order: int = 0, splice: int = 0, utts: Iterable[str] | None = None,
                  ) -> Iterator[tuple[str, np.ndarray]]:
    """Yield (utterance, float32 matrix) in feats.scp order, after per-speaker CMVN from
    cmvn.scp (stats keyed by the speaker in utt2spk, or by the utterance itself), ``delta_order``
    deltas (Kaldi window 2) and splicing of ±``splice`` frames (edge frames replicated).
    ``utts``: only these utterances (the others are not even read)."""
    _check_opts(delta_order, splice)
    data_dir = os.fspath(data_dir)
    scp = _feats_scp(data_dir)
    cmvn_stats_of = None
    utt2spk: dict[str, str] = {}
    if cmvn:
        cmvn_scp = os.path.join(data_dir, "cmvn.scp")
        if not os.path.exists(cmvn_scp):
            fail("no cmvn.scp (run steps/compute_cmvn_stats.sh first, or read with cmvn=False)", data_dir)
        try:
            cmvn_stats_of = load_scp(cmvn_scp)
        except (ValueError, OSError) as e:
            fail(f"cannot read: {e}", cmvn_scp)
        from pynnet.io.datadir import read_data_file
        utt2spk = read_data_file(data_dir, "utt2spk", required=False) or {}
    n = 0
    want = None if utts is None else set(utts)
    try:
        reader = load_scp_sequential(scp) if want is None else _read_some(scp, want)
        for utt, mat in reader:
            n += 1
            x = np.asarray(mat, dtype=np.float32)
            if x.ndim != 2:
                fail(f"entry '{utt}' is not a matrix", scp, n)
            stats = None
            if cmvn_stats_of is not None:
                key = utt2spk.get(utt, utt)
                if key not in cmvn_stats_of:
                    key = utt
                if key not in cmvn_stats_of:
                    fail(f"no CMVN stats for utterance '{utt}' (speaker '{utt2spk.get(utt, '?')}')",
                         os.path.join(data_dir, "cmvn.scp"))
                stats = np.asarray(cmvn_stats_of[key], dtype=np.float64)
            yield utt, transform_features(x, stats=stats, norm_vars=norm_vars,
                                          delta_order=delta_order, splice=splice, name=utt)
    except (FileNotFoundError, EOFError, ValueError) as e:
        # kaldiio reads lazily: the failing entry is the one after the last yielded
        fail(f"cannot read features: {e}", scp, n + 1 if want is None else None)


def _read_some(scp: str, want: set[str]) -> Iterator[tuple[str, np.ndarray]]:
    import kaldiio

    with open(scp, encoding="utf-8", newline="\n") as f:
        for line in f:
            utt, rx = split_key(line.rstrip("\r\n"))
            if utt in want:
                yield utt, kaldiio.load_mat(rx)


def feature_dim(data_dir: str | os.PathLike, *, cmvn: bool = True, norm_vars: bool = False,
                delta_order: int = 0, splice: int = 0) -> int:
    """Dimension of what ``read_features`` yields with the same options (reads one matrix)."""
    import kaldiio

    _check_opts(delta_order, splice)
    scp = _feats_scp(os.fspath(data_dir))
    with open(scp, encoding="utf-8", newline="\n") as f:
        rx = split_key(f.readline().rstrip("\r\n"))[1]
    if not rx:
        fail("empty or malformed feats.scp", scp, 1)
    try:
        base = np.asarray(kaldiio.load_mat(rx)).shape[1]
    except (FileNotFoundError, EOFError, ValueError) as e:
        fail(f"cannot read features: {e}", scp, 1)
    return base * (delta_order + 1) * (2 * splice + 1)
