"""Data-parallel training throughput on the Switchboard-shaped 46M DNN (Seide et al.: 429 inputs =
11 x 39, 7 x 2048 sigmoid, 9304 outputs), one thread per rank, in-memory random frames (the
step's cost, not the data loading's):

* K=1 and K=2 ranks (mpiexec -n 2) for model averaging every 1, 10 and 50 minibatches, fp32
  gradient allreduce and 1-bit averaging (every 10), all with NG-SGD: frames/s, bytes sent per
  frame (per rank), share of the step time in communication;
* the peers on the same model and data: torch DistributedDataParallel (gloo) against our
  allreduce mode, and torch's PeriodicModelAverager (post-local SGD) against our averaging every
  10, both with plain SGD on both sides (the peers have no NG-SGD);
* 1-bit SGD (Seide et al.; AdaGrad) with and without double buffering at a global minibatch of
  ``--minibatch-1bit`` frames (1024: each of the 2 ranks computes 512), against one worker with
  AdaGrad at the same minibatch; the hidden share of the exchanges with double buffering; bytes
  per update against the fp32 gradient allreduce; and what quantizing + packing + unpacking the
  whole 46M gradient costs next to one minibatch of 1024 frames on one thread;
* model parallelism (``mp2``): the layers of the one model split over 2 ranks computing the same
  minibatch together (all-gathers forward, reduce-scatters backward), NG-SGD.

    python bench/parallel.py [--steps 50] [--minibatch 128] [--steps-1bit 12] [--minibatch-1bit 1024]
                             [--plot docs/parallel_speedup.png]

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
    # (model parallelism: the ranks of the group compute the same minibatch)
    g = torch.Generator().manual_seed(1 + (0 if mode == "mp2" else int(os.environ.get("PMI_RANK", "0"))))
    x = torch.randn(4 * minibatch, SHAPE["input"], generator=g)   # (4 minibatches, cycled)
    y = torch.randint(0, SHAPE["output"], (4 * minibatch,), generator=g)
    warmup = 2
    if mode in ("ddp", "torch-averager"):
        rate, comm_s, nbytes = _torch_peer(mode, x, y, steps, warmup, minibatch)
        rank = int(os.environ.get("PMI_RANK", "0"))
        extra = {}
    else:
        from pynnet.nnet.model import Dnn
        from pynnet.nnet.optim import make_optimizer
        from pynnet.nnet.train import Synchronizer, TrainConfig

        model = Dnn(SHAPE["input"], SHAPE["hidden"], SHAPE["output"], "sigmoid", context=0)
        model.init_random(0)
        model.train()
        opt = make_optimizer(optimizer, model)
        if mode == "quantize":
            print("RESULT " + json.dumps(_quantize_cost(model, opt, x, y, minibatch)), flush=True)
            return
        sync, comm = Synchronizer(), None
        if mode == "mp2":
            from pynnet.parallel.comm import make_communicator
            from pynnet.parallel.model_parallel import ModelParallelSync
            comm = make_communicator("mpi", 600.0)
            sync = ModelParallelSync(TrainConfig(num_workers=2, model_parallel=2), comm)
            model = sync.local_model(model)
            model.train()
            opt.detach()
            opt = sync.make_optimizer(optimizer, model, 0.0)
        elif mode != "single":
            from pynnet.parallel.comm import make_communicator
            from pynnet.parallel.sync import make_sync
            comm = make_communicator("mpi", 600.0)
            kind, every = {"avg1": ("average", 1), "avg10": ("average", 10), "avg50": ("average", 50),
                           "allreduce": ("allreduce", 1), "avg1bit": ("average-1bit", 10),
                           "1bit": ("1bit", 1), "1bit_db": ("1bit", 1)}[mode]
            sync = make_sync(TrainConfig(sync=kind, average_every=every, double_buffering=mode == "1bit_db"), comm)
        sync.setup(model, opt)
        local = sync.local_minibatch(minibatch)   # (1-bit SGD: the global minibatch split K ways)
        lr = 1e-5 * sync.lr_scale
        fused = not sync.needs_gradients
        t0 = None
        # (model parallelism: the collectives run on the group's communicator)
        comms = [c for c in (comm, getattr(sync, "mp", None), getattr(sync, "dp", None)) if c is not None]
        for s in range(steps + warmup):
            if s == warmup:
                sync.flush(s)
                if comm is not None:
                    comm.barrier()
                    for c in comms:
                        c.seconds, c.bytes_sent = 0.0, 0
                    sync.wait_seconds = sync.exchange_seconds = 0.0
                t0 = time.perf_counter()
            i = (s % 4) * local
            opt.fused_lr = lr if fused else None
            loss = F.cross_entropy(model(x[i:i + local]), y[i:i + local], reduction="sum")
            loss.backward()
            sync.before_update(s, model, opt, lr)
            if not sync.owns_update:
                opt.step(lr)
            sync.after_update(s + 1, model, opt)
        sync.flush(steps + warmup)
        if comm is not None:
            comm.barrier()
        dt = time.perf_counter() - t0
        rate = steps * local / dt
        comm_s = sum(c.seconds for c in comms) / dt
        sent = sum(c.bytes_sent for c in comms)
        nbytes = sent / (steps * local)
        rank = comm.rank if comm else 0
        if sync.owns_update:
            # the share of the time the training waited for exchanges (quantization included), and
            # how much of the exchanges' own time double buffering hid
            comm_s = sync.wait_seconds / dt
            extra = {"hidden_fraction": max(0.0, 1.0 - sync.wait_seconds / max(sync.exchange_seconds, 1e-9)),
                     "bytes_per_update": sent / steps}
        elif comm is not None:
            extra = {"bytes_per_update": sent / steps}
        else:
            extra = {}
    if rank == 0:
        # K ranks train K minibatches per step: the job's frames/s (model parallelism: one)
        k = 1 if mode == "mp2" else int(os.environ.get("PMI_SIZE", "1"))
        print("RESULT " + json.dumps({"fps": rate * k, "comm_fraction": comm_s, "bytes_per_frame": nbytes,
                                      **extra}), flush=True)


def _quantize_cost(model, opt, x, y, minibatch) -> dict:
    """Seconds of one minibatch's forward + backward (gradients into buffers) against those of
    1-bit quantizing, packing and unpacking the whole gradient (every matrix, error feedback)."""
    import torch
    import torch.nn.functional as F

    from pynnet.parallel.quantize import ErrorFeedbackQuantizer

    qs = [ErrorFeedbackQuantizer(a.out_dim, a.in_dim + 1) for a in model.affines]
    bufs = [torch.zeros(q.nbytes, dtype=torch.uint8) for q in qs]
    acc = [torch.zeros(a.out_dim, a.in_dim + 1) for a in model.affines]
    compute, quant = [], []
    for s in range(4):
        t0 = time.perf_counter()
        i = (s % 4) * minibatch
        F.cross_entropy(model(x[i:i + minibatch]), y[i:i + minibatch], reduction="sum").backward()
        t1 = time.perf_counter()
        for a, q, b, c in zip(model.affines, qs, bufs, acc):
            q.encode(a.grad, b)
            q.decode_add(b, c)
        t2 = time.perf_counter()
        if s:   # (the first: warm-up)
            compute.append(t1 - t0)
            quant.append(t2 - t1)
    compute.sort()
    quant.sort()
    return {"compute_s": compute[len(compute) // 2], "quantize_s": quant[len(quant) // 2]}


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
    if mode == "quantize":
        print(f"quantize + pack + unpack of the gradient {res['quantize_s']:.3f} s, forward + backward of "
              f"{minibatch} frames {res['compute_s']:.3f} s", file=sys.stderr, flush=True)
        return res
    print(f"{mode:15s} {optimizer:7s} K={k} mb {minibatch}: {res['fps']:8.0f} frames/s, comm "
          f"{100 * res['comm_fraction']:5.1f}% of the time, {res['bytes_per_frame']:9.0f} bytes/frame"
          + (f", {100 * res['hidden_fraction']:.0f}% of the exchanges hidden" if "hidden_fraction" in res else ""),
          file=sys.stderr, flush=True)
    return res


def plot(results: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["avg1", "avg10", "avg50", "allreduce", "avg1bit", "1bit", "1bit_db", "mp2"]
    names = [n for n in names if f"speedup_{n}" in results]
    vals = [results[f"speedup_{n}"] for n in names]
    fig, ax = plt.subplots(figsize=(7.5, 3.5))
    colors = {"allreduce": "#c64", "avg1bit": "#47c", "1bit": "#a5c", "1bit_db": "#a5c", "mp2": "#888"}
    ax.bar(names, vals, color=[colors.get(n, "#4a7") for n in names])
    ax.axhline(2.0, ls="--", c="gray", lw=1, label="ideal")
    if "speedup_independent" in results:
        ax.axhline(results["speedup_independent"], ls="-.", c="#a33", lw=1,
                   label="2 ranks that never communicate")
        ax.legend(loc="lower right", fontsize=8)
    ax.axhline(1.0, ls=":", c="gray", lw=1)
    for i, v in enumerate(vals):
        ax.text(i, v + 0.03, f"{v:.2f}", ha="center")
    ax.set_ylabel("speed-up, 2 workers over 1")
    ax.set_title(f"46M DNN, 1 thread per worker: NG-SGD, minibatch {results['minibatch']} per worker; "
                 f"1bit: AdaGrad, global minibatch {results.get('minibatch_1bit', '-')}", fontsize=9)
    ax.set_ylim(0, 2.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--minibatch", type=int, default=128)
    p.add_argument("--steps-1bit", type=int, default=12)
    p.add_argument("--minibatch-1bit", type=int, default=1024, help="the global minibatch of 1-bit SGD")
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
        one_bit = a.only.startswith("1bit")
        opt, steps, mb = ("adagrad", a.steps_1bit, a.minibatch_1bit) if one_bit else ("ngsgd", a.steps, a.minibatch)
        base = launch("single", opt, 1, steps, mb)
        alone = launch("single", opt, 2, steps, mb // 2 if one_bit else mb)
        res = launch(a.only, opt, 2, steps, mb)
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
    for m in ("avg1", "avg10", "avg50", "allreduce", "avg1bit", "mp2"):
        r[m] = launch(m, "ngsgd", 2, a.steps, a.minibatch)
    ours_ar = launch("allreduce", "sgd", 2, a.steps, a.minibatch)
    ddp = launch("ddp", "sgd", 2, a.steps, a.minibatch)
    ours_avg = launch("avg10", "sgd", 2, a.steps, a.minibatch)
    averager = launch("torch-averager", "sgd", 2, a.steps, a.minibatch)
    # 1-bit SGD: a global minibatch; its base is one worker with AdaGrad on the whole minibatch
    base_1bit = launch("single", "adagrad", 1, a.steps_1bit, a.minibatch_1bit)
    for m in ("1bit", "1bit_db"):
        r[m] = launch(m, "adagrad", 2, a.steps_1bit, a.minibatch_1bit)
    quant = launch("quantize", "adagrad", 1, 0, 1024)
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
    out["minibatch_1bit"] = a.minibatch_1bit
    out["fps_k1_adagrad_mb_1bit"] = round(base_1bit["fps"], 1)
    for m in ("1bit", "1bit_db"):
        out[f"speedup_{m}"] = round(r[m]["fps"] / base_1bit["fps"], 3)
    out["comm_hidden_fraction_db"] = round(r["1bit_db"]["hidden_fraction"], 3)
    # bytes of one update's exchange: the fp32 gradient allreduce against 1-bit SGD's
    out["bytes_ratio_fp32_vs_1bit"] = round(r["allreduce"]["bytes_per_update"] / r["1bit"]["bytes_per_update"], 2)
    out["quantize_fraction_mb1024"] = round(quant["quantize_s"] / quant["compute_s"], 4)
    out["bytes_ratio_avg_vs_avg1bit"] = round(r["avg10"]["bytes_per_frame"] / r["avg1bit"]["bytes_per_frame"], 2)
    out["fps_ratio_allreduce_vs_ddp"] = round(ours_ar["fps"] / ddp["fps"], 3)
    out["fps_ratio_avg10_vs_torch_averager"] = round(ours_avg["fps"] / averager["fps"], 3)
    if a.plot:
        plot(out, a.plot)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
