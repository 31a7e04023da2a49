"""A tiny generated corpus for the GMM tests: lang dir (via prepare_lang) + MFCC-like features
drawn from planted per-phone-state Gaussians, with per-speaker offsets that CMVN removes."""
from __future__ import annotations

import os
import subprocess

import numpy as np

PHONES = ["a", "b", "c", "d", "e", "f"]
WORDS = {"ab": "a b", "bad": "b a d", "cafe": "c a f e", "dec": "d e c", "fed": "f e d",
         "face": "f a c e", "bee": "b e", "ace": "a c e"}


def make_dict(d: str) -> None:
    os.makedirs(d, exist_ok=True)
    w = lambda name, text: open(os.path.join(d, name), "w").write(text)  # noqa: E731
    w("silence_phones.txt", "sil\n")
    w("optional_silence.txt", "sil\n")
    w("nonsilence_phones.txt", "".join(p + "\n" for p in PHONES))
    w("extra_questions.txt", "")
    w("lexicon.txt", "<unk> sil\n" + "".join(f"{k} {v}\n" for k, v in sorted(WORDS.items())))


def make_corpus(root: str, num_spk: int = 4, utts_per_spk: int = 10, dim: int = 13, seed: int = 0,
                noise: float = 1.0) -> tuple[str, str]:
    """Write <root>/data/train (feats.scp, cmvn.scp, text, utt2spk, spk2utt) and <root>/lang.
    Returns (data_dir, lang_dir)."""
    import kaldiio

    from pynnet.hmm.lang import prepare_lang

    rng = np.random.default_rng(seed)
    dict_dir = os.path.join(root, "dict")
    make_dict(dict_dir)
    lang = os.path.join(root, "lang")
    if not os.path.exists(os.path.join(lang, "L.fst")):
        prepare_lang(dict_dir, "<unk>", os.path.join(root, "lang_tmp"), lang)
    means = {p: rng.normal(0, 4, (3, dim)) for p in PHONES}
    means["sil"] = rng.normal(0, 4, (1, dim))
    data = os.path.join(root, "data", "train")
    os.makedirs(data, exist_ok=True)
    words = sorted(WORDS)
    feats, text, utt2spk, truth, segments = {}, {}, {}, {}, {}
    for s in range(num_spk):
        spk = f"spk{s + 1}"
        offset = rng.normal(0, 2, dim)
        for u in range(utts_per_spk):
            utt = f"{spk}-u{u + 1:03d}"
            ws = list(rng.choice(words, size=rng.integers(2, 5)))
            # (phone, planted state, frames, positional phone name)
            segs = [("sil", 0, rng.integers(8, 15), "sil")]
            for w in ws:
                pron = WORDS[w].split()
                for i, p in enumerate(pron):
                    pos = "_S" if len(pron) == 1 else "_B" if i == 0 else "_E" if i == len(pron) - 1 else "_I"
                    for st in range(3):
                        segs.append((p, st, rng.integers(2, 7), p + pos))
                if rng.random() < 0.3:
                    segs.append(("sil", 0, rng.integers(3, 8), "sil"))
            segs.append(("sil", 0, rng.integers(8, 15), "sil"))
            x = np.concatenate([rng.normal(means[p][st], noise, (n, dim)) for p, st, n, _ in segs]) + offset
            feats[utt] = x.astype(np.float32)
            truth[utt] = [p for p, _, n, _ in segs for _ in range(n)]
            segments[utt] = [(name, int(st), int(n)) for _, st, n, name in segs]
            text[utt] = " ".join(ws)
            utt2spk[utt] = spk
    with kaldiio.WriteHelper(f"ark,scp:{data}/feats.ark,{data}/feats.scp") as wr:
        for utt in sorted(feats):
            wr(utt, feats[utt])
    spk2utt: dict[str, list[str]] = {}
    for utt, spk in sorted(utt2spk.items()):
        spk2utt.setdefault(spk, []).append(utt)
    with kaldiio.WriteHelper(f"ark,scp:{data}/cmvn.ark,{data}/cmvn.scp") as wr:
        for spk, us in sorted(spk2utt.items()):
            x = np.concatenate([feats[u] for u in us]).astype(np.float64)
            st = np.zeros((2, dim + 1))
            st[0, :dim], st[1, :dim], st[0, dim] = x.sum(0), (x * x).sum(0), x.shape[0]
            wr(spk, st)
    # the planted phone of every frame, to score alignments against
    with open(os.path.join(root, "truth.txt"), "w") as f:
        f.writelines(f"{u} {' '.join(truth[u])}\n" for u in sorted(truth))
    # and the planted (positional phone, state, frames) segments
    with open(os.path.join(root, "segments_truth.txt"), "w") as f:
        f.writelines(f"{u} {' '.join(f'{a}:{b}:{c}' for a, b, c in segments[u])}\n" for u in sorted(segments))
    with open(f"{data}/text", "w") as f:
        f.writelines(f"{u} {text[u]}\n" for u in sorted(text))
    with open(f"{data}/utt2spk", "w") as f:
        f.writelines(f"{u} {utt2spk[u]}\n" for u in sorted(utt2spk))
    with open(f"{data}/spk2utt", "w") as f:
        f.writelines(f"{s} {' '.join(us)}\n" for s, us in sorted(spk2utt.items()))
    return data, lang


if __name__ == "__main__":
    import sys

    print(make_corpus(sys.argv[1], *(int(a) for a in sys.argv[2:])))


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script_env() -> dict:
    """The environment path.sh gives the recipe scripts (utils/ and the venv on PATH, C locale,
    one thread per job)."""
    env = dict(os.environ)
    env["PATH"] = f"{ROOT}/utils:{ROOT}/tools/venv/bin:" + env["PATH"]
    env["LC_ALL"] = "C"
    env["OMP_NUM_THREADS"] = "1"
    return env


def sh(cwd, *cmd, check: bool = True, timeout: float = 600):
    """Run a script (argv) in cwd with script_env(); check: fail with its output's tail."""
    r = subprocess.run(list(cmd), cwd=cwd, env=script_env(), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r
