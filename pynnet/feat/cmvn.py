"""Cepstral mean and variance normalisation, exactly as Kaldi's compute-cmvn-stats / apply-cmvn.

Stats are Kaldi's 2 x (dim+1) double matrix: row 0 = per-dimension sums and the frame count in
the last column; row 1 = per-dimension sums of squares (last column 0).
"""
from __future__ import annotations

import warnings

import numpy as np

from pynnet.io.errors import fail

__all__ = ["cmvn_stats", "acc_cmvn_stats", "apply_cmvn", "CmvnWarning"]


class CmvnWarning(UserWarning):
    pass


def cmvn_stats(feats: np.ndarray) -> np.ndarray:
    """Stats of one feature matrix (T, dim) -> (2, dim+1) float64."""
    feats = np.asarray(feats)
    stats = np.zeros((2, feats.shape[1] + 1), dtype=np.float64)
    acc_cmvn_stats(stats, feats)
    return stats


def acc_cmvn_stats(stats: np.ndarray, feats: np.ndarray, weights: np.ndarray | None = None) -> None:
    """Add the frames of ``feats`` (optionally weighted per frame) to ``stats`` in place."""
    x = np.asarray(feats, dtype=np.float64)
    if x.ndim != 2 or stats.shape != (2, x.shape[1] + 1):
        raise ValueError(f"stats {stats.shape} do not match features {x.shape}")
    if weights is None:
        stats[0, :-1] += x.sum(axis=0)
        stats[1, :-1] += (x * x).sum(axis=0)
        stats[0, -1] += x.shape[0]
    else:
        w = np.asarray(weights, dtype=np.float64)
        stats[0, :-1] += w @ x
        stats[1, :-1] += w @ (x * x)
        stats[0, -1] += w.sum()


def apply_cmvn(feats: np.ndarray, stats: np.ndarray, norm_vars: bool = False, *,
               norm_means: bool = True, name: str = "") -> np.ndarray:
    """Kaldi ApplyCmvn: subtract the mean (and, with ``norm_vars``, divide by the standard
    deviation) of ``stats`` from float32 ``feats``; returns a new float32 matrix.

    Arithmetic follows Kaldi: the offset -sum/count is formed from a float32 -1/count times the
    double sums, and variances below 1e-20 are floored with a warning. ``stats`` with count < 1
    is an error (naming ``name``, e.g. the speaker), as in Kaldi.
    """
    feats = np.asarray(feats, dtype=np.float32)
    stats = np.asarray(stats, dtype=np.float64)
    dim = feats.shape[1]
    if stats.ndim != 2 or stats.shape[1] != dim + 1 or stats.shape[0] not in (1, 2):
        fail(f"CMVN stats of shape {stats.shape} do not match features of dimension {dim}"
             + (f" ({name})" if name else ""))
    if not norm_means:
        if norm_vars:
            fail("you cannot normalize the variance but not the mean")
        return feats.copy()
    count = stats[0, dim]
    if count < 1.0:
        fail(f"insufficient stats for cepstral mean and variance normalization: count = {count}"
             + (f" ({name})" if name else ""))
    if not norm_vars:
        alpha = np.float32(-1.0 / count)
        offset = (np.float64(alpha) * stats[0, :dim]).astype(np.float32)
        return feats + offset[None, :]
    if stats.shape[0] != 2:
        fail("variance normalization needs 2-row CMVN stats" + (f" ({name})" if name else ""))
    mean = stats[0, :dim] / count
    var = stats[1, :dim] / count - mean * mean
    floor = 1.0e-20
    if (var < floor).any():
        warnings.warn(f"Flooring cepstral variance from {var.min()} to {floor}"
                      + (f" ({name})" if name else ""), CmvnWarning, stacklevel=2)
        var = np.maximum(var, floor)
    scale = 1.0 / np.sqrt(var)
    if not np.all(np.isfinite(scale)) or np.any(1.0 / scale == 0.0):
        fail("NaN or infinity in cepstral mean/variance computation" + (f" ({name})" if name else ""))
    offset = -(mean * scale)
    out = feats * scale.astype(np.float32)[None, :]
    out += offset.astype(np.float32)[None, :]
    return out
