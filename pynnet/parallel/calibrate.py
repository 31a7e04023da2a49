"""``pynnet-parallel-model --calibrate``: measures the constants of pynnet.parallel.perfmodel on this
machine, for one rank alone and for two ranks at once (``mpiexec -n 2``, as bench/parallel.py and
the training run them):

* GEMM FLOP/s at the DNN's shapes: the three products of a 2048 x 2049 hidden layer for a few
  frame counts, fitted to ``F n / (n + n_half)``, scaled to the whole 46M DNN's rate at 128
  frames (every layer's own weights, from memory as in training); the low-rank
  products of NG-SGD; with 1 thread and with the threads asked for;
* memory bandwidth: large copies and axpys (``add_``), and first-touch writes of fresh tensors;
* the 1-bit quantizer (pynnet.parallel.quantize): values/s encoded and decoded;
* the link: allreduces through our communicator (pynnet.parallel.comm.MpiCommunicator) at a few
  message sizes, fitted to ``latency + bytes / bandwidth``.

Every measurement keeps the fastest of its repetitions (the machine's speed; other work on it
only slows). ``quick``: one repetition each and fewer message sizes, ~10 s in all (the tests).
A machine busy with other work gives low figures: the file records the load average."""
from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

from pynnet.io.errors import PynnetError
from pynnet.parallel.perfmodel import line_fit

HIDDEN, OUTPUT = 2048, 9304


def _fastest(fn, reps: int, budget: float) -> float:
    """The fastest of at least ``reps`` calls (more while within ``budget`` seconds), after one
    to warm up (first touch of the buffers, kernel selection)."""
    fn()
    best, start, n = float("inf"), time.perf_counter(), 0
    while n < reps or (time.perf_counter() - start < budget and n < 50):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        n += 1
    return best


def _gemm_rate(n: int, cols: int, rows: int, reps: int, budget: float) -> float:
    """FLOP/s of one layer's three products over n frames: forward x W^T, error signal g W,
    gradient g^T x (W: rows x cols, the bias a column)."""
    import torch
    x, w = torch.randn(n, cols), torch.randn(rows, cols) * 0.01
    y, g, gw, gx = torch.empty(n, rows), torch.randn(n, rows), torch.empty(rows, cols), torch.empty(n, cols - 1)

    def run():
        torch.mm(x, w.t(), out=y)
        torch.mm(g, w[:, :-1], out=gx)
        torch.mm(g.t(), x, out=gw)
    return 2 * n * rows * (3 * cols - 1) / _fastest(run, reps, budget)


def _dnn_gemm_rate(n: int, reps: int, budget: float) -> float:
    """FLOP/s of the whole 46M DNN's products over n frames, every layer with its own weights as
    in training (180 MB of them, read from memory every step; one layer's 17 MB over and over
    stays partly in the cache: 12% faster here), the weight gradient added into a buffer."""
    import torch
    from pynnet.parallel.perfmodel import SWB_46M
    layers = SWB_46M.layers
    ws = [torch.randn(o, i + 1) * 0.01 for i, o in layers]
    xs = [torch.randn(n, i + 1) for i, _ in layers]
    gs = [torch.randn(n, o) for _, o in layers]
    ys = [torch.empty(n, o) for _, o in layers]
    gxs = [torch.empty(n, i) for i, _ in layers]
    gws = [torch.zeros_like(w) for w in ws]

    def run():
        for w, x, y in zip(ws, xs, ys):
            torch.mm(x, w.t(), out=y)
        for k, (w, x, g, gx, gw) in enumerate(zip(ws, xs, gs, gxs, gws)):
            if k:   # (the first layer's input needs no error signal)
                torch.mm(g, w[:, :-1], out=gx)
            gw.addmm_(g.t(), x, beta=0.0)
    return n * SWB_46M.flops_per_frame / _fastest(run, reps, budget)


def _lowrank_rate(n: int, dim: int, rank: int, reps: int, budget: float) -> float:
    """FLOP/s of NG-SGD's products against a rank x dim basis: H = M R^T, M -= H R."""
    import torch
    m, r, h = torch.randn(n, dim), torch.randn(rank, dim), torch.empty(n, rank)

    def run():
        torch.mm(m, r.t(), out=h)
        m.addmm_(h, r, alpha=-1e-6)
    return 4 * n * dim * rank / _fastest(run, reps, budget)


