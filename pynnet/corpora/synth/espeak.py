"""libespeak-ng (from the ``espeakng-loader`` wheel) driven through ctypes.

One synthesiser per process (espeak-ng keeps global state), in AUDIO_OUTPUT_SYNCHRONOUS mode with a
synth callback that collects the 16-bit samples (22050 Hz).  Voices are ``<accent>+<variant>``;
espeak-ng silently falls back to its default voice for an unknown name, so every accent and
variant is checked against the files in espeak-ng-data before use.
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass

import numpy as np

from pynnet.io.errors import fail

AUDIO_OUTPUT_SYNCHRONOUS = 2
ESPEAK_CHARS_UTF8 = 1
POS_CHARACTER = 1
EE_OK = 0
# espeak_PARAMETER
ESPEAK_RATE, ESPEAK_VOLUME, ESPEAK_PITCH, ESPEAK_RANGE, ESPEAK_WORDGAP = 1, 2, 3, 4, 7
RATE_MIN, RATE_MAX = 80, 450


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
                ("text_position", ctypes.c_int), ("length", ctypes.c_int),
                ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _EventId)]


_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                                   ctypes.POINTER(_Event))


def data_path() -> str:
    """The espeak-ng-data directory shipped in the espeakng-loader wheel."""
    import espeakng_loader
    return espeakng_loader.get_data_path()


def _voice_file_field(path: str, field: str) -> str | None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == field:
                return parts[1]
    return None


def accent_exists(accent: str) -> bool:
    """True if espeak-ng-data/lang has an English voice file named ``accent`` (any case)."""
    return accent.lower() in english_accents()


_ACCENTS: dict[str, str] | None = None


def english_accents() -> dict[str, str]:
    """Map accent id -> voice file, for the English voices in espeak-ng-data/lang.  The id is the
    lower-cased file name (``en``, ``en-us``, ``en-gb-scotland`` ...), which is what
    espeak_SetVoiceByName matches; ``en-shaw`` (Shavian script) is not an accent and is left out."""
    global _ACCENTS
    if _ACCENTS is None:
        out = {}
        lang_dir = os.path.join(data_path(), "lang")
        for root, _dirs, files in os.walk(lang_dir):
            for name in files:
                low = name.lower()
                if (low == "en" or low.startswith("en-")) and low != "en-shaw":
                    out[low] = os.path.join(root, name)
        _ACCENTS = out
    return dict(_ACCENTS)


def variant_path(variant: str) -> str:
    return os.path.join(data_path(), "voices", "!v", variant)


def variant_exists(variant: str) -> bool:
    return os.path.isfile(variant_path(variant))


def variant_gender(variant: str) -> str:
    """'m' or 'f' from the variant file's ``gender`` line (files without one are treated as male,
    which is espeak-ng's default pitch range)."""
    g = _voice_file_field(variant_path(variant), "gender")
    return "f" if g and g.lower().startswith("f") else "m"


def check_voice(accent: str, variant: str | None) -> str:
    """Return the espeak voice name for (accent, variant) or fail if either file is missing."""
    if not accent_exists(accent):
        fail(f"espeak-ng has no English accent '{accent}' (have: {', '.join(sorted(english_accents()))})",
             os.path.join(data_path(), "lang"))
    if variant is None:
        return accent
    if not variant_exists(variant):
        fail(f"espeak-ng has no voice variant '{variant}'", variant_path(variant))
    return f"{accent}+{variant}"


@dataclass(frozen=True)
class VoiceParams:
    accent: str            # espeak language code, e.g. en-us
    variant: str | None    # file name under espeak-ng-data/voices/!v, e.g. m3
    rate: int = 175        # words per minute (80..450)
    pitch: int = 50        # base pitch 0..100
    pitch_range: int = 50  # 0 = monotone .. 100
    word_gap: int = 0      # extra pause between words, units of 10 ms


