"""pynnet-parallel-model: the parallel-efficiency model of Seide et al. 2014 (pynnet.parallel.perfmodel):
time per minibatch split into compute, post-processing, update and communication, and the best node
count K for data parallelism, model parallelism, data x model hybrids and model averaging;
``--calibrate`` measures this machine's constants (pynnet.parallel.calibrate); ``--compare-bench``
sets the calibrated model's predictions of bench/parallel.py beside what it measured."""
from __future__ import annotations

import dataclasses
import json
import os
import sys

from pynnet.bin._cli import cli
from pynnet.bin._opts import float_opt, int_opt, kaldi_bool
from pynnet.bin._opts import parser as _parser
from pynnet.io.errors import fail

USAGE = """pynnet-parallel-model [--preset seide2014-k20x | --hardware FILE] [options]
       pynnet-parallel-model --calibrate --out FILE [--threads N] [--quick]
       pynnet-parallel-model --hardware FILE --compare-bench BENCH_JSON
e.g.   pynnet-parallel-model --preset seide2014-k20x --minibatch 1024 --json
       pynnet-parallel-model --preset seide2014-k20x --z 32 --minibatch 8192"""


def _args(argv):
    p = _parser("pynnet-parallel-model", __doc__.split("\n\n")[0], usage=USAGE)
    p.add_argument("--preset", default="", help="seide2014-k20x (the default without --hardware): K20X GPUs, "
                   "3.95 TFLOP/s, 250 GB/s, PCIe 6 GB/s, the 46M Switchboard DNN")
    p.add_argument("--hardware", default="", help="a --calibrate file: this machine's constants (A,B: the mean "
                   "of several, e.g. taken before and after a bench)")
    for opt, what in (("--flops", "peak GEMM FLOP/s of a node"), ("--mem-bw", "memory bytes/s of a node"),
                      ("--link-bw", "bytes/s per direction of a node's link (data parallel)"),
                      ("--bus-bw", "bytes/s of the bus a server's nodes share (model parallel; default "
                       "the link's)"), ("--latency", "seconds per message"),
                      ("--gemm-efficiency", "the fraction of --flops the DNN's large GEMMs reach"),
                      ("--gemm-half-frames", "frames per GEMM at which half of that is reached"),
                      ("--z", "the compression factor of the exchanged gradients (32: 1 bit)")):
        p.add_argument(opt, type=float_opt, default=None, help=what)
    p.add_argument("--double-buffering", type=kaldi_bool, default=True,
                   help="overlap each half minibatch's exchange with the other's computation (default true)")
    p.add_argument("--input", type=int_opt, default=None, help="input dimension (default the preset's, 429)")
    p.add_argument("--hidden", default="", help="hidden layers, e.g. 2048x7 or 2048:1024 (default 2048x7)")
    p.add_argument("--output", type=int_opt, default=None, help="output dimension (default 9304)")
    p.add_argument("--minibatch", type=int_opt, default=1024, help="frames per minibatch (default 1024)")
    p.add_argument("--average-every", type=int_opt, default=10, help="model averaging period (default 10)")
    p.add_argument("--max-k", type=int_opt, default=8, help="the most nodes to consider (default 8: one server)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--calibrate", action="store_true", help="measure this machine and write --out")
    p.add_argument("--out", default="", help="the calibration file --calibrate writes")
    p.add_argument("--threads", type=int_opt, default=0, help="--calibrate: also measure with this many "
                   "threads (default: the cores)")
    p.add_argument("--quick", action="store_true", help="--calibrate in a few seconds (rough figures)")
    p.add_argument("--compare-bench", default="", help="the JSON line bench/parallel.py printed: predicted "
                   "against measured (needs --hardware from --calibrate)")
    return p.parse_args(argv)


