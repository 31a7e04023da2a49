"""Audio reading: NIST SPHERE (PCM, mu-law, 1/2 channels, 8/16 kHz), wav.scp paths/pipes/archives,
the sph2pipe fallback, segments, channel selection, and the errors users get for bad input."""
from __future__ import annotations

import shutil
import struct
import warnings

import numpy as np
import pytest
import soundfile as sf

from pynnet.io.audio import (AudioWarning, alaw_to_linear, iter_utterances, read_audio_file,
                             read_rxfilename, read_segments, read_sphere, read_wav_scp,
                             select_channel, ulaw_to_linear)
from pynnet.io.errors import PynnetError


# -- helpers that write test files ------------------------------------------------------------

def linear_to_ulaw(x: np.ndarray) -> np.ndarray:
    """Reference G.711 mu-law encoder (the classic Sun/CCITT algorithm), for generating files."""
    bias, clip = 0x84, 32635
    x = x.astype(np.int32)
    sign = np.where(x < 0, 0x80, 0)
    mag = np.minimum(np.abs(x), clip) + bias
    top = mag >> 7                       # the exponent is the highest set bit of bits 7..14
    exponent = np.where(top > 0, np.floor(np.log2(np.maximum(top, 1))), 0).astype(np.int32)
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)


def write_sphere(path, samples: np.ndarray, rate: int, coding: str = "pcm", byte_format: str = "01",
                 extra_fields: str = "", raw_data: bytes | None = None) -> None:
    """Write a NIST SPHERE file; ``samples`` is (n, channels) int16 (or uint8 codes for ulaw)."""
    n, ch = samples.shape
    if coding in ("ulaw", "mu-law"):
        data = samples.astype(np.uint8).tobytes()
        nbytes, bf = 1, "1"
    else:
        data = samples.astype("<i2" if byte_format == "01" else ">i2").tobytes()
        nbytes, bf = 2, byte_format
    fields = (f"sample_count -i {n}\nsample_rate -i {rate}\nchannel_count -i {ch}\n"
              f"sample_n_bytes -i {nbytes}\nsample_byte_format -s{len(bf)} {bf}\n"
              f"sample_coding -s{len(coding)} {coding}\nsample_sig_bits -i 16\n"
              f"database_id -s12 test corpus\n{extra_fields}end_head\n")
    head = ("NIST_1A\n   1024\n" + fields).encode()
    head += b" " * (1024 - len(head))
    with open(path, "wb") as f:
        f.write(head + (data if raw_data is None else raw_data))


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# -- G.711 ---------------------------------------------------------------------------------------

def test_ulaw_table_known_values_and_roundtrip(rng):
    assert ulaw_to_linear(np.array([0x00, 0x7F, 0x80, 0xFF, 0x0F, 0x8F])).tolist() == \
        [-32124, 0, 32124, 0, -16764, 16764]
    lin = ulaw_to_linear(np.arange(256))
    # codes 0..127 are negative and increasing in magnitude downwards, 128..255 the mirror image
    assert np.all(np.diff(lin[:128].astype(int)) > 0) and np.all(lin[128:] == -lin[:128])
    x = rng.integers(-32000, 32000, 5000).astype(np.int16)
    y = ulaw_to_linear(linear_to_ulaw(x)).astype(int)
    # mu-law quantisation error is at most half a step: step = 2^(exponent+3)
    assert np.all(np.abs(y - x) <= np.maximum(16, np.abs(x) / 16 + 8))


def test_alaw_known_values():
    assert alaw_to_linear(np.array([0xD5, 0x55, 0x2A, 0xAA])).tolist() == [8, -8, -32256, 32256]


