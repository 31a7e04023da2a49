"""Data-parallel training throughput on the Switchboard-shaped 46M DNN (Seide et al.: 429 inputs =
11 x 39, 7 x 2048 sigmoid, 9304 outputs), one thread per rank, in-memory random frames (the
step's cost, not the data loading's):

* K=1 and K=2 ranks (mpiexec -n 2) for model averaging every 1, 10 and 50 minibatches, fp32
  gradient allreduce and 1-bit averaging (every 10), all with NG-SGD: frames/s, bytes sent per
  frame (per rank), share of the step time in communication;
* the peers on the same model and data: torch DistributedDataParallel (gloo) against our
  allreduce mode, and torch's PeriodicModelAverager (post-local SGD) against our averaging every
  10, both with plain SGD on both sides (the peers have no NG-SGD).

    python bench/parallel.py [--steps 50] [--minibatch 128] [--plot docs/parallel_speedup.png]

Prints one JSON line at the end (speedup_* = K=2 frames/s over K=1's, the ideal is 2;
speedup_independent: two ranks that never communicate, the ceiling of this machine).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SHAPE = {"input": 429, "hidden": [2048] * 7, "output": 9304}


def worker(mode: str, optimizer: str, steps: int, minibatch: int) -> None:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1 + int(os.environ.get("PMI_RANK", "0")))
    x = torch.randn(4 * minibatch, SHAPE["input"], generator=g)
    y = torch.randint(0, SHAPE["output"], (4 * minibatch,), generator=g)
    warmup = 2
    if mode in ("ddp", "torch-averager"):
        rate, comm_s, nbytes = _torch_peer(mode, x, y, steps, warmup, minibatch)
        rank = int(os.environ.get("PMI_RANK", "0"))
    else:
        from pynnet.nnet.model import Dnn
        from pynnet.nnet.optim import make_optimizer
        from pynnet.nnet.train import Synchronizer

        model = Dnn(SHAPE["input"], SHAPE["hidden"], SHAPE["output"], "sigmoid", context=0)
        model.init_random(0)
        model.train()
        opt = make_optimizer(optimizer, model)
        sync, comm = Synchronizer(), None
        if mode != "single":
            from pynnet.parallel.comm import make_communicator
            from pynnet.parallel.sync import make_sync
            comm = make_communicator("mpi", 600.0)
            kind, every = {"avg1": ("average", 1), "avg10": ("average", 10), "avg50": ("average", 50),
                           "allreduce": ("allreduce", 1), "avg1bit": ("average-1bit", 10)}[mode]
            sync = make_sync(kind, comm, every, "linear")
        sync.setup(model, opt)
        lr = 1e-5 * sync.lr_scale
        fused = not sync.needs_gradients
        t0 = None
        for s in range(steps + warmup):
            if s == warmup:
                if comm is not None:
                    comm.barrier()
                    comm.seconds, comm.bytes_sent = 0.0, 0
                t0 = time.perf_counter()
            i = (s % 4) * minibatch
            opt.fused_lr = lr if fused else None
            loss = F.cross_entropy(model(x[i:i + minibatch]), y[i:i + minibatch], reduction="sum")
            loss.backward()
            sync.before_update(s, model, opt)
            opt.step(lr)
            sync.after_update(s + 1, model, opt)
        if comm is not None:
            comm.barrier()
        dt = time.perf_counter() - t0
        rate = steps * minibatch / dt
        comm_s = (comm.seconds / dt) if comm else 0.0
        nbytes = (comm.bytes_sent / (steps * minibatch)) if comm else 0.0
        rank = comm.rank if comm else 0
    if rank == 0:
        # K ranks train K minibatches per step: the job's frames/s
        k = int(os.environ.get("PMI_SIZE", "1"))
        print("RESULT " + json.dumps({"fps": rate * k, "comm_fraction": comm_s, "bytes_per_frame": nbytes}),
              flush=True)


def _torch_peer(mode, x, y, steps, warmup, minibatch):
    import datetime

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn

    dist.init_process_group("gloo", rank=int(os.environ["PMI_RANK"]), world_size=int(os.environ["PMI_SIZE"]),
                            timeout=datetime.timedelta(seconds=600))
    layers, d = [], SHAPE["input"]
    for h in SHAPE["hidden"]:
        layers += [nn.Linear(d, h), nn.Sigmoid()]
        d = h
    layers.append(nn.Linear(d, SHAPE["output"]))
    model = nn.Sequential(*layers)
    averager = None
    if mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        averager = PeriodicModelAverager(period=10, warmup_steps=0)
    opt = torch.optim.SGD(model.parameters(), lr=1e-5)
    t0 = None
    for s in range(steps + warmup):
        if s == warmup:
            dist.barrier()
            t0 = time.perf_counter()
        i = (s % 4) * minibatch
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x[i:i + minibatch]), y[i:i + minibatch], reduction="sum").backward()
        opt.step()
        if averager is not None:
            averager.average_parameters(model.parameters())
    dist.barrier()
    dt = time.perf_counter() - t0
    dist.destroy_process_group()
    return steps * minibatch / dt, 0.0, 0.0


def launch(mode: str, optimizer: str, k: int, steps: int, minibatch: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--optimizer", optimizer,
           "--steps", str(steps), "--minibatch", str(minibatch)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if k > 1:
        cmd = ["mpiexec", "-n", str(k)] + cmd
        if mode in ("ddp", "torch-averager"):
            from pynnet.parallel.launch import free_port
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        sys.exit(f"bench/parallel.py: {mode} failed:\n{r.stdout}\n{r.stderr}")
    res = json.loads(line[7:])
    print(f"{mode:15s} {optimizer:6s} K={k}: {res['fps']:8.0f} frames/s, comm {100 * res['comm_fraction']:5.1f}% "
          f"of the time, {res['bytes_per_frame']:9.0f} bytes/frame", file=sys.stderr, flush=True)
    return res


def plot(results: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["avg1", "avg10", "avg50", "allreduce", "avg1bit"]
    vals = [results[f"speedup_{n}"] for n in names]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(names, vals, color=["#4a7", "#4a7", "#4a7", "#c64", "#47c"])
    ax.axhline(2.0, ls="--", c="gray", lw=1, label="ideal")
    if "speedup_independent" in results:
        ax.axhline(results["speedup_independent"], ls="-.", c="#a33", lw=1,
                   label="2 ranks that never communicate")
        ax.legend(loc="lower right", fontsize=8)
    ax.axhline(1.0, ls=":", c="gray", lw=1)
    for i, v in enumerate(vals):
        ax.text(i, v + 0.03, f"{v:.2f}", ha="center")
    ax.set_ylabel("speed-up, 2 workers over 1")
    ax.set_title(f"46M DNN, NG-SGD, minibatch {results['minibatch']}, 1 thread per worker", fontsize=10)
    ax.set_ylim(0, 2.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--minibatch", type=int, default=128)
    p.add_argument("--plot", default="")
    p.add_argument("--worker", default="")
    p.add_argument("--optimizer", default="ngsgd")
    p.add_argument("--only", default="", help="e.g. avg10: K=1 and that mode only (a quick probe; no JSON keys "
                   "but speedup_<mode>)")
    a = p.parse_args()
    if a.worker:
        worker(a.worker, a.optimizer, a.steps, a.minibatch)
        return
    if a.only:
        base = launch("single", "ngsgd", 1, a.steps, a.minibatch)
        alone = launch("single", "ngsgd", 2, a.steps, a.minibatch)
        res = launch(a.only, "ngsgd", 2, a.steps, a.minibatch)
        print(json.dumps({"minibatch": a.minibatch, "steps": a.steps, "fps_k1": round(base["fps"], 1),
                          "speedup_independent": round(alone["fps"] / base["fps"], 3),
                          f"speedup_{a.only}": round(res["fps"] / base["fps"], 3),
                          f"comm_fraction_{a.only}": round(res["comm_fraction"], 4)}))
        return
    r = {}
    base = launch("single", "ngsgd", 1, a.steps, a.minibatch)
    # two ranks that never communicate: what two concurrent trainings get on this machine (the
    # ceiling of any synchronisation: shared memory bandwidth and caches)
    alone = launch("single", "ngsgd", 2, a.steps, a.minibatch)
    for m in ("avg1", "avg10", "avg50", "allreduce", "avg1bit"):
        r[m] = launch(m, "ngsgd", 2, a.steps, a.minibatch)
    ours_ar = launch("allreduce", "sgd", 2, a.steps, a.minibatch)
    ddp = launch("ddp", "sgd", 2, a.steps, a.minibatch)
    ours_avg = launch("avg10", "sgd", 2, a.steps, a.minibatch)
    averager = launch("torch-averager", "sgd", 2, a.steps, a.minibatch)
    # the VM's speed drifts over minutes: K=1 again at the end, the faster of the two is the base
    again = launch("single", "ngsgd", 1, a.steps, a.minibatch)
    base = max(base, again, key=lambda x: x["fps"])
    out = {"model_params": 0, "minibatch": a.minibatch, "steps": a.steps, "fps_k1": round(base["fps"], 1)}
    out["model_params"] = (SHAPE["input"] + 1) * 2048 + 6 * 2049 * 2048 + 2049 * SHAPE["output"]
    out["speedup_independent"] = round(alone["fps"] / base["fps"], 3)
    for m, res in r.items():
        out[f"speedup_{m}"] = round(res["fps"] / base["fps"], 3)
        out[f"bytes_per_frame_{m}"] = round(res["bytes_per_frame"], 1)
        out[f"comm_fraction_{m}"] = round(res["comm_fraction"], 4)
    out["bytes_ratio_avg_vs_avg1bit"] = round(r["avg10"]["bytes_per_frame"] / r["avg1bit"]["bytes_per_frame"], 2)
    out["fps_ratio_allreduce_vs_ddp"] = round(ours_ar["fps"] / ddp["fps"], 3)
    out["fps_ratio_avg10_vs_torch_averager"] = round(ours_avg["fps"] / averager["fps"], 3)
    if a.plot:
        plot(out, a.plot)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