def _fit_curve(points: dict[int, float]) -> tuple[float, float]:
    """(F, n_half) of rate(n) = F n / (n + n_half): 1/rate = 1/F + (n_half/F) / n is a line in 1/n."""
    slope, a = line_fit([1.0 / n for n in points], [1.0 / r for r in points.values()])
    if a <= 0:   # (noise: no asymptote) the fastest point as a flat rate
        return max(points.values()), 0.0
    return 1.0 / a, max(0.0, slope / a)


def measure_node(quick: bool, threads: int = 1, curve: bool = True) -> dict:
    """One process's compute and memory constants with ``threads`` threads (``quick``: one
    repetition of each, smaller buffers, the GEMM curve from 2 frame counts; ``curve`` False:
    the DNN's rate at 128 frames only, not the curve and NG-SGD's products)."""
    import torch

    from pynnet.parallel.quantize import ErrorFeedbackQuantizer
    torch.set_num_threads(threads)
    reps, budget = (1, 0.0) if quick else (3, 0.6)
    frames = ((32, 128) if quick else (32, 128, 512)) if curve else (128,)
    hidden = {n: _gemm_rate(n, HIDDEN + 1, HIDDEN, reps, budget) for n in frames}
    out = {"threads": threads, "gemm_hidden_flops": {str(n): r for n, r in hidden.items()}}
    flops, half = _fit_curve(hidden) if curve else (hidden[128], 0.0)
    out["gemm_output_flops_128"] = _gemm_rate(128, HIDDEN + 1, OUTPUT, reps, budget)
    # the DNN's whole set of products at 128 frames, every layer's own weights (from memory)
    dnn = _dnn_gemm_rate(128, reps, budget)
    out.update(gemm_dnn_flops_128=dnn,
               # the hidden layer's curve, scaled to the whole DNN's rate at 128 frames
               flops=flops * dnn / hidden[128], gemm_half_frames=half)
    if curve:
        out["lowrank_flops"] = {str(r): _lowrank_rate(128, HIDDEN + 1, r, reps, budget) for r in (20, 80)}
    n = (16 if quick else 32) * 1024 * 1024          # floats: 128 MB (quick 64 MB), beyond the caches
    a, b = torch.full((n,), 1.0), torch.full((n,), 0.5)
    out["copy_bw"] = 8 * n / _fastest(lambda: a.copy_(b), reps, budget)
    out["axpy_bw"] = 12 * n / _fastest(lambda: a.add_(b, alpha=1e-3), reps, budget)
    out["mem_bw"] = out["axpy_bw"]
    out["alloc_bw"] = 4 * n / _fastest(lambda: torch.zeros(n), reps, budget)   # fresh pages, first touch
    del a, b
    # the quantizer over the whole DNN's gradient, every layer its own buffers (from memory, as in
    # training; one 2048 x 2049 matrix over and over stays partly in the cache)
    from pynnet.parallel.perfmodel import SWB_46M
    qs = [ErrorFeedbackQuantizer(o, i + 1) for i, o in SWB_46M.layers]
    gs = [torch.randn(o, i + 1) for i, o in SWB_46M.layers]
    accs = [torch.zeros_like(g) for g in gs]
    payloads = [torch.zeros(q.nbytes, dtype=torch.uint8) for q in qs]
    values = SWB_46M.params

    def encode():
        for q, g, p in zip(qs, gs, payloads):
            q.encode(g, p)

    def decode():
        for q, p, acc in zip(qs, payloads, accs):
            q.decode_add(p, acc)
    out["quantize_encode_values_per_s"] = values / _fastest(encode, reps, budget)
    out["quantize_decode_values_per_s"] = values / _fastest(decode, reps, budget)
    return out


