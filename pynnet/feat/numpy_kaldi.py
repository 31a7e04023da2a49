"""Kaldi's MFCC/fbank pipeline vectorised in numpy, for what kaldi-native-fbank's online extractor
cannot do: VTLN-warped mel banks (``--vtln-warp`` != 1, ``--vtln-map``).

Same steps and order as Kaldi's OfflineFeatureTpl: frames (reflecting at the edges when
``--snip-edges=false``), remove DC, raw log-energy, preemphasis, window, zero-padded real FFT,
power (or magnitude) spectrum, mel banks (from kaldi-native-fbank, warped), log with an epsilon
floor, DCT-II + cepstral liftering (MFCC), energy. The FFT runs in float64, so values agree with
Kaldi to float32 rounding (about 1e-5 relative), not bit for bit.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_EPS = np.float32(np.finfo(np.float32).eps)


def frame_indices(num_samples: int, v: dict[str, Any]) -> np.ndarray:
    """(num_frames, frame_length) sample indices of each frame, reflected at the edges (Kaldi)."""
    sr = float(v["sample_frequency"])
    shift = int(sr * 0.001 * v["frame_shift"])
    length = int(sr * 0.001 * v["frame_length"])
    if v["snip_edges"]:
        n = 0 if num_samples < length else 1 + (num_samples - length) // shift
        starts = np.arange(n, dtype=np.int64) * shift
    else:
        n = (num_samples + shift // 2) // shift
        starts = np.arange(n, dtype=np.int64) * shift + shift // 2 - length // 2
    idx = starts[:, None] + np.arange(length, dtype=np.int64)[None, :]
    if n and num_samples:
        while True:
            low, high = idx < 0, idx >= num_samples
            if not (low.any() or high.any()):
                break
            idx = np.where(low, -idx - 1, idx)
            idx = np.where(high, 2 * num_samples - 1 - idx, idx)
    return idx


def dct_matrix(num_bins: int, num_ceps: int) -> np.ndarray:
    """Kaldi's ComputeDctMatrix (orthonormal DCT-II), first ``num_ceps`` rows."""
    k = np.arange(num_ceps)[:, None]
    n = np.arange(num_bins)[None, :]
    m = np.sqrt(2.0 / num_bins) * np.cos(np.pi / num_bins * (n + 0.5) * k)
    m[0, :] = np.sqrt(1.0 / num_bins)
    return m


def lifter_coeffs(num_ceps: int, q: float) -> np.ndarray:
    i = np.arange(num_ceps)
    return 1.0 + 0.5 * q * np.sin(np.pi * i / q) if q != 0 else np.ones(num_ceps)


def compute_numpy(kind: str, v: dict[str, Any], x: np.ndarray, vtln_warp: float = 1.0) -> np.ndarray:
    """Features of one channel ``x`` (int16 scale, already dithered if wanted) -> (T, dim) float32."""
    import kaldi_native_fbank as knf

    from pynnet.feat.compute import knf_options

    opts = knf_options(kind, v, 0.0)
    x = np.asarray(x, dtype=np.float32)
    idx = frame_indices(x.shape[0], v)
    num_ceps = int(v["num_ceps"]) if kind == "mfcc" else 0
    dim = num_ceps if kind == "mfcc" else int(v["num_mel_bins"]) + (1 if v["use_energy"] else 0)
    if idx.shape[0] == 0:
        return np.zeros((0, dim), dtype=np.float32)
    frames = x[idx]
    length = frames.shape[1]
    if v["remove_dc_offset"]:
        frames = frames - frames.mean(axis=1, dtype=np.float64, keepdims=True).astype(np.float32)
    energy = None
    if v["raw_energy"]:
        energy = np.log(np.maximum((frames.astype(np.float64) ** 2).sum(axis=1), _EPS))
    p = np.float32(v["preemphasis_coefficient"])
    if p != 0:
        pre = frames.copy()
        pre[:, 1:] -= p * frames[:, :-1]
        pre[:, 0] -= p * frames[:, 0]
        frames = pre
    window = np.asarray(knf.FeatureWindowFunction(opts.frame_opts).window, dtype=np.float32)
    frames = frames * window[None, :length]
    if not v["raw_energy"]:
        energy = np.log(np.maximum((frames.astype(np.float64) ** 2).sum(axis=1),
                                   np.finfo(np.float32).tiny))
    padded = 1 << (length - 1).bit_length() if v["round_to_power_of_two"] else length
    spec = np.fft.rfft(frames.astype(np.float64), n=padded, axis=1)
    power = spec.real ** 2 + spec.imag ** 2
    if kind == "fbank" and not v["use_power"]:
        power = np.sqrt(power)
    banks = np.asarray(knf.MelBanks(opts.mel_opts, opts.frame_opts, float(vtln_warp)).get_matrix(),
                       dtype=np.float64)
    mel = power[:, :banks.shape[1]] @ banks.T
    if v["energy_floor"] > 0:
        energy = np.maximum(energy, np.log(v["energy_floor"]))
    if kind == "fbank":
        if v["use_log_fbank"]:
            mel = np.log(np.maximum(mel, _EPS))
        if v["use_energy"]:
            e = energy[:, None]
            mel = np.hstack([mel, e] if v["htk_compat"] else [e, mel])
        return mel.astype(np.float32)
    logmel = np.log(np.maximum(mel, _EPS))
    ceps = logmel @ dct_matrix(logmel.shape[1], num_ceps).T
    ceps *= lifter_coeffs(num_ceps, float(v["cepstral_lifter"]))[None, :]
    if v["use_energy"]:
        ceps[:, 0] = energy
    if v["htk_compat"]:
        c0 = ceps[:, 0].copy()
        if not v["use_energy"]:
            c0 *= np.sqrt(2.0)
        ceps = np.hstack([ceps[:, 1:], c0[:, None]])
    return ceps.astype(np.float32)