# -- SPHERE ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [8000, 16000])
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("byte_format", ["01", "10"])
def test_sphere_pcm(tmp_path, rng, rate, channels, byte_format):
    x = rng.integers(-32768, 32767, (rate // 10, channels)).astype(np.int16)
    p = tmp_path / "a.sph"
    write_sphere(p, x, rate, "pcm", byte_format)
    y, r = read_sphere(p)
    assert r == rate and y.shape == x.shape and np.array_equal(y, x)
    z, r2 = read_audio_file(p)          # dispatches on the NIST_1A magic, int16 scale floats
    assert r2 == rate and z.dtype == np.float32 and np.array_equal(z, x.astype(np.float32))


@pytest.mark.parametrize("coding", ["ulaw", "mu-law"])
@pytest.mark.parametrize("rate", [8000, 16000])
def test_sphere_ulaw_two_channel(tmp_path, rng, coding, rate):
    lin = rng.integers(-20000, 20000, (rate // 20, 2)).astype(np.int16)
    codes = linear_to_ulaw(lin.ravel()).reshape(lin.shape)
    p = tmp_path / "b.sph"
    write_sphere(p, codes, rate, coding)
    y, r = read_sphere(p)
    assert r == rate and y.shape == lin.shape
    assert np.array_equal(y, ulaw_to_linear(codes))
    # the channels stay apart (interleaving is undone correctly)
    assert np.corrcoef(y[:, 0], lin[:, 0])[0, 1] > 0.999 and np.corrcoef(y[:, 1], lin[:, 1])[0, 1] > 0.999


def test_sphere_shorten_and_bad_files(tmp_path, rng):
    x = rng.integers(-100, 100, (800, 1)).astype(np.int16)
    p = tmp_path / "sw02001.sph"
    write_sphere(p, x, 8000, "pcm,embedded-shorten-v2.00", raw_data=b"ajkg" + bytes(100))
    with pytest.raises(PynnetError, match=r"sw02001\.sph: shorten-compressed SPHERE is not supported"):
        read_sphere(p)
    t = tmp_path / "trunc.sph"
    write_sphere(t, x, 8000, raw_data=x.tobytes()[:100])
    with pytest.raises(PynnetError, match=r"trunc\.sph: truncated SPHERE file"):
        read_sphere(t)
    w = tmp_path / "notsph.sph"
    w.write_bytes(b"RIFF....WAVE")
    with pytest.raises(PynnetError, match=r"notsph\.sph: not a NIST SPHERE file"):
        read_sphere(w)


# -- wav.scp entries -----------------------------------------------------------------------------------

def _wav(path, x, rate):
    sf.write(str(path), x, rate, subtype="PCM_16")


def test_files_pipes_and_archives(tmp_path, rng):
    x = rng.integers(-30000, 30000, (4000, 1)).astype(np.int16)
    _wav(tmp_path / "a.wav", x, 8000)
    sf.write(str(tmp_path / "a.flac"), x, 8000, subtype="PCM_16")
    for rx in [str(tmp_path / "a.wav"), str(tmp_path / "a.flac"), f"cat {tmp_path}/a.wav |",
               f"cat {tmp_path}/a.wav | cat |"]:
        y, r = read_rxfilename(rx)
        assert r == 8000 and np.array_equal(y, x.astype(np.float32)), rx

    # A WAV streamed to a pipe whose writer could not seek back: sizes 0xFFFFFFFF.
    raw = bytearray((tmp_path / "a.wav").read_bytes())
    assert raw[36:40] == b"data"
    struct.pack_into("<I", raw, 4, 0xFFFFFFFF)
    struct.pack_into("<I", raw, 40, 0xFFFFFFFF)
    (tmp_path / "streamed.bin").write_bytes(bytes(raw))
    y, _ = read_rxfilename(f"cat {tmp_path}/streamed.bin |")
    assert np.array_equal(y, x.astype(np.float32))

    # Kaldi wave archives: wav.scp values like wav.ark:OFFSET
    import kaldiio
    kaldiio.save_ark(str(tmp_path / "w.ark"), {"u1": (8000, x[:, 0])}, scp=str(tmp_path / "w.scp"))
    rx = open(tmp_path / "w.scp").read().split()[1]
    y, r = read_rxfilename(rx)
    assert r == 8000 and np.array_equal(y[:, 0], x[:, 0].astype(np.float32))


def test_pipe_and_path_errors(tmp_path):
    with pytest.raises(PynnetError, match=r"wav\.scp:3: command failed \(exit status 1\): 'false'"):
        read_rxfilename("false |", "wav.scp:3")
    with pytest.raises(PynnetError, match=r"wav\.scp:4: command failed .*no/such\.wav"):
        read_rxfilename("cat no/such.wav |", "wav.scp:4")
    with pytest.raises(PynnetError, match=r"wav\.scp:5: no audio data"):
        read_rxfilename("true |", "wav.scp:5")
    with pytest.raises(PynnetError, match=r"wav\.scp:6: no such audio file: 'nothere\.wav'"):
        read_rxfilename("nothere.wav", "wav.scp:6")
    (tmp_path / "junk.wav").write_bytes(b"this is not audio at all")
    with pytest.raises(PynnetError, match=r"junk\.wav: cannot read audio"):
        read_rxfilename(str(tmp_path / "junk.wav"))


@pytest.mark.skipif(shutil.which("sph2pipe") is not None, reason="sph2pipe is installed: the real one runs")
def test_sph2pipe_fallback_takes_the_channel(tmp_path, rng):
    lin = rng.integers(-20000, 20000, (1600, 2)).astype(np.int16)
    codes = linear_to_ulaw(lin.ravel()).reshape(lin.shape)
    write_sphere(tmp_path / "sw02001.sph", codes, 8000, "ulaw")
    expect = ulaw_to_linear(codes).astype(np.float32)
    for c in (1, 2):
        y, r = read_rxfilename(f"sph2pipe -f wav -p -c {c} {tmp_path}/sw02001.sph |")
        assert r == 8000 and y.shape == (1600, 1) and np.array_equal(y[:, 0], expect[:, c - 1])
    y, _ = read_rxfilename(f"/opt/kaldi/tools/sph2pipe_v2.5/sph2pipe -f wav -p {tmp_path}/sw02001.sph |")
    assert np.array_equal(y, expect)
    y, _ = read_rxfilename(f"sph2pipe -f wav -p -c 1 -t 0.05:0.1 {tmp_path}/sw02001.sph |")
    assert np.array_equal(y[:, 0], expect[400:800, 0])
    with pytest.raises(PynnetError, match=r"sph2pipe -c 3: file has 2 channel\(s\)"):
        read_rxfilename(f"sph2pipe -f wav -p -c 3 {tmp_path}/sw02001.sph |")


# -- wav.scp / segments tables ------------------------------------------------------------------------

def test_wav_scp_and_segments_errors(tmp_path):
    (tmp_path / "wav.scp").write_text("a x.wav\nb\n")
    with pytest.raises(PynnetError, match=r"wav\.scp:2: expected at least 2 fields"):
        read_wav_scp(tmp_path / "wav.scp")
    (tmp_path / "wav.scp").write_text("a x.wav\na y.wav\n")
    with pytest.raises(PynnetError, match=r"wav\.scp:2: duplicate recording id 'a'"):
        read_wav_scp(tmp_path / "wav.scp")
    (tmp_path / "wav.scp").write_text("a  |\n")
    with pytest.raises(PynnetError, match=r"wav\.scp:1: empty command"):
        read_wav_scp(tmp_path / "wav.scp")
    seg = tmp_path / "segments"
    for text, msg in [("u1 a 1.0 0.5\n", r"segments:1: start time 1\.0 >= end time 0\.5"),
                      ("u1 a 0 1\nu2 a 2.0 2.0\n", r"segments:2: start time 2\.0 >= end time 2\.0"),
                      ("u1 a x 1\n", r"segments:1: start/end times must be numbers"),
                      ("u1 a 0\n", r"segments:1: expected at least 4 fields"),
                      ("u1 a -1 2\n", r"segments:1: negative start time")]:
        seg.write_text(text)
        with pytest.raises(PynnetError, match=msg):
            read_segments(seg)
    seg.write_text("u1 a 0 1.5\nu2 a 1.5 -1 1\n")
    s = read_segments(seg)
    assert [(x.utt, x.reco, x.start, x.end, x.channel) for x in s] == \
        [("u1", "a", 0.0, 1.5, -1), ("u2", "a", 1.5, -1.0, 1)]


def test_segments_cut_clip_and_skip(tmp_path, rng):
    x = rng.integers(-30000, 30000, (8000 * 2, 1)).astype(np.int16)   # 2.0 s
    _wav(tmp_path / "r1.wav", x, 8000)
    (tmp_path / "wav.scp").write_text(f"r1 {tmp_path}/r1.wav\nr2 cat {tmp_path}/r1.wav |\n")
    (tmp_path / "segments").write_text(
        "s1 r1 0.25 0.75\n"       # plain cut
        "s2 r1 1.5 2.3\n"         # past the end by 0.3 s: clipped, warning
        "s3 r1 1.0 3.0\n"         # past by 1 s (> 0.5 s overshoot): skipped, warning
        "s4 r1 2.5 2.8\n"         # starts after the end: skipped
        "s5 r2 0 -1\n"            # -1: to the end of the recording
        "s6 r2 0.0 0.05\n")       # shorter than 0.1 s: skipped
    failures: list[str] = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = {u: d for u, d, r, c in iter_utterances(tmp_path / "wav.scp", tmp_path / "segments",
                                                       failures=failures)}
    msgs = [str(m.message) for m in w if issubclass(m.category, AudioWarning)]
    assert sorted(got) == ["s1", "s2", "s5"] and failures == ["s3", "s4", "s6"]
    assert np.array_equal(got["s1"][:, 0], x[2000:6000, 0])
    assert np.array_equal(got["s2"][:, 0], x[12000:, 0])
    assert np.array_equal(got["s5"][:, 0], x[:, 0])
    assert any("s2" in m and "clipping" in m for m in msgs)
    assert any("s3" in m and "too far past the end" in m for m in msgs)
    with pytest.raises(PynnetError, match=r"wav\.scp:1: sample frequency mismatch for recording 'r1': "
                                          r"the data has 8000 Hz but --sample-frequency=16000"):
        list(iter_utterances(tmp_path / "wav.scp", tmp_path / "segments", sample_rate=16000))
    (tmp_path / "segments").write_text("s1 r9 0 1\n")
    with pytest.raises(PynnetError, match=r"segments:1: recording 'r9' of utterance 's1' is not in"):
        list(iter_utterances(tmp_path / "wav.scp", tmp_path / "segments"))


def test_ids_and_times_split_at_spaces_and_tabs_only(tmp_path, rng):
    # Kaldi splits segments and wav.scp at spaces and tabs: 'u\u00a01' and 'r\u00a01' are one id
    # each (str.split() made the recording 'r' and the start '1'), a file name may end in U+00A0;
    # '0\u00a0' is no time (float() took it), '\u0661' no channel (int() read 1)
    x = rng.integers(-30000, 30000, (8000 * 2, 1)).astype(np.int16)
    _wav(tmp_path / "r1.wav", x, 8000)
    (tmp_path / "r1.wav").rename(tmp_path / "r1.wav\u00a0")
    (tmp_path / "wav.scp").write_text(f"r\u00a01\t {tmp_path}/r1.wav\u00a0\n", encoding="utf-8")
    seg = tmp_path / "segments"
    seg.write_text("u\u00a01  r\u00a01\t0.25 0.75\r\nu2 r\u00a01 1.0\t\t1.5 \n", encoding="utf-8")
    assert [(s.utt, s.reco, s.start, s.end, s.channel) for s in read_segments(seg)] == \
        [("u\u00a01", "r\u00a01", 0.25, 0.75, -1), ("u2", "r\u00a01", 1.0, 1.5, -1)]
    got = {u: d for u, d, r, c in iter_utterances(tmp_path / "wav.scp", seg)}
    assert sorted(got) == ["u2", "u\u00a01"]
    assert np.array_equal(got["u\u00a01"][:, 0], x[2000:6000, 0])
    for line, msg in [("u1 r1 0\u00a0 1", "start/end times must be numbers"),
                      ("u1 r1 0 1_0", "start/end times must be numbers"),
                      ("u1 r1\u00a00 1", "expected at least 4 fields"),
                      ("u1 r1 0 1 \u0661", "channel must be an integer")]:
        seg.write_text(line + "\n", encoding="utf-8")
        with pytest.raises(PynnetError, match="segments:1: " + msg):
            read_segments(seg)


def test_unreadable_recording_is_a_failure_not_a_crash(tmp_path, rng):
    x = rng.integers(-30000, 30000, (800, 1)).astype(np.int16)
    _wav(tmp_path / "ok.wav", x, 8000)
    (tmp_path / "wav.scp").write_text(f"a {tmp_path}/ok.wav\nb {tmp_path}/missing.wav\n")
    failures: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = [u for u, *_ in iter_utterances(tmp_path / "wav.scp", failures=failures)]
    assert ids == ["a"] and failures == ["b"]
    with pytest.raises(PynnetError, match=r"wav\.scp:2: no such audio file"):
        list(iter_utterances(tmp_path / "wav.scp"))


def test_select_channel_kaldi_semantics():
    d = np.arange(12, dtype=np.float32).reshape(6, 2)
    with pytest.warns(AudioWarning, match="defaulting to zero"):
        assert np.array_equal(select_channel(d, -1, "u"), d[:, 0])
    assert np.array_equal(select_channel(d, 1, "u"), d[:, 1])
    with pytest.warns(AudioWarning, match="has 2 channels but you specified channel 2"):
        assert select_channel(d, 2, "u") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(select_channel(d[:, :1], -1, "u"), d[:, 0])


def test_unreadable_audio_messages_say_why(tmp_path):
    # soundfile named its BytesIO ("Error opening <_io.BytesIO object at 0x..>"), kaldiio's failed
    # assertion had no text: the reasons are now readable
    import kaldiio
    import numpy as np

    from pynnet.io.audio import read_rxfilename
    from pynnet.io.errors import PynnetError
    with pytest.raises(PynnetError) as e:
        read_rxfilename("echo notawav |", "wav.scp:1")
    assert str(e.value) == "wav.scp:1: cannot decode audio: Format not recognised."
    ark = str(tmp_path / "w.ark")
    with kaldiio.WriteHelper(f"ark:{ark}") as w:
        w("u1", (8000, np.zeros(800, dtype=np.int16)))
    with pytest.raises(PynnetError) as e:
        read_rxfilename(f"{ark}:99999", "wav.scp:2")
    assert str(e.value).startswith(f"wav.scp:2: cannot read wave from archive '{ark}:99999': ")
    assert str(e.value).endswith("(offset past the end?)")
