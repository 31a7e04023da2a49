#!/usr/bin/env python3
"""DNN training throughput against this machine's fp32 GEMM peak (not a test).

Measures torch.mm GFLOP/s on large square matrices (all threads), then frames/s of one training
step (forward, backward, update) of the Switchboard-shaped DNN (429 inputs = 11 x 39, 7 x 2048
sigmoid, 9304 outputs, ~46M parameters) with plain SGD and with NG-SGD at minibatch 256 and
1024. peak fraction = 6 x parameters x frames/s / peak (3 GEMMs of 2 flops per weight per frame).
SGD, NG-SGD and the step's GEMMs alone (forward, dL/dx, update of every layer at its real shapes
and layouts, nothing else: the ceiling on this BLAS) run in lockstep, one step each per round,
followed by one 3072^2 GEMM (the peak sample, about as long as a step). The machine is a VM whose
GEMM rate moves by up to 2x from moment to moment, so step and peak are measured alike:
peak_fraction_* = the fastest step over the rounds / the fastest peak sample over the SAME rounds
(the same statistic over the same number of samples of similar length, taken side by side);
peak_fraction_*_median = the median over rounds of (that round's step rate / that round's peak);
peak_fraction_*_vs_highest = the fastest step against the highest peak sample of the whole run,
warm-up included (more samples than steps: biased low; the definition used before 2026-11-30 13:20).
ngsgd_overhead_* compares fastest steps, ngsgd_overhead_mean_* the mean over all measured steps
(with the estimate refresh every 4th minibatch). Prints ONE JSON line last.

    python bench/train_throughput.py [--threads N] [--steps 12] [--clock wall|cpu] [--quick]
    python bench/train_throughput.py --device cuda     (the GPU: fp32 peak without TF32, same figures)
    python bench/train_throughput.py --time-preconditioner 256     (where NG-SGD's extra time goes)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from pynnet.nnet.model import Dnn, _padded_empty
from pynnet.nnet.optim import make_optimizer


CLOCK = time.perf_counter
DEVICE = torch.device("cpu")


def _cuda_clock() -> float:
    """Wall clock after the GPU has finished what was queued (kernels run asynchronously)."""
    torch.cuda.synchronize()
    return time.perf_counter()


def _peak_size(hid: int) -> int:
    """The square GEMM of the peak sample: about as long as a training step (a GPU runs a step
    ~100x faster than these 2 cores, so it gets a larger one)."""
    if hid != 2048:
        return 1024
    return 8192 if DEVICE.type == "cuda" else 3072


def gemm_gflops(n: int, reps: int) -> float:
    a, b = torch.randn(n, n, device=DEVICE), torch.randn(n, n, device=DEVICE)
    c = torch.empty(n, n, device=DEVICE)
    torch.mm(a, b, out=c)
    best = float("inf")
    for _ in range(reps):
        t = CLOCK()
        torch.mm(a, b, out=c)
        best = min(best, CLOCK() - t)
    return 2 * n ** 3 / best / 1e9


class GemmOnly:
    """The training step's GEMMs alone, on copies of the model's [W b] (same shapes and layouts):
    per layer [x 1][W b]^T into the next layer's input buffer, dL/dx = g W (not for the first
    layer, as in training) and W += -lr g^T [x 1]. Nothing else: the ceiling for the step."""

    def __init__(self, model: Dnn, mb: int):
        affs = model.affines
        self.wb = [_padded_empty(a.out_dim, a.in_dim + 1, like=a.wb).copy_(a.wb.detach()) for a in affs]
        self.xa = [_padded_empty(mb, a.in_dim + 1, like=a.wb).normal_() for a in affs]
        self.g = [torch.randn(mb, a.out_dim, device=DEVICE) for a in affs]
        self.gx = [_padded_empty(mb, a.in_dim, like=a.wb) for a in affs]
        self.out = [self.xa[k + 1][:, :-1] for k in range(len(affs) - 1)] + [torch.empty(mb, affs[-1].out_dim, device=DEVICE)]

    def step(self) -> None:
        L = len(self.wb)
        for k in range(L):
            torch.mm(self.xa[k], self.wb[k].t(), out=self.out[k])
        for k in range(L - 1, -1, -1):
            if k > 0:
                torch.mm(self.g[k], self.wb[k][:, :-1], out=self.gx[k])
            self.wb[k].addmm_(self.g[k].t(), self.xa[k], alpha=-1e-12)


def _train_step(model: Dnn, opt, x, y, lr: float) -> None:
    loss = F.cross_entropy(model(x), y, reduction="sum")
    loss.backward()
    opt.step(lr)


def _runs(hid: int, out: int) -> dict:
    """{"sgd": (model, opt), "ngsgd": (model, opt)}: the Switchboard-shaped DNN (or --quick's) with
    each optimizer, updating inside backward as the trainer's single-worker path does."""
    runs = {}
    for name in ("sgd", "ngsgd"):
        model = Dnn(39, [hid] * 7, out, "sigmoid", context=5)
        model.init_random(0)
        model.to(DEVICE)
        opt = make_optimizer(name, model)
        opt.fused_lr = 1e-5
        runs[name] = (model, opt)
    return runs


def _batches(mb: int, model: Dnn, out: int, n: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(mb * n, model.transform.output_dim, generator=g).to(DEVICE),
            torch.randint(0, out, (mb * n,), generator=g).to(DEVICE))


def measure(mb: int, steps: int, hid: int, out: int, peaks: list[float]) -> dict[str, list[float]]:
    """Per measured round: the seconds of one step of plain SGD, NG-SGD and the GEMMs alone at
    minibatch mb, and the GFLOP/s of the peak sample taken right after them (key "peak"; also
    appended to peaks). Lockstep rounds: a shared machine's load changes hit all of them alike."""
    runs = _runs(hid, out)
    x, y = _batches(mb, runs["sgd"][0], out)
    gemm = GemmOnly(runs["sgd"][0], mb)
    # NG-SGD warms up past its first 10 minibatches (estimate refreshed on each of them); SGD
    # and the GEMMs need 2 steps (buffers, first-touch page faults): the time saved goes into
    # measured rounds
    warmup = {"ngsgd": 11, "sgd": 2, "gemm_only": 2}
    start = max(warmup.values())
    times: dict[str, list[float]] = {"sgd": [], "ngsgd": [], "gemm_only": [], "peak": []}
    for i in range(start + steps):
        j = (i % 4) * mb
        for name, (model, opt) in runs.items():
            if i < start - warmup[name]:
                continue
            t = CLOCK()
            _train_step(model, opt, x[j:j + mb], y[j:j + mb], 1e-5)
            times[name].append(CLOCK() - t)
        if i >= start - warmup["gemm_only"]:
            t = CLOCK()
            gemm.step()
            times["gemm_only"].append(CLOCK() - t)
        if i >= start:
            peaks.append(gemm_gflops(_peak_size(hid), 1))
            times["peak"].append(peaks[-1])
    for _, opt in runs.values():
        opt.detach()
    return {k: v[-steps:] for k, v in times.items()}


def profile_steps(mb: int, hid: int, out: int, rows: int = 18) -> None:
    """torch.profiler over two steps (after warm-up) of SGD and NG-SGD: where the time goes."""
    from torch.profiler import ProfilerActivity, profile
    for name, (model, opt) in _runs(hid, out).items():
        x, y = _batches(mb, model, out, 1)
        for _ in range(11):
            _train_step(model, opt, x, y, 1e-5)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(2):
                _train_step(model, opt, x, y, 1e-5)
        print(f"--- {name}, minibatch {mb}, 2 steps", file=sys.stderr)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows), file=sys.stderr)
        opt.detach()