@cli
def main(argv: list[str] | None = None) -> int:
    from pynnet.parallel import perfmodel as pm
    a = _args(argv)
    if a.calibrate:
        return _calibrate(a)
    if a.preset and a.hardware:
        fail("give --preset or --hardware, not both")
    cal = pm.load_calibrations(a.hardware) if a.hardware else None
    if a.compare_bench:
        if cal is None:
            fail("--compare-bench needs --hardware FILE (a --calibrate file of the machine the bench ran on)")
        return _compare(a, cal)
    if cal is not None:
        hw, shape = pm.hardware_from_calibration(cal, a.hardware), pm.SWB_46M
    else:
        hw, shape = pm.preset(a.preset or "seide2014-k20x")
    over = {k: getattr(a, k) for k in ("flops", "mem_bw", "link_bw", "bus_bw", "latency", "gemm_efficiency",
                                       "gemm_half_frames") if getattr(a, k) is not None}
    hw = dataclasses.replace(hw, **over)   # (Hardware checks the overrides)
    shape = pm.ModelShape(a.input if a.input is not None else shape.input,
                          pm.parse_hidden(a.hidden) if a.hidden else shape.hidden,
                          a.output if a.output is not None else shape.output)
    scheme = pm.Scheme(z=a.z if a.z is not None else 1.0, double_buffering=a.double_buffering)
    if a.minibatch <= 0:
        fail(f"--minibatch must be positive, not {a.minibatch}")
    if a.average_every <= 0:
        fail(f"--average-every must be positive, not {a.average_every}")
    if a.max_k <= 0:
        fail(f"--max-k must be positive, not {a.max_k}")
    s = pm.summary(shape, hw, scheme, a.minibatch, a.max_k, a.average_every)
    if a.json:
        print(json.dumps(s))
    else:
        _table(s)
    return 0


def _calibrate(a) -> int:
    from pynnet.io.atomic import atomic_write
    from pynnet.parallel.calibrate import calibrate
    if not a.out:
        fail("--calibrate needs --out FILE (where to write the constants)")
    if a.threads < 0:
        fail(f"--threads must be positive, not {a.threads}")
    cal = calibrate(quick=a.quick, threads=a.threads or None)
    with atomic_write(a.out) as f:
        f.write(json.dumps(cal, indent=1) + "\n")
    s, c = cal["single"], cal["concurrent"]
    print(f"calibrated {cal['name']} in {cal['seconds']:.1f} s "
          f"(load average {cal['loadavg_at_start']:.2f} at the start)")
    print(f"  GEMM, 1 thread: {s['gemm_dnn_flops_128'] / 1e9:.1f} GFLOP/s at 128 frames (the DNN's shapes); curve "
          f"{cal['flops'] / 1e9:.1f} GFLOP/s x n / (n + {cal['gemm_half_frames']:.0f}); "
          f"per frame count: " + ", ".join(f"{n}: {r / 1e9:.1f}" for n, r in s["gemm_hidden_flops"].items()))
    if cal.get("threads"):
        t = cal["threads"]
        print(f"  GEMM, {t['threads']} threads: {t['gemm_dnn_flops_128'] / 1e9:.1f} GFLOP/s at 128 frames")
    print(f"  GEMM, each of {c['ranks']} ranks at once: {c['gemm_dnn_flops_128'] / 1e9:.1f} GFLOP/s at 128 frames")
    print(f"  memory: {s['mem_bw'] / 1e9:.1f} GB/s (axpy; copy {s['copy_bw'] / 1e9:.1f}; fresh pages "
          f"{s['alloc_bw'] / 1e9:.2f}), each of {c['ranks']} ranks at once {c['mem_bw'] / 1e9:.1f} GB/s")
    print(f"  1-bit quantizer: {s['quantize_encode_values_per_s'] / 1e6:.0f} M values/s encoded, "
          f"{s['quantize_decode_values_per_s'] / 1e6:.0f} M decoded")
    print(f"  MPI ({c['ranks']} ranks, our communicator's allreduce): latency {cal['latency'] * 1e3:.3f} ms, "
          f"{cal['link_bw'] / 1e9:.2f} GB/s; " + ", ".join(f"{b:.0f} B sent: {t * 1e3:.2f} ms"
                                                           for b, t in cal["link"]["allreduce_points"]))
    print(f"wrote {a.out}")
    return 0


def _read_bench(path: str) -> dict:
    """The last JSON object line of a bench/parallel.py output (or a file holding only that line)."""
    if not os.path.isfile(path):
        fail("no such bench result file", path)
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and any(k.startswith("speedup_") or k == "fps_k1" for k in d):
                return d
    fail("no bench/parallel.py JSON line (with fps_k1 and speedup_* keys) in it", path)


