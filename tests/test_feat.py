"""Features: equal to kaldi-native-fbank called directly and to a by-hand numpy computation of
one frame; deterministic dither; Kaldi option/config parsing and its errors; CMVN, deltas and
splicing against direct formulas; the programs (ark/scp via kaldiio) and steps scripts."""
from __future__ import annotations

import os
import subprocess

import kaldiio
import kaldi_native_fbank as knf
import numpy as np
import pytest
import soundfile as sf

from pynnet.feat import (add_deltas, apply_cmvn, cmvn_stats, delta_scales, feature_dim,
                         read_features, splice_feats)
from pynnet.feat.compute import FeatureComputer, default_values, knf_options
from pynnet.feat.numpy_kaldi import compute_numpy
from pynnet.feat.options import KaldiOptions
from pynnet.io.errors import PynnetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def speechlike(n: int, rate: int, seed: int = 0) -> np.ndarray:
    """Harmonics with a moving pitch plus noise, on the int16 scale (float32)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 12)) * 4000 + rng.standard_normal(n) * 200
    return np.round(x).astype(np.float32)


def knf_direct(kind: str, opts, x: np.ndarray) -> np.ndarray:
    comp = knf.OnlineMfcc(opts) if kind == "mfcc" else knf.OnlineFbank(opts)
    comp.accept_waveform(opts.frame_opts.samp_freq, x)
    comp.input_finished()
    return np.array([comp.get_frame(i) for i in range(comp.num_frames_ready)], dtype=np.float32)


def values(kind: str, **kw):
    return {**default_values(kind), **kw}


# -- exactness ----------------------------------------------------------------------------------

CONFIGS = [
    {},
    {"snip_edges": False},
    {"use_energy": True, "raw_energy": False},
    {"htk_compat": True, "use_energy": True},
    {"window_type": "hamming", "round_to_power_of_two": False, "preemphasis_coefficient": 0.0},
    {"low_freq": 64.0, "high_freq": -200.0, "num_mel_bins": 15, "frame_shift": 12.5},
    {"energy_floor": 1.0, "remove_dc_offset": False, "window_type": "blackman"},
]


@pytest.mark.parametrize("kind", ["mfcc", "fbank"])
@pytest.mark.parametrize("rate", [8000, 16000])
@pytest.mark.parametrize("over", CONFIGS)
def test_equals_kaldi_native_fbank_directly(kind, rate, over):
    x = speechlike(rate // 2 + 37, rate)
    v = values(kind, sample_frequency=float(rate), dither=0.0, **over)
    ours = FeatureComputer(kind, v).compute(x, "utt")
    ref = knf_direct(kind, knf_options(kind, v), x)
    assert ours.dtype == np.float32 and ours.shape == ref.shape and ours.shape[0] > 10
    assert np.array_equal(ours, ref)
    # and the numpy pipeline (used for VTLN) agrees to float rounding
    assert np.allclose(compute_numpy(kind, v, x), ref, rtol=1e-4, atol=2e-4 * np.abs(ref).max())


# -- against Kaldi itself --------------------------------------------------------------------------

# The first 1200 samples of kaldifeat's tests/test_data/test.wav (16 kHz, a sox sine sweep 300-3300 Hz,
# Apache-2.0) and the first frames Kaldi's own compute-*-feats --dither=0 computed from that file
# (kaldifeat tests/test_data/test-mfcc.txt, test-mfcc-no-snip-edges.txt, test.txt, test-htk.txt,
# test-40-no-snip-edges.txt), as printed by Kaldi (ark,t).
KALDI_WAV_B64 = (
    "eNoBYAmf9gkBbgorFSsfDSkbMrE6QkIZSb9OdFPcVjBZJ1r3WW1YvFXGUblMj0ZvP2Y3mS4kJSYbyxAtBn772fBw5lvcztLb"
    "ybPBZLoUtNOuu6rTpy2myaWuptWoOqzNsIC2P73wxHnNutaS4NvqdfUxAOAKZhWiH2opnzIcO8dCgEkwT8JTJ1dQWTda1Vkv"
    "WEpVMFHtS5hFRT4QNhctdyNXGdkOJQRi+bbuR+Q92r7Q6sfiv8S4qrKrrdipQqfwpemlLae2qX2tcrKFuKC/qMeA0AfaHOSX"
    "7lX5JATZDlkZfSMgLR82WD6vRQdMSVFiVUJY31kyWjxZ/VZ/U81O+UgZQkU6mzE5KEIe2xMqCVf+iPPn6J3ey9SZyynDmbsH"
    "tYmvNqsdqEumxaWOpqaoAayVsFK2Ib3qxI/N8tbv4F/rH/YCAdMLdRbJIKIq3jNbPPpDnEorUJBUvVeiWTxah1mEVz1Uu08P"
    "SlBDlTv8MqQpsB9EFYkKpv/E9Arqod+01WHM0cMjvHK12K9sqz2oWKbEpYSmlajvq4iwS7YlvfzEtM0o1zjhvuuR9ocBaQwa"
    "F3ghVyuWNA89o0Q3S7FQ+1QHWMhZOFpTWR5XoVPnTgRJDUIcOlAxyCeqHRoTQQhI/Vnynec+3WDTLMrEwUi61LOCrmaqkKcJ"
    "ptqlA6d/qUatSbJ1uLO/6cf00LXaBeW877X6uwWgEEYbhiU4Lzg4Y0CYR8BNvVKDVv5YJVr2WXBYl1V5USJMqUUjPrE1cCyE"
    "IhQYRg1FAjr3UOyy4YjX980oxTm9TLZ5sNmrf6h0psOlcKZ1qM2rbLA+ti+9IsX7zZbXz+F97Hf3kgKVDWIY1CK/LP81cD7x"
    "RWVMtFHIVZFYBFodWthYPVZUUitN2UZzPxg35S0BJI8Zuw6sA4/4jO3T4onY2c7oxde9ybbYsByspqiFpsOlYqZfqLSrU7Aq"
    "tiS9I8ULzrfXAuLD7NL3/wITDu8YaiNcLZ82DD+FRuxMJ1IgVspYGVoHWpZYylWsUVBMyEUtPp81PSwtIpUXoQx6AUz2ROuM"
    "4FHWuczrwwq8M7WFrxSr86cups2l0aY1qfSs+7E4uJS/7scq0R/bqeWa8Mz7BwccEuscRycLMQw6KkJDSTtP+VNsV4ZZPVqO"
    "WX5XEVRXT2NJSUIoOiAxVSfqHA4S6Aam+3XwgeX22v3Qwcdkvwq40LHMrBepvabKpT6mHKhaq+2vw7XCvNHEzs2X1wLi5+wZ"
    "+GsDog6cGTEkNi6EN/Q/ZUe5TddSp1YfWTBa2lkZWPdUf1DEStxD4zv3Mj4p3x4CFNUIgv068ifnetxZ0vLIacDhuHeySa1p"
    "qeim0aUnpuqnFauXr2K1XbxsxG7NP9e24ars7fdQA5kOpRlLJF4utzcuQKJH9U0MU9JWOVk2WsRZ51ejVAZQJkoVQ/Q64TEC"
    "KIAdhRI+B9j7gvBr5cHartBbx/G+kbdZsWOsxKiMpsOlbaaIqAus57AKt1m+uMYE0Bbax+Tn70z7vgYIEgwdmCeCMaM61ELz"
    "SeRPjVTbV8FZNlo4WcpW+lLQTWhH1z9AN8MtiiO7GIgNGwKl9lTrWODg1RXMIMMou020ra5dqnGn9aXwpWGnRaqNriq0Arv7"
    "wvXLx9VM4FTrtfY7AqsN3xivI+otaTcCQJRH+k0fU+hWSlk5WrBZsldGVHtPYkkaQrw5bDBRJpUbZRDxBGf59+3S4ifYI87v"
    "xLO8kbWnrw+r3KccptelDae6qdStSLMCuuLBysqU1BbfJOqP9SYBqQz3F+IiOi3VNos/NUe3TfFSz1ZAWTlatVm3V0lUdk9S"
    "SflBiTklMPQlIxveD1UEufg87QziW9dXzSnE+LvptBivoKqTp/6l6qVVpzuqkK5BtDW7UcNwzG3WHuFR7Nz3hwMWD2QaQyWD"
    "L/w4gUHxSCxPFlSaV6lZOlpKWd1W/FK6TStHaz+bNuIsZyJYF+ULPQCU9BvpBd5/07fJ2cAKuWyyG60wqbumx6VYpmuo+6v1"
    "sEa30b53xxLRetuB5vfxq/1eCeEUDiCxKp00pz2qRX9MDVI5VvJYK1rfWQ5YwlQHUPFJm0IlOrIwbCZ+GxgQawSr+AntuuHu"
    "1tPMl8Nhu1W0k640qkun5aUIprWn4qqGr4m11LxFxbfOA9n542zvKvv2BpgS6x29KN4yITxgRHZLRFGtVaNYFlr/WV9YPVWm"
    "UK1KbUMFO5oxVCdjHPMQOAVl+a/tSeJk1zLN3sOUu3a0pq48qkyn5KUKpr+n+qqsr8S1JL2uxTvPoNmx5DzwD/znB5YT8h7E"
    "Kd8zGD1DRT5M6VEpVu9YK1raWftXlVS6T3xJ+0FSOasvMSURGnoOpALC9gjrqt/b1M3KqsGcucqyT61Eqb2mxqVhpo+oRKxv"
    "sfy3zL+9yKbSW92t6Gn0VgA3DN4XHSO/LZc3d0A5SLhO2lODV6dZOVo3WahWk1INTStGDz7cNLwq2x9pFJwIpvzA8Bzl89lz"
    "z83FLr27tZiv36qop/+l76V1p4yqKK8ytZC8IMW8zjnZZ+QT8An8BQjXE1EfPipvNLI94UXUTGxSkVYuWTlaqlmGV9RTp04U"
    "SDtAPTdELXsiFxdHC0T/RfN95yXccNGNx66+9raNsI+rEagmptelJacJqnmuXrSfuxvEqs0h2FHjBO8I+xwHBROYHqAp6zNK"
    "PZJFm0xIUn1WJlk3WqtZhVfNU5VO80cIQPQ25CwFIokWpAqO/n7yquZM25bQucblvUK29K8Wq8OnBqbrpXGnkqpAr2W147yb"
    "xWPPDdpq5UHxYP1/CWsV9yDrKxU2SD9VRxhOdFNOV5NZO1pAWadWfFLRTMJFbz3+M5opcx6/ErIGhvpx7rDidNf3zGbD8Lq8"
    "s+2tnqnjpsmlVqaIqFSsqbFtuITAxskG1BXfwurT9g0DLQ8DG10mBTHJOnpD8EoIUaZVs1ggWuhZCViOVIVPB0kyQSk4Fy4s"
    "I5sXmgtg/yvzMOep287Q0cbgvSm20K/wqqSn+aX5paSn9KrWrzW29b3uxvfQ4dt454Tzzv8MDAsYnCODLpA4k0FgSdJPylQz"
    "WPlZFFqFWFFViFBASpdCsTm4L9skTRlHDQABtfSe6Pbc9dHPx7W+0rZOsEar1acJpuylgKe9qpSv7bWqvafGudCv21XncfPM"
    "/xwMLRjMI8Au1jjcQahJFFABVVhYB1oHWlZY/VQMUJn9qkc="
)
KALDI_REF = {
    "mfcc": """
        25.38532 46.38532 40.43646 26.04891 0.3232674 -23.76116 -47.58815 -55.77805 -56.82245 -43.12204 -33.96529 -15.93318 -4.92479
        25.40668 45.93211 39.33534 20.82029 -1.113101 -30.38894 -49.96596 -62.04239 -57.14521 -47.23344 -32.91168 -18.48427 -5.089862
        25.39494 46.07357 38.62945 19.25349 -2.265106 -32.01031 -50.18764 -61.27365 -56.84636 -47.66944 -32.12716 -14.62166 -4.821646
        25.38965 45.94759 37.9682 19.80231 -4.0096 -29.4664 -51.8117 -57.52616 -57.92469 -44.71363 -29.21408 -12.42252 -2.346232
        25.40345 46.62432 36.93261 20.22779 -6.637779 -31.15936 -51.155 -58.34569 -54.31585 -44.24779 -23.55167 -8.863897 1.932559
    """,
    "mfcc --snip-edges=false": """
        25.39608 32.35185 -2.321556 14.60079 -13.74259 -4.045824 -24.44216 -15.79832 -25.61224 -15.68476 -16.97382 -7.824823 -5.879378
        25.39381 45.95031 39.74594 24.35997 -0.8152001 -26.2968 -49.12233 -58.09226 -59.16555 -43.86792 -35.18478 -16.45622 -6.582274
        25.38237 46.29809 39.69444 21.26501 -0.1167132 -30.20249 -48.83283 -62.01665 -55.13354 -47.37197 -29.98325 -16.55868 -3.574477
        25.38654 45.92929 38.62181 19.25543 -2.401595 -31.4079 -50.66693 -60.24544 -56.83351 -46.73343 -31.91438 -13.66359 -4.147025
        25.40916 46.29382 37.4265 20.59778 -5.06803 -28.80847 -51.90322 -56.63943 -57.86185 -43.94829 -28.04593 -11.67387 -1.56284
        25.38297 46.47021 36.70466 18.70617 -6.900266 -34.04674 -51.83358 -60.35369 -54.66861 -44.32346 -23.42499 -8.679977 2.353952
    """,
    "fbank": """
        15.00744 21.17303 25.52861 24.46438 16.69938 13.84804 11.2087 11.79517 10.3911 10.44909 10.30123 9.874329 9.699727 9.37509 9.347578 9.355928 9.107419 9.00323 9.031268 8.839916 9.082197 8.744139 8.40221
        13.87853 20.56466 25.49562 24.69662 16.9541 13.91633 11.33638 11.84495 10.25656 10.58718 10.34841 9.747416 9.612316 9.39642 9.06955 9.117751 8.913527 8.842571 8.59212 8.831518 8.622513 8.86048 8.976251
        13.94753 19.94101 25.4494 24.90511 17.00044 13.92074 11.66673 11.82172 10.34108 10.72575 10.09829 9.810879 9.676199 9.421767 9.124647 8.774353 9.086291 8.74897 8.469534 8.670973 8.772754 8.740549 8.982433
        14.46999 19.35756 25.38992 25.09344 16.9938 13.9162 11.93417 11.74966 10.509 10.89407 10.06301 9.909191 9.719013 9.472373 9.279746 8.977654 8.786046 9.155951 8.680856 8.915503 9.044468 8.622409 8.614415
        14.86701 18.83547 25.31638 25.26457 17.58689 13.96361 12.28831 11.64583 10.77008 10.93227 9.965744 9.983705 9.794715 9.683822 9.214636 9.22319 9.027518 9.08751 9.00797 8.690693 8.636527 8.534263 8.608916
    """,
    "fbank --use-energy=true --htk-compat=true": """
        15.00744 21.17303 25.52861 24.46438 16.69938 13.84804 11.2087 11.79517 10.3911 10.44909 10.30123 9.874329 9.699727 9.37509 9.347578 9.355928 9.107419 9.00323 9.031268 8.839916 9.082197 8.744139 8.40221 25.38532
        13.87853 20.56466 25.49562 24.69662 16.9541 13.91633 11.33638 11.84495 10.25656 10.58718 10.34841 9.747416 9.612316 9.39642 9.06955 9.117751 8.913527 8.842571 8.59212 8.831518 8.622513 8.86048 8.976251 25.40668
        13.94753 19.94101 25.4494 24.90511 17.00044 13.92074 11.66673 11.82172 10.34108 10.72575 10.09829 9.810879 9.676199 9.421767 9.124647 8.774353 9.086291 8.74897 8.469534 8.670973 8.772754 8.740549 8.982433 25.39494
        14.46999 19.35756 25.38992 25.09344 16.9938 13.9162 11.93417 11.74966 10.509 10.89407 10.06301 9.909191 9.719013 9.472373 9.279746 8.977654 8.786046 9.155951 8.680856 8.915503 9.044468 8.622409 8.614415 25.38965
        14.86701 18.83547 25.31638 25.26457 17.58689 13.96361 12.28831 11.64583 10.77008 10.93227 9.965744 9.983705 9.794715 9.683822 9.214636 9.22319 9.027518 9.08751 9.00797 8.690693 8.636527 8.534263 8.608916 25.40345
    """,
    "fbank --num-mel-bins=40 --snip-edges=false": """
        18.96444 19.86346 21.15996 23.03783 24.78062 24.94543 23.25801 21.85808 21.16464 20.76589 20.42589 20.15896 19.90022 19.69295 19.52393 19.30501 19.16441 18.99253 18.84548 18.69155 18.54767 18.39189 18.25266 18.09157 17.94785 17.78059 17.6096 17.43325 17.23833 17.02701 16.80378 16.5495 16.25627 15.90453 15.49727 14.97293 14.30372 13.22139 11.32305 13.5525
        13.92753 13.86944 15.39794 20.46374 25.03641 25.20131 22.09086 16.44104 13.82726 13.68196 11.64849 9.743029 11.38992 11.13653 7.746305 10.62938 9.88602 9.107728 10.07885 8.270217 9.766935 8.492453 9.40504 8.623954 8.594773 9.016858 8.66531 8.656908 8.608487 8.477707 8.260619 8.622458 8.053888 8.32217 8.370289 8.643818 8.507599 8.028069 7.892542 7.890952
        13.99486 13.42189 16.01205 19.33348 24.87531 25.36166 22.61705 16.45071 14.23818 13.68901 11.9747 9.808083 10.99918 11.4527 7.4759 10.28248 10.36299 8.060785 10.22566 7.89238 9.779221 8.225794 9.42803 8.342211 8.886475 8.424166 8.302045 8.314983 8.478705 8.561936 8.171611 8.077629 7.809419 8.093275 8.545591 7.652286 7.700088 8.514207 8.594678 8.550256
        12.7885 13.3399 16.08387 17.97527 24.67034 25.4923 23.10605 16.49453 14.50649 13.64687 12.52543 10.24612 10.65288 11.6139 9.111442 9.757303 10.63304 7.346739 10.10882 8.902452 9.560848 9.050172 9.174734 8.399022 9.132246 8.106356 8.121744 8.6475 8.344028 8.434936 8.303373 7.982547 7.882221 8.173124 8.458884 8.157388 8.519258 8.12985 8.164676 8.631008
        14.19501 13.68966 15.75414 17.60499 24.41491 25.59239 23.559 16.9673 14.4115 13.46476 13.07809 10.10822 9.828719 11.7355 9.625244 8.948779 10.85012 8.296032 9.873562 9.619483 9.01224 9.362689 8.920494 8.93167 9.038802 8.435759 8.714669 8.422825 8.172736 8.452174 8.669788 8.412346 8.109411 8.22609 8.608659 8.47726 7.93852 7.868503 7.920403 7.827925
        11.93478 14.22943 15.13304 18.03271 24.10098 25.66022 23.97587 17.84577 14.1089 13.56284 13.20702 10.53455 9.524833 11.60045 10.49826 7.72007 10.77716 9.363244 9.329349 10.04248 8.19213 9.757459 8.37489 9.436014 8.518677 8.391635 9.074756 8.402056 8.399717 8.530869 8.293662 8.662748 7.990947 7.953528 8.291599 7.972326 8.189728 7.884634 8.484457 7.945732
    """,
}


def test_equals_kaldi_compute_feats_output():
    """Our features vs what Kaldi's compute-mfcc-feats/compute-fbank-feats printed for the same
    samples. Mel bins within 12 nats of the frame's strongest agree to Kaldi's print precision;
    bins far below it (a pure sine leaves most bins at float32 FFT rounding noise) may differ in
    the 2nd decimal, and so do MFCCs, which mix those bins through the DCT."""
    import base64
    import zlib
    x = np.frombuffer(zlib.decompress(base64.b64decode("".join(KALDI_WAV_B64))), dtype="<i2").astype(np.float32)
    assert x.shape == (1200,)
    for key, text in KALDI_REF.items():
        kind, *opts = key.split()
        p = parser(kind)
        v, _ = p.parse(["--dither=0", *opts])
        ref = np.array([[float(t) for t in line.split()] for line in text.strip().splitlines()], dtype=np.float64)
        ours = FeatureComputer(kind, v).compute(x, "1")[:ref.shape[0]]
        assert ours.shape == ref.shape, key
        diff = np.abs(ours - ref)
        if kind == "fbank":
            htk = "--htk-compat=true" in opts
            mel, dmel = (ref[:, :-1], diff[:, :-1]) if htk else (ref, diff)
            strong = mel >= mel.max(axis=1, keepdims=True) - 12
            assert strong.sum() >= 2 * ref.shape[0]
            assert np.all(dmel[strong] <= 5e-5 + 2e-6 * np.abs(mel[strong])), key
            assert np.all(diff <= 0.05), key
            if htk:
                assert np.all(diff[:, -1] <= 5e-5), key          # log energy, last with --htk-compat
        else:
            assert np.all(diff[:, 0] <= 5e-5), key                # C0 is the log energy (--use-energy)
            assert np.all(diff <= 0.1), key


def hand_mel_banks(num_bins, padded, rate, low, high):
    mel = lambda f: 1127.0 * np.log(1.0 + f / 700.0)   # noqa: E731
    ml, mh = mel(low), mel(high)
    delta = (mh - ml) / (num_bins + 1)
    w = np.zeros((num_bins, padded // 2 + 1))
    fm = mel(np.arange(padded // 2) * rate / padded)
    for b in range(num_bins):
        left, center, right = ml + b * delta, ml + (b + 1) * delta, ml + (b + 2) * delta
        up = (fm > left) & (fm <= center)
        down = (fm > center) & (fm < right)
        w[b, :padded // 2][up] = (fm[up] - left) / (center - left)
        w[b, :padded // 2][down] = (right - fm[down]) / (right - center)
    return w


def test_one_frame_by_hand():
    """MFCC and fbank of one 25 ms frame at 8 kHz computed step by step in numpy."""
    rate, n = 8000, 200
    x = speechlike(n, rate, seed=3).astype(np.float64)
    f = x - x.mean()                                       # remove DC
    log_energy = np.log(np.dot(f, f))                       # raw energy (before preemphasis)
    f = np.concatenate([[f[0] - 0.97 * f[0]], f[1:] - 0.97 * f[:-1]])   # preemphasis
    i = np.arange(n)
    f = f * (0.5 - 0.5 * np.cos(2 * np.pi * i / (n - 1))) ** 0.85      # povey window
    power = np.abs(np.fft.rfft(f, 256)) ** 2                # 256-point FFT
    mel = hand_mel_banks(23, 256, rate, 20.0, 4000.0) @ power
    logmel = np.log(mel)
    fbank = FeatureComputer("fbank", values("fbank", sample_frequency=8000.0, dither=0.0)).compute(
        x.astype(np.float32), "u")
    assert fbank.shape == (1, 23)
    assert np.allclose(fbank[0], logmel, rtol=0, atol=2e-4)
    k = np.arange(13)[:, None]
    dct = np.sqrt(2 / 23) * np.cos(np.pi / 23 * (np.arange(23)[None, :] + 0.5) * k)
    dct[0] = np.sqrt(1 / 23)
    ceps = (dct @ logmel) * (1 + 11 * np.sin(np.pi * np.arange(13) / 22))   # lifter Q=22
    ceps[0] = log_energy                                    # --use-energy=true (default)
    mfcc = FeatureComputer("mfcc", values("mfcc", sample_frequency=8000.0, dither=0.0)).compute(
        x.astype(np.float32), "u")
    assert mfcc.shape == (1, 13)
    assert np.allclose(mfcc[0], ceps, rtol=0, atol=5e-4)
    # too short for a frame: zero rows; snip-edges=false: round(n / shift) frames
    assert FeatureComputer("mfcc", values("mfcc", sample_frequency=8000.0)).compute(
        x[:199].astype(np.float32), "u").shape == (0, 13)
    assert FeatureComputer("mfcc", values("mfcc", sample_frequency=8000.0, snip_edges=False)).compute(
        x[:199].astype(np.float32), "u").shape == (2, 13)


def test_dither_is_deterministic_per_utterance():
    x = speechlike(8000, 8000)
    x[1000:7000] = 0.0                        # digital silence: the dither noise is all there is
    for mode in ("waveform", "frame"):
        fc = FeatureComputer("fbank", values("fbank", sample_frequency=8000.0, dither_mode=mode))
        a, b, c = fc.compute(x, "spk1-utt1"), fc.compute(x, "spk1-utt2"), fc.compute(x, "spk1-utt1")
        assert np.array_equal(a, c), mode               # same utterance -> same noise, any order
        assert not np.array_equal(a, b), mode
        clean = FeatureComputer("fbank", values("fbank", sample_frequency=8000.0, dither=0.0)).compute(x, "u")
        speech = slice(0, 7)
        assert np.allclose(a[speech], clean[speech], atol=0.05)     # dither 1 is tiny vs speech
        silent = slice(15, 65)
        assert np.all(clean[silent] < -14)               # log of the epsilon floor without dither
        # with dither: N(0, 1) noise per sample; its expected mel energy after preemphasis and the
        # povey window is sum_k w[b,k] * sum_n win[n]^2 * |1 - 0.97 e^{-i omega_k}|^2
        n = np.arange(200)
        win2 = ((0.5 - 0.5 * np.cos(2 * np.pi * n / 199)) ** 0.85) ** 2
        omega = 2 * np.pi * np.arange(129) / 256
        expect = hand_mel_banks(23, 256, 8000, 20.0, 4000.0) @ (win2.sum() * np.abs(1 - 0.97 * np.exp(-1j * omega)) ** 2)
        got = a[silent].mean(axis=0)
        # E[log chi-square-like energy] sits a little below log E[energy]
        assert np.all(got < np.log(expect) + 0.3) and np.all(got > np.log(expect) - 1.0), (got, np.log(expect))
    # other seed offset -> other noise
    fc2 = FeatureComputer("fbank", values("fbank", sample_frequency=8000.0, dither_seed=5))
    assert not np.array_equal(fc2.compute(x, "spk1-utt1"), a)


def test_vtln_warp():
    x = speechlike(8000, 8000)
    v = values("mfcc", sample_frequency=8000.0, dither=0.0)
    fc = FeatureComputer("mfcc", v)
    plain, warped = fc.compute(x, "u"), fc.compute(x, "u", vtln_warp=1.1)
    assert plain.shape == warped.shape and not np.allclose(plain, warped, atol=1e-2)
    assert np.allclose(fc.compute(x, "u", vtln_warp=1.0), plain)
    # warped mel banks move the centres down for warp > 1 (frequencies are scaled up)
    opts = knf_options("mfcc", v)
    m1 = knf.MelBanks(opts.mel_opts, opts.frame_opts, 1.0).get_matrix()
    m2 = knf.MelBanks(opts.mel_opts, opts.frame_opts, 1.1).get_matrix()
    assert np.argmax(m2[10]) < np.argmax(m1[10])


def test_torchaudio_backend_parity():
    pytest.importorskip("torchaudio")
    x = speechlike(8000, 8000)
    for kind in ("mfcc", "fbank"):
        v = values(kind, sample_frequency=8000.0, dither=0.0)
        a = FeatureComputer(kind, v).compute(x, "u")
        b = FeatureComputer(kind, v, backend="torchaudio").compute(x, "u")
        assert np.allclose(a, b, rtol=1e-3, atol=1e-3 * np.abs(a).max())


# -- options and config files ------------------------------------------------------------------------

def parser(kind="mfcc"):
    from pynnet.feat.compute import register_options
    p = KaldiOptions("usage")
    register_options(p, kind)
    return p


def test_config_file_parsing(tmp_path):
    conf = tmp_path / "mfcc.conf"
    conf.write_text("# MFCC for telephone speech\n--use-energy=false   # only non-default option\n\n"
                    "--sample-frequency=8000\n--num_mel_bins=20\n--snip-edges\n")
    v, pos = parser().parse([f"--config={conf}", "--num-mel-bins=21", "in", "out"])
    assert pos == ["in", "out"]
    assert v["use_energy"] is False and v["sample_frequency"] == 8000.0 and v["num_mel_bins"] == 21
    assert v["snip_edges"] is True and v["dither"] == 1.0 and v["num_ceps"] == 13
    v, _ = parser().parse(["--use-energy=f", "--dither=0", "--window-type=hamming"])
    assert v["use_energy"] is False and v["dither"] == 0.0 and v["window_type"] == "hamming"


@pytest.mark.parametrize("line,msg", [
    ("--bogus-option=3", r"mfcc\.conf:2: unknown option --bogus-option"),
    ("--num-ceps=abc", r"mfcc\.conf:2: invalid value for --num-ceps: 'abc' is not an integer"),
    ("--use-energy=maybe", r"mfcc\.conf:2: invalid value for boolean option --use-energy"),
    ("--window-type=gauss", r"mfcc\.conf:2: invalid value for --window-type: 'gauss' \(expected one of"),
    ("use-energy=false", r"mfcc\.conf:2: line does not look like an option"),
    ("--dither", r"mfcc\.conf:2: option --dither needs a value"),
    # Kaldi trims ASCII whitespace only: the value is 'false\u00a0' (strip() made it 'false')
    ("--use-energy=false\u00a0", r"mfcc\.conf:2: invalid value for boolean option --use-energy"),
])
def test_bad_config_lines(tmp_path, line, msg):
    conf = tmp_path / "mfcc.conf"
    conf.write_text(f"--sample-frequency=8000\n{line}\n")
    with pytest.raises(PynnetError, match=msg):
        parser().parse([f"--config={conf}", "a", "b"])


def test_bad_command_lines_and_values(tmp_path):
    with pytest.raises(PynnetError, match="command line: unknown option --num-cepz"):
        parser().parse(["--num-cepz=3"])
    with pytest.raises(PynnetError, match=r"cannot open config file"):
        parser().parse([f"--config={tmp_path}/none.conf"])
    with pytest.raises(PynnetError, match="after a positional argument"):
        parser().parse(["a", "--dither=0"])
    for over, msg in [({"num_ceps": 30}, "--num-ceps=30 must be between 1 and --num-mel-bins=23"),
                      ({"high_freq": 5000.0, "sample_frequency": 8000.0}, "bad values in options: --low-freq"),
                      ({"num_mel_bins": 2}, "--num-mel-bins must be at least 3"),
                      ({"num_mel_bins": 120, "sample_frequency": 8000.0}, "bad feature options"),
                      ({"frame_length": 0.0}, "must be positive")]:
        with pytest.raises(PynnetError, match=msg):
            FeatureComputer("mfcc", values("mfcc", **over))


# -- CMVN, deltas, splicing -------------------------------------------------------------------------

@pytest.fixture
def feats():
    rng = np.random.default_rng(11)
    return (rng.standard_normal((57, 13)) * 3 + np.arange(13)).astype(np.float32)


def test_cmvn_stats_format_and_apply(feats):
    st = cmvn_stats(feats)
    x = feats.astype(np.float64)
    assert st.shape == (2, 14) and st.dtype == np.float64
    assert np.allclose(st[0, :13], x.sum(0)) and st[0, 13] == 57
    assert np.allclose(st[1, :13], (x * x).sum(0)) and st[1, 13] == 0
    assert np.allclose(st, knf.compute_cmvn_stats(feats))
    mean = x.mean(0)
    assert np.allclose(apply_cmvn(feats, st), x - mean, atol=1e-5)
    std = np.sqrt((x * x).mean(0) - mean ** 2)
    assert np.allclose(apply_cmvn(feats, st, norm_vars=True), (x - mean) / std, atol=1e-5)
    for nv in (False, True):
        o = knf.CmvnOptions()
        o.norm_vars = nv
        assert np.allclose(apply_cmvn(feats, st, nv), knf.apply_cmvn(st, o, feats), atol=1e-6)
    # speaker stats applied to one of its utterances
    other = feats[:10] + 1
    spk = cmvn_stats(np.vstack([feats, other]))
    assert np.allclose(apply_cmvn(other, spk), other - np.vstack([feats, other]).astype(np.float64).mean(0),
                       atol=1e-5)
    with pytest.raises(PynnetError, match="insufficient stats .* count = 0"):
        apply_cmvn(feats, np.zeros((2, 14)), name="spk1")
    with pytest.raises(PynnetError, match="do not match features of dimension 13"):
        apply_cmvn(feats, np.zeros((2, 10)))


def test_deltas_against_direct_formula(feats):
    s = delta_scales(2, 2)
    assert np.allclose(s[1], np.arange(-2, 3) / 10)
    assert np.allclose(s[2], np.convolve(s[1], s[1]))
    assert np.allclose(s[2], [0.04, 0.04, 0.01, -0.04, -0.1, -0.04, 0.01, 0.04, 0.04])
    out = add_deltas(feats, 2, 2)
    t = feats.shape[0]
    pad = lambda j: feats[np.clip(np.arange(t) + j, 0, t - 1)].astype(np.float64)   # noqa: E731
    d1 = sum(j * pad(j) for j in range(-2, 3)) / 10
    d2 = sum(w * pad(j) for j, w in zip(range(-4, 5), np.convolve(np.arange(-2, 3), np.arange(-2, 3)) / 100))
    assert out.shape == (57, 39) and out.dtype == np.float32
    assert np.array_equal(out[:, :13], feats)
    assert np.allclose(out[:, 13:26], d1, atol=1e-5) and np.allclose(out[:, 26:], d2, atol=1e-5)
    o = knf.DeltaOptions()
    o.order, o.window = 2, 2
    assert np.allclose(out, knf.compute_deltas(o, feats), atol=1e-6)
    assert add_deltas(feats[:1], 2, 2).shape == (1, 39)
    assert np.allclose(add_deltas(feats[:1], 2, 2)[:, 13:], 0, atol=1e-6)   # one frame: no slope


def test_splice_against_direct_formula(feats):
    out = splice_feats(feats, 3, 2)
    assert out.shape == (57, 13 * 6)
    for t in (0, 1, 30, 55, 56):
        want = np.concatenate([feats[min(max(t + j, 0), 56)] for j in range(-3, 3)])
        assert np.array_equal(out[t], want)
    o = knf.SpliceOptions()
    o.left_context, o.right_context = 5, 5
    assert np.array_equal(splice_feats(feats, 5), knf.splice_frames(feats, o))


# -- programs and scripts -------------------------------------------------------------------------------

def make_data_dir(d, rate=8000, n_utts=4, pipe_last=True):
    d.mkdir(parents=True, exist_ok=True)
    wav, utt2spk = [], []
    for i in range(n_utts):
        utt = f"spk{i % 2}-utt{i}"
        x = speechlike(rate // 2 + 400 * i, rate, seed=i).astype(np.int16)
        sf.write(str(d / f"{utt}.wav"), x, rate, subtype="PCM_16")
        wav.append((utt, f"cat {d}/{utt}.wav |" if pipe_last and i == n_utts - 1 else f"{d}/{utt}.wav"))
        utt2spk.append((utt, f"spk{i % 2}"))
    wav.sort()
    utt2spk.sort()
    (d / "wav.scp").write_text("".join(f"{u} {w}\n" for u, w in wav))
    (d / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s in utt2spk))
    spk2utt: dict[str, list[str]] = {}
    for u, s in utt2spk:
        spk2utt.setdefault(s, []).append(u)
    (d / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in sorted(spk2utt.items())))
    return d


def run_main(fn, args, capsys):
    rc = fn(args)
    err = capsys.readouterr().err
    return rc, err


def test_compute_feats_program(tmp_path, capsys):
    from pynnet.bin.feat import compute_cmvn_stats, compute_fbank_feats, compute_mfcc_feats
    d = make_data_dir(tmp_path / "data")
    conf = tmp_path / "mfcc.conf"
    conf.write_text("--use-energy=false\n--sample-frequency=8000\n")
    ark, scp = tmp_path / "raw.ark", tmp_path / "raw.scp"
    rc, err = run_main(compute_mfcc_feats, [f"--config={conf}", "--write-num-frames=ark,t:" + str(tmp_path / "nf"),
                                            f"scp:{d}/wav.scp", f"ark,scp:{ark},{scp}"], capsys)
    assert rc == 0, err
    assert "Done 4 out of 4 utterances" in err
    got = kaldiio.load_scp(str(scp))
    assert list(got) == sorted(got) and len(got) == 4
    fc = FeatureComputer("mfcc", values("mfcc", sample_frequency=8000.0, use_energy=False))
    for utt in got:
        x, _ = sf.read(str(d / f"{utt}.wav"), dtype="int16")
        assert np.array_equal(got[utt], fc.compute(x.astype(np.float32), utt))
    nf = dict(line.split() for line in open(tmp_path / "nf"))
    assert {u: int(n) for u, n in nf.items()} == {u: m.shape[0] for u, m in got.items()}
    # Kaldi's text form is readable too
    rc, err = run_main(compute_fbank_feats, ["--sample-frequency=8000", "--num-mel-bins=40", "--dither=0",
                                             f"scp:{d}/wav.scp", f"ark,t:{tmp_path}/fb.txt"], capsys)
    assert rc == 0, err
    fb = dict(kaldiio.load_ark(str(tmp_path / "fb.txt")))
    assert all(m.shape[1] == 40 for m in fb.values())
    # CMVN stats per speaker
    rc, err = run_main(compute_cmvn_stats, [f"--spk2utt=ark:{d}/spk2utt", f"scp:{scp}",
                                            f"ark,scp:{tmp_path}/cmvn.ark,{tmp_path}/cmvn.scp"], capsys)
    assert rc == 0, err
    st = kaldiio.load_scp(str(tmp_path / "cmvn.scp"))
    assert sorted(st) == ["spk0", "spk1"]
    want = cmvn_stats(np.vstack([got["spk0-utt0"], got["spk0-utt2"]]))
    assert st["spk0"].dtype == np.float64 and np.allclose(st["spk0"], want)
    # global stats to a plain file (an rxfilename, as Kaldi): one matrix over all utterances
    rc, err = run_main(compute_cmvn_stats, [f"scp:{scp}", f"{tmp_path}/global.stats"], capsys)
    assert rc == 0, err
    g = kaldiio.load_mat(str(tmp_path / "global.stats"))
    assert g.dtype == np.float64 and np.allclose(g, cmvn_stats(np.vstack(list(got.values()))))


def test_compute_feats_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    from pynnet.bin.feat import compute_mfcc_feats
    d = make_data_dir(tmp_path / "data", pipe_last=False)
    out = [f"ark,scp:{tmp_path}/o.ark,{tmp_path}/o.scp"]
    conf = tmp_path / "bad.conf"
    conf.write_text("--sample-frequency=8000\n--use-energy=nope\n")
    cases = [
        ([f"--config={conf}", f"scp:{d}/wav.scp"] + out, r"bad\.conf:2: invalid value for boolean option --use-energy"),
        ([f"scp:{d}/wav.scp"] + out, r"wav\.scp:1: sample frequency mismatch for recording 'spk0-utt0': the data has 8000 Hz but "
                                     r"--sample-frequency=16000"),
        (["--sample-frequency=8000", f"scp:{d}/none.scp"] + out, r"none\.scp: no such file"),
        (["--sample-frequency=8000", f"scp:{d}/wav.scp"], r"wrong number of arguments"),
        (["--sample-frequency=8000", f"scp:{d}/wav.scp", "ark,scp:only-one"], r"bad wspecifier"),
        (["--sample-frequency=8000", f"scp:{d}/wav.scp", f"ark:| gzip -c > {tmp_path}/o.ark"],
         r"pipes are not supported here; write ark:- and pipe that"),
    ]
    for args, msg in cases:
        rc, err = run_main(compute_mfcc_feats, args, capsys)
        lines = [ln for ln in err.splitlines() if ln.startswith("ERROR")]
        assert rc == 1 and len(lines) == 1, err
        import re
        assert re.search(msg, lines[0]), lines[0]
        assert not os.path.exists(tmp_path / "o.ark") and not os.path.exists(tmp_path / "o.scp")
    # a bad wav.scp line: that utterance fails with a warning naming it, the others are written
    # and the program succeeds (Kaldi: it fails only when no utterance got features)
    with open(d / "wav.scp", "a") as f:
        f.write("spk9-utt9 cat /no/such/file.wav |\n")
    rc, err = run_main(compute_mfcc_feats, ["--sample-frequency=8000", f"scp:{d}/wav.scp"] + out, capsys)
    assert rc == 0, err
    warn = [ln for ln in err.splitlines() if ln.startswith("WARNING")]
    assert len(warn) == 1 and "spk9-utt9" in warn[0] and "wav.scp:5: command failed" in warn[0], err
    assert "Done 4 out of 5 utterances" in err and "1 failed" in err
    assert sorted(kaldiio.load_scp(str(tmp_path / "o.scp"))) == sorted(f"spk{i % 2}-utt{i}" for i in range(4))


def test_read_features_from_a_data_dir(tmp_path, capsys):
    from pynnet.bin.feat import compute_cmvn_stats, compute_mfcc_feats
    d = make_data_dir(tmp_path / "data")
    assert compute_mfcc_feats(["--sample-frequency=8000", f"scp:{d}/wav.scp",
                               f"ark,scp:{tmp_path}/f.ark,{d}/feats.scp"]) == 0
    with pytest.raises(PynnetError, match="no cmvn.scp"):
        next(read_features(d))
    assert compute_cmvn_stats([f"--spk2utt=ark:{d}/spk2utt", f"scp:{d}/feats.scp",
                               f"ark,scp:{tmp_path}/c.ark,{d}/cmvn.scp"]) == 0
    raw = dict(kaldiio.load_scp(str(d / "feats.scp")))
    spk0 = np.vstack([raw["spk0-utt0"], raw["spk0-utt2"]]).astype(np.float64)
    got = dict(read_features(d, delta_order=2, splice=1))
    assert list(got) == list(raw) and all(m.dtype == np.float32 for m in got.values())
    assert got["spk0-utt0"].shape == (raw["spk0-utt0"].shape[0], 13 * 3 * 3)
    assert feature_dim(d, delta_order=2, splice=1) == 117 and feature_dim(d) == 13
    normed = dict(read_features(d, norm_vars=True))
    want = (raw["spk0-utt2"] - spk0.mean(0)) / spk0.std(0)
    assert np.allclose(normed["spk0-utt2"], want, atol=1e-4)
    # CMVN over the speaker's frames: the speaker's normalized frames have mean 0, std 1
    both = np.vstack([normed["spk0-utt0"], normed["spk0-utt2"]])
    assert np.allclose(both.mean(0), 0, atol=1e-4) and np.allclose(both.std(0), 1, atol=1e-4)
    some = dict(read_features(d, norm_vars=True, utts=["spk0-utt2", "nobody"]))
    assert list(some) == ["spk0-utt2"] and np.array_equal(some["spk0-utt2"], normed["spk0-utt2"])
    middle = dict(read_features(d, cmvn=False, splice=1))["spk1-utt1"]
    assert np.array_equal(middle[5, 13:26], raw["spk1-utt1"][5])


def test_keys_with_non_breaking_space_through_the_feature_programs(tmp_path, capsys):
    # A Kaldi key may hold U+00A0 (IsToken refuses ASCII spaces and control characters only) and is
    # cut from its line at spaces and tabs only: the feature writer refused 'spk\u00a00-u0', and
    # kaldiio's scp readers, read_features(utts=...) and feature_dim cut it at the U+00A0
    from pynnet.bin.feat import compute_cmvn_stats, compute_mfcc_feats
    from pynnet.feat.tables import MatrixWriter, read_matrices
    d = tmp_path / "data"
    d.mkdir()
    utts = [(f"spk\u00a0{i % 2}-u\u00a0{i}", f"spk\u00a0{i % 2}", d / f"{i}.wav") for i in range(4)]
    utts.sort(key=lambda u: u[0].encode())
    for i, (_, _, wav) in enumerate(utts):
        sf.write(str(wav), speechlike(4000 + 400 * i, 8000, seed=i).astype(np.int16), 8000, subtype="PCM_16")
    w = lambda name, lines: (d / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")  # noqa: E731
    w("wav.scp", [f"{u}\t {wav}" for u, _, wav in utts])
    w("utt2spk", [f"{u} {s}" for u, s, _ in utts])
    w("spk2utt", [f"{s}\t" + "  ".join(u for u, t, _ in utts if t == s) for s in ("spk\u00a00", "spk\u00a01")])
    assert compute_mfcc_feats(["--sample-frequency=8000", f"scp:{d}/wav.scp",
                               f"ark,scp:{tmp_path}/f.ark,{d}/feats.scp"]) == 0, capsys.readouterr().err
    keys = [u for u, _, _ in utts]
    scp = (d / "feats.scp").read_text(encoding="utf-8").splitlines()
    assert [x.split(" ", 1)[0] for x in scp] == keys
    w("feats.scp", [x.replace(" ", "\t", 1) for x in scp[:2]] + scp[2:])  # a tab separates too
    assert [k for k, _ in read_matrices(f"scp:{d}/feats.scp")] == keys
    assert compute_cmvn_stats([f"--spk2utt=ark:{d}/spk2utt", f"scp:{d}/feats.scp",
                               f"ark,scp:{tmp_path}/c.ark,{d}/cmvn.scp"]) == 0, capsys.readouterr().err
    assert "Did not find" not in capsys.readouterr().err
    got = dict(read_features(d))
    assert list(got) == keys and feature_dim(d) == 13
    assert list(dict(read_features(d, utts=[keys[1]]))) == [keys[1]]
    raw = dict(read_matrices(f"scp:{d}/feats.scp"))
    spk = np.vstack([raw[keys[0]], raw[keys[1]]]).astype(np.float64)  # speaker 0
    assert np.allclose(got[keys[0]], raw[keys[0]] - spk.mean(0), atol=1e-4)
    # a warp factor is an ASCII number ('\u00a01.0' is not; float() took it)
    w("spk2warp", ["spk\u00a00 0.9", "spk\u00a01 \u00a01.0"])
    assert compute_mfcc_feats(["--sample-frequency=8000", f"--vtln-map=ark:{d}/spk2warp", f"--utt2spk=ark:{d}/utt2spk",
                               f"scp:{d}/wav.scp", "ark:/dev/null"]) == 1
    assert "spk2warp:2: VTLN warp factor: '\u00a01.0' is not a number" in capsys.readouterr().err
    with MatrixWriter(f"ark:{tmp_path}/x.ark") as mw:
        for bad in ("u 1", "u\t1", "u\x01", "u\x7f", ""):
            with pytest.raises(PynnetError, match="bad key"):
                mw.write(bad, np.zeros((1, 1)))


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{ROOT}/utils:{ROOT}/tools/venv/bin:" + env["PATH"]
    env["LC_ALL"] = "C"
    return env


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "utils", "run.pl")), reason="needs utils/run.pl")
def test_make_mfcc_and_cmvn_scripts(tmp_path):
    d = make_data_dir(tmp_path / "data" / "train", n_utts=4)
    # one recording holding two segments; the segments become the utterances
    seg = tmp_path / "data" / "seg"
    seg.mkdir()
    x = speechlike(8000 * 2, 8000).astype(np.int16)
    sf.write(str(seg / "rec1.wav"), x, 8000, subtype="PCM_16")
    (seg / "wav.scp").write_text(f"rec1 {seg}/rec1.wav\n")
    (seg / "segments").write_text("rec1-a rec1 0.0 0.9\nrec1-b rec1 0.9 2.2\n")
    (seg / "utt2spk").write_text("rec1-a rec1\nrec1-b rec1\n")
    (seg / "spk2utt").write_text("rec1 rec1-a rec1-b\n")
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "mfcc.conf").write_text("--use-energy=false\n--sample-frequency=8000\n")
    (conf / "fbank.conf").write_text("--num-mel-bins=40\n--sample-frequency=8000\n")
    env = _env()
    r = subprocess.run(f"{ROOT}/steps/make_mfcc.sh --nj 2 --cmd run.pl data/train exp/make_mfcc/train mfcc && "
                       f"{ROOT}/steps/compute_cmvn_stats.sh data/train exp/make_mfcc/train mfcc && "
                       f"{ROOT}/steps/make_fbank.sh --nj 1 data/seg exp/make_fbank/seg fbank",
                       shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Succeeded creating MFCC features for train" in r.stdout
    assert "Succeeded creating FBANK features for seg" in r.stdout
    feats = kaldiio.load_scp(str(d / "feats.scp"))
    assert list(feats) == [ln.split()[0] for ln in open(d / "utt2spk")]
    assert all(str(tmp_path / "mfcc") in ln for ln in open(d / "feats.scp"))    # absolute ark paths
    assert (d / "frame_shift").read_text() == "0.010\n" and (d / "conf" / "mfcc.conf").exists()
    nf = dict(ln.split() for ln in open(d / "utt2num_frames"))
    assert {u: int(n) for u, n in nf.items()} == {u: m.shape[0] for u, m in feats.items()}
    assert sorted(kaldiio.load_scp(str(d / "cmvn.scp"))) == ["spk0", "spk1"]
    assert feature_dim(d, delta_order=2) == 39
    # Kaldi's bare --fake: stats that normalise nothing
    r = subprocess.run(f"{ROOT}/steps/compute_cmvn_stats.sh --fake data/train exp/make_mfcc/train fakecmvn",
                       shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    fake = kaldiio.load_scp(str(d / "cmvn.scp"))
    utt = next(u for u in feats if u.startswith("spk0"))
    assert np.allclose(apply_cmvn(feats[utt], fake["spk0"], norm_vars=True), feats[utt], atol=1e-5)
    r = subprocess.run(f"{ROOT}/steps/compute_cmvn_stats.sh --fake-dims 13:14 data/train", shell=True, cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--fake-dims is not supported" in r.stderr
    subprocess.run(f"{ROOT}/steps/compute_cmvn_stats.sh data/train exp/make_mfcc/train mfcc", shell=True,
                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True)
    sfeats = kaldiio.load_scp(str(seg / "feats.scp"))
    assert {u: m.shape for u, m in sfeats.items()} == {"rec1-a": (88, 40), "rec1-b": (108, 40)}   # b clipped at 2.0 s
    # compressed by default (as Kaldi): close to the uncompressed computation
    fc = FeatureComputer("fbank", values("fbank", sample_frequency=8000.0, num_mel_bins=40))
    assert np.allclose(sfeats["rec1-b"], fc.compute(x[7200:16000].astype(np.float32), "rec1-b"), atol=0.1)

    # a job that fails: a clear message naming the logs, exit status 1, no feats.scp
    bad = make_data_dir(tmp_path / "data" / "bad", n_utts=2, pipe_last=False)
    with open(bad / "wav.scp", "a") as f:
        f.write("spk9-x /no/such.wav\n")
    with open(bad / "utt2spk", "a") as f:
        f.write("spk9-x spk9\n")
    (bad / "spk2utt").write_text("spk0 spk0-utt0\nspk1 spk1-utt1\nspk9 spk9-x\n")
    r = subprocess.run(f"{ROOT}/steps/make_mfcc.sh --nj 1 data/bad exp/bad mfcc", shell=True, cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "no such audio file" in r.stderr and "exp/bad/make_mfcc_bad.*.log" in r.stderr
    assert not (bad / "feats.scp").exists()


def test_vtln_map_and_filters_through_pipes(tmp_path, capsys):
    from pynnet.bin.feat import compute_mfcc_feats
    d = make_data_dir(tmp_path / "data", n_utts=2, pipe_last=False)
    (tmp_path / "spk2warp").write_text("spk0 0.9\nspk1 1.0\n")
    assert compute_mfcc_feats(["--sample-frequency=8000", "--dither=0", f"--vtln-map=ark:{tmp_path}/spk2warp",
                               f"--utt2spk=ark:{d}/utt2spk", f"scp:{d}/wav.scp",
                               f"ark,scp:{tmp_path}/v.ark,{tmp_path}/v.scp"]) == 0
    got = kaldiio.load_scp(str(tmp_path / "v.scp"))
    fc = FeatureComputer("mfcc", values("mfcc", sample_frequency=8000.0, dither=0.0))
    for utt, warp in (("spk0-utt0", 0.9), ("spk1-utt1", 1.0)):
        x, _ = sf.read(str(d / f"{utt}.wav"), dtype="int16")
        assert np.array_equal(got[utt], fc.compute(x.astype(np.float32), utt, vtln_warp=warp))
    assert not np.allclose(got["spk0-utt0"], fc.compute(
        sf.read(str(d / "spk0-utt0.wav"), dtype="int16")[0].astype(np.float32), "u"), atol=1e-2)
    # a speaker without a warp factor: that utterance fails, clearly
    (tmp_path / "spk2warp").write_text("spk1 1.0\n")
    rc = compute_mfcc_feats(["--sample-frequency=8000", f"--vtln-map=ark:{tmp_path}/spk2warp",
                             f"--utt2spk=ark:{d}/utt2spk", f"scp:{d}/wav.scp", "ark:/dev/null"])
    err = capsys.readouterr().err
    assert rc == 0 and "No vtln-map entry for utterance-id (or speaker-id) spk0: producing no output " \
        "for utterance spk0-utt0" in err

    # Kaldi-style pipes between the programs: apply-cmvn | add-deltas | splice-feats
    from pynnet.bin.feat import compute_cmvn_stats, feat_to_dim
    assert compute_cmvn_stats([f"--spk2utt=ark:{d}/spk2utt", f"scp:{tmp_path}/v.scp", f"ark:{tmp_path}/cmvn.ark"]) == 0
    r = subprocess.run(f"pynnet-apply-cmvn --norm-vars=true --utt2spk=ark:{d}/utt2spk ark:{tmp_path}/cmvn.ark "
                       f"scp:{tmp_path}/v.scp ark:- | pynnet-add-deltas ark:- ark:- | "
                       f"pynnet-splice-feats --left-context=1 --right-context=1 ark:- ark,t:{tmp_path}/out.txt",
                       shell=True, env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = dict(kaldiio.load_ark(str(tmp_path / "out.txt")))
    raw = got["spk0-utt0"]
    want = splice_feats(add_deltas(apply_cmvn(raw, cmvn_stats(raw), norm_vars=True)), 1)
    assert out["spk0-utt0"].shape == (raw.shape[0], 117) and np.allclose(out["spk0-utt0"], want, atol=1e-4)
    # CMVN stats through an scp whose offset is wrong: one ERROR line naming the file, no output
    assert compute_cmvn_stats([f"--spk2utt=ark:{d}/spk2utt", f"scp:{tmp_path}/v.scp",
                               f"ark,scp:{tmp_path}/cmvn2.ark,{tmp_path}/cmvn2.scp"]) == 0
    bad = tmp_path / "cmvn_bad.scp"
    bad.write_text("".join(f"{line.split()[0]} {tmp_path}/cmvn2.ark:3\n"
                           for line in (tmp_path / "cmvn2.scp").read_text().splitlines()))
    r = subprocess.run(["pynnet-apply-cmvn", f"--utt2spk=ark:{d}/utt2spk", f"scp:{bad}",
                        f"scp:{tmp_path}/v.scp", f"ark:{tmp_path}/never.ark"], env=_env(), capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert [x for x in r.stderr.splitlines() if x.startswith("ERROR")] == [r.stderr.strip().splitlines()[-1]]
    assert str(bad) in r.stderr and not (tmp_path / "never.ark").exists()
    # --fake-stats (steps/compute_cmvn_stats.sh --fake true): stats that change nothing
    assert compute_cmvn_stats(["--fake-stats=true", f"--spk2utt=ark:{d}/spk2utt", f"scp:{tmp_path}/v.scp",
                               f"ark:{tmp_path}/fake.ark"]) == 0
    fake = dict(kaldiio.load_ark(str(tmp_path / "fake.ark")))
    assert fake["spk0"][0, -1] == raw.shape[0]
    assert np.allclose(apply_cmvn(raw, fake["spk0"], norm_vars=True), raw)
    capsys.readouterr()
    assert feat_to_dim([f"ark:{tmp_path}/out.txt"]) == 0
    assert capsys.readouterr().out.strip() == "117"
    with pytest.raises(SystemExit) as e:
        compute_mfcc_feats(["--help"])
    err = capsys.readouterr().err
    assert e.value.code == 0 and "--sample-frequency" in err and "Usage:" in err


def test_read_features_errors(tmp_path):
    with pytest.raises(PynnetError, match="no such data directory"):
        next(read_features(tmp_path / "nope"))
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(PynnetError, match="no feats.scp"):
        next(read_features(d))
    (d / "feats.scp").write_text(f"u1 {tmp_path}/gone.ark:5\n")
    with pytest.raises(PynnetError, match=r"feats\.scp:1: cannot read features"):
        next(read_features(d, cmvn=False))
    with pytest.raises(ValueError):
        next(read_features(d, delta_order=-1))


def test_read_matrices_from_a_command(tmp_path):
    # Kaldi's "ark:cmd |": the command's failure is an error (kaldiio alone returns a short table)
    from pynnet.feat.tables import read_matrices
    mats = {"u1": np.arange(6, dtype=np.float32).reshape(3, 2), "u2": np.ones((4, 2), np.float32)}
    ark = tmp_path / "a.ark"
    with kaldiio.WriteHelper(f"ark:{ark}") as w:
        for k, m in mats.items():
            w(k, m)
    got = dict(read_matrices(f"ark:cat {ark} |"))
    assert got.keys() == mats.keys() and all(np.array_equal(got[k], mats[k]) for k in mats)
    with pytest.raises(PynnetError, match=r"'cat .*missing.ark \| cat \|' failed \(exit code 1\)"):
        list(read_matrices(f"ark:cat {tmp_path}/missing.ark | cat |"))
    with pytest.raises(PynnetError, match=r"'\(cat .*a.ark; exit 3\) \|' failed \(exit code 3\)"):
        list(read_matrices(f"ark:(cat {ark}; exit 3) |"))
    with pytest.raises(PynnetError, match=r"cannot read matrices from 'echo garbage \|'"):
        list(read_matrices("ark:echo garbage |"))
    # a later stage that stops reading on purpose (SIGPIPE upstream) is not a failure
    big = tmp_path / "big.ark"
    big.write_bytes(ark.read_bytes() * 20000)    # more than a pipe buffer: cat gets SIGPIPE
    assert list(dict(read_matrices(f"ark:cat {big} | head -c {ark.stat().st_size} |"))) == ["u1", "u2"]
    # a reader that stops early does not wait for an endless command, and stops all its stages
    pid_file = tmp_path / "pid"
    g = read_matrices(f"ark:cat {ark}; sh -c 'echo $$ > {pid_file}; exec sleep 30' | cat |")
    assert next(g)[0] == "u1"
    import time
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.02)
    g.close()
    pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the command's sleep is still running")