def time_preconditioner(mb: int, hid: int, out: int, steps: int = 12) -> dict[str, float]:
    """SGD and NG-SGD steps in lockstep, with the NG-SGD preconditioner calls timed inside the step:
    where NG-SGD's extra time goes (stderr: per-step ms; returns the fastest and median figures)."""
    from pynnet.nnet import ngsgd
    spent = [0.0]
    real = ngsgd.OnlineNaturalGradient.precondition

    def timed(self, *a, **k):
        t = CLOCK()
        try:
            return real(self, *a, **k)
        finally:
            spent[0] += CLOCK() - t

    ngsgd.OnlineNaturalGradient.precondition = timed
    try:
        runs = _runs(hid, out)
        x, y = _batches(mb, runs["sgd"][0], out)
        ms: dict[str, list[float]] = {"sgd": [], "ngsgd": [], "precondition": []}
        for i in range(11 + steps):
            j = (i % 4) * mb
            for name, (model, opt) in runs.items():
                spent[0] = 0.0
                t = CLOCK()
                _train_step(model, opt, x[j:j + mb], y[j:j + mb], 1e-5)
                if i >= 11:
                    ms[name].append(1000 * (CLOCK() - t))
                    if name == "ngsgd":
                        ms["precondition"].append(1000 * spent[0])
        for _, opt in runs.values():
            opt.detach()
    finally:
        ngsgd.OnlineNaturalGradient.precondition = real
    print(f"minibatch {mb}, ms per step: " + "; ".join(
        f"{k} fastest {min(v):.1f} median {statistics.median(v):.1f}" for k, v in ms.items()), file=sys.stderr)
    print("preconditioner ms per step (every 4th refreshes the estimate): "
          + " ".join(f"{v:.0f}" for v in ms["precondition"]), file=sys.stderr)
    return {f"{k}_ms_{s}": round(f(v), 1) for k, v in ms.items()
            for s, f in (("fastest", min), ("median", statistics.median))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=12, help="measured rounds at minibatch 256 (half at 1024)")
    p.add_argument("--quick", action="store_true", help="smaller model (smoke test of the script)")
    p.add_argument("--profile", type=int, metavar="MB", default=0,
                   help="only print a per-op profile of SGD and NG-SGD steps at minibatch MB (stderr)")
    p.add_argument("--time-preconditioner", type=int, metavar="MB", default=0,
                   help="only time NG-SGD's preconditioner calls inside steps at minibatch MB (stderr)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: process CPU time (with --threads 1, robust to other jobs on a shared machine)")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (wall clock, the GPU synchronised)")
    a = p.parse_args()
    global CLOCK, DEVICE
    DEVICE = torch.device(a.device)
    if DEVICE.type == "cuda":
        if a.clock == "cpu":
            p.error("--clock cpu measures the CPU, not the GPU")
        # fp32 means fp32: TF32 tensor cores would inflate both the peak and the steps
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        CLOCK = _cuda_clock
    else:
        CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.profile:
        profile_steps(a.profile, *((2048, 9304) if not a.quick else (256, 500)))
        print(json.dumps({"bench": "train_throughput", "profile_minibatch": a.profile, "threads": a.threads}))
        return 0
    if a.time_preconditioner:
        r = time_preconditioner(a.time_preconditioner, *((2048, 9304) if not a.quick else (256, 500)))
        print(json.dumps({"bench": "train_throughput", "minibatch": a.time_preconditioner, "threads": a.threads} | r))
        return 0
    peaks = [gemm_gflops(_peak_size(2048 if not a.quick else 256), 4) for _ in range(2)]
    hid, out = (2048, 9304) if not a.quick else (256, 500)
    nparam = sum(x.wb.numel() for x in Dnn(39, [hid] * 7, out, "sigmoid", context=5).affines)
    print(f"model: 429 -> 7 x {hid} -> {out}: {nparam / 1e6:.1f}M parameters", file=sys.stderr)
    res = {"bench": "train_throughput", "threads": a.threads, "cpu": platform.processor() or platform.machine(),
           "torch": torch.__version__, "params": nparam, "loadavg_at_start": round(os.getloadavg()[0], 2),
           "clock": a.clock, "device": str(DEVICE) if DEVICE.type == "cpu" else torch.cuda.get_device_name(DEVICE)}
    rounds = {mb: measure(mb, a.steps if mb == 256 else max(3, a.steps // 2), hid, out, peaks) for mb in (256, 1024)}
    highest = max(peaks)
    res["gemm_gflops"] = round(highest, 1)
    res["gemm_gflops_lowest"] = round(min(peaks), 1)
    print(f"fp32 GEMM peak samples: {min(peaks):.1f}-{highest:.1f} GFLOP/s with {a.threads} threads", file=sys.stderr)
    for mb, r in rounds.items():
        peak = max(r["peak"])            # the fastest peak sample of this minibatch size's rounds
        res[f"gemm_gflops_mb{mb}"] = round(peak, 1)
        fps = {}
        for k in ("gemm_only", "sgd", "ngsgd"):
            fps[k] = mb / min(r[k])      # the fastest step: what the code can do on this machine
            gflops = [6 * nparam * mb / t / 1e9 for t in r[k]]
            frac = 6 * nparam * fps[k] / (peak * 1e9)
            median = statistics.median(s / p for s, p in zip(gflops, r["peak"]))
            name = f"peak_fraction_{k}_mb{mb}" if k != "gemm_only" else f"gemm_only_fraction_mb{mb}"
            if k != "gemm_only":
                res[f"fps_{k}_mb{mb}"] = round(fps[k], 1)
            res[name] = round(frac, 3)
            res[f"{name}_median"] = round(median, 3)
            res[f"{name}_vs_highest"] = round(6 * nparam * fps[k] / (highest * 1e9), 3)
            print(f"mb {mb} {k}: {fps[k]:.0f} frames/s = {100 * frac:.1f}% of the rounds' peak {peak:.1f} "
                  f"(median per round {100 * median:.1f}%, {100 * res[name + '_vs_highest']:.1f}% of the highest)",
                  file=sys.stderr)
        res[f"ngsgd_overhead_mb{mb}"] = round(fps["sgd"] / fps["ngsgd"] - 1.0, 3)
        # mean over the measured steps (includes NG-SGD's estimate refresh every 4th minibatch)
        res[f"ngsgd_overhead_mean_mb{mb}"] = round(sum(r["ngsgd"]) / sum(r["sgd"]) - 1.0, 3)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
