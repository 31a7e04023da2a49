"""Audio for Kaldi data dirs: wav.scp entries (files, ``cmd |`` pipes, ``ark:offset``), NIST
SPHERE read directly (no sph2pipe needed), ``segments``, channel selection.

Samples come back as float32 on the 16-bit integer scale (a full-scale 16-bit sample is 32767),
exactly what Kaldi's ``WaveData`` holds, so features match Kaldi's.
"""
from __future__ import annotations

import io
import math
import os
import re
import shlex
import shutil
import struct
import subprocess
import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from pynnet.io.errors import PynnetError, fail
from pynnet.io.tables import FIELD_SEPS, ascii_float, ascii_int, read_table_lines, split_fields

__all__ = ["AudioWarning", "read_sphere", "read_audio_file", "read_wav_bytes", "read_rxfilename",
           "read_wav_scp", "read_segments", "Segment", "select_channel", "iter_utterances",
           "ulaw_to_linear", "alaw_to_linear", "linear_to_ulaw", "write_sphere"]


class AudioWarning(UserWarning):
    """Kaldi prints these as WARNING lines: a problem with one recording, not with the setup."""


def _warn(msg: str) -> None:
    warnings.warn(msg, AudioWarning, stacklevel=3)


# ----------------------------------------------------------------------------------------------
# G.711 companding (SPHERE 'ulaw'/'mu-law' and 'alaw' sample codings), as sph2pipe decodes them.

def _build_ulaw_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


def _build_alaw_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (a >> 4) & 0x07
    mantissa = a & 0x0F
    magnitude = np.where(exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << (exponent - 1))
    return np.where(a & 0x80, magnitude, -magnitude).astype(np.int16)


_ULAW = _build_ulaw_table()
_ALAW = _build_alaw_table()


def ulaw_to_linear(codes: np.ndarray) -> np.ndarray:
    """G.711 mu-law bytes -> 16-bit linear samples (int16)."""
    return _ULAW[np.asarray(codes, dtype=np.uint8)]


def alaw_to_linear(codes: np.ndarray) -> np.ndarray:
    """G.711 A-law bytes -> 16-bit linear samples (int16)."""
    return _ALAW[np.asarray(codes, dtype=np.uint8)]


def linear_to_ulaw(samples: np.ndarray) -> np.ndarray:
    """16-bit linear samples -> G.711 mu-law bytes (uint8), the inverse of ulaw_to_linear up to
    mu-law's quantisation: each sample gets the code of its segment (bias 0x84, clipped at 32635)."""
    x = np.asarray(samples, dtype=np.int32)
    sign = np.where(x < 0, 0x80, 0)
    mag = np.minimum(np.abs(x), 32635) + 0x84
    # segment = position of the highest set bit above bit 7 (mag >= 0x84 so bit 7 or higher is set)
    exponent = np.floor(np.log2(mag)).astype(np.int32) - 7
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)


# ----------------------------------------------------------------------------------------------
# NIST SPHERE

