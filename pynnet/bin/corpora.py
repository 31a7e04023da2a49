"""Corpus preparation programs.

pynnet-synth-corpus [options] <db-dir> <data-dir>
  Synthesise the built-in telephone-dialogue corpus (espeak-ng voices and accents through a
  simulated telephone channel) into <db-dir> and write Kaldi data dirs <data-dir>/{train,dev,test},
  the dict dir <data-dir>/local/dict and LM text <data-dir>/local/lm/train.txt.
"""
from __future__ import annotations

import argparse
import json
import sys

from pynnet.bin._cli import cli, run
from pynnet.bin._opts import float_opt, int_opt, parser
from pynnet.io.errors import fail
from pynnet.io.tables import ascii_float


def _range(text: str) -> tuple[float, float]:
    """'5:20' or '5' -> (5.0, 20.0) / (5.0, 5.0)."""
    parts = [ascii_float(x) for x in text.split(":")]
    if None in parts:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX or a number, got '{text}'")
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected MIN:MAX, got '{text}'")
    return (parts[0], parts[1])


def _weights(text: str) -> dict[str, float]:
    """'white=1,pink=2,pink+babble=1' -> {...}."""
    out = {}
    for item in text.split(","):
        name, eq, w = item.partition("=")
        weight = ascii_float(w) if eq else 1.0
        if weight is None:
            raise argparse.ArgumentTypeError(f"bad noise weight '{item}' (want TYPE=WEIGHT)")
        out[name.strip()] = weight
    return out


@cli
def synth_corpus_main(argv: list[str] | None = None) -> int:
    from pynnet.corpora.synth.corpus import SynthConfig, build_corpus

    p = parser("pynnet-synth-corpus",
               "Synthesise the egs/synth telephone-dialogue corpus and write Kaldi data dirs, dict dir "
               "and LM text.", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    d = SynthConfig()
    p.add_argument("db_dir", help="where the wavs (and meta/) go")
    p.add_argument("data_dir", help="where {train,dev,test}/, local/dict/ and local/lm/ go")
    p.add_argument("--tiny", action="store_true",
                   help="test preset: a few dozen short utterances (options below still override)")
    p.add_argument("--seed", type=int_opt, default=None, help=f"random seed [{d.seed}]")
    p.add_argument("--nj", type=int_opt, default=1, help="parallel synthesis processes")
    p.add_argument("--train-hours", type=float_opt, default=None, help=f"[{d.train_hours}]")
    p.add_argument("--dev-minutes", type=float_opt, default=None, help=f"[{d.dev_minutes}]")
    p.add_argument("--test-minutes", type=float_opt, default=None, help=f"[{d.test_minutes}]")
    p.add_argument("--train-speakers", type=int_opt, default=None, help=f"[{d.train_speakers}]")
    p.add_argument("--dev-speakers", type=int_opt, default=None, help=f"[{d.dev_speakers}]")
    p.add_argument("--test-speakers", type=int_opt, default=None, help=f"[{d.test_speakers}]")
    p.add_argument("--lm-sentences", type=int_opt, default=None, help=f"[{d.lm_sentences}]")
    g = p.add_argument_group("difficulty (ranges are MIN:MAX)")
    g.add_argument("--snr-db", type=_range, default=None, help=f"[{d.snr_db[0]:g}:{d.snr_db[1]:g}]")
    g.add_argument("--noise-weights", type=_weights, default=None,
                   help="noise type mix, e.g. white=1,pink=1,babble=2,pink+babble=1 "
                        f"[{','.join(f'{k}={v:g}' for k, v in d.noise_weights.items())}]")
    g.add_argument("--reverb-prob", type=float_opt, default=None, help=f"[{d.reverb_prob}]")
    g.add_argument("--rt60", type=_range, default=None, help=f"seconds [{d.rt60[0]:g}:{d.rt60[1]:g}]")
    g.add_argument("--mulaw-prob", type=float_opt, default=None, help=f"[{d.mulaw_prob}]")
    g.add_argument("--rate-wpm", type=_range, default=None,
                   help=f"speaker base rates, words/minute [{d.rate_wpm[0]:g}:{d.rate_wpm[1]:g}]")
    g.add_argument("--rate-jitter", type=float_opt, default=None, help=f"[{d.rate_jitter}]")
    g.add_argument("--pitch-jitter", type=float_opt, default=None, help=f"[{d.pitch_jitter}]")
    g.add_argument("--test-extra-accents", default=None, type=lambda v: tuple(x for x in v.split(",") if x),
                   help="comma-separated accents for test speakers on top of the training accents "
                        "(e.g. en-gb-scotland,en-029,en-gb-x-gbcwmd: accents never heard in training) "
                        f"[{','.join(d.test_extra_accents) or 'none'}]")
    g.add_argument("--config", default=None,
                   help="JSON file of SynthConfig fields (as written to <db-dir>/meta/config.json); "
                        "command-line options override it")
    a = p.parse_args(argv)

    kw: dict = {}
    if a.config:
        try:
            with open(a.config, encoding="utf-8") as f:
                kw = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            fail(f"cannot read config: {e}", a.config)
        known = set(SynthConfig.__dataclass_fields__)
        bad = sorted(set(kw) - known)
        if bad:
            fail(f"unknown config fields {bad}", a.config)
        for name in ("train_accents", "dev_extra_accents", "test_extra_accents"):
            if name in kw and not (isinstance(kw[name], list) and all(isinstance(x, str) for x in kw[name])):
                fail(f"{name} must be a list of accent names, e.g. [\"en-029\"]", a.config)
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
    for name in ("seed", "train_hours", "dev_minutes", "test_minutes", "train_speakers",
                 "dev_speakers", "test_speakers", "lm_sentences", "snr_db", "noise_weights",
                 "reverb_prob", "rt60", "mulaw_prob", "rate_wpm", "rate_jitter", "pitch_jitter",
                 "test_extra_accents"):
        v = getattr(a, name)
        if v is not None:
            kw[name] = v
    cfg = SynthConfig.tiny(**kw) if a.tiny else SynthConfig(**kw)
    summary = build_corpus(a.db_dir, a.data_dir, cfg, nj=a.nj,
                           log=lambda m: print(f"pynnet-synth-corpus: {m}", file=sys.stderr))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    run(synth_corpus_main)
