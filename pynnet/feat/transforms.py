"""Kaldi's add-deltas and splice-feats on float32 feature matrices."""
from __future__ import annotations

import numpy as np

__all__ = ["delta_scales", "add_deltas", "splice_feats"]


def delta_scales(order: int = 2, window: int = 2) -> list[np.ndarray]:
    """Kaldi DeltaFeatures' regression windows (float32), scales[i] has length 1 + 2*i*window."""
    if order < 0 or window < 1:
        raise ValueError(f"bad delta options: order={order} window={window}")
    scales = [np.ones(1, dtype=np.float32)]
    normalizer = np.float32(sum(j * j for j in range(-window, window + 1)))
    for i in range(1, order + 1):
        prev = scales[i - 1]
        prev_off = (prev.shape[0] - 1) // 2
        cur_off = prev_off + window
        cur = np.zeros(prev.shape[0] + 2 * window, dtype=np.float32)
        for j in range(-window, window + 1):
            for k in range(-prev_off, prev_off + 1):
                cur[j + k + cur_off] += np.float32(j) * prev[k + prev_off]
        cur *= np.float32(1.0 / normalizer)
        scales.append(cur)
    return scales


def add_deltas(feats: np.ndarray, order: int = 2, window: int = 2) -> np.ndarray:
    """Kaldi add-deltas: (T, d) -> (T, d*(order+1)) = [x, delta, delta-delta, ...]; frames beyond
    the edges replicate the first/last frame. Accumulates in Kaldi's order in float32."""
    x = np.asarray(feats, dtype=np.float32)
    t, d = x.shape
    out = np.zeros((t, d * (order + 1)), dtype=np.float32)
    if t == 0:
        return out
    frames = np.arange(t)
    for i, scale in enumerate(delta_scales(order, window)):
        max_off = (scale.shape[0] - 1) // 2
        block = out[:, i * d:(i + 1) * d]
        for j in range(-max_off, max_off + 1):
            s = scale[j + max_off]
            if s != 0.0:
                block += s * x[np.clip(frames + j, 0, t - 1)]
    return out


def splice_feats(feats: np.ndarray, left: int, right: int | None = None) -> np.ndarray:
    """Kaldi splice-feats: (T, d) -> (T, d*(left+1+right)), row t = x[t-left .. t+right] with
    out-of-range frames replaced by the first/last frame."""
    right = left if right is None else right
    if left < 0 or right < 0:
        raise ValueError(f"bad splice context: left={left} right={right}")
    x = np.asarray(feats, dtype=np.float32)
    t, d = x.shape
    if t == 0:
        return np.zeros((0, d * (left + 1 + right)), dtype=np.float32)
    idx = np.clip(np.arange(t)[:, None] + np.arange(-left, right + 1)[None, :], 0, t - 1)
    return x[idx].reshape(t, -1)
