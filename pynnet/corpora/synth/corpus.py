"""The synthesised telephone-dialogue corpus: plans utterances, synthesises them in parallel,
writes wavs under <db-dir> and Kaldi data dirs, a dict dir and LM text under <data-dir>.

Every utterance is a pure function of (seed, split, index): its text, speaker, prosody jitter
and channel come from ``numpy.random.default_rng([seed, split, index])`` and espeak-ng runs in a
fresh fork for each one, so the corpus is bit-identical for a seed whatever ``nj`` is.

Layout written:
  <db-dir>/wav/<split>/<spk>/<utt>.wav       8 kHz 16-bit mono PCM
  <db-dir>/meta/speakers.tsv                 speaker -> split accent variant gender pitch rate range
  <db-dir>/meta/<split>.tsv                  per-utterance voice, prosody and channel parameters
  <db-dir>/meta/config.json                  the configuration used
  <data-dir>/{train,dev,test}/{wav.scp,text,utt2spk,spk2utt,utt2dur,spk2gender}
  <data-dir>/local/dict/{lexicon.txt,nonsilence_phones.txt,silence_phones.txt,
                         optional_silence.txt,extra_questions.txt,lexicon_fallback.txt}
  <data-dir>/local/lm/train.txt              LM training text (no dev/test sentence in it)
"""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from pynnet.corpora.synth import channel, espeak, grammar, lexicon, voices
from pynnet.io.atomic import atomic_path, atomic_write
from pynnet.io.errors import fail
from pynnet.io.tables import write_table

SPLIT_CODE = {"train": 1, "dev": 2, "test": 3, "lm": 4}


