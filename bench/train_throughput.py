#!/usr/bin/env python3
"""DNN training throughput against this machine's fp32 GEMM peak (not a test).

Measures torch.mm GFLOP/s on large square matrices (all threads), then frames/s of one training
step (forward, backward, update) of the Switchboard-shaped DNN (429 inputs = 11 x 39, 7 x 2048
sigmoid, 9304 outputs, ~46M parameters) with plain SGD and with NG-SGD at minibatch 256 and
1024. peak fraction = 6 x parameters x frames/s / peak (3 GEMMs of 2 flops per weight per frame).
Each figure is the fastest of several steps (the machine may be shared). Also measured: the same
fraction for the step's GEMMs alone (forward, dL/dx, update of every layer at its real shapes and
layouts, nothing else): the ceiling for this model on this BLAS. Prints ONE JSON line last.

    python bench/train_throughput.py [--threads N] [--steps 8] [--clock wall|cpu] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F

from pynnet.nnet.model import Dnn, _padded_empty
from pynnet.nnet.optim import make_optimizer


CLOCK = time.perf_counter


def gemm_gflops(n: int, reps: int) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    c = torch.empty(n, n)
    torch.mm(a, b, out=c)
    best = float("inf")
    for _ in range(reps):
        t = CLOCK()
        torch.mm(a, b, out=c)
        best = min(best, CLOCK() - t)
    return 2 * n ** 3 / best / 1e9


def gemm_only_fps(model: Dnn, mb: int, reps: int) -> float:
    """Frames/s of the training step's GEMMs alone: per layer [x 1][W b]^T into the next layer's
    input buffer, dL/dx = g W (not for the first layer, as in training) and W += -lr g^T [x 1]."""
    affs = model.affines
    xa = [_padded_empty(mb, a.in_dim + 1, like=a.wb).normal_() for a in affs]
    gs = [torch.randn(mb, a.out_dim) for a in affs]
    gx = [_padded_empty(mb, a.in_dim, like=a.wb) for a in affs]
    outs = [xa[k + 1][:, :-1] for k in range(len(affs) - 1)] + [torch.empty(mb, affs[-1].out_dim)]
    saved = [a.wb.detach().clone() for a in affs]

    def once():
        with torch.no_grad():
            for k, a in enumerate(affs):
                torch.mm(xa[k], a.wb.t(), out=outs[k])
            for k in range(len(affs) - 1, -1, -1):
                if k > 0:
                    torch.mm(gs[k], affs[k].wb[:, :-1], out=gx[k])
                affs[k].wb.addmm_(gs[k].t(), xa[k], alpha=-1e-12)
    once()
    best = float("inf")
    for _ in range(reps):
        t = CLOCK()
        once()
        best = min(best, CLOCK() - t)
    with torch.no_grad():
        for a, w in zip(affs, saved):
            a.wb.copy_(w)
    return mb / best


def train_fps(model: Dnn, opt_name: str, mb: int, steps: int, warmup: int = 2, fused: bool = True) -> float:
    for a in model.affines:          # fresh buffers per configuration
        a.grad, a._xa = None, None
    opt = make_optimizer(opt_name, model)
    opt.fused_lr = 1e-5 if fused else None   # the trainer's single-worker path updates inside backward
    g = torch.Generator().manual_seed(0)
    x = torch.randn(mb * 4, model.transform.output_dim, generator=g)
    y = torch.randint(0, model.arch["output_dim"], (mb * 4,), generator=g)
    lr = 1e-5
    if opt_name == "ngsgd":
        warmup = max(warmup, 11)   # past the preconditioner's first 10 minibatches (updated every time)
    times = []
    for i in range(warmup + steps):
        j = (i % 4) * mb
        t = CLOCK()
        loss = F.cross_entropy(model(x[j:j + mb]), y[j:j + mb], reduction="sum")
        loss.backward()
        opt.step(lr)
        times.append(CLOCK() - t)
    opt.detach()
    # the fastest step: this machine is shared, the minimum is what the code can do on it
    return mb / min(times[warmup:])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="smaller model (smoke test of the script)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: process CPU time (with --threads 1, robust to other jobs on a shared machine)")
    a = p.parse_args()
    global CLOCK
    CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    peak = max(gemm_gflops(3072 if not a.quick else 1024, 4) for _ in range(2))
    print(f"fp32 GEMM peak: {peak:.1f} GFLOP/s with {a.threads} threads", file=sys.stderr)
    hid, out = (2048, 9304) if not a.quick else (256, 500)
    model = Dnn(39, [hid] * 7, out, "sigmoid", context=5)
    model.init_random(0)
    nparam = sum(x.wb.numel() for x in model.affines)
    print(f"model: {model.transform.output_dim} -> 7 x {hid} -> {out}: {nparam / 1e6:.1f}M parameters", file=sys.stderr)
    res = {"bench": "train_throughput", "threads": a.threads, "cpu": platform.processor() or platform.machine(),
           "torch": torch.__version__, "params": nparam, "gemm_gflops": round(peak, 1),
           "loadavg_at_start": round(os.getloadavg()[0], 2), "clock": a.clock}
    for mb in (256, 1024):
        fps = {}
        g_fps = gemm_only_fps(model, mb, 4 if mb == 256 else 3)
        res[f"gemm_only_fraction_mb{mb}"] = round(6 * nparam * g_fps / (peak * 1e9), 3)
        print(f"mb {mb} GEMMs alone: {g_fps:.0f} frames/s = {100 * res[f'gemm_only_fraction_mb{mb}']:.1f}% of peak",
              file=sys.stderr)
        for opt in ("sgd", "ngsgd"):
            fps[opt] = train_fps(model, opt, mb, a.steps if mb == 256 else max(3, a.steps // 2))
            frac = 6 * nparam * fps[opt] / (peak * 1e9)
            res[f"fps_{opt}_mb{mb}"] = round(fps[opt], 1)
            res[f"peak_fraction_{opt}_mb{mb}"] = round(frac, 3)
            print(f"mb {mb} {opt}: {fps[opt]:.0f} frames/s = {100 * frac:.1f}% of peak", file=sys.stderr)
        res[f"ngsgd_overhead_mb{mb}"] = round(fps["sgd"] / fps["ngsgd"] - 1.0, 3)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
