"""The speaker inventory: speakers are (accent, variant, base pitch, base rate, pitch range)
combinations; train, dev and test use DISJOINT variants (test voices are never heard in
training); dev and test speak the training accents plus optional extra accents."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pynnet.corpora.synth import espeak
from pynnet.io.errors import fail

# Variants under espeak-ng-data/voices/!v that sound like a person talking (robotic, whispered,
# echoing, joke and 'fast_test' variants are left out), grouped by family so that every split
# gets some of each family (klatt voices use a different synthesiser).
VARIANT_FAMILIES: dict[str, list[str]] = {
    "male": ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"],
    "female": ["f1", "f2", "f3", "f4", "f5"],
    "klatt": ["klatt", "klatt2", "klatt3", "klatt4", "klatt5", "klatt6"],
    "named_female": ["Alicia", "Andrea", "Annie", "anika", "aunty", "belinda", "grandma",
                     "linda", "steph", "steph2", "steph3"],
    "named_male": ["Alex", "Andy", "Denis", "Diogo", "Gene", "Gene2", "Henrique", "Hugo",
                   "Jacky", "Lee", "Marco", "Mario", "Michael", "Mike", "Nguyen", "Reed",
                   "Storm", "adam", "antonio", "benjamin", "boris", "caleb", "david", "ed",
                   "edward", "edward2", "grandpa", "gustave", "ian", "iven", "iven2", "iven3",
                   "iven4", "john", "kaukovalta", "marcelo", "max", "michel", "miguel", "mike2",
                   "norbert", "pablo", "paul", "pedro", "quincy", "rob", "robert", "sandro",
                   "shelby", "travis", "victor", "zac"],
}
# Accents (espeak-ng-data/lang voice file names).  The defaults of SynthConfig: test speaks the
# training accents with unseen voices (as Switchboard's test speakers are new but their dialects
# are in training); dev adds one unseen accent; HARD_TEST_ACCENTS are the "accent never heard"
# condition (SynthConfig.test_extra_accents), where espeak's accent rules change the phones
# themselves and triphone trees fitted to the training accents stop helping (docs/notes/gmm.md).
TRAIN_ACCENTS = ["en-us", "en", "en-gb-x-rp", "en-gb-x-gbclan"]
DEV_EXTRA_ACCENTS = ["en-us-nyc"]
HARD_TEST_ACCENTS = ["en-gb-scotland", "en-029", "en-gb-x-gbcwmd"]
SPLITS = ("train", "dev", "test")
SPLIT_TAG = {"train": "tr", "dev": "dv", "test": "ts"}
# share of each variant family going to train / dev / test
SPLIT_SHARE = {"train": 0.6, "dev": 0.15, "test": 0.25}


@dataclass(frozen=True)
class Speaker:
    spk: str            # speaker id, e.g. tr007
    split: str
    accent: str
    variant: str
    gender: str         # m / f
    pitch: int          # espeak base pitch 0..100
    rate: int           # words per minute
    pitch_range: int    # espeak pitch range 0..100

    @property
    def voice(self) -> str:
        return f"{self.accent}+{self.variant}"


def split_variants(rng: np.random.Generator) -> dict[str, list[str]]:
    """Partition the variants into disjoint train/dev/test sets, family by family; every
    variant is checked to exist (espeak-ng would silently fall back to its default voice)."""
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    for fam, names in VARIANT_FAMILIES.items():
        names = [n for n in names if espeak.variant_exists(n)]
        if len(names) < 3:
            fail(f"voice family '{fam}' has fewer than 3 variants installed",
                 espeak.variant_path(""))
        names = [names[i] for i in rng.permutation(len(names))]
        n_dev = max(1, int(round(SPLIT_SHARE["dev"] * len(names))))
        n_test = max(1, int(round(SPLIT_SHARE["test"] * len(names))))
        out["dev"] += names[:n_dev]
        out["test"] += names[n_dev:n_dev + n_test]
        out["train"] += names[n_dev + n_test:]
    return out


def split_accents(accents: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per split, the accents its speakers take in turn: dev and test get their extra accents
    first (so even a few speakers include them), then the training accents."""
    out = {"train": list(accents["train"]),
           "dev": list(accents.get("dev", [])) + list(accents["train"]),
           "test": list(accents.get("test", [])) + list(accents["train"])}
    for split, names in out.items():
        if not names:
            fail(f"no accents for {split}")
        for a in names:
            espeak.check_voice(a, None)
    return out


def make_speakers(seed: int, counts: dict[str, int], rate_range: tuple[float, float],
                  accents: dict[str, list[str]] | None = None,
                  pitch_range: tuple[float, float] = (25, 75),
                  intonation_range: tuple[float, float] = (20, 90)) -> list[Speaker]:
    """``counts[split]`` speakers per split.  Variants are used round-robin in a shuffled order
    (so N speakers cover min(N, #variants) voices); accents round-robin (``accents``: "train",
    and the extra "dev"/"test" accents; default: TRAIN_ACCENTS, DEV_EXTRA_ACCENTS, none);
    base pitch, rate and pitch range drawn per speaker."""
    if accents is None:
        accents = {"train": TRAIN_ACCENTS, "dev": DEV_EXTRA_ACCENTS, "test": []}
    plan = split_accents(accents)
    rng = np.random.default_rng([seed, 7001])
    variants = split_variants(rng)
    speakers: list[Speaker] = []
    for split in SPLITS:
        n = counts[split]
        if n < 1:
            fail(f"need at least one {split} speaker")
        vs = [variants[split][i] for i in rng.permutation(len(variants[split]))]
        for k in range(n):
            variant = vs[k % len(vs)]
            accent = plan[split][k % len(plan[split])]
            speakers.append(Speaker(
                spk=f"{SPLIT_TAG[split]}{k + 1:03d}", split=split, accent=accent, variant=variant,
                gender=espeak.variant_gender(variant),
                pitch=int(rng.integers(int(pitch_range[0]), int(pitch_range[1]) + 1)),
                rate=int(rng.integers(int(rate_range[0]), int(rate_range[1]) + 1)),
                pitch_range=int(rng.integers(int(intonation_range[0]), int(intonation_range[1]) + 1))))
    return speakers