def measure_link(comm, quick: bool) -> dict:
    """Allreduces of a few sizes through ``comm`` (every rank calls it at once): the fastest of the
    repetitions per size, and the least-squares fit of seconds = latency + bytes_sent / bandwidth,
    bytes_sent per rank by the ring volume 2 (K-1)/K of the buffer (what comm.bytes_sent counts)."""
    import torch
    # floats; the largest: the 46M DNN's parameters, what averaging and the allreduce mode move
    sizes = (2, 1 << 14, 1 << 20) if quick else (2, 1 << 14, 1 << 18, 1 << 21, 1 << 23, 45_122_648)
    reps = 2 if quick else 4
    points = []
    k = comm.size
    for n in sizes:
        t = torch.zeros(n)
        best = float("inf")
        # small messages cost microseconds: many repetitions, so that one descheduled rank on a
        # busy machine does not set the latency (and with it a negative slope)
        for _ in range((reps + 1) * (20 if 4 * n < 1 << 20 else 1)):
            comm.barrier()
            t0 = time.perf_counter()
            comm.allreduce(t, "sum", "the calibration allreduce")
            best = min(best, time.perf_counter() - t0)
        points.append((2 * (k - 1) / k * 4 * n, best))
    # the slowest rank's figure (a collective ends when the last rank is done)
    worst = comm.allgather(torch.tensor([p[1] for p in points], dtype=torch.float64), "the calibration").max(0).values
    points = [(b, float(s)) for (b, _), s in zip(points, worst.tolist())]
    # the latency: the smallest message's time; the bandwidth: least squares of the others'
    # times less that latency against their bytes, through the origin (an unweighted line
    # through all sizes would leave the intercept to the largest messages' noise)
    latency = points[0][1]
    big = points[1:]
    slope = sum(b * (t - latency) for b, t in big) / sum(b * b for b, _ in big)
    return {"ranks": k, "allreduce_points": points, "link_bw": 1.0 / slope if slope > 0 else float("inf"),
            "latency": latency}


def worker(quick: bool) -> None:
    """Inside ``mpiexec -n 2``: every rank measures at once (what K ranks on this machine each
    get), then the link; rank 0 prints one ``CALIBRATION {json}`` line."""
    import torch

    from pynnet.parallel.comm import MpiCommunicator
    comm = MpiCommunicator(timeout=120.0)
    comm.barrier()
    node = measure_node(quick, 1, curve=False)
    # a busy machine can still spoil one measurement; every rank sees the same gathered points,
    # so all take the same decision to measure again
    for _ in range(3):
        link = measure_link(comm, quick)
        if 0 < link["link_bw"] < float("inf"):
            break
    keys = ("flops", "gemm_dnn_flops_128", "mem_bw", "alloc_bw", "quantize_encode_values_per_s",
            "quantize_decode_values_per_s")
    rows = comm.allgather(torch.tensor([node[k] for k in keys], dtype=torch.float64), "the calibration")
    if comm.rank == 0:
        # per rank, the mean over the ranks
        conc = {k: float(v) for k, v in zip(keys, rows.mean(0).tolist())}
        print("CALIBRATION " + json.dumps({"concurrent": dict(conc, ranks=comm.size), "link": link}), flush=True)
    comm.barrier()
    comm.close()


def calibrate(quick: bool = False, threads: int | None = None, ranks: int = 2, mpiexec: str = "mpiexec") -> dict:
    """Measures this machine: one rank (1 thread, and ``threads``), then ``ranks`` ranks at once
    with the link between them."""
    t0 = time.perf_counter()
    if shutil.which(mpiexec) is None:
        raise PynnetError(f"--calibrate needs '{mpiexec}' on PATH to measure the link (tools/install.sh "
                          "installs mpich's)")
    import torch
    threads = threads or (1 if quick else os.cpu_count() or 1)
    one = measure_node(quick, 1)
    multi = measure_node(quick, threads, curve=False) if threads > 1 else None
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "pynnet.parallel.calibrate", "--worker"] + \
        (["--quick"] if quick else [])
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120 if quick else 300)
    except subprocess.TimeoutExpired:
        raise PynnetError(f"the {ranks}-rank calibration ({' '.join(cmd[:3])}) did not finish in time") from None
    line = next((x for x in r.stdout.splitlines() if x.startswith("CALIBRATION ")), None)
    if r.returncode != 0 or line is None:
        tail = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or ["no output"])[-1]
        raise PynnetError(f"the {ranks}-rank calibration failed ({' '.join(cmd[:3])}): {tail}")
    par = json.loads(line[len("CALIBRATION "):])
    link = par["link"]
    if not 0 < link["link_bw"] < float("inf"):
        raise PynnetError("the link measurement came out inconsistent (larger messages no slower than the "
                          "smallest): the machine is too busy; rerun --calibrate")
    return {
        "calibration": "pynnet-parallel-model --calibrate" + (" --quick" if quick else ""),
        "name": f"calibrated:{socket.gethostname()}",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "torch": torch.__version__,
        "loadavg_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        # the perfmodel.Hardware constants of one rank (1 thread) and its link
        "flops": one["flops"], "gemm_efficiency": 1.0, "gemm_half_frames": one["gemm_half_frames"],
        "mem_bw": one["mem_bw"], "link_bw": link["link_bw"], "latency": link["latency"],
        "single": one, "threads": multi, "concurrent": par["concurrent"], "link": link,
        "seconds": time.perf_counter() - t0,
    }


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        worker("--quick" in sys.argv[1:])
