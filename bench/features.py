#!/usr/bin/env python3
"""Feature extraction speed in x real time per core (audio seconds / CPU seconds of one process).

    python bench/features.py [--seconds 60] [--repeats 3]

Measures, for 8 kHz and 16 kHz generated speech-like audio cut into 10 s utterances:
  * FeatureComputer (what pynnet-compute-*-feats runs) with Kaldi's default dither 1.0 drawn
    per waveform (pynnet's default), with --dither=0, and with Kaldi's per-frame dither;
  * kaldi-native-fbank called directly the naive way (ndarray in, one get_frame per frame) for
    comparison;
  * the whole program pynnet-compute-{mfcc,fbank}-feats in-process on a wav.scp of those
    utterances (read WAV, compute, write ark,scp).
CPU time (time.process_time) of this single process is used, so the figures are per core and
less sensitive to other load on the machine than wall time; the best of --repeats runs counts.
The last line printed is one JSON object; mfcc_xrt_per_core / fbank_xrt_per_core are the
whole-program figures at 8 kHz with the egs/synth configs (the built-in corpus).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def speechlike(n: int, rate: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 12)) * 4000 + rng.standard_normal(n) * 200
    return np.round(x).astype(np.float32)


def best_cpu(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return max(best, 1e-9)


def breakdown(repeats: int) -> None:
    """Milliseconds per 60 s of audio for each part of one utterance's MFCC computation."""
    import array

    import kaldi_native_fbank as knf

    from pynnet.feat.compute import default_values, knf_options

    for rate in (8000, 16000):
        x = speechlike(60 * rate, rate)
        v = {**default_values("mfcc"), "sample_frequency": float(rate), "dither": 0.0}
        opts = knf_options("mfcc", v)
        few = knf_options("mfcc", {**v, "frame_shift": 10000.0})   # ~no frames: conversion only
        arr = array.array("f", x.tobytes())

        def accept(o, w):
            c = knf.OnlineMfcc(o)
            c.accept_waveform(float(rate), w)
            c.input_finished()
            return c
        ms = {
            "knf_cpp": best_cpu(lambda: accept(opts, arr), repeats) - best_cpu(lambda: accept(few, arr), repeats),
            "pass_ndarray": best_cpu(lambda: accept(few, x), repeats),
            "pass_tolist": best_cpu(lambda: accept(few, x.tolist()), repeats),
            "pass_array_array": best_cpu(lambda: accept(few, array.array("f", x.tobytes())), repeats),
        }
        c = accept(opts, arr)
        ms["get_frame_loop"] = best_cpu(lambda: [c.get_frame(i) for i in range(c.num_frames_ready)], repeats)
        rng = np.random.default_rng(1)
        ms["dither_noise"] = best_cpu(lambda: x + rng.standard_normal(x.shape[0], dtype=np.float32), repeats)
        print(f"breakdown {rate} Hz, ms per 60 s: " + ", ".join(f"{k}={1000 * t:.0f}" for k, t in ms.items()),
              file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of audio per measurement")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--breakdown", action="store_true",
                    help="also print where the time goes (knf's C++, waveform passing, get_frame, dither)")
    args = ap.parse_args()
    if args.breakdown:
        breakdown(args.repeats)

    import kaldi_native_fbank as knf
    import soundfile as sf

    from pynnet.bin.feat import compute_fbank_feats, compute_mfcc_feats
    from pynnet.feat.compute import FeatureComputer, default_values, knf_options

    conf = {"mfcc": {"use_energy": False}, "fbank": {"num_mel_bins": 40}}   # egs/synth/conf
    out: dict[str, float | str] = {}
    utt_len = 10.0
    for rate in (8000, 16000):
        n_utt = max(1, int(round(args.seconds / utt_len)))
        utts = [speechlike(int(utt_len * rate), rate, seed=i) for i in range(n_utt)]
        total = n_utt * utt_len
        tag = f"{rate // 1000}k"
        for kind in ("mfcc", "fbank"):
            base = {**default_values(kind), **conf[kind], "sample_frequency": float(rate)}
            variants = {
                "dither1": base,
                "dither0": {**base, "dither": 0.0},
                "frame_dither": {**base, "dither_mode": "frame"},
            }
            for name, v in variants.items():
                fc = FeatureComputer(kind, v)
                cpu = best_cpu(lambda: [fc.compute(x, f"utt{i}") for i, x in enumerate(utts)], args.repeats)
                out[f"{kind}_{tag}_{name}_xrt"] = round(total / cpu, 1)

            opts = knf_options(kind, {**base, "dither": 0.0})
            cls = knf.OnlineMfcc if kind == "mfcc" else knf.OnlineFbank

            def naive():
                for x in utts:
                    c = cls(opts)
                    c.accept_waveform(float(rate), x)          # ndarray through Sequence[float]
                    c.input_finished()
                    np.array([c.get_frame(i) for i in range(c.num_frames_ready)])
            out[f"{kind}_{tag}_knf_naive_dither0_xrt"] = round(total / best_cpu(naive, args.repeats), 1)

            # The whole program on a wav.scp (WAV reading + features + ark/scp writing).
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "wav.scp"), "w") as f:
                    for i, x in enumerate(utts):
                        p = os.path.join(tmp, f"utt{i}.wav")
                        sf.write(p, x.astype(np.int16), rate, subtype="PCM_16")
                        f.write(f"utt{i} {p}\n")
                prog = compute_mfcc_feats if kind == "mfcc" else compute_fbank_feats
                opts_cli = [f"--sample-frequency={rate}"] + (
                    ["--use-energy=false"] if kind == "mfcc" else ["--num-mel-bins=40"])
                argv = opts_cli + [f"scp:{tmp}/wav.scp", f"ark,scp:{tmp}/f.ark,{tmp}/f.scp"]

                def program():
                    with contextlib.redirect_stderr(io.StringIO()):
                        assert prog(argv) == 0
                out[f"{kind}_{tag}_program_xrt"] = round(total / best_cpu(program, args.repeats), 1)
        print(f"{tag}: " + ", ".join(f"{k}={v}" for k, v in out.items() if f"_{tag}_" in k), file=sys.stderr)

    out["mfcc_xrt_per_core"] = out["mfcc_8k_program_xrt"]
    out["fbank_xrt_per_core"] = out["fbank_8k_program_xrt"]
    out["mfcc_16k_xrt_per_core"] = out["mfcc_16k_program_xrt"]
    out["fbank_16k_xrt_per_core"] = out["fbank_16k_program_xrt"]
    out["audio_seconds"] = args.seconds
    out["measure"] = "audio seconds / CPU seconds of one process, best of %d" % args.repeats
    print(json.dumps(out))


if __name__ == "__main__":
    main()
