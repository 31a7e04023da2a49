"""MFCC and log-mel filterbank features exactly as Kaldi's compute-mfcc-feats / compute-fbank-feats,
computed by kaldi-native-fbank (a port of Kaldi's feature code).

Options carry Kaldi's names and defaults (``--sample-frequency``, ``--num-mel-bins``, ...), see
``register_options``. Dither (Kaldi default 1.0) is deterministic here: the noise of each
utterance is seeded from its id, so features do not depend on how the data was split into jobs.

Two dither modes:
  ``waveform`` (default): Gaussian noise of standard deviation ``--dither`` is added once to the
      waveform (numpy, seeded per utterance) and kaldi-native-fbank runs with dither 0. Every frame
      gets i.i.d. N(0, dither^2) noise on each sample, as in Kaldi; overlapping frames share the
      noise of their shared samples (Kaldi draws fresh noise per frame). About 4x cheaper.
  ``frame``: Kaldi's own algorithm (fresh noise per frame from ``RandomState``/``rand_r`` seeded
      by ``rand()``), run inside kaldi-native-fbank after ``srand(seed of the utterance)``.
With ``--dither=0`` both are bit-identical to Kaldi (and to kaldi-native-fbank called directly).
"""
from __future__ import annotations

import array
import ctypes
import math
import zlib
from typing import Any

import numpy as np

from pynnet.feat.options import KaldiOptions
from pynnet.io.errors import fail

WINDOW_TYPES = ("hamming", "hanning", "povey", "rectangular", "sine", "blackman")


def register_options(parser: KaldiOptions, kind: str) -> None:
    """Register Kaldi's MfccOptions/FbankOptions (FrameExtractionOptions + MelBanksOptions)."""
    assert kind in ("mfcc", "fbank")
    r = parser.register
    # FrameExtractionOptions
    r("sample-frequency", float, 16000.0, "Waveform data sample frequency (must match the waveform file)")
    r("frame-shift", float, 10.0, "Frame shift in milliseconds")
    r("frame-length", float, 25.0, "Frame length in milliseconds")
    r("dither", float, 1.0, "Dithering constant (0.0 means no dither)")
    r("preemphasis-coefficient", float, 0.97, "Coefficient for use in signal preemphasis")
    r("remove-dc-offset", bool, True, "Subtract mean from waveform on each frame")
    r("window-type", str, "povey", "Type of window", WINDOW_TYPES)
    r("round-to-power-of-two", bool, True, "If true, round window size to power of two by zero-padding")
    r("blackman-coeff", float, 0.42, "Constant coefficient for generalized Blackman window")
    r("snip-edges", bool, True, "If true, end effects will be handled by outputting only frames that "
      "completely fit in the file; if false, the number of frames depends only on the frame-shift, "
      "and we reflect the data at the ends")
    r("allow-downsample", bool, False, "If true, allow the input waveform to have a higher frequency "
      "than the specified --sample-frequency (not supported by pynnet: resample with sox in wav.scp)")
    r("allow-upsample", bool, False, "If true, allow the input waveform to have a lower frequency "
      "than the specified --sample-frequency (not supported by pynnet)")
    r("max-feature-vectors", int, -1, "Memory optimization for online feature extraction (ignored)")
    # MelBanksOptions
    r("num-mel-bins", int, 23, "Number of triangular mel-frequency bins")
    r("low-freq", float, 20.0, "Low cutoff frequency for mel bins")
    r("high-freq", float, 0.0, "High cutoff frequency for mel bins (if <= 0, offset from Nyquist)")
    r("vtln-low", float, 100.0, "Low inflection point in piecewise linear VTLN warping function")
    r("vtln-high", float, -500.0, "High inflection point in piecewise linear VTLN warping function "
      "(if negative, offset from high-mel-freq)")
    r("debug-mel", bool, False, "Print out debugging information for mel bin computation")
    r("energy-floor", float, 0.0, "Floor on energy (absolute, not relative) in MFCC/fbank computation. "
      "Only makes a difference if --use-energy=true; only necessary if --dither=0.0")
    r("raw-energy", bool, True, "If true, compute energy before preemphasis and windowing")
    r("htk-compat", bool, False, "If true, put energy or C0 last and use a factor of sqrt(2) on C0")
    if kind == "mfcc":
        r("num-ceps", int, 13, "Number of cepstra in MFCC computation (including C0)")
        r("use-energy", bool, True, "Use energy (not C0) in MFCC computation")
        r("cepstral-lifter", float, 22.0, "Constant that controls scaling of MFCCs")
    else:
        r("use-energy", bool, False, "Add an extra dimension with energy to the FBANK output")
        r("use-log-fbank", bool, True, "If true, produce log-filterbank, else produce linear")
        r("use-power", bool, True, "If true, use power, else use magnitude")
    # pynnet extensions
    r("dither-mode", str, "waveform", "How the dither noise is drawn (pynnet): 'waveform' (noise added "
      "once to the waveform, fast) or 'frame' (Kaldi's per-frame noise, slower); both seeded per "
      "utterance", ("waveform", "frame"))
    r("dither-seed", int, 0, "Added to the per-utterance dither seed (pynnet)")