class Espeak:
    """The process-wide espeak-ng instance (use :func:`get`)."""

    def __init__(self) -> None:
        import espeakng_loader
        self.lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib = self.lib
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                     ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_uint),
                                     ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        lib.espeak_ng_SetRandSeed.restype = None
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        # path is the directory that CONTAINS espeak-ng-data
        parent = os.path.dirname(data_path()).encode()
        self.sample_rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, parent, 0x8000)
        if self.sample_rate <= 0:
            fail("espeak_Initialize failed", data_path())
        self._chunks: list[np.ndarray] = []
        self._cb = _SYNTH_CALLBACK(self._on_audio)  # keep a reference: ctypes does not
        lib.espeak_SetSynthCallback(self._cb)
        self._voice: str | None = None

    def _on_audio(self, wav, numsamples, _events) -> int:
        if wav and numsamples > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(numsamples,)).copy())
        return 0

    def set_voice(self, accent: str, variant: str | None, force: bool = False) -> None:
        name = check_voice(accent, variant)
        if force or name != self._voice:
            if self.lib.espeak_SetVoiceByName(name.encode()) != EE_OK:
                fail(f"espeak_SetVoiceByName('{name}') failed")
            self._voice = name

    def synthesize(self, text: str, voice: VoiceParams, seed: int = 0) -> np.ndarray:
        """Speak ``text`` with ``voice``; returns int16 samples at :attr:`sample_rate`.

        espeak-ng keeps state between utterances (flutter phase, echo buffer ...), so the same
        call gives slightly different audio depending on what was spoken before.  To make each
        utterance a pure function of its arguments it is synthesised in a forked child of this
        process, which itself never synthesises; espeak-ng's random generator (breath noise,
        Klatt voices) is seeded with ``seed`` in the child."""
        check_voice(voice.accent, voice.variant)  # fail here, not in the child
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: synthesise, write b"O"+samples or b"E"+message, exit at once
            os.close(r)
            try:
                try:
                    payload = b"O" + self._synthesize_here(text, voice, seed).tobytes()
                except BaseException as e:  # noqa: BLE001 - relayed to the parent
                    payload = b"E" + str(e).encode("utf-8", "replace")
                with os.fdopen(w, "wb") as f:
                    f.write(payload)
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        if not data:
            fail(f"espeak-ng child died while speaking '{text}'")
        if data[:1] == b"E":
            fail(data[1:].decode("utf-8", "replace"))
        return np.frombuffer(data[1:], dtype=np.int16).copy()

    def _synthesize_here(self, text: str, voice: VoiceParams, seed: int) -> np.ndarray:
        self.set_voice(voice.accent, voice.variant, force=True)
        for par, val in ((ESPEAK_RATE, int(np.clip(voice.rate, RATE_MIN, RATE_MAX))),
                         (ESPEAK_PITCH, int(np.clip(voice.pitch, 0, 100))),
                         (ESPEAK_RANGE, int(np.clip(voice.pitch_range, 0, 100))),
                         (ESPEAK_WORDGAP, int(max(0, voice.word_gap))),
                         (ESPEAK_VOLUME, 100)):
            if self.lib.espeak_SetParameter(par, val, 0) != EE_OK:
                fail(f"espeak_SetParameter({par}, {val}) failed")
        self.lib.espeak_ng_SetRandSeed(seed & 0x7FFFFFFF)
        self._chunks = []
        buf = ctypes.create_string_buffer(text.encode("utf-8"))
        rc = self.lib.espeak_Synth(buf, len(buf), 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None, None)
        if rc != EE_OK:
            fail(f"espeak_Synth failed ({rc}) for '{text}'")
        self.lib.espeak_Synchronize()
        out = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        self._chunks = []
        return out.astype(np.int16, copy=False)

    def phonemes(self, text: str, accent: str = "en-us") -> str:
        """espeak-ng's own IPA phonemes for ``text``: words separated by spaces, phonemes within a
        word by ``_`` (stress marks attached); used as the lexicon's fallback."""
        self.set_voice(accent, None)
        raw = text.encode("utf-8") + b"\0"
        buf = ctypes.create_string_buffer(raw)
        ptr = ctypes.c_char_p(ctypes.addressof(buf))
        parts = []
        # bit 1 = IPA; bits 8-23 = separator between phonemes ('_')
        mode = 0x02 | (ord("_") << 8)
        while ptr.value:
            res = self.lib.espeak_TextToPhonemes(ctypes.byref(ptr), ESPEAK_CHARS_UTF8, mode)
            if res:
                parts.append(res.decode("utf-8"))
            if not ptr.value:
                break
        return " ".join(parts)


_INSTANCE: Espeak | None = None
_LOCK = threading.Lock()


def get() -> Espeak:
    """The espeak-ng instance of this process (created on first use; a forked process keeps
    its parent's, which is what we want: it has never synthesised)."""
    global _INSTANCE
    with _LOCK:
        if _INSTANCE is None:
            _INSTANCE = Espeak()
        return _INSTANCE
