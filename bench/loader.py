#!/usr/bin/env python3
"""The data loader's overhead in DNN training (not a test).

Builds a Kaldi-format training set in a temp dir (feats.ark/scp of 40-dim features, utt2spk,
per-speaker cmvn.scp; --utts utterances of 50-150 frames, ~200k frames by default, per-utterance
pdf targets), and the egs/synth DNN (440 inputs = 40 x 11 -> 4 x 512 sigmoid -> 428, NG-SGD,
minibatch 256, --threads torch threads as the recipe's 1-worker training), then measures:

  (a) loader_fps: the loader alone -- frames/s through ChunkLoader (read, per-speaker mean
      normalisation, splice +-5 and global CMVN, chunks of 32768 frames, one thread: the loader's
      own), nothing training;
  (b) train_fps_in_memory: training steps (Trainer._update: forward, backward, NG-SGD) on
      minibatches already in memory;
  (c) train_fps_with_loader: one epoch of Trainer.run_epoch, the loader feeding it in its
      background thread (double buffering) and the minibatches gathered from the shuffled chunk.

loader_overhead = 1 - (c) / (b): the share of training speed the data path costs. (b) runs before
and after each of --rounds epochs (c); each epoch is set against the mean of the two (b) beside it
(the VM's speed drifts over minutes), and the median over the rounds counts; train_fps_* are the
medians. Prints ONE JSON line last.

    python bench/loader.py [--utts 2000] [--threads 2] [--rounds 3] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

DIM, CONTEXT, HIDDEN, PDFS = 40, 5, [512] * 4, 428


def make_data(d: str, utts: int, speakers: int, seed: int = 0) -> dict[str, np.ndarray]:
    """feats.scp/ark, utt2spk, cmvn.scp/ark in d; returns {utt: int32 pdf ids} (the targets)."""
    from pynnet.feat.tables import MatrixWriter

    rng = np.random.default_rng(seed)
    targets, stats = {}, {}
    spk_of = {}
    with MatrixWriter(f"ark,scp:{d}/feats.ark,{d}/feats.scp") as w:
        for i in range(utts):
            spk = f"spk{i % speakers:03d}"
            utt = f"{spk}-utt{i:05d}"
            n = int(rng.integers(50, 151))
            m = (rng.standard_normal((n, DIM)) * 2.0 + rng.standard_normal(DIM) * 3.0 + 10.0).astype(np.float32)
            w.write(utt, m)
            targets[utt] = rng.integers(0, PDFS, n).astype(np.int32)
            spk_of[utt] = spk
            s = stats.setdefault(spk, np.zeros((2, DIM + 1)))
            s[0, :DIM] += m.sum(0)
            s[0, DIM] += n
            s[1, :DIM] += (m.astype(np.float64) ** 2).sum(0)
    with open(f"{d}/utt2spk", "w") as f:
        f.writelines(f"{u} {spk_of[u]}\n" for u in sorted(spk_of))
    with MatrixWriter(f"ark,scp:{d}/cmvn.ark,{d}/cmvn.scp") as w:
        for spk in sorted(stats):
            w.write(spk, stats[spk])
    return targets


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--utts", type=int, default=2000, help="utterances of 50-150 frames (default ~200k frames)")
    p.add_argument("--speakers", type=int, default=100)
    p.add_argument("--threads", type=int, default=2, help="torch threads of the training (the recipe's 2)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of (in-memory steps, one epoch with the loader)")
    p.add_argument("--quick", action="store_true", help="a few hundred utterances, one round (smoke test)")
    a = p.parse_args()
    if a.quick:
        a.utts, a.rounds = 300, 1
    if a.utts < 10 or a.rounds < 1 or a.threads < 1 or a.speakers < 1:
        p.error("--utts >= 10, --rounds >= 1, --threads >= 1, --speakers >= 1")

    from pynnet.nnet.data import ChunkLoader, global_cmvn, load_chunk, load_frame_sets, plan_chunks
    from pynnet.nnet.model import Dnn
    from pynnet.nnet.train import Trainer, TrainConfig, _zero_acc

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    res: dict = {"bench": "loader", "threads": a.threads, "loadavg_at_start": round(os.getloadavg()[0], 2),
                 "model": f"{DIM * (2 * CONTEXT + 1)}-{len(HIDDEN)}x{HIDDEN[0]}-{PDFS}", "optimizer": "ngsgd"}
    with tempfile.TemporaryDirectory(prefix="pynnet-bench-loader-") as tmp:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        t = time.perf_counter()
        targets = make_data(data, a.utts, min(a.speakers, a.utts))
        tr, cv, _ = load_frame_sets(data, tmp, apply_cmvn=True, delta_order=0, cv_percent=0.0, seed=777,
                                    targets=(targets, PDFS))
        cfg = TrainConfig(optimizer="ngsgd", minibatch_size=256, learn_rate=0.001, checkpoint_every=10 ** 9)
        model = Dnn(DIM, HIDDEN, PDFS, "sigmoid", context=CONTEXT,
                    input_pipeline={"apply_cmvn": True, "delta_order": 0})
        model.init_random(0)
        model.transform.set_global_cmvn(*global_cmvn(tr, progress=False))
        trainer = Trainer(os.path.join(tmp, "exp"), model, tr, cv, cfg, progress=False)
        res.update(utterances=len(tr.utts), frames=tr.num_frames, setup_seconds=round(time.perf_counter() - t, 2))
        print(f"{len(tr.utts)} utterances, {tr.num_frames} frames of {DIM}-dim features written and "
              f"read in {res['setup_seconds']:.1f} s", file=sys.stderr, flush=True)

        # (a) the loader alone
        chunks = plan_chunks(tr, 1, cfg.seed, cfg.buffer_frames)
        t = time.perf_counter()
        loader = ChunkLoader(tr, chunks, trainer.cpu_transform, 0, [cfg.seed, 1, 2])
        n = 0
        try:
            for ch in loader:
                n += len(ch.y)
        finally:
            loader.close()
        res["loader_fps"] = round(n / (time.perf_counter() - t), 1)
        print(f"(a) the loader alone: {res['loader_fps']:.0f} frames/s", file=sys.stderr, flush=True)

        # (b) steps on minibatches in memory (one chunk's frames, shuffled and cut as training does)
        mb = cfg.minibatch_size
        ch = load_chunk(tr, chunks[0], trainer.cpu_transform, 0, [cfg.seed, 1, 2, 0])
        batches = [(ch.x[ch.order[i:i + mb]].contiguous(), ch.y[ch.order[i:i + mb]].contiguous())
                   for i in range(0, len(ch.y) - mb + 1, mb)]
        steps = max(len(batches), min(300, tr.num_frames // mb // 2))
        model = trainer.model
        model.train()
        for i in range(12):   # warm-up: NG-SGD refreshes its estimates on its first 10 minibatches
            trainer.st = {"step": 0}
            trainer._update(*batches[i % len(batches)], cfg.learn_rate, "warm-up")
        def in_memory_fps() -> float:
            trainer.st = {"step": 0}
            t = time.perf_counter()
            for i in range(steps):
                trainer._update(*batches[i % len(batches)], cfg.learn_rate, "in memory")
            return steps * mb / (time.perf_counter() - t)

        # (b) before and after every (c): each epoch is paired with the mean of the in-memory runs on
        # either side of it, which cancels the VM's drift over the minute
        in_memory, with_loader = [in_memory_fps()], []
        for r in range(a.rounds):
            # (c) one epoch as the Trainer runs it, fed by the background loader
            trainer.st = {"epoch": 1 + r, "chunk": 0, "batch": 0, "step": 0, "lr": cfg.learn_rate, "acc": _zero_acc()}
            t = time.perf_counter()
            trainer.run_epoch()
            wall = time.perf_counter() - t
            frames = trainer.st["acc"]["frames"]
            with_loader.append(frames / wall)
            in_memory.append(in_memory_fps())
            print(f"round {r + 1}: (b) in memory {in_memory[-2]:.0f} and {in_memory[-1]:.0f} frames/s ({steps} "
                  f"minibatches each) around (c) with the loader {with_loader[-1]:.0f} frames/s (one epoch, "
                  f"{frames} frames in {wall:.1f} s)", file=sys.stderr, flush=True)
    ratios = [c / ((in_memory[r] + in_memory[r + 1]) / 2) for r, c in enumerate(with_loader)]
    b, c = statistics.median(in_memory), statistics.median(with_loader)
    res.update(minibatch=mb, rounds=a.rounds, train_fps_in_memory=round(b, 1), train_fps_with_loader=round(c, 1),
               train_fps_in_memory_all=[round(x, 1) for x in in_memory],
               train_fps_with_loader_all=[round(x, 1) for x in with_loader],
               # 1 - (c)/(b), paired per round, the median over the rounds
               loader_overhead=round(1.0 - statistics.median(ratios), 4),
               loader_overhead_all=[round(1.0 - x, 4) for x in ratios],
               # the share of one core the loader needs to keep up with the training
               loader_core_share=round(b / res["loader_fps"], 4))
    print(f"loader overhead: {100 * res['loader_overhead']:.1f}% of the training's speed (rounds: "
          + ", ".join(f"{100 * x:.1f}%" for x in res["loader_overhead_all"]) + f"); the loader alone runs "
          f"{res['loader_fps'] / b:.1f}x faster than the training consumes", file=sys.stderr)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