def _nyquist_checks(v: dict[str, Any], vtln_warp: float = 1.0) -> None:
    if not (math.isfinite(vtln_warp) and vtln_warp > 0):
        fail(f"bad VTLN warp factor {vtln_warp} (expected a positive number, e.g. 0.9)")
    nyquist = 0.5 * v["sample_frequency"]
    low, high = v["low_freq"], v["high_freq"]
    if high <= 0:
        high = nyquist + high
    if low < 0 or low >= nyquist or high <= 0 or high > nyquist or high <= low:
        fail(f"bad values in options: --low-freq={v['low_freq']} and --high-freq={v['high_freq']} "
             f"vs. Nyquist frequency {nyquist}")
    if vtln_warp != 1.0:
        vl, vh = v["vtln_low"], v["vtln_high"]
        if vh < 0:
            vh = high + vh
        if vl < 0 or vl <= low or vl >= high or vh <= 0 or vh >= high or vh <= vl:
            fail(f"bad values in options: --vtln-low={v['vtln_low']} and --vtln-high={v['vtln_high']} "
                 f"vs. --low-freq={v['low_freq']} and --high-freq={v['high_freq']}")


# The longest frame (and frame shift) we take, in samples (65 s at 16 kHz): Kaldi has no limit
# and dies allocating the FFT of a frame of --frame-length=1e9.
MAX_FRAME_SAMPLES = 1 << 20


def _float_options(kind: str) -> list[str]:
    p = KaldiOptions("")
    register_options(p, kind)
    return [o.name for o in p.options.values() if o.type is float]


def check_options(kind: str, v: dict[str, Any]) -> None:
    """What Kaldi checks (it aborts; we fail with one line) before any audio is read, and what
    it does not (NaN, inf, windows of gigabytes) but would crash on."""
    for name in _float_options(kind):
        x = v[name.replace("-", "_")]
        if not math.isfinite(x):
            fail(f"--{name} must be a finite number, got {x}")
    if v["sample_frequency"] <= 0:
        fail(f"--sample-frequency must be positive, got {v['sample_frequency']}")
    if v["frame_shift"] <= 0 or v["frame_length"] <= 0:
        fail(f"--frame-shift and --frame-length must be positive, got {v['frame_shift']} and {v['frame_length']}")
    win = int(v["sample_frequency"] * 0.001 * v["frame_length"])
    shift = int(v["sample_frequency"] * 0.001 * v["frame_shift"])
    if win < 2 or shift < 1 or win > MAX_FRAME_SAMPLES or shift > MAX_FRAME_SAMPLES:
        fail(f"--frame-length={v['frame_length']} / --frame-shift={v['frame_shift']} ms give a window of "
             f"{win} and a shift of {shift} samples at {v['sample_frequency']} Hz (at least 2 and 1, "
             f"at most {MAX_FRAME_SAMPLES})")
    if not 0.0 <= v["preemphasis_coefficient"] <= 1.0:
        fail(f"--preemphasis-coefficient must be in [0, 1], got {v['preemphasis_coefficient']}")
    if v["dither"] < 0:
        fail(f"--dither must be >= 0, got {v['dither']}")
    if v["num_mel_bins"] < 3:
        fail(f"--num-mel-bins must be at least 3, got {v['num_mel_bins']}")
    fft = 1 << (win - 1).bit_length() if v["round_to_power_of_two"] else win
    if v["num_mel_bins"] > fft + 2:
        # every other mel bin needs an FFT bin of its own (Kaldi: "num_mel_bins too large")
        fail(f"--num-mel-bins={v['num_mel_bins']} is too large for a window of {win} samples "
             f"(its FFT has {fft // 2 + 1} bins)")
    if v["energy_floor"] < 0:
        fail(f"--energy-floor must be >= 0, got {v['energy_floor']}")
    if kind == "mfcc":
        if v["num_ceps"] < 1 or v["num_ceps"] > v["num_mel_bins"]:
            fail(f"--num-ceps={v['num_ceps']} must be between 1 and --num-mel-bins={v['num_mel_bins']}")
        if v["cepstral_lifter"] < 0:
            fail(f"--cepstral-lifter must be >= 0, got {v['cepstral_lifter']}")
    _nyquist_checks(v)