def _compare(a, cal: dict) -> int:
    from pynnet.parallel import perfmodel as pm
    meas = _read_bench(a.compare_bench)
    mb = meas.get("minibatch", 128)
    mb1 = meas.get("minibatch_1bit", 1024)
    if not (isinstance(mb, int) and mb > 0 and isinstance(mb1, int) and mb1 > 0):
        fail(f"bad minibatch sizes in the bench result ({mb}, {mb1})", a.compare_bench)
    pred = pm.predict_bench(cal, mb, mb1)
    rows = pm.compare_bench(pred, meas)
    if a.json:
        print(json.dumps({"calibration": a.hardware, "bench": a.compare_bench, "minibatch": mb,
                          "minibatch_1bit": mb1, "rows": rows,
                          "max_abs_error": max((abs(r["error"]) for r in rows if not r["share"]), default=None)}))
        return 0
    print(f"bench/parallel.py figures ({a.compare_bench}) against the model calibrated in {a.hardware}")
    print(f"{'figure':32s} {'predicted':>11s} {'measured':>11s} {'error':>8s}")
    for r in rows:
        if r["share"]:
            print(f"{r['key']:32s} {100 * r['predicted']:10.1f}% {100 * r['measured']:10.1f}% "
                  f"{100 * r['error']:+6.1f}pt")
        else:
            print(f"{r['key']:32s} {r['predicted']:11.3f} {r['measured']:11.3f} {100 * r['error']:+7.1f}%")
    errs = [abs(r["error"]) for r in rows if not r["share"]]
    if errs:
        within = sum(e <= 0.2 for e in errs)
        print(f"{within} of {len(errs)} frames/s and speed-up figures within 20% "
              f"(largest error {100 * max(errs):.1f}%)")
    return 0


def _ms(x: float) -> str:
    return f"{1e3 * x:7.1f}"


def _table(s: dict) -> None:
    hw, m, sc = s["hardware"], s["model"], s["scheme"]
    one = s["single"]
    hid = m["hidden"]
    hid_s = f"{hid[0]}x{len(hid)}" if len(set(hid)) == 1 else ":".join(map(str, hid))
    bus = f", shared bus {hw['bus_bw'] / 1e9:.1f} GB/s" if hw["bus_bw"] else ""
    print(f"{hw['name']}: {hw['flops'] / 1e12:.3g} TFLOP/s (the DNN's GEMMs {100 * hw['gemm_efficiency']:.0f}% of it, "
          f"half that at {hw['gemm_half_frames']:.0f} frames), memory {hw['mem_bw'] / 1e9:.3g} GB/s, link "
          f"{hw['link_bw'] / 1e9:.3g} GB/s{bus}, latency {1e6 * hw['latency']:.0f} us; Z = {sc['z']:g}, double "
          f"buffering {'on' if sc['double_buffering'] else 'off'}")
    print(f"model {m['input']}-{hid_s}-{m['output']}: {m['params'] / 1e6:.1f} M parameters, "
          f"{m['flops_per_frame'] / 1e6:.0f} MFLOP per frame; minibatch {s['minibatch']}")
    print(f"one node: {_ms(one['total']).strip()} ms per minibatch (compute {_ms(one['compute']).strip()}, post "
          f"{_ms(one['post']).strip()}, update {_ms(one['update']).strip()}) = {one['frames_per_s']:.0f} frames/s")
    print()
    head = " ".join(f"{h:>7s}" for h in ("compute", "post", "update", "comm", "exposed", "speedup"))
    head = f"{'ms/minibatch':>12s} {head}"
    for title, rows in (("data parallel", s["data_parallel"]), ("model parallel (one server, shared bus)",
                                                                s["model_parallel"]),
                        (f"model averaging every {s['averaging_every']} (per local minibatch)", s["averaging"])):
        print(title)
        print(f"{'K':>3s} {head}")
        for r in rows:
            print(f"{r['k_data'] * r['k_model']:3d} {_ms(r['total']):>12s} {_ms(r['compute'])} {_ms(r['post'])} "
                  f"{_ms(r['update'])} {_ms(r['comm'])} {_ms(r['comm_exposed'])} {r['speedup']:7.2f}")
        print()
    k = s["data_parallel_optimal_k"]
    print(f"data parallel: Seide's K (computation = communication) = "
          + (f"{k:.2f}" if k is not None else
             f"none: the communication is below the fixed cost, which bounds the speed-up at "
             f"{s['data_parallel_fixed_cost_bound']:.1f}x")
          + f"; fastest K = {s['data_parallel_best_k']} ({s['data_parallel_speedup']:.2f}x)")
    print(f"model parallel: continuous optimum K = {s['model_parallel_optimal_k']:.2f}; fastest K = "
          f"{s['model_parallel_best_k']} ({s['model_parallel_speedup']:.2f}x)")
    h = s["hybrid_best"]
    print(f"data x model: fastest {h['k_data']} x {h['k_model']} ({h['speedup']:.2f}x) within {s['max_k']} nodes")
    print(f"model averaging every {s['averaging_every']}: fastest K = {s['averaging_best_k']} "
          f"({s['averaging_speedup']:.2f}x, {s['averaging_efficiency']:.2f} per node); communication <= 5% of the "
          f"time needs averaging every >= {s['averaging_every_for_5pct']} minibatches")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