@dataclass
class SynthConfig:
    """Size and difficulty knobs.  Dev/test use voices never heard in training, speaking the
    training accents (dev adds one accent never heard in training; ``test_extra_accents`` adds
    more to test, e.g. ``voices.HARD_TEST_ACCENTS``); 8 kHz telephone band; noise at 10-30 dB SNR; reverberation
    on 20%; brisk speaking rates.  The full recipe's monophone %WER on test with these defaults
    is in egs/synth/RESULTS.

    Measured (seed 1, 1 h train, steps/train_mono.sh + 3-gram LM, 100 evenly spaced test
    utterances, beam 10): monophone %WER 28.2 with these defaults; 33.0 with SNR 5-20 dB,
    reverb 30% at RT60 0.2-0.8 s, 150-250 wpm; 17.5 with SNR 10-30 dB, reverb 20% at RT60
    0.15-0.5 s, 140-230 wpm, less white noise.  Unseen accents and reverberation cost most."""
    seed: int = 1
    train_hours: float = 1.0
    dev_minutes: float = 8.0
    test_minutes: float = 10.0
    train_speakers: int = 60
    dev_speakers: int = 10
    test_speakers: int = 12
    lm_sentences: int = 50000
    # difficulty
    snr_db: tuple[float, float] = (10.0, 30.0)
    noise_weights: dict[str, float] = field(default_factory=lambda: {
        "white": 0.1, "pink": 0.3, "brown": 0.1, "babble": 0.35, "pink+babble": 0.15})
    reverb_prob: float = 0.2
    rt60: tuple[float, float] = (0.15, 0.5)
    drr_db: tuple[float, float] = (0.0, 10.0)
    mulaw_prob: float = 0.5
    band_lo: tuple[float, float] = (250.0, 400.0)
    band_hi: tuple[float, float] = (3100.0, 3500.0)
    level_db: tuple[float, float] = (-32.0, -14.0)
    lead_s: tuple[float, float] = (0.2, 0.6)
    tail_s: tuple[float, float] = (0.2, 0.6)
    rate_wpm: tuple[float, float] = (140.0, 230.0)   # speaker base rates
    rate_jitter: float = 0.12                         # per utterance, relative
    pitch_jitter: float = 8.0                         # per utterance, espeak pitch units
    word_gap_prob: float = 0.1                        # chance of slow, gappy delivery
    # accents (espeak-ng voice names); dev/test speak the training accents plus their extras
    train_accents: tuple[str, ...] = tuple(voices.TRAIN_ACCENTS)
    dev_extra_accents: tuple[str, ...] = tuple(voices.DEV_EXTRA_ACCENTS)
    test_extra_accents: tuple[str, ...] = ()

    @classmethod
    def tiny(cls, **kw) -> "SynthConfig":
        """A few dozen short utterances (for tests): synthesised in seconds."""
        base = dict(train_hours=60 / 3600, dev_minutes=0.4, test_minutes=0.4, train_speakers=6,
                    dev_speakers=2, test_speakers=3, lm_sentences=2000)
        base.update(kw)
        return cls(**base)

    def check(self) -> None:
        for name in ("train_hours", "dev_minutes", "test_minutes"):
            if getattr(self, name) <= 0:
                fail(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        for name in ("train_speakers", "dev_speakers", "test_speakers", "lm_sentences"):
            if getattr(self, name) < 1:
                fail(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        for name in ("snr_db", "rt60", "drr_db", "band_lo", "band_hi", "level_db", "lead_s",
                     "tail_s", "rate_wpm"):
            lo, hi = getattr(self, name)
            if lo > hi:
                fail(f"{name}: minimum {lo} is above maximum {hi}")
        if not (espeak.RATE_MIN <= self.rate_wpm[0] and self.rate_wpm[1] <= espeak.RATE_MAX):
            fail(f"rate must be within {espeak.RATE_MIN}..{espeak.RATE_MAX} words per minute")
        if self.band_hi[1] >= channel.TELEPHONE_RATE / 2 - 100:
            fail("band_hi must stay below 3900 Hz (8 kHz output)")
        for name in ("reverb_prob", "mulaw_prob", "word_gap_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                fail(f"--{name.replace('_', '-')} must be within 0..1, got {getattr(self, name)}")
        if self.rt60[0] <= 0 and self.reverb_prob > 0:
            fail("rt60 minimum must be positive")
        for kind in self.noise_weights:
            for k in kind.split("+"):
                if k not in channel.NOISE_TYPES:
                    fail(f"unknown noise type '{k}' (have {', '.join(channel.NOISE_TYPES)})")
        if not self.train_accents:
            fail("train_accents must name at least one accent")
        voices.split_accents(self.accents())  # every accent must exist in espeak-ng
        if not self.noise_weights or min(self.noise_weights.values()) < 0 or \
                sum(self.noise_weights.values()) <= 0:
            fail("noise weights must be non-negative and not all zero")

    def accents(self) -> dict[str, list[str]]:
        return {"train": list(self.train_accents), "dev": list(self.dev_extra_accents),
                "test": list(self.test_extra_accents)}

    def target_seconds(self, split: str) -> float:
        return {"train": self.train_hours * 3600, "dev": self.dev_minutes * 60,
                "test": self.test_minutes * 60}[split]

    def speaker_counts(self) -> dict[str, int]:
        return {"train": self.train_speakers, "dev": self.dev_speakers, "test": self.test_speakers}

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, indent=1)


@dataclass(frozen=True)
class UttSpec:
    utt: str
    split: str
    index: int
    speaker: voices.Speaker
    text: str


def utt_rng(seed: int, split: str, index: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, SPLIT_CODE[split], index, stream])


def plan_utterance(cfg: SynthConfig, split: str, index: int,
                   speakers: list[voices.Speaker]) -> UttSpec:
    """Speakers take turns (round robin) so any prefix of a split is balanced over speakers."""
    spk = speakers[index % len(speakers)]
    text = grammar.sample_sentence(utt_rng(cfg.seed, split, index, 0))
    return UttSpec(utt=f"{spk.spk}-{index:05d}", split=split, index=index, speaker=spk, text=text)


def _draw(rng: np.random.Generator, lohi: tuple[float, float]) -> float:
    return float(rng.uniform(lohi[0], lohi[1])) if lohi[1] > lohi[0] else float(lohi[0])


def draw_utterance_params(cfg: SynthConfig, spec: UttSpec) -> tuple[espeak.VoiceParams,
                                                                     channel.ChannelParams]:
    rng = utt_rng(cfg.seed, spec.split, spec.index, 1)
    s = spec.speaker
    rate = int(round(s.rate * (1.0 + rng.uniform(-cfg.rate_jitter, cfg.rate_jitter))))
    pitch = int(round(s.pitch + rng.uniform(-cfg.pitch_jitter, cfg.pitch_jitter)))
    prange = int(round(s.pitch_range + rng.uniform(-10, 10)))
    gap = int(rng.integers(2, 9)) if rng.random() < cfg.word_gap_prob else 0
    vp = espeak.VoiceParams(accent=s.accent, variant=s.variant,
                            rate=int(np.clip(rate, espeak.RATE_MIN, espeak.RATE_MAX)),
                            pitch=int(np.clip(pitch, 0, 100)), pitch_range=int(np.clip(prange, 0, 100)),
                            word_gap=gap)
    kinds = sorted(cfg.noise_weights)
    w = np.array([cfg.noise_weights[k] for k in kinds], dtype=float)
    noise = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
    reverb = rng.random() < cfg.reverb_prob
    cp = channel.ChannelParams(
        snr_db=_draw(rng, cfg.snr_db), noise=noise,
        rt60=_draw(rng, cfg.rt60) if reverb else 0.0,
        drr_db=_draw(rng, cfg.drr_db), band_lo=_draw(rng, cfg.band_lo),
        band_hi=_draw(rng, cfg.band_hi), mulaw=bool(rng.random() < cfg.mulaw_prob),
        level_db=_draw(rng, cfg.level_db), lead_s=_draw(rng, cfg.lead_s),
        tail_s=_draw(rng, cfg.tail_s))
    return vp, cp


def synthesize_utterance(cfg: SynthConfig, spec: UttSpec) -> tuple[np.ndarray, dict]:
    """Audio (int16, 8 kHz) and a metadata row for one planned utterance."""
    vp, cp = draw_utterance_params(cfg, spec)
    seed32 = int(utt_rng(cfg.seed, spec.split, spec.index, 2).integers(0, 2 ** 31 - 1))
    raw = espeak.get().synthesize(spec.text, vp, seed=seed32)
    if len(raw) == 0:
        fail(f"espeak-ng produced no audio for '{spec.text}' ({spec.speaker.voice})")
    audio, measured = channel.apply_channel(raw, espeak.get().sample_rate, cp,
                                            utt_rng(cfg.seed, spec.split, spec.index, 3))
    meta = {"utt": spec.utt, "spk": spec.speaker.spk, "voice": spec.speaker.voice,
            "rate": vp.rate, "pitch": vp.pitch, "range": vp.pitch_range, "wordgap": vp.word_gap,
            "snr_db": round(cp.snr_db, 2), "noise": cp.noise, "rt60": round(cp.rt60, 3),
            "drr_db": round(cp.drr_db, 2), "band_lo": round(cp.band_lo), "band_hi": round(cp.band_hi),
            "mulaw": int(cp.mulaw), "level_db": round(cp.level_db, 2),
            "seg_start": measured["seg_start"], "seg_end": measured["seg_end"],
            "num_samples": len(audio)}
    return audio, meta


# --- worker plumbing: each pool process forks one child per utterance for espeak (see espeak.py)
_WORKER_CFG: SynthConfig | None = None


def _worker_init(cfg: SynthConfig) -> None:
    global _WORKER_CFG
    _WORKER_CFG = cfg
    espeak.get()


def _worker_run(spec: UttSpec):
    try:
        audio, meta = synthesize_utterance(_WORKER_CFG, spec)
        return spec, audio, meta, None
    except Exception as e:  # noqa: BLE001 - reported by the parent with the utterance id
        return spec, None, None, f"{spec.utt}: {e}"


def write_wav(path: str, audio: np.ndarray, sr: int = channel.TELEPHONE_RATE) -> None:
    import soundfile as sf
    with atomic_path(path) as tmp:
        sf.write(tmp, audio, sr, subtype="PCM_16", format="WAV")


def _progress(total_s: float, desc: str, enabled: bool):
    from tqdm import tqdm
    # disable=None: a bar only on a terminal (logs stay clean)
    return tqdm(total=int(round(total_s)), desc=desc, unit="s", disable=None if enabled else True,
                file=sys.stderr, dynamic_ncols=True, leave=False)


def synthesize_split(cfg: SynthConfig, split: str, speakers: list[voices.Speaker], db_dir: str,
                     nj: int, progress: bool = True) -> list[tuple[UttSpec, dict]]:
    """Synthesise utterances of ``split`` in order until the target duration is reached; write
    their wavs.  The stopping point depends only on the ordered durations, not on ``nj``."""
    target = cfg.target_seconds(split)
    spk = [s for s in speakers if s.split == split]

    done: list[tuple[UttSpec, dict]] = []
    total = 0.0
    bar = _progress(target, f"synth {split}", progress)
    ctx = multiprocessing.get_context("fork")
    pool = ctx.Pool(nj, initializer=_worker_init, initargs=(cfg,)) if nj > 1 else None
    batch = 8 * nj  # planned ahead in batches: at most one batch is synthesised in vain
    try:
        if pool is None:
            _worker_init(cfg)
        index = 0
        while total < target:
            specs = [plan_utterance(cfg, split, i, spk) for i in range(index, index + batch)]
            index += batch
            results = pool.imap(_worker_run, specs) if pool else map(_worker_run, specs)
            for spec, audio, meta, err in results:
                if err is not None:
                    fail(err)
                path = os.path.join(db_dir, "wav", split, spec.speaker.spk, spec.utt + ".wav")
                write_wav(path, audio)
                meta["path"] = os.path.abspath(path)
                meta["text"] = spec.text
                done.append((spec, meta))
                dur = len(audio) / channel.TELEPHONE_RATE
                total += dur
                bar.update(int(min(total, target)) - bar.n)
                if total >= target:
                    break
        if pool is not None:
            # the rest of the last batch is let finish, and the pool closed, not terminated:
            # terminate() while imap still has tasks out can leave join() waiting for ever
            for _ in results:
                pass
            pool.close()
            pool.join()
            pool = None
    finally:
        bar.close()
        if pool is not None:   # (an error: nothing more is wanted from the workers)
            pool.terminate()
            pool.join()
    return done


def lm_text(cfg: SynthConfig, exclude: set[str]) -> list[str]:
    """``cfg.lm_sentences`` grammar sentences (repeats allowed, as in real text), with every
    sentence in ``exclude`` (the dev and test transcripts) removed."""
    rng = np.random.default_rng([cfg.seed, SPLIT_CODE["lm"]])
    out = []
    while len(out) < cfg.lm_sentences:
        s = grammar.sample_sentence(rng)
        if s not in exclude:
            out.append(s)
    return out


def write_dict_dir(dict_dir: str, lex: dict[str, list[list[str]]], fallback: list[str]) -> None:
    """Kaldi dict dir (as utils/prepare_lang.sh expects): lexicon with <unk> SPN and !SIL SIL."""
    phones = sorted({p for prons in lex.values() for pron in prons for p in pron})
    with atomic_write(os.path.join(dict_dir, "lexicon.txt")) as f:
        entries = [("!SIL", "SIL"), ("<unk>", "SPN")]
        entries += [(w, " ".join(p)) for w, prons in lex.items() for p in prons]
        for w, p in sorted(entries, key=lambda e: (e[0].encode(), e[1].encode())):
            f.write(f"{w} {p}\n")
    with atomic_write(os.path.join(dict_dir, "nonsilence_phones.txt")) as f:
        f.writelines(p + "\n" for p in phones)
    with atomic_write(os.path.join(dict_dir, "silence_phones.txt")) as f:
        f.write("SIL\nSPN\n")
    with atomic_write(os.path.join(dict_dir, "optional_silence.txt")) as f:
        f.write("SIL\n")
    # no stress marks, so (as in egs/wsj) one question of the silence phones and one of all
    # non-silence phones
    with atomic_write(os.path.join(dict_dir, "extra_questions.txt")) as f:
        f.write("SIL SPN\n" + " ".join(phones) + "\n")
    with atomic_write(os.path.join(dict_dir, "lexicon_fallback.txt")) as f:
        f.writelines(w + "\n" for w in fallback)


def write_data_dir(out_dir: str, rows: list[dict], speakers: dict[str, voices.Speaker]) -> None:
    """Write a Kaldi data dir into a temp dir beside ``out_dir`` and swap it in."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(out_dir)}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        write_table(os.path.join(tmp, "wav.scp"), [(r["utt"], r["path"]) for r in rows])
        write_table(os.path.join(tmp, "text"), [(r["utt"], r["text"]) for r in rows])
        write_table(os.path.join(tmp, "utt2spk"), [(r["utt"], r["spk"]) for r in rows])
        write_table(os.path.join(tmp, "utt2dur"),
                    [(r["utt"], f"{r['num_samples'] / channel.TELEPHONE_RATE:.4f}") for r in rows])
        spk2utt: dict[str, list[str]] = {}
        for r in sorted(rows, key=lambda r: r["utt"].encode()):
            spk2utt.setdefault(r["spk"], []).append(r["utt"])
        write_table(os.path.join(tmp, "spk2utt"), {s: " ".join(u) for s, u in spk2utt.items()})
        write_table(os.path.join(tmp, "spk2gender"), {s: speakers[s].gender for s in spk2utt})
        old = out_dir + f".old{os.getpid()}"
        if os.path.exists(out_dir):
            os.rename(out_dir, old)
        os.rename(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


META_COLUMNS = ["utt", "spk", "voice", "rate", "pitch", "range", "wordgap", "snr_db", "noise",
                "rt60", "drr_db", "band_lo", "band_hi", "mulaw", "level_db", "seg_start",
                "seg_end", "num_samples", "text"]


def write_meta(db_dir: str, split: str, rows: list[dict]) -> None:
    with atomic_write(os.path.join(db_dir, "meta", f"{split}.tsv")) as f:
        f.write("\t".join(META_COLUMNS) + "\n")
        for r in sorted(rows, key=lambda r: r["utt"].encode()):
            f.write("\t".join(str(r[c]) for c in META_COLUMNS) + "\n")


def read_meta(db_dir: str, split: str) -> list[dict]:
    path = os.path.join(db_dir, "meta", f"{split}.tsv")
    if not os.path.exists(path):
        fail("no such file", path)
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f]


def build_corpus(db_dir: str, data_dir: str, cfg: SynthConfig, nj: int = 1,
                 progress: bool = True, log=print) -> dict:
    """Synthesise the corpus into ``db_dir`` and write data dirs, dict and LM text under
    ``data_dir``.  Returns a summary (durations, counts, timings)."""
    cfg.check()
    if nj < 1:
        fail(f"--nj must be at least 1, got {nj}")
    t0 = time.time()
    speakers = voices.make_speakers(cfg.seed, cfg.speaker_counts(), cfg.rate_wpm, cfg.accents())
    by_id = {s.spk: s for s in speakers}
    os.makedirs(db_dir, exist_ok=True)
    with atomic_write(os.path.join(db_dir, "meta", "config.json")) as f:
        f.write(cfg.to_json() + "\n")
    with atomic_write(os.path.join(db_dir, "meta", "speakers.tsv")) as f:
        f.write("spk\tsplit\taccent\tvariant\tgender\tpitch\trate\trange\n")
        for s in speakers:
            f.write(f"{s.spk}\t{s.split}\t{s.accent}\t{s.variant}\t{s.gender}\t{s.pitch}\t"
                    f"{s.rate}\t{s.pitch_range}\n")
    for split in voices.SPLITS:  # stale wavs of an earlier, bigger run must not linger
        shutil.rmtree(os.path.join(db_dir, "wav", split), ignore_errors=True)
    summary: dict = {"seed": cfg.seed, "nj": nj, "splits": {}}
    texts: dict[str, list[str]] = {}
    for split in voices.SPLITS:
        t1 = time.time()
        done = synthesize_split(cfg, split, speakers, db_dir, nj, progress)
        rows = [m for _, m in done]
        write_meta(db_dir, split, rows)
        write_data_dir(os.path.join(data_dir, split), rows, by_id)
        texts[split] = [r["text"] for r in rows]
        secs = sum(r["num_samples"] for r in rows) / channel.TELEPHONE_RATE
        nspk = len({r["spk"] for r in rows})
        summary["splits"][split] = {"utts": len(rows), "speakers": nspk, "seconds": round(secs, 1),
                                    "synth_seconds": round(time.time() - t1, 1)}
        log(f"{split}: {len(rows)} utterances, {nspk} speakers, {secs / 60:.1f} min of audio "
            f"({time.time() - t1:.1f} s to synthesise)")
    lex, fallback = lexicon.build_lexicon(grammar.vocabulary())
    write_dict_dir(os.path.join(data_dir, "local", "dict"), lex, fallback)
    log(f"lexicon: {len(lex)} words, {len(fallback)} from the espeak-ng fallback"
        + (f" ({' '.join(fallback)})" if fallback else ""))
    lm = lm_text(cfg, set(texts["dev"]) | set(texts["test"]))
    with atomic_write(os.path.join(data_dir, "local", "lm", "train.txt")) as f:
        f.writelines(s + "\n" for s in lm)
    log(f"LM text: {len(lm)} sentences in {os.path.join(data_dir, 'local', 'lm', 'train.txt')}")
    summary.update(vocab=len(lex), fallback_words=len(fallback), lm_sentences=len(lm),
                   total_seconds=round(time.time() - t0, 1))
    with atomic_write(os.path.join(db_dir, "meta", "summary.json")) as f:
        f.write(json.dumps(summary, indent=1) + "\n")
    return summary