def knf_options(kind: str, v: dict[str, Any], dither: float = 0.0):
    """Kaldi option values (python names) -> kaldi_native_fbank MfccOptions/FbankOptions."""
    import kaldi_native_fbank as knf

    o = knf.MfccOptions() if kind == "mfcc" else knf.FbankOptions()
    fo = o.frame_opts
    fo.samp_freq = float(v["sample_frequency"])
    fo.frame_shift_ms = float(v["frame_shift"])
    fo.frame_length_ms = float(v["frame_length"])
    fo.dither = float(dither)
    fo.preemph_coeff = float(v["preemphasis_coefficient"])
    fo.remove_dc_offset = bool(v["remove_dc_offset"])
    fo.window_type = v["window_type"]
    fo.round_to_power_of_two = bool(v["round_to_power_of_two"])
    fo.blackman_coeff = float(v["blackman_coeff"])
    fo.snip_edges = bool(v["snip_edges"])
    mo = o.mel_opts
    mo.num_bins = int(v["num_mel_bins"])
    mo.low_freq = float(v["low_freq"])
    mo.high_freq = float(v["high_freq"])
    mo.vtln_low = float(v["vtln_low"])
    mo.vtln_high = float(v["vtln_high"])
    mo.debug_mel = bool(v["debug_mel"])
    o.energy_floor = float(v["energy_floor"])
    o.raw_energy = bool(v["raw_energy"])
    o.htk_compat = bool(v["htk_compat"])
    o.use_energy = bool(v["use_energy"])
    if kind == "mfcc":
        o.num_ceps = int(v["num_ceps"])
        o.cepstral_lifter = float(v["cepstral_lifter"])
    else:
        o.use_log_fbank = bool(v["use_log_fbank"])
        o.use_power = bool(v["use_power"])
    return o


def utterance_seed(utt: str, extra: int = 0) -> int:
    """Stable 31-bit seed of an utterance id (the same in every job split and Python process)."""
    return (zlib.crc32(utt.encode("utf-8")) + extra) & 0x7FFFFFFF


_libc = None


def _srand(seed: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None)
    _libc.srand(ctypes.c_uint(seed))


def default_values(kind: str) -> dict[str, Any]:
    """Kaldi's defaults for ``kind`` as a dict of python option names (for library callers)."""
    p = KaldiOptions("")
    register_options(p, kind)
    return p.parse([])[0]


