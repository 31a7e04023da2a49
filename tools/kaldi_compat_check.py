#!/usr/bin/env python3
"""Does pynnet's DNN stage work with a model and graph written by a real Kaldi system?

    tools/kaldi_compat_check.py <kaldi-dir> [--work DIR]

<kaldi-dir> holds Kaldi's own files: final.mdl (a GMM model: TransitionModel + AmDiagGmm, binary
or text), HCLG.fst and words.txt (as in exp/tri*/ and exp/tri*/graph/). Kaldi is not needed.
Checks, in order:
  1. pynnet reads final.mdl, and writing it back gives the same bytes (apart from at most a few
     float ulps: the Gaussians' gconsts are recomputed);
  2. alignments in Kaldi's ali.*.gz format against that model (made here by decoding random
     log-likelihoods over HCLG.fst: Kaldi's own alignments would do the same) train a small DNN
     with pynnet-nnet-train, whose targets are the model's pdf ids;
  3. pynnet-nnet-forward --prior-subtract | pynnet-decode-faster-mapped decodes over HCLG.fst.
The features are synthetic (random, shifted by each frame's pdf so that the DNN can learn them):
this checks the formats and the plumbing, not accuracy. Prints one JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kaldi_dir")
    p.add_argument("--work", default="", help="working dir (default: a temporary one)")
    p.add_argument("--utts", type=int, default=60)
    a = p.parse_args()
    import kaldiio

    from pynnet.decode.decoder import decode_loglikes, read_hclg
    from pynnet.hmm.ali_io import write_alignments
    from pynnet.hmm.model_io import read_model, write_model

    # absolute: the programs below run in the work dir, and feats.scp keeps the ark's path
    kaldi_dir = os.path.abspath(a.kaldi_dir)
    mdl, hclg_path, words = (os.path.join(kaldi_dir, f) for f in ("final.mdl", "HCLG.fst", "words.txt"))
    for f in (mdl, hclg_path, words):
        if not os.path.isfile(f):
            sys.exit(f"{sys.argv[0]}: no such file {f}")
    work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="kaldi_compat."))
    for d in ("data", "ali"):
        os.makedirs(os.path.join(work, d), exist_ok=True)

    # 1. the model, read and written back
    tm, am = read_model(mdl)
    copy = os.path.join(work, "ali", "final.mdl")
    with open(mdl, "rb") as f:
        old = f.read()
    write_model(copy, tm, am, binary=old[:2] == b"\0B")
    with open(copy, "rb") as f:
        new = f.read()
    differing = sum(x != y for x, y in zip(old, new)) if len(old) == len(new) else -1
    print(f"{mdl}: {tm.num_pdfs} pdfs, {tm.num_transition_ids} transition ids, {am.num_gauss} Gaussians of "
          f"dim {am.dim}; written back: {len(new)} bytes, {differing} differ", file=sys.stderr)

    # 2. Kaldi-format alignments and features; a DNN trained on them
    hclg = read_hclg(hclg_path)
    rng = np.random.default_rng(0)
    ali = {}
    with kaldiio.WriteHelper(f"ark,scp:{work}/data/feats.ark,{work}/data/feats.scp") as w:
        for i in range(a.utts):
            T = int(rng.integers(80, 160))
            r = decode_loglikes(hclg, tm, rng.normal(size=(T, tm.num_pdfs)).astype(np.float32) * 3)
            if not r.ok:
                continue
            utt = f"spk{i % 3}-u{i:04d}"
            pdf = np.array([tm.transition_id_to_pdf(int(t)) for t in r.alignment])
            w(utt, rng.normal(size=(T, am.dim)).astype(np.float32) + 3 * np.eye(am.dim, dtype=np.float32)[pdf % am.dim])
            ali[utt] = np.asarray(r.alignment, dtype=np.int32)
    write_alignments(os.path.join(work, "ali", "ali.1.gz"), ali)
    with open(os.path.join(work, "data", "utt2spk"), "w") as f:
        f.writelines(f"{u} {u.split('-')[0]}\n" for u in sorted(ali))
    run = {"cwd": work, "capture_output": True, "text": True}
    r = subprocess.run(["pynnet-nnet-train", "--nn-depth", "2", "--hid-dim", "64", "--max-epochs", "4",
                        "--apply-cmvn", "false", "--buffer-frames", "2000", "data", "ali", "dnn"], **run)
    if r.returncode != 0:
        sys.exit(f"pynnet-nnet-train failed:\n{r.stderr}")
    hist = json.load(open(os.path.join(work, "dnn", "log", "train.json")))

    # 3. forward | decoder over the Kaldi graph
    r = subprocess.run(["bash", "-o", "pipefail", "-c",
                        "pynnet-nnet-forward --prior-subtract dnn/final.nnet scp:data/feats.scp ark:- | "
                        f"pynnet-decode-faster-mapped --word-symbol-table {shlex.quote(words)} ali/final.mdl "
                        f"{shlex.quote(hclg_path)} "
                        "ark:- 'ark:|gzip -c > lat.gz'"], **run)
    if r.returncode != 0:
        sys.exit(f"forward | decode failed:\n{r.stderr}")
    done = [x for x in r.stderr.splitlines() if "Done" in x]
    print(done[-1] if done else r.stderr[-500:], file=sys.stderr)
    print(json.dumps({"check": "kaldi_compat", "model": mdl, "num_pdfs": tm.num_pdfs,
                      "model_bytes_differing_after_rewrite": differing, "utterances": len(ali),
                      "cv_frame_acc_first_epoch": round(hist[1]["cv_acc"], 4),
                      "cv_frame_acc_last_epoch": round(hist[-1]["cv_acc"], 4),
                      "decoded": done[-1] if done else None, "work": work}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