def _parse_sphere_header(head: bytes, path: str) -> dict[str, str | int | float]:
    lines = head.split(b"\n")
    if len(lines) < 2 or lines[0].strip() != b"NIST_1A":
        fail("not a NIST SPHERE file (no NIST_1A header)", path)
    fields: dict[str, str | int | float] = {}
    for raw in lines[2:]:
        line = raw.decode("latin-1").rstrip("\r")
        if line.strip() == "end_head":
            return fields
        if not line.strip() or line.startswith(";"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[1].startswith("-"):
            fail(f"bad SPHERE header line '{line}'", path)
        key, typ, value = parts
        if typ.startswith("-s"):
            try:
                n = int(typ[2:])
            except ValueError:
                fail(f"bad SPHERE header field type '{typ}'", path)
            fields[key] = value[:n]  # a -sN value is N characters (it may contain spaces)
        elif typ == "-i":
            try:
                fields[key] = int(value.split()[0])
            except ValueError:
                fail(f"bad integer in SPHERE header: '{line}'", path)
        elif typ == "-r":
            try:
                fields[key] = float(value.split()[0])
            except ValueError:
                fail(f"bad real in SPHERE header: '{line}'", path)
        else:
            fail(f"unknown SPHERE header field type '{typ}'", path)
    fail("SPHERE header has no end_head", path)


def _int_field(fields: dict[str, str | int | float], key: str, default: int, path: str) -> int:
    """An integer field of a SPHERE header (a finite -r real is truncated, a -sN string parsed)."""
    v = fields.get(key, default)
    if isinstance(v, float):
        return int(v) if math.isfinite(v) else fail(f"bad SPHERE header: {key}={v}", path)
    if isinstance(v, str):
        i = ascii_int(v.strip())
        return i if i is not None else fail(f"bad SPHERE header: {key} '{v}' is not an integer", path)
    return v


def read_sphere(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Read a NIST SPHERE file: returns (samples int16 of shape (num_samples, num_channels), rate).

    PCM 16-bit (either byte order), mu-law ('ulaw', 'mu-law') and A-law, any channel count.
    Shorten-compressed files (``...,embedded-shorten-...``) are not supported: error naming the file.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        return sphere_from_bytes(f.read(), path)


def sphere_from_bytes(raw: bytes, path: str) -> tuple[np.ndarray, int]:
    """read_sphere of a file's bytes (e.g. a pipe's output); errors name ``path``."""
    if not raw.startswith(b"NIST_1A"):
        fail("not a NIST SPHERE file (no NIST_1A header)", path)
    header_size = ascii_int(raw[8:16].split(b"\n")[0].decode("latin-1").strip())
    if header_size is None or header_size < 16:
        fail("bad SPHERE header size line", path)
    head = raw[:header_size]
    if len(head) < header_size:
        fail("truncated SPHERE header", path)
    fields = _parse_sphere_header(head, path)
    data = raw[header_size:]

    coding = str(fields.get("sample_coding", "pcm")).strip().lower()
    if "shorten" in coding or data[:4] == b"ajkg":
        fail("shorten-compressed SPHERE is not supported; decompress it first "
             "(e.g. 'sph2pipe -f wav -p x.sph x.wav' or 'w_decode -o pcm')", path)
    if "wavpack" in coding or "pculaw" in coding:
        fail(f"unsupported SPHERE sample_coding '{coding}'", path)
    if "sample_rate" not in fields:
        fail("SPHERE header lacks sample_rate", path)
    channels = _int_field(fields, "channel_count", 1, path)
    rate = _int_field(fields, "sample_rate", 0, path)
    nbytes = _int_field(fields, "sample_n_bytes", 1 if coding in ("ulaw", "mu-law", "alaw") else 2, path)
    if channels < 1 or rate <= 0:
        fail(f"bad SPHERE header: channel_count={channels} sample_rate={rate}", path)

    if coding in ("ulaw", "mu-law", "mulaw", "alaw"):
        if nbytes != 1:
            fail(f"{coding} SPHERE with sample_n_bytes={nbytes} (expected 1)", path)
        codes = np.frombuffer(data, dtype=np.uint8)
        samples = alaw_to_linear(codes) if coding == "alaw" else ulaw_to_linear(codes)
    elif coding == "pcm" or coding.startswith("pcm"):
        if nbytes != 2:
            fail(f"PCM SPHERE with sample_n_bytes={nbytes} is not supported (only 16-bit)", path)
        order = str(fields.get("sample_byte_format", "01")).strip()
        if order not in ("01", "10", "1"):
            fail(f"unsupported SPHERE sample_byte_format '{order}'", path)
        dtype = ">i2" if order == "10" else "<i2"
        usable = len(data) - len(data) % 2
        samples = np.frombuffer(data[:usable], dtype=dtype).astype(np.int16)
    else:
        fail(f"unsupported SPHERE sample_coding '{coding}'", path)

    have = len(samples) // channels
    if "sample_count" in fields:
        count = _int_field(fields, "sample_count", 0, path)
        if count < 0:
            fail(f"bad SPHERE header: sample_count={count}", path)
        if have < count:
            fail(f"truncated SPHERE file: header says {count} samples per channel, data has {have}", path)
        have = count
    samples = samples[: have * channels].reshape(have, channels)
    return samples, rate


def write_sphere(path: str | os.PathLike, samples: np.ndarray, rate: int, coding: str = "ulaw",
                 extra: dict[str, str | int] | None = None) -> None:
    """Write int16 ``samples`` (num_samples,) or (num_samples, channels) as NIST SPHERE, atomically:
    ``coding`` 'ulaw' (1 byte per sample, as LDC ships Switchboard) or 'pcm' (16-bit little-endian).
    ``extra`` adds header fields (strings as -sN, integers as -i), e.g. {"conversation_id": "2001"}."""
    from pynnet.io.atomic import atomic_write

    data = np.asarray(samples)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[1] < 1:
        raise ValueError(f"write_sphere: samples must be (n,) or (n, channels), got {data.shape}")
    if coding == "ulaw":
        body = linear_to_ulaw(data).tobytes()   # row-major: channels interleaved per sample
        fields: list[tuple[str, str | int]] = [("sample_byte_format", "1"), ("sample_n_bytes", 1),
                                               ("sample_coding", "ulaw")]
    elif coding == "pcm":
        body = np.clip(data, -32768, 32767).astype("<i2").tobytes()
        fields = [("sample_byte_format", "01"), ("sample_n_bytes", 2), ("sample_coding", "pcm")]
    else:
        raise ValueError(f"write_sphere: coding must be 'ulaw' or 'pcm', got '{coding}'")
    fields = [("sample_count", data.shape[0]), ("sample_rate", int(rate)),
              ("channel_count", data.shape[1])] + fields + list((extra or {}).items())
    lines = []
    for key, value in fields:
        if isinstance(value, int):
            lines.append(f"{key} -i {value}")
        else:
            lines.append(f"{key} -s{len(value)} {value}")
    text = "\n".join(lines + ["end_head"]) + "\n"
    size = 1024
    while len(text) + 16 > size:   # the header is a multiple of 1024 bytes
        size += 1024
    head = f"NIST_1A\n{size:7d}\n{text}".encode("latin-1")
    with atomic_write(path, "wb") as f:
        f.write(head + b" " * (size - len(head)) + body)


# ----------------------------------------------------------------------------------------------
# WAV / FLAC / anything soundfile reads

def _to_kaldi_scale(data: np.ndarray) -> np.ndarray:
    """soundfile floats in [-1, 1) -> the 16-bit integer scale Kaldi computes features on."""
    return (data * 32768.0).astype(np.float32)


def _fix_streamed_wav(data: bytes) -> bytes:
    """WAV written to a pipe (sox, sph2pipe) may carry 0 or 0xFFFFFFFF chunk sizes because the
    writer could not seek back; set the RIFF and data sizes from the bytes actually received."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    buf = bytearray(data)
    pos = 12
    while pos + 8 <= len(buf):
        cid = bytes(buf[pos:pos + 4])
        size = struct.unpack_from("<I", buf, pos + 4)[0]
        if cid == b"data":
            real = len(buf) - pos - 8
            if size == 0 or size > real:
                struct.pack_into("<I", buf, pos + 4, real - real % 2)
            break
        pos += 8 + size + (size & 1)
    struct.pack_into("<I", buf, 4, len(buf) - 8)
    return bytes(buf)


def read_wav_bytes(data: bytes, name: str) -> tuple[np.ndarray, int]:
    """Decode WAV (or FLAC/SPHERE) bytes, e.g. a pipe's output: ((num_samples, channels) float32, rate)."""
    import soundfile as sf

    if not data:
        fail("no audio data (empty output)", name)
    if data.startswith(b"NIST_1A"):
        samples, rate = sphere_from_bytes(data, name)
        return samples.astype(np.float32), rate
    try:
        arr, rate = sf.read(io.BytesIO(_fix_streamed_wav(data)), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises its own error types
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        # (soundfile names the BytesIO it was given: "Error opening <_io.BytesIO object at 0x..>: ...")
        why = re.sub(r"(Error opening )?<_io\.BytesIO object at 0x[0-9a-f]+>: ?", "", why)
        fail(f"cannot decode audio: {why}", name)
    return _to_kaldi_scale(arr), int(rate)


def read_audio_file(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Read an audio file: ((num_samples, channels) float32 on the int16 scale, sample rate)."""
    import soundfile as sf

    path = os.fspath(path)
    if not os.path.exists(path):
        fail("no such audio file", path)
    with open(path, "rb") as f:
        magic = f.read(7)
    if magic == b"NIST_1A":
        samples, rate = read_sphere(path)
        return samples.astype(np.float32), rate
    try:
        arr, rate = sf.read(path, dtype="float32", always_2d=True)
    except Exception as e:
        fail(f"cannot read audio: {str(e).splitlines()[0] if str(e) else type(e).__name__}", path)
    return _to_kaldi_scale(arr), int(rate)


# ----------------------------------------------------------------------------------------------
# wav.scp entries (Kaldi rxfilenames)

def _sph2pipe_fallback(command: str, where: str = "") -> tuple[np.ndarray, int] | None:
    """If ``command`` is a lone ``sph2pipe [opts] file.sph`` and sph2pipe is not installed, do what
    it would do in Python (Switchboard/Fisher wav.scp files look like this). None: not applicable.
    A bad option value is an error naming ``where`` (the wav.scp line)."""
    def number(v: str, parse, what: str, empty: int | None = None):
        x = parse(v) if v else empty
        if x is None or not math.isfinite(x):
            fail(f"sph2pipe {what} '{v}': not a number in '{command}'", where or command)
        return x

    if any(c in command for c in "|;&<>`$"):
        return None
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if not tokens or os.path.basename(tokens[0]) != "sph2pipe":
        return None
    if shutil.which(tokens[0]) is not None:
        return None
    channel = None
    time_range: tuple[float, float | None] | None = None
    sample_range: tuple[int, int | None] | None = None
    files = []
    i = 1
    while i < len(tokens):
        t = tokens[i]
        if t in ("-f", "-c", "-t", "-s"):
            if i + 1 >= len(tokens):
                return None
            v = tokens[i + 1]
            if t == "-c":
                channel = number(v, ascii_int, "-c")
            elif t in ("-t", "-s"):
                a, _, b = v.partition(":")
                if t == "-t":
                    time_range = (number(a, ascii_float, "-t", 0), number(b, ascii_float, "-t") if b else None)
                else:
                    sample_range = (number(a, ascii_int, "-s", 0), number(b, ascii_int, "-s") if b else None)
            i += 2
        elif t in ("-p", "-h"):   # -p: 16-bit PCM output, which is what we decode to anyway
            i += 1
        elif t.startswith("-"):
            return None           # an option we do not emulate (e.g. -u, -a): run the real thing
        else:
            files.append(t)
            i += 1
    if len(files) != 1:
        return None
    if not os.path.isfile(files[0]):
        fail(f"sph2pipe: no such file '{files[0]}'", where or command)
    samples, rate = read_sphere(files[0])
    if channel is not None:
        if not 1 <= channel <= samples.shape[1]:
            fail(f"sph2pipe -c {channel}: file has {samples.shape[1]} channel(s)", files[0])
        samples = samples[:, channel - 1:channel]
    if time_range is not None:
        s, e = time_range
        samples = samples[int(round(s * rate)): None if e is None else int(round(e * rate))]
    if sample_range is not None:
        s, e = sample_range
        samples = samples[s: e]
    return samples.astype(np.float32), rate


def _run_pipe(command: str, name: str) -> bytes:
    proc = subprocess.run(["bash", "-c", "set -o pipefail; " + command], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        fail(f"command failed (exit status {proc.returncode}): '{command}'"
             + (f": {err[-1]}" if err else ""), name)
    return proc.stdout


def read_rxfilename(rx: str, name: str = "") -> tuple[np.ndarray, int]:
    """Read one wav.scp value: a file, ``cmd |`` (run by bash, WAV on stdout), or ``x.ark:OFFSET``.

    Returns ((num_samples, channels) float32 on the int16 scale, sample rate). ``name`` (e.g.
    ``wav.scp:12``) prefixes error messages.
    """
    rx = rx.strip(FIELD_SEPS)
    where = name or rx
    if rx.endswith("|"):
        command = rx[:-1].strip(FIELD_SEPS)
        if not command:
            fail("empty command before '|'", where)
        direct = _sph2pipe_fallback(command, where)
        if direct is not None:
            return direct
        return read_wav_bytes(_run_pipe(command, where), where)
    if rx == "-" or rx.startswith("-|") or rx.endswith("|-"):
        fail(f"reading audio from stdin is not supported: '{rx}'", where)
    if not os.path.exists(rx):
        path, colon, offset = rx.rpartition(":")
        if colon and offset.isascii() and offset.isdigit() and os.path.exists(path):
            import kaldiio
            try:
                rate, arr = kaldiio.load_mat(rx)
            except Exception as e:
                fail(f"cannot read wave from archive '{rx}': {str(e) or type(e).__name__ + ' (offset past the end?)'}",
                     where)
            arr = np.asarray(arr, dtype=np.float32)
            if arr.ndim == 1:
                arr = arr[:, None]
            return arr, int(rate)
        fail(f"no such audio file: '{rx}'", where)
    return read_audio_file(rx)


@dataclass(frozen=True)
class Segment:
    """One line of ``segments``: utterance = recording[start:end] seconds (end -1: to the end)."""
    utt: str
    reco: str
    start: float
    end: float
    channel: int = -1
    line: int = 0


def read_wav_scp(path: str | os.PathLike) -> dict[str, tuple[str, int]]:
    """wav.scp -> {recording_id: (rxfilename, line_number)} in file order; duplicates are errors."""
    out: dict[str, tuple[str, int]] = {}
    for n, key, rest in read_table_lines(path, min_fields=2):
        if key in out:
            fail(f"duplicate recording id '{key}'", path, n)
        if rest.endswith("|") and not rest[:-1].strip(FIELD_SEPS):
            fail(f"empty command for '{key}'", path, n)
        out[key] = (rest, n)
    return out


def read_segments(path: str | os.PathLike) -> list[Segment]:
    """segments (``utt reco start end [channel]``): bad numbers or start >= end are errors naming the line."""
    segs: list[Segment] = []
    seen: set[str] = set()
    for n, utt, rest in read_table_lines(path, min_fields=4, max_fields=5):
        f = split_fields(rest)
        start, end = ascii_float(f[1]), ascii_float(f[2])
        if start is None or end is None:
            fail(f"start/end times must be numbers: '{utt} {rest}'", path, n)
        if not (math.isfinite(start) and math.isfinite(end)):
            fail(f"start/end times must be finite: '{utt} {rest}'", path, n)
        channel = -1
        if len(f) == 4:
            channel = ascii_int(f[3])
            if channel is None or channel < 0:
                fail(f"channel must be an integer >= 0: '{f[3]}'", path, n)
        if start < 0:
            fail(f"negative start time {start}", path, n)
        if end != -1 and end <= start:
            fail(f"start time {start} >= end time {end}", path, n)
        if utt in seen:
            fail(f"duplicate utterance id '{utt}'", path, n)
        seen.add(utt)
        segs.append(Segment(utt, f[0], start, end, channel, n))
    return segs


def select_channel(data: np.ndarray, channel: int, utt: str) -> np.ndarray | None:
    """Kaldi compute-*-feats --channel: -1 expects mono (takes channel 0 of multi-channel data with
    a warning); K >= 0 takes channel K, or warns and returns None if the data has fewer channels."""
    num_chan = data.shape[1]
    if channel == -1:
        if num_chan != 1:
            _warn(f"Channel not specified but you have data with {num_chan} channels; "
                  f"defaulting to zero (utterance {utt})")
        return np.ascontiguousarray(data[:, 0])
    if channel >= num_chan:
        _warn(f"File with id {utt} has {num_chan} channels but you specified channel {channel}, "
              "producing no output.")
        return None
    return np.ascontiguousarray(data[:, channel])


def iter_utterances(wav_scp: str | os.PathLike, segments: str | os.PathLike | None = None, *,
                    max_overshoot: float = 0.5, min_segment_length: float = 0.1,
                    failures: list[str] | None = None, sample_rate: float | None = None,
                    ) -> Iterator[tuple[str, np.ndarray, int, int]]:
    """Yield (utterance_id, samples (n, channels) float32, rate, segment_channel) for a data dir's
    audio. Without ``segments`` each recording is an utterance (segment_channel -1).

    With ``segments`` the recording is read once per run of consecutive segments; like Kaldi's
    extract-segments an end past the recording is clipped with a warning when it is less than
    ``max_overshoot`` seconds past, otherwise the segment is skipped with a warning; a segment
    starting at or after the end, or shorter than ``min_segment_length`` seconds, is skipped
    with a warning. Skipped utterance ids are appended to
    ``failures``; a recording that cannot be read fails every segment on it. With
    ``sample_rate``, a recording at another rate is an error naming it and its wav.scp line.
    """
    def check_rate(reco: str, rate: int, n: int) -> None:
        if sample_rate is not None and rate != sample_rate:
            fail(f"sample frequency mismatch for recording '{reco}': the data has {rate} Hz but "
                 f"--sample-frequency={sample_rate:g} (set it in the config, or resample in wav.scp "
                 "with 'sox ... -r N -t wav - |')", wav_scp, n)

    wavs = read_wav_scp(wav_scp)
    if segments is None:
        for reco, (rx, n) in wavs.items():
            try:
                data, rate = read_rxfilename(rx, f"{os.fspath(wav_scp)}:{n}")
            except PynnetError as e:
                if failures is None:
                    raise
                _warn(f"failed to read recording {reco}: {e}")
                failures.append(reco)
                continue
            check_rate(reco, rate, n)
            yield reco, data, rate, -1
        return

    segs = read_segments(segments)
    cur_reco: str | None = None
    cur: tuple[np.ndarray, int] | None = None
    cur_error: str | None = None
    for seg in segs:
        if seg.reco not in wavs:
            fail(f"recording '{seg.reco}' of utterance '{seg.utt}' is not in {os.fspath(wav_scp)}",
                 segments, seg.line)
        if seg.reco != cur_reco:
            cur_reco, cur, cur_error = seg.reco, None, None
            rx, n = wavs[seg.reco]
            try:
                cur = read_rxfilename(rx, f"{os.fspath(wav_scp)}:{n}")
            except PynnetError as e:
                if failures is None:
                    raise
                cur_error = str(e)
            if cur is not None:
                check_rate(seg.reco, cur[1], n)
        if cur is None:
            _warn(f"failed to read recording {seg.reco} for utterance {seg.utt}: {cur_error}")
            failures is not None and failures.append(seg.utt)
            continue
        data, rate = cur
        num_samp = data.shape[0]
        start_samp = int(seg.start * rate)
        end_samp = num_samp if seg.end == -1 else int(seg.end * rate)
        if start_samp >= num_samp:
            _warn(f"Start time {seg.start} of segment {seg.utt} is past the end of recording "
                  f"{seg.reco} ({num_samp / rate:.3f} s); skipping it")
            failures is not None and failures.append(seg.utt)
            continue
        if end_samp > num_samp:
            if end_samp >= num_samp + int(max_overshoot * rate):
                _warn(f"End time {seg.end} of segment {seg.utt} is too far past the end of recording "
                      f"{seg.reco} ({num_samp / rate:.3f} s); skipping it")
                failures is not None and failures.append(seg.utt)
                continue
            _warn(f"End time {seg.end} of segment {seg.utt} is past the end of recording {seg.reco} "
                  f"({num_samp / rate:.3f} s); clipping it")
            end_samp = num_samp
        if end_samp <= start_samp + int(min_segment_length * rate):
            _warn(f"Segment {seg.utt} too short, skipping it")
            failures is not None and failures.append(seg.utt)
            continue
        yield seg.utt, data[start_samp:end_samp], rate, seg.channel