class FeatureComputer:
    """Computes one kind of features for whole utterances.

    >>> fc = FeatureComputer("mfcc", {**default_values("mfcc"), "sample_frequency": 8000})
    >>> feats = fc.compute(samples_int16_scale, "utt1")   # (num_frames, 13) float32
    """

    def __init__(self, kind: str, values: dict[str, Any], backend: str = "knf") -> None:
        if kind not in ("mfcc", "fbank"):
            raise ValueError(kind)
        self.kind = kind
        self.v = dict(values)
        check_options(kind, self.v)
        self.backend = backend
        self.dither = float(self.v["dither"])
        self.dither_mode = self.v.get("dither_mode", "waveform")
        self.seed_offset = int(self.v.get("dither_seed", 0))
        self.sample_frequency = float(self.v["sample_frequency"])
        if backend == "knf":
            import kaldi_native_fbank as knf
            self._knf = knf
            frame_dither = self.dither if self.dither_mode == "frame" else 0.0
            self._opts = knf_options(kind, self.v, frame_dither)
            self._cls = knf.OnlineMfcc if kind == "mfcc" else knf.OnlineFbank
            try:  # knf validates the mel banks (e.g. empty bins) when it is constructed
                self._cls(self._opts)
            except (ValueError, RuntimeError) as e:
                v = self.v
                fail(f"bad feature options (--num-mel-bins={v['num_mel_bins']} --low-freq={v['low_freq']} "
                     f"--high-freq={v['high_freq']} --frame-length={v['frame_length']} at "
                     f"--sample-frequency={v['sample_frequency']}): {e}")
        elif backend == "torchaudio":
            try:
                import torch  # noqa: F401
                import torchaudio.compliance.kaldi  # noqa: F401
            except ImportError:
                fail("--backend=torchaudio: torchaudio cannot be imported here")
            if self.dither_mode == "frame":
                fail("--dither-mode=frame is only available with --backend=knf")
            if self.v["window_type"] == "sine":
                fail("--window-type=sine is not available with --backend=torchaudio")
        else:
            fail(f"unknown feature backend '{backend}' (expected knf or torchaudio)")

    @property
    def dim(self) -> int:
        if self.kind == "mfcc":
            return int(self.v["num_ceps"])
        return int(self.v["num_mel_bins"]) + (1 if self.v["use_energy"] else 0)

    def num_frames(self, num_samples: int) -> int:
        """Kaldi's NumFrames(num_samples, opts, flush=true)."""
        shift = int(self.sample_frequency * 0.001 * self.v["frame_shift"])
        length = int(self.sample_frequency * 0.001 * self.v["frame_length"])
        if self.v["snip_edges"]:
            return 0 if num_samples < length else 1 + (num_samples - length) // shift
        return (num_samples + shift // 2) // shift

    def compute(self, samples: np.ndarray, utt: str = "", vtln_warp: float = 1.0) -> np.ndarray:
        """1-D samples on the int16 scale -> (num_frames, dim) float32 (0 rows if too short)."""
        x = np.asarray(samples, dtype=np.float32)
        if x.ndim != 1:
            raise ValueError("compute() takes one channel (a 1-D array)")
        if vtln_warp != 1.0:
            _nyquist_checks(self.v, vtln_warp)
        if self.backend == "torchaudio":
            return self._compute_torchaudio(x, utt, vtln_warp)
        if vtln_warp != 1.0:
            from pynnet.feat.numpy_kaldi import compute_numpy
            if self.dither and self.dither_mode == "waveform":
                x = self._dithered(x, utt)
            try:
                return compute_numpy(self.kind, self.v, x, vtln_warp)
            except ValueError as e:    # the mel banks of a warp such as 100: empty bins
                fail(f"bad feature options for VTLN warp factor {vtln_warp} (utterance {utt}): {e}")
        if self.dither and self.dither_mode == "waveform":
            x = self._dithered(x, utt)
        elif self.dither:
            _srand(utterance_seed(utt, self.seed_offset))
        comp = self._cls(self._opts)
        try:
            if x.size:
                # The binding takes a Sequence[float]; an array.array of float32 converts about 4x
                # faster than a list and 8x faster than an ndarray (bench/features.py).
                comp.accept_waveform(self.sample_frequency, array.array("f", np.ascontiguousarray(x).tobytes()))
            comp.input_finished()
            n = comp.num_frames_ready
            out = np.empty((n, self.dim), dtype=np.float32)
            for i in range(n):
                out[i] = comp.get_frame(i)
        except RuntimeError as e:  # knf's checks, e.g. "mel energy is nan" (a --dither of 1e300)
            fail(f"cannot compute features of utterance {utt}: {e}")
        return out

    def _dithered(self, x: np.ndarray, utt: str) -> np.ndarray:
        rng = np.random.default_rng(utterance_seed(utt, self.seed_offset))
        noise = rng.standard_normal(x.shape[0], dtype=np.float32)
        noise *= np.float32(self.dither)
        return x + noise

    def _compute_torchaudio(self, x: np.ndarray, utt: str, vtln_warp: float) -> np.ndarray:
        import torch
        import torchaudio.compliance.kaldi as tk

        if self.dither:
            x = self._dithered(x, utt)
        if x.size == 0 or self.num_frames(x.size) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        v = self.v
        common = dict(
            blackman_coeff=v["blackman_coeff"], channel=-1, dither=0.0,
            energy_floor=v["energy_floor"], frame_length=v["frame_length"], frame_shift=v["frame_shift"],
            high_freq=v["high_freq"], htk_compat=v["htk_compat"], low_freq=v["low_freq"],
            min_duration=0.0, num_mel_bins=v["num_mel_bins"],
            preemphasis_coefficient=v["preemphasis_coefficient"], raw_energy=v["raw_energy"],
            remove_dc_offset=v["remove_dc_offset"], round_to_power_of_two=v["round_to_power_of_two"],
            sample_frequency=v["sample_frequency"], snip_edges=v["snip_edges"], subtract_mean=False,
            use_energy=v["use_energy"], vtln_high=v["vtln_high"], vtln_low=v["vtln_low"],
            vtln_warp=vtln_warp, window_type=v["window_type"])
        wav = torch.from_numpy(np.ascontiguousarray(x)).unsqueeze(0)
        with torch.no_grad():
            if self.kind == "mfcc":
                out = tk.mfcc(wav, cepstral_lifter=v["cepstral_lifter"], num_ceps=v["num_ceps"], **common)
            else:
                out = tk.fbank(wav, use_log_fbank=v["use_log_fbank"], use_power=v["use_power"], **common)
        return out.numpy().astype(np.float32, copy=False)
