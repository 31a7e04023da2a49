"""Telephone channel simulation in numpy: room reverberation, 300-3400 Hz band-limiting and
resampling to 8 kHz, additive noise (white / pink / babble-like) at a given SNR, optional G.711
mu-law coding, random gain, 16-bit quantisation.

SNR definition (what ``snr_db`` means and what the tests measure): the mean power of the
(reverberant, band-limited) speech over the synthesised speech segment, i.e. without the
noise-only lead-in and tail, divided by the mean power of the noise, both in the telephone band.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TELEPHONE_RATE = 8000


def fast_len(n: int) -> int:
    """Smallest 7-smooth integer >= n (pocketfft is fast for these; other lengths can be 5x
    slower)."""
    n = int(n)
    best = 1 << max(n - 1, 0).bit_length()
    p7 = 1
    while p7 < best:
        p5 = p7
        while p5 < best:
            p3 = p5
            while p3 < best:
                p2 = p3
                while p2 < n:
                    p2 *= 2
                best = min(best, p2)
                p3 *= 3
            p5 *= 5
        p7 *= 7
    return best


def band_mask(freqs: np.ndarray, lo: float, hi: float, transition: float = 150.0) -> np.ndarray:
    """Raised-cosine band-pass gain: 0 below lo - t/2, 1 in [lo + t/2, hi - t/2], 0 above hi + t/2."""
    def ramp(x):  # 0 -> 1 over [-t/2, t/2]
        return 0.5 - 0.5 * np.cos(np.pi * np.clip(x / transition + 0.5, 0.0, 1.0))
    return ramp(freqs - lo) * ramp(hi - freqs)


def resample_bandpass(x: np.ndarray, sr_in: int, sr_out: int, lo: float, hi: float) -> np.ndarray:
    """Band-limit ``x`` to [lo, hi] Hz and resample it from sr_in to sr_out in one FFT
    (ideal band-limited resampling; hi must be below sr_out / 2)."""
    n = len(x)
    if n == 0:
        return np.zeros(0)
    want = int(round(n * sr_out / sr_in))
    # zero-pad to a length N with N * sr_out / sr_in whole and both FFT sizes fast
    g = np.gcd(sr_in, sr_out)
    step_in, step_out = sr_in // g, sr_out // g
    k = fast_len(-(-n // step_in))
    n_pad, n_out = k * step_in, k * step_out
    spec = np.fft.rfft(x, n_pad)
    freqs = np.fft.rfftfreq(n_pad, 1.0 / sr_in)
    spec = spec * band_mask(freqs, lo, hi)
    keep = n_out // 2 + 1
    out_spec = np.zeros(keep, dtype=complex)
    m = min(keep, len(spec))
    out_spec[:m] = spec[:m]
    return np.fft.irfft(out_spec, n_out)[:want] * (n_out / n_pad)


def bandpass(x: np.ndarray, sr: int, lo: float, hi: float) -> np.ndarray:
    return resample_bandpass(x, sr, sr, lo, hi)


def fft_convolve(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    n = len(x) + len(h) - 1
    nfft = fast_len(n)
    return np.fft.irfft(np.fft.rfft(x, nfft) * np.fft.rfft(h, nfft), nfft)[:n]


def room_impulse_response(rng: np.random.Generator, sr: int, rt60: float,
                          direct_to_reverb_db: float) -> np.ndarray:
    """Synthetic RIR: a direct-path impulse, then exponentially decaying Gaussian noise
    (60 dB decay in rt60 seconds) starting after a short pre-delay; the energy ratio of the
    direct path to the tail is ``direct_to_reverb_db``."""
    n = max(int(rt60 * sr), 16)
    t = np.arange(n) / sr
    tail = rng.standard_normal(n) * np.exp(-6.9078 * t / rt60)
    predelay = int(rng.uniform(0.002, 0.01) * sr)
    tail[:predelay] = 0.0
    tail *= np.sqrt(10 ** (-direct_to_reverb_db / 10) / max(np.sum(tail ** 2), 1e-12))
    tail[0] = 1.0
    return tail


def _shaped_noise(rng: np.random.Generator, n: int, sr: int, exponent: float) -> np.ndarray:
    """Gaussian noise with power spectrum ~ 1/f^exponent (0 white, 1 pink, 2 brown)."""
    m = fast_len(n)
    spec = np.fft.rfft(rng.standard_normal(m))
    f = np.fft.rfftfreq(m, 1.0 / sr)
    f[0] = f[1] if m > 1 else 1.0
    return np.fft.irfft(spec / f ** (exponent / 2), m)[:n]


def babble_noise(rng: np.random.Generator, n: int, sr: int, talkers: int) -> np.ndarray:
    """Babble-like noise: ``talkers`` streams of speech-shaped noise, each switched on and off
    at a syllabic rate (2-6 Hz envelope) with random pauses, summed."""
    out = np.zeros(n)
    m = fast_len(n)
    f = np.fft.rfftfreq(m, 1.0 / sr)
    for _ in range(talkers):
        # long-term speech spectrum: a bump around 500 Hz falling ~ -9 dB/octave above it
        f0 = rng.uniform(350, 700)
        shape = 1.0 / (1.0 + (f / f0) ** 1.5) * (f / (f + 150.0))
        carrier = np.fft.irfft(np.fft.rfft(rng.standard_normal(m)) * shape, m)[:n]
        rate = rng.uniform(2.0, 6.0)
        env_spec = np.fft.rfft(rng.standard_normal(m))
        env_spec[f > rate] = 0.0
        env = np.fft.irfft(env_spec, m)[:n]
        env = np.maximum(env - 0.2 * np.std(env), 0.0)
        # pauses between "phrases"
        gate = np.ones(n)
        pos = 0
        while pos < n:
            talk = int(rng.uniform(0.8, 3.0) * sr)
            pause = int(rng.uniform(0.1, 0.8) * sr)
            gate[pos + talk: pos + talk + pause] = 0.0
            pos += talk + pause
        s = carrier * env * gate
        p = np.mean(s ** 2)
        if p > 0:
            out += s / np.sqrt(p) * rng.uniform(0.5, 1.0)
    return out


NOISE_TYPES = ("white", "pink", "brown", "babble")


def make_noise(kind: str, rng: np.random.Generator, n: int, sr: int) -> np.ndarray:
    if kind == "white":
        return rng.standard_normal(n)
    if kind == "pink":
        return _shaped_noise(rng, n, sr, 1.0)
    if kind == "brown":
        return _shaped_noise(rng, n, sr, 2.0)
    if kind == "babble":
        return babble_noise(rng, n, sr, int(rng.integers(3, 9)))
    raise ValueError(f"unknown noise type '{kind}' (have {', '.join(NOISE_TYPES)})")


def mulaw_roundtrip(x: np.ndarray) -> np.ndarray:
    """G.711-style 8-bit mu-law encode + decode of x in [-1, 1] (quantisation noise of a
    digital telephone line)."""
    mu = 255.0
    y = np.sign(x) * np.log1p(mu * np.minimum(np.abs(x), 1.0)) / np.log1p(mu)
    q = np.round((y + 1.0) * 127.5) / 127.5 - 1.0
    return np.sign(q) * ((1.0 + mu) ** np.abs(q) - 1.0) / mu


@dataclass
class ChannelParams:
    """Everything random about one utterance's channel (drawn by the corpus writer)."""
    snr_db: float
    noise: str            # one of NOISE_TYPES, or two joined by '+'
    rt60: float           # 0 = no reverberation
    drr_db: float         # direct-to-reverberant energy ratio
    band_lo: float
    band_hi: float
    mulaw: bool
    level_db: float       # RMS level of the speech segment re full scale (dBFS)
    lead_s: float         # noise-only lead-in
    tail_s: float         # noise-only tail


