#!/usr/bin/env python3
"""The training step's GEMMs alone (429 -> 7 x 2048 -> 9304: forward, dL/dx, dL/dW) on two cores:
MKL's two threads per GEMM against task parallelism with two single-threaded workers (the forward
split into two row halves, each run through all layers by one worker; the backward as two chains,
dL/dx on one core, dL/dW one layer behind on the other). An experiment kept for its figures in
docs/PERFORMANCE.md; the training step uses MKL's threads.

    python bench/task_parallel_gemms.py [--minibatch 256] [--rounds 3] [--steps 30]

Each round: the two-thread 8192^2 GEMM peak (best of 3), then each variant timed over --steps
steps; fractions of that round's peak (6 x parameters x frames / time / peak), fastest step and
median. Prints one JSON line last."""
from __future__ import annotations

import argparse
import json
import os
import queue
import threading
import time

import torch

DIMS = [429] + [2048] * 7 + [9304]


class Worker(threading.Thread):
    """A thread with its own single-threaded MKL/OpenMP settings running the callables it is given."""

    def __init__(self):
        super().__init__(daemon=True)
        self.todo: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.start()

    def run(self) -> None:
        torch.set_num_threads(1)   # per thread (OpenMP's and MKL's thread-local settings)
        while True:
            self.todo.get()()
            self.done.put(None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minibatch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    load = os.getloadavg()[0]
    n, half = a.minibatch, a.minibatch // 2
    torch.manual_seed(0)
    W = [torch.randn(o, i) * 0.01 for i, o in zip(DIMS[:-1], DIMS[1:])]
    X = [torch.randn(n, d) for d in DIMS[:-1]]   # each layer's input
    G = [torch.randn(n, d) for d in DIMS[1:]]    # dL/d(each layer's output)
    Y = [torch.empty(n, d) for d in DIMS[1:]]
    GX = [torch.empty(n, d) for d in DIMS[:-1]]
    GW = [torch.empty_like(w) for w in W]
    flops = 6 * sum(i * o for i, o in zip(DIMS[:-1], DIMS[1:])) * n

    def mkl_step() -> None:
        for l, w in enumerate(W):
            torch.mm(X[l], w.t(), out=Y[l])
        for l in reversed(range(len(W))):
            if l > 0:
                torch.mm(G[l], W[l], out=GX[l])
            torch.mm(G[l].t(), X[l], out=GW[l])

    worker = Worker()

    def forward_rows(lo: int, hi: int) -> None:
        for l, w in enumerate(W):
            torch.mm(X[l][lo:hi], w.t(), out=Y[l][lo:hi])

    def task_step() -> None:
        worker.todo.put(lambda: forward_rows(half, n))
        forward_rows(0, half)
        worker.done.get()
        for l in reversed(range(len(W))):
            worker.todo.put(lambda l=l: torch.mm(G[l].t(), X[l], out=GW[l]))
            if l > 0:
                torch.mm(G[l], W[l], out=GX[l])
        for _ in W:
            worker.done.get()

    def times(step, threads: int) -> list[float]:
        torch.set_num_threads(threads)
        for _ in range(3):
            step()
        out = []
        for _ in range(a.steps):
            t = time.perf_counter()
            step()
            out.append(time.perf_counter() - t)
        return sorted(out)

    big = torch.randn(8192, 8192)
    rounds = []
    for r in range(a.rounds):
        torch.set_num_threads(2)
        torch.mm(big, big)
        best = min(_timed(lambda: torch.mm(big, big)) for _ in range(3))
        peak = 2 * 8192 ** 3 / best / 1e9
        row = {"peak_gflops": round(peak, 1)}
        for name, step, threads in (("mkl_2_threads", mkl_step, 2), ("task_parallel", task_step, 1)):
            ts = times(step, threads)
            row[name] = round(flops / ts[0] / 1e9 / peak, 3)
            row[name + "_median"] = round(flops / ts[len(ts) // 2] / 1e9 / peak, 3)
        rounds.append(row)
        print(f"round {r + 1}: {row}", flush=True)
    print(json.dumps({"bench": "task_parallel_gemms", "minibatch": n, "loadavg_at_start": load,
                      "rounds": rounds}))
    return 0


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


if __name__ == "__main__":
    raise SystemExit(main())