def apply_channel(speech: np.ndarray, sr_in: int, p: ChannelParams,
                  rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """Run int16/float ``speech`` at ``sr_in`` through the telephone channel; returns int16
    samples at 8 kHz and a dict of measured figures (speech segment start/end samples,
    achieved SNR before quantisation, clipping)."""
    sr = TELEPHONE_RATE
    x = speech.astype(np.float64) / 32768.0
    # espeak-ng may stop mid-waveform: fade 10 ms at both ends so the cut is not a click
    nf = min(int(0.01 * sr_in), len(x) // 2)
    if nf > 0:
        ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(nf) / nf)
        x[:nf] *= ramp
        x[len(x) - nf:] *= ramp[::-1]
    x = resample_bandpass(x, sr_in, sr, p.band_lo, p.band_hi)
    if p.rt60 > 0:
        x = fft_convolve(x, room_impulse_response(rng, sr, p.rt60, p.drr_db))
    lead, tail = int(p.lead_s * sr), int(p.tail_s * sr)
    seg_len = len(x)
    clean = np.concatenate([np.zeros(lead), x, np.zeros(tail)])
    n = len(clean)
    noise = np.zeros(n)
    for kind in p.noise.split("+"):
        nz = make_noise(kind, rng, n, sr)
        noise += nz / max(np.sqrt(np.mean(nz ** 2)), 1e-12)
    noise = bandpass(noise, sr, p.band_lo, p.band_hi)
    p_speech = np.mean(x ** 2) if seg_len else 0.0
    p_noise = max(np.mean(noise ** 2), 1e-20)
    noise *= np.sqrt(p_speech / p_noise / 10 ** (p.snr_db / 10))
    y = clean + noise
    # level: speech segment RMS at level_db dBFS, but never clip more than a hair
    gain = 10 ** (p.level_db / 20) / max(np.sqrt(p_speech), 1e-12)
    peak = np.max(np.abs(y)) * gain if n else 0.0
    if peak > 0.98:
        gain *= 0.98 / peak
    y = y * gain
    if p.mulaw:
        y = mulaw_roundtrip(y)
    out = np.clip(np.round(y * 32767.0), -32768, 32767).astype(np.int16)
    measured = {
        "seg_start": lead, "seg_end": lead + seg_len,
        "snr_db": 10 * np.log10(max(p_speech, 1e-20) / max(np.mean((noise) ** 2), 1e-20)),
        "gain_db": 20 * np.log10(gain) if gain > 0 else -999.0,
    }
    return out, measured
