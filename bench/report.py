#!/usr/bin/env python3
"""docs/PERFORMANCE.md from the benches' results (what bench/run_all.sh leaves in its --out dir).

    python bench/report.py RESULTS_DIR [--out docs/PERFORMANCE.md]

RESULTS_DIR holds, per result NAME, ``NAME.json`` (the JSON line the bench printed last) and
``NAME.cmd`` (the command that printed it): train_throughput, loader, parallel, features,
calibration (``pynnet-parallel-model --calibrate``'s file), compare (``--compare-bench --json``),
machine_model (``--hardware ... --json``), optionally decode_threads; ``seide_model.jsonl`` (one
``pynnet-parallel-model --preset seide2014-k20x --json`` line per minibatch size and Z) and
``meta.json`` (commit, start time, load); optionally ``timings.tsv`` (bench, seconds[, load average at its
start]). Every input is
read and checked before anything is written; the markdown and its PNGs (beside it) are written
atomically. A missing or garbled input is one line naming the file, exit status 1.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pynnet.bin._cli import cli  # noqa: E402
from pynnet.io.atomic import atomic_path, atomic_write  # noqa: E402
from pynnet.io.errors import fail  # noqa: E402

# ---------------------------------------------------------------- the papers (../shared/REFERENCES.md §2-§3)
# Seide et al., Interspeech 2014, "1-bit SGD": Table 1, one K20X, ms per minibatch of N frames
SEIDE_TABLE1_MS = {256: 59, 512: 89, 1024: 143, 2048: 260, 4096: 490, 8192: 955}
# Table 4: kfps on 4 x 2 GPUs, 1-bit SGD with double buffering, per minibatch size
SEIDE_TABLE4_KFPS = {1024: 15, 2048: 23, 2880: 28, 4096: 34, 8192: 39, 16384: 45, 32768: 47, 65536: 49, 92160: 50}
# Table 5: kfps of 1 GPU and 8 GPUs (1-bit SGD, double buffering) at N = 2880 and 16k
SEIDE_TABLE5 = {2880: (7.5, 26.9), 16384: (8.2, 51.6)}

# bench/parallel.py's modes: (key, what it is)
MODES = [("avg1", "model averaging every minibatch"),
         ("avg10", "model averaging every 10 (the recipe's)"),
         ("avg50", "model averaging every 50"),
         ("allreduce", "fp32 gradient allreduce"),
         ("avg1bit", "1-bit averaging every 10"),
         ("1bit", "1-bit SGD (AdaGrad), global minibatch {mb1}"),
         ("1bit_db", "1-bit SGD, double buffering"),
         ("mp2", "model parallelism: each layer split over the 2 ranks")]
NUMBER = (int, float)

PLOTS = {"gemm": "perf_gemm_peak.png", "loader": "perf_loader.png", "speedup": "parallel_speedup.png",
         "bytes": "perf_bytes_per_frame.png", "predicted": "perf_predicted_vs_measured.png",
         "seide": "perf_seide.png"}


# ---------------------------------------------------------------- reading and checking the inputs
def _parse_json(path: str, text: str):
    """The whole file as JSON, else its last line that is a JSON object (a bench's stdout)."""
    with contextlib.suppress(ValueError):
        return json.loads(text)
    for line in reversed(text.splitlines()):
        if line.strip().startswith("{"):
            try:
                return json.loads(line)
            except ValueError as e:
                fail(f"garbled JSON line ({e})", path)
    fail("no JSON object in it (did the bench fail? its .log beside it has its output)", path)


def _read(path: str) -> str:
    if not os.path.isfile(path):
        fail("missing (run bench/run_all.sh, or the bench that writes it)", path)
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _get(d, key: str, path: str, kind=NUMBER):
    """d[key] (dotted: nested), checked to be of ``kind``; else a one-line error naming the file."""
    v = d
    for part in key.split("."):
        if not isinstance(v, dict) or part not in v:
            fail(f"no '{key}' in it (not the output of the bench named by the file?)", path)
        v = v[part]
    if kind is NUMBER and (isinstance(v, bool) or not isinstance(v, NUMBER) or not math.isfinite(v)):
        fail(f"'{key}' is {v!r}, not a number", path)
    if kind is not NUMBER and not isinstance(v, kind):
        fail(f"'{key}' is {v!r}, not a {kind.__name__}", path)
    return v


class Results:
    """The results dir, read and checked: every figure the report uses is here or it failed."""

    def __init__(self, d: str):
        if not os.path.isdir(d):
            fail("not a directory (the --out dir of bench/run_all.sh)", d)
        self.dir = d
        self.cmd: dict[str, str] = {}
        self.tp = self._bench("train_throughput", ["gemm_gflops", "gemm_gflops_lowest", "threads", "params"] + [
            f"{k}_mb{mb}{m}" for mb in (256, 1024) for k in (
                "gemm_gflops", "gemm_only_fraction", "fps_sgd", "peak_fraction_sgd", "fps_ngsgd",
                "peak_fraction_ngsgd", "ngsgd_overhead", "ngsgd_overhead_mean") for m in (
                ("", "_median") if "fraction" in k else ("",))])
        self.loader = self._bench("loader", ["loader_fps", "train_fps_in_memory", "train_fps_with_loader",
                                             "loader_overhead", "loader_core_share", "frames", "utterances",
                                             "threads", "minibatch"])
        par_keys = ["fps_k1", "minibatch", "steps", "speedup_independent", "minibatch_1bit", "fps_k1_adagrad_mb_1bit",
                    "comm_hidden_fraction_db", "bytes_ratio_fp32_vs_1bit", "quantize_fraction_mb1024",
                    "bytes_ratio_avg_vs_avg1bit", "fps_ratio_allreduce_vs_ddp", "fps_ratio_avg10_vs_torch_averager"]
        self.par = self._bench("parallel", par_keys + [f"{k}_{m}" for m, _ in MODES
                                                       for k in ("speedup", "bytes_per_frame", "comm_fraction")])
        self.feat = self._bench("features", [f"{k}_{r}_{v}_xrt" for k in ("mfcc", "fbank") for r in ("8k", "16k")
                                             for v in ("program", "dither1", "dither0", "frame_dither",
                                                       "knf_naive_dither0")])
        self.cal = self._bench("calibration", ["flops", "mem_bw", "link_bw", "latency"])
        # (the calibration after bench/parallel.py: the predictions use the mean of the two)
        self.cal_after = None
        if os.path.exists(self._path("calibration_after.json")):
            self.cal_after = self._bench("calibration_after", ["flops", "mem_bw", "link_bw", "latency"])
        self.compare = self._bench("compare", [])
        rows = _get(self.compare, "rows", self._path("compare.json"), list)
        for r in rows:
            for k, kind in (("key", str), ("predicted", NUMBER), ("measured", NUMBER), ("error", NUMBER),
                            ("share", bool)):
                _get(r, k, self._path("compare.json"), kind)
        if not rows:
            fail("'rows' is empty: no figure compared", self._path("compare.json"))
        self.machine = self._bench("machine_model", ["minibatch", "data_parallel_best_k", "data_parallel_speedup",
                                                     "model_parallel_optimal_k", "model_parallel_best_k",
                                                     "model_parallel_speedup", "averaging_every_for_5pct"])
        self.decode = None
        if os.path.exists(self._path("decode_threads.json")):
            self.decode = self._bench("decode_threads", ["threads", "wall_s_1", "speedup", "utterances"])
        self.seide = self._seide()
        p = self._path("meta.json")
        self.meta = _parse_json(p, _read(p))
        for k in ("commit", "started", "loadavg"):
            _get(self.meta, k, p, str)
        _get(self.meta, "dirty", p, int)
        self.timings: list[tuple[str, float, str]] = []
        p = self._path("timings.tsv")
        if os.path.exists(p):
            for n, line in enumerate(_read(p).splitlines(), 1):
                parts = line.split("\t")
                try:
                    self.timings.append((parts[0], float(parts[1]), parts[2] if len(parts) > 2 else ""))
                except (IndexError, ValueError):
                    fail(f"expected 'bench<TAB>seconds[<TAB>load average]', got {line!r}", p, n)

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _bench(self, name: str, keys: list[str]) -> dict:
        p = self._path(name + ".json")
        d = _parse_json(p, _read(p))
        if not isinstance(d, dict):
            fail("not a JSON object", p)
        for k in keys:
            _get(d, k, p)
        c = self._path(name + ".cmd")
        self.cmd[name] = _read(c).strip()
        if not self.cmd[name]:
            fail("empty: the command that produced " + os.path.basename(p) + " goes here", c)
        return d

    def _seide(self) -> dict[tuple[float, int], dict]:
        """{(Z, minibatch): pynnet-parallel-model --preset seide2014-k20x --json} for every case the
        papers' tables need."""
        p = self._path("seide_model.jsonl")
        text = _read(p)
        self.cmd["seide_model"] = _read(self._path("seide_model.cmd")).strip()
        cases = {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except ValueError as e:
                fail(f"garbled JSON line ({e})", p, n)
            if not isinstance(d, dict):
                fail("not a JSON object", p, n)
            for k in ("minibatch", "scheme.z", "single.total", "single.frames_per_s"):
                _get(d, k, f"{p}:{n}")
            for k in ("data_parallel", "hybrid"):
                for r in _get(d, k, f"{p}:{n}", list):
                    for kk in ("k_data", "k_model", "frames_per_s", "speedup", "total"):
                        _get(r, kk, f"{p}:{n}")
            cases[(float(d["scheme"]["z"]), int(d["minibatch"]))] = d
        want = [(1.0, n) for n in SEIDE_TABLE1_MS] + [(32.0, n) for n in SEIDE_TABLE4_KFPS]
        for z, n in want:
            if (z, n) not in cases:
                fail(f"no line for minibatch {n} with Z = {z:g} (run_all.sh writes one per case)", p)
        d = cases[(1.0, 1024)]
        for k in ("data_parallel_optimal_k", "data_parallel_best_k", "data_parallel_speedup",
                  "model_parallel_optimal_k", "model_parallel_best_k", "model_parallel_speedup"):
            if k != "data_parallel_optimal_k" or d.get(k) is not None:
                _get(d, k, p)
        return cases


# ---------------------------------------------------------------- formatting
def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


def num(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def command(text: str) -> str:
    return f"Command: `. ./path.sh && {text}`"


def hw_row(d: dict, k_data: int, k_model: int) -> dict | None:
    """The per-K row of a --json model output: data parallel K x 1 or a hybrid."""
    rows = d["data_parallel"] if k_model == 1 else d["hybrid"]
    return next((r for r in rows if r["k_data"] == k_data and r["k_model"] == k_model), None)


def _load1(text: str) -> float | None:
    """The 1-minute figure of a '0.41 0.52 0.60' load average (None if it is not one)."""
    head = text.split()[0] if text.split() else ""
    return float(head) if head.replace(".", "", 1).isdigit() else None


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    import platform
    return platform.processor() or platform.machine()


def mem_gib() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as f:
            return f"{int(f.readline().split()[1]) / 2 ** 20:.0f} GiB"
    return "?"


# ---------------------------------------------------------------- the targets
def targets(R: Results) -> list[tuple[str, str, str, bool, str]]:
    """(issue, target, our figure, met, why it is not where it is not)."""
    tp, par, feat = R.tp, R.par, R.feat
    out = []
    for mb in (256, 1024):
        f, ceil = tp[f"peak_fraction_ngsgd_mb{mb}"], tp[f"gemm_only_fraction_mb{mb}"]
        sgd = tp[f"peak_fraction_sgd_mb{mb}"]
        out.append(("4", f"NG-SGD >= 0.85 of the GEMM peak, minibatch {mb} (46M DNN, {tp['threads']} threads)",
                    f"{f:.3f}", f >= 0.85,
                    f"machine-bound: the step's GEMMs alone reach only {ceil:.3f} of the peak on this BLAS "
                    "(the ceiling of any training step)" if ceil < 0.85 else
                    f"the step's GEMMs alone reach {ceil:.3f} and plain SGD {sgd:.3f} in the same rounds: NG-SGD's "
                    "preconditioner (low-rank products, ~3% of the FLOPs, at skinny shapes) costs the rest"))
    for mb in (256, 1024):
        o = tp[f"ngsgd_overhead_mb{mb}"]
        out.append(("4", f"NG-SGD overhead <= 10% over plain SGD, minibatch {mb} (fastest steps)", pct(o), o <= 0.10,
                    f"mean over the steps with the estimate refresh: {pct(tp[f'ngsgd_overhead_mean_mb{mb}'])}"))
    for k in ("mfcc", "fbank"):
        x = feat[f"{k}_8k_program_xrt"]
        out.append(("2", f"{k.upper() if k == 'mfcc' else 'fbank'} extraction >= 500x real time per core "
                    "(8 kHz, the built-in corpus, whole program)", f"{x:.0f}x", x >= 500, ""))
    ind, s10 = par["speedup_independent"], par["speedup_avg10"]
    if ind > s10 * 1.02:
        why = (f"machine-bound: two ranks that never communicate reach only {ind:.2f} here (the two cores share "
               f"memory bandwidth and caches), so 1.9 is out of reach of any synchronisation; averaging every 10 "
               f"runs at {s10 / ind:.2f} of that ceiling") if ind < 1.9 else \
            f"the ceiling here (two ranks that never communicate) is {ind:.2f}: the synchronisation costs the rest"
    else:
        why = (f"the ceiling measured in this run (two ranks that never communicate: {ind:.2f}) came out no "
               "higher than averaging every 10 itself, so the machine's speed changed between the two "
               "measurements (other load): this run cannot say how much is the machine's; rerun on a quiet machine")
    out.append(("15", "2 workers over 1, averaging every 10 (`speedup_avg10`) >= 1.9", f"{s10:.2f}", s10 >= 1.9, why))
    for key, what in (("fps_ratio_allreduce_vs_ddp", "our fp32 allreduce / torch DistributedDataParallel (gloo)"),
                      ("fps_ratio_avg10_vs_torch_averager",
                       "our averaging every 10 / torch PeriodicModelAverager (post-local SGD)")):
        out.append(("15", f"{what} >= 1.0 (frames/s, plain SGD on both)", f"{par[key]:.3f}", par[key] >= 1.0,
                    "within this VM's run-to-run noise (±5%) of the peer" if par[key] >= 0.95 else ""))
    out.append(("15", "1-bit averaging sends >= 30x fewer bytes than fp32 averaging (`bytes_ratio_avg_vs_avg1bit`)",
                f"{par['bytes_ratio_avg_vs_avg1bit']:.1f}", par["bytes_ratio_avg_vs_avg1bit"] >= 30, ""))
    out.append(("16", "bytes of one update, fp32 allreduce / 1-bit SGD (`bytes_ratio_fp32_vs_1bit`) >= 30",
                f"{par['bytes_ratio_fp32_vs_1bit']:.1f}", par["bytes_ratio_fp32_vs_1bit"] >= 30, ""))
    q = par["quantize_fraction_mb1024"]
    out.append(("16", "1-bit quantize + pack + unpack of the 46M gradient <= 0.10 of a minibatch of 1024's compute, "
                "one thread (`quantize_fraction_mb1024`)", f"{q:.3f}", q <= 0.10, ""))
    rows = [r for r in R.compare["rows"] if not r["share"]]
    off = [r for r in rows if abs(r["error"]) > 0.2]
    out.append(("18", "the calibrated model predicts bench/parallel.py's frames/s and speed-ups within 20%",
                f"{len(rows) - len(off)} of {len(rows)} (largest error "
                f"{pct(max((abs(r['error']) for r in rows), default=0.0))})", bool(rows) and not off,
                "outside: " + ", ".join(f"{r['key']} {100 * r['error']:+.0f}%" for r in off)))
    return out


# ---------------------------------------------------------------- plots (Agg, written to the paths given)
def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, f) -> None:
    fig.tight_layout()
    fig.savefig(f, format="png", dpi=80)
    _plt().close(fig)


def plot_gemm(tp: dict, f) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    kinds = [("gemm_only_fraction", "the step's GEMMs alone"), ("peak_fraction_sgd", "SGD"),
             ("peak_fraction_ngsgd", "NG-SGD")]
    w = 0.26
    for i, (k, label) in enumerate(kinds):
        vals = [tp[f"{k}_mb{mb}"] for mb in (256, 1024)]
        xs = [j + (i - 1) * w for j in range(2)]
        ax.bar(xs, vals, w, label=label, color=["#999", "#4a7", "#47c"][i])
        for x, v in zip(xs, vals):
            ax.text(x, v + 0.01, f"{v:.2f}", ha="center", fontsize=8)
    ax.axhline(0.85, ls="--", c="#a33", lw=1, label="target for NG-SGD (0.85)")
    ax.set_xticks([0, 1])
    ax.set_xticklabels([f"minibatch {mb}\nNG-SGD overhead {pct(tp[f'ngsgd_overhead_mb{mb}'])}" for mb in (256, 1024)])
    ax.set_ylim(0, 1.3)
    ax.set_ylabel("fraction of the fp32 GEMM peak")
    ax.set_title(f"46M DNN training step, {tp['threads']} threads; peak {tp['gemm_gflops']:.0f} GFLOP/s "
                 f"(fastest sample)", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", ncol=4)
    _save(fig, f)


def plot_loader(ld: dict, f) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 2.6))
    names = ["(a) the loader alone", "(b) training, minibatches in memory", "(c) training fed by the loader"]
    vals = [ld["loader_fps"], ld["train_fps_in_memory"], ld["train_fps_with_loader"]]
    ax.barh(names[::-1], vals[::-1], color=["#47c", "#4a7", "#999"])
    for i, v in enumerate(vals[::-1]):
        ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(min(vals) / 2, max(vals) * 6)
    ax.set_xlabel("frames/s (log scale)")
    ax.set_title(f"egs/synth DNN, NG-SGD, {ld['threads']} threads: loader overhead {pct(ld['loader_overhead'])}",
                 fontsize=9)
    _save(fig, f)


def plot_bytes(par: dict, f) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    names = [m for m, _ in MODES if par[f"bytes_per_frame_{m}"] > 0]
    vals = [par[f"bytes_per_frame_{m}"] for m in names]
    ax.bar(names, vals, color=["#47c" if "1bit" in n else "#4a7" for n in names])
    for i, v in enumerate(vals):
        ax.text(i, v * 1.15, f"{v:,.0f}", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylim(min(vals) / 3, max(vals) * 8)
    ax.set_ylabel("bytes sent per frame per rank")
    ax.set_title("46M DNN, 2 ranks: what each mode sends (log scale)", fontsize=9)
    _save(fig, f)


def plot_predicted(rows: list[dict], f) -> None:
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
    for ax, pre, label in ((a1, "fps_", "frames/s"), (a2, "speedup_", "speed-up, 2 ranks over 1")):
        rs = [r for r in rows if not r["share"] and r["key"].startswith(pre)]
        if not rs:
            ax.set_visible(False)
            continue
        m, p = [r["measured"] for r in rs], [r["predicted"] for r in rs]
        lo, hi = min(m + p) * 0.7, max(m + p) * 1.3
        ax.plot([lo, hi], [lo, hi], c="gray", lw=1)
        ax.fill_between([lo, hi], [lo * 0.8, hi * 0.8], [lo * 1.2, hi * 1.2], color="#ddd", label="within 20%")
        ax.scatter(m, p, c=["#4a7" if abs(r["error"]) <= 0.2 else "#c64" for r in rs], zorder=3)
        for r in rs:
            ax.annotate(r["key"][len(pre):], (r["measured"], r["predicted"]), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("pynnet-parallel-model calibrated here against bench/parallel.py", fontsize=9)
    _save(fig, f)


def plot_seide(seide: dict, f) -> None:
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ns = sorted(SEIDE_TABLE1_MS)
    a1.plot(ns, [SEIDE_TABLE1_MS[n] for n in ns], "o-", label="paper, Table 1 (one K20X)")
    a1.plot(ns, [1e3 * seide[(1.0, n)]["single"]["total"] for n in ns], "s--", label="model, --preset seide2014-k20x")
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xlabel("minibatch (frames)")
    a1.set_ylabel("ms per minibatch")
    a1.legend(fontsize=7)
    ns = sorted(SEIDE_TABLE4_KFPS)
    a2.plot(ns, [SEIDE_TABLE4_KFPS[n] for n in ns], "o-", label="paper, Table 4 (4 x 2 GPUs)")
    for (kd, km), style, label in (((8, 1), "s--", "model, 8 data-parallel"), ((4, 2), "^:", "model, 4 x 2 hybrid")):
        pts = [(n, hw_row(seide[(32.0, n)], kd, km)) for n in ns]
        pts = [(n, r["frames_per_s"] / 1e3) for n, r in pts if r is not None]
        if pts:
            a2.plot(*zip(*pts), style, label=label)
    a2.set_xscale("log", base=2)
    a2.set_xlabel("minibatch (frames)")
    a2.set_ylabel("kframes/s, 1-bit SGD, double buffering")
    a2.legend(fontsize=7)
    fig.suptitle("Seide et al. 2014 (46M DNN on K20X GPUs) and the parallel-efficiency model", fontsize=9)
    _save(fig, f)


def _bench_parallel_plot():
    """bench/parallel.py's own speed-up plot (the function its --plot runs)."""
    spec = importlib.util.spec_from_file_location("bench_parallel", os.path.join(ROOT, "bench", "parallel.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.plot


# ---------------------------------------------------------------- the markdown
def render(R: Results, out_md: str) -> list[str]:
    tp, ld, par, feat, cal, mach = R.tp, R.loader, R.par, R.feat, R.cal, R.machine
    rel = os.path.relpath(os.path.join(ROOT, "egs", "synth", "RESULTS"), os.path.dirname(os.path.abspath(out_md)))
    L = ["# Performance", "",
         "Generated by `bench/run_all.sh` (`bench/report.py` from the benches' JSON lines): the current figures, "
         "each with the command that produced them. Do not edit by hand: rerun `bench/run_all.sh`. The history of "
         "earlier measurements and of what was tried is in git (`git log -p docs/PERFORMANCE.md`) and in "
         "docs/notes/. In the commands, `$RESULTS` is the dir of `bench/run_all.sh --out` (JSON lines, logs).", ""]
    dirty = R.meta["dirty"]
    L += [f"Machine: {cpu_model()}, {os.cpu_count()} cores, {mem_gib()} of memory (a VM: its speed drifts by "
          "5-15% within minutes, so one run's figures move by that much; read them as ratios within the run). "
          f"Run started {R.meta['started']}, code {R.meta['commit']}"
          + (f" with {dirty} uncommitted changed file(s) in the working tree" if dirty else "")
          + f"; load average at the start {R.meta['loadavg']}.", ""]
    if R.timings:
        total = sum(t[1] for t in R.timings)
        L += [f"Time of each step of this run ({total / 60:.1f} min in all):", ""]
        if any(t[2] for t in R.timings):
            L += table(["step", "seconds", "load average at its start"], [[n, f"{s:.0f}", ld] for n, s, ld in R.timings])
            L += ["(A step's load average at its start includes the previous step's own two processes: up to ~2 "
                  "on a quiet machine.)", ""]
        else:
            L += table(["step", "seconds"], [[n, f"{s:.0f}"] for n, s, _ in R.timings])
    first = _load1(R.meta["loadavg"])
    later = [x for x in (_load1(t[2]) for t in R.timings[1:]) if x is not None]
    if (first is not None and first >= 1.5) or (later and max(later) >= 2.5):
        L += [f"**Other jobs were running on the machine during this run** (1-minute load average {R.meta['loadavg']}"
              f" at its start, up to {max(later + [first or 0]):.2f} at the steps' starts, against 2 cores): the "
              "two-thread figures (fractions of the GEMM peak, NG-SGD overhead, the loader) and the 2-rank speed-ups "
              "are lower and noisier than on a quiet machine; rerun `bench/run_all.sh` when `uptime` shows < 1.5.",
              ""]

    # ---- targets
    L += ["## Targets", "", "As the issues state them; figures from the sections below.", ""]
    rows = []
    for issue, what, fig, met, why in targets(R):
        rows.append([f"#{issue}", what, fig, "**met**" if met else "not met", "" if met else why])
    L += table(["issue", "target", "here", "", "why not"], rows)

    # ---- GEMM peak and NG-SGD
    L += ["## Training step against the GEMM peak, NG-SGD overhead (`bench/train_throughput.py`)", "",
          command(R.cmd["train_throughput"]), "",
          f"The Switchboard-shaped DNN (429 -> 7 x 2048 sigmoid -> 9304, {tp['params'] / 1e6:.1f} M parameters), "
          f"{tp['threads']} torch threads, random frames in memory. SGD, NG-SGD and the step's GEMMs alone run in "
          "lockstep rounds, each round followed by one 3072² GEMM (the peak sample); fraction of peak = 6 x "
          "parameters x frames/s / the fastest peak sample of the same rounds (fastest step; median per round in "
          f"brackets). Peak samples {tp['gemm_gflops_lowest']:.0f}-{tp['gemm_gflops']:.0f} GFLOP/s.", ""]
    rows = []
    for mb in (256, 1024):
        rows.append([mb, f"{tp[f'gemm_gflops_mb{mb}']:.0f}",
                     f"{tp[f'gemm_only_fraction_mb{mb}']:.3f} ({tp[f'gemm_only_fraction_mb{mb}_median']:.3f})",
                     f"{tp[f'peak_fraction_sgd_mb{mb}']:.3f} ({tp[f'peak_fraction_sgd_mb{mb}_median']:.3f})",
                     f"**{tp[f'peak_fraction_ngsgd_mb{mb}']:.3f}** ({tp[f'peak_fraction_ngsgd_mb{mb}_median']:.3f})",
                     f"{tp[f'fps_sgd_mb{mb}']:.0f} / {tp[f'fps_ngsgd_mb{mb}']:.0f}",
                     f"{pct(tp[f'ngsgd_overhead_mb{mb}'])} ({pct(tp[f'ngsgd_overhead_mean_mb{mb}'])})"])
    L += table(["minibatch", "peak GFLOP/s (rounds)", "GEMMs alone", "SGD", "NG-SGD", "frames/s SGD / NG-SGD",
                "NG-SGD overhead, fastest (mean)"], rows)
    L += [f"![fraction of the GEMM peak]({PLOTS['gemm']})", ""]

    # ---- loader
    L += ["## The data loader's overhead (`bench/loader.py`)", "", command(R.cmd["loader"]), "",
          f"A Kaldi-format training set built in a temp dir ({num(ld['utterances'])} utterances, "
          f"{num(ld['frames'])} frames of 40-dim features, per-speaker CMVN stats), the egs/synth DNN "
          f"({ld.get('model', '440-4x512-428')}, NG-SGD, minibatch {ld['minibatch']}, {ld['threads']} threads as "
          "the recipe's 1-worker training). (a) ChunkLoader alone (read, per-speaker mean normalisation, splice ±5, "
          "global CMVN; its own thread); (b) `Trainer._update` on minibatches already in memory; (c) one epoch of "
          "`Trainer.run_epoch`, fed by the background loader. Overhead = 1 - (c)/(b), each epoch set against "
          "the in-memory runs just before and after it, the median over the rounds"
          + (" (" + ", ".join(pct(x) for x in ld["loader_overhead_all"]) + ")"
             if isinstance(ld.get("loader_overhead_all"), list) else "")
          + "; frames/s are the medians.", ""]
    L += table(["(a) loader alone, frames/s", "(b) training in memory", "(c) training with the loader",
                "loader overhead", "share of a core the loader needs at (b)"],
               [[num(ld["loader_fps"]), num(ld["train_fps_in_memory"]), num(ld["train_fps_with_loader"]),
                 f"**{pct(ld['loader_overhead'])}**", pct(ld["loader_core_share"])]])
    L += [f"![loader]({PLOTS['loader']})", ""]

    # ---- parallel
    mb, mb1 = par["minibatch"], par["minibatch_1bit"]
    L += ["## Data-parallel and model-parallel training, 2 workers over 1 (`bench/parallel.py`)", "",
          command(R.cmd["parallel"]), "",
          f"The 46M DNN, one thread per rank, in-memory random frames, `mpiexec -n 2` on this machine. Averaging and "
          f"allreduce modes: NG-SGD, {par['steps']} minibatches of {mb} per rank (K=1: {par['fps_k1']:.0f} "
          f"frames/s, the faster of a run first and last); 1-bit SGD: AdaGrad at a global minibatch of {mb1} "
          f"against one worker with AdaGrad on the whole {mb1} ({par['fps_k1_adagrad_mb_1bit']:.0f} frames/s); model "
          f"parallelism: the two ranks compute the same minibatch of {mb}, each half of every layer. Speed-up = the "
          "job's frames/s over one worker's (ideal 2); \"of the ceiling\" = over the speed-up of two ranks that never "
          "communicate.", ""]
    ind = par["speedup_independent"]
    rows = [["two ranks that never communicate (the ceiling here)", f"{ind:.2f}", f"{ind / 2:.2f}", "1.00", "-", "0"]]
    for m, what in MODES:
        s = par[f"speedup_{m}"]
        share = pct(par[f"comm_fraction_{m}"])
        if m == "1bit_db":
            share += f" waited; {pct(par['comm_hidden_fraction_db'], 0)} of the exchanges hidden"
        nbytes = num(par[f"bytes_per_frame_{m}"])
        if not par[f"bytes_per_frame_{m}"]:
            nbytes += f" (no exchange in the run's {par['steps']} minibatches)"
        rows.append([("**" + what + "**" if m == "avg10" else what).format(mb1=mb1), f"{s:.2f}", f"{s / 2:.2f}",
                     f"{s / ind:.2f}", share, nbytes])
    for n in sorted(SEIDE_TABLE5):
        one, eight = SEIDE_TABLE5[n]
        rows.append([f"Seide et al. Table 5: 1-bit SGD on 8 K20X GPUs, N = {n}", f"{eight / one:.1f}",
                     f"{eight / one / 8:.2f}", "", "", ""])
    L += table(["2 workers over 1", "speed-up", "per worker", "of the ceiling", "communication share of the time",
                "bytes sent per frame per rank"], rows)
    L += table(["against the peers, and the bytes", ""], [
        ["our fp32 allreduce / torch DistributedDataParallel (gloo), plain SGD on both, frames/s",
         f"{par['fps_ratio_allreduce_vs_ddp']:.2f}"],
        ["our averaging every 10 / torch PeriodicModelAverager (period 10), plain SGD, frames/s",
         f"{par['fps_ratio_avg10_vs_torch_averager']:.2f}"],
        ["bytes, fp32 averaging every 10 / 1-bit averaging every 10", f"{par['bytes_ratio_avg_vs_avg1bit']:.1f}"],
        ["bytes of one update, fp32 gradient allreduce / 1-bit SGD", f"{par['bytes_ratio_fp32_vs_1bit']:.1f}"],
        ["1-bit quantize + pack + unpack of the whole gradient / forward + backward of 1024 frames, one thread",
         f"{par['quantize_fraction_mb1024']:.3f}"]])
    L += [f"![speed-ups]({PLOTS['speedup']})", "", f"![bytes per frame]({PLOTS['bytes']})", "",
          (f"On this machine the ceiling is {ind:.2f}, not 2: the two ranks share the two cores' memory bandwidth "
           "and caches, and MPI moves the bytes through shared memory with the same CPUs that compute. "
           if ind < 1.98 else
           f"In this run the ceiling came out at {ind:.2f}, above 2: one worker's runs (the base of every speed-up) "
           "met a slower moment of the VM than the two ranks' runs did; the speed-ups carry that error, the "
           "\"of the ceiling\" column less of it. ")
          + "Each mode's \"of the ceiling\" column is what its synchronisation costs; the speed-up column is bounded "
          "by the machine.", ""]

    # ---- predicted vs measured
    def constants(c: dict) -> str:
        return (f"GEMM {c['flops'] / 1e9:.1f} GFLOP/s (one thread, the DNN's shapes), memory "
                f"{c['mem_bw'] / 1e9:.1f} GB/s, MPI allreduce {c['link_bw'] / 1e9:.2f} GB/s and "
                f"{1e3 * c['latency']:.2f} ms per message"
                + (f" (load average {c['loadavg_at_start']:.2f} at its start)"
                   if isinstance(c.get("loadavg_at_start"), NUMBER) else ""))

    L += ["## Predicted against measured (`pynnet-parallel-model`)", "",
          command(R.cmd["calibration"]), ""]
    if R.cal_after is not None:
        after = R.cal_after
        L += [command(R.cmd["calibration_after"]), "", command(R.cmd["compare"]), "",
              f"The calibration right before bench/parallel.py: {constants(cal)}; right after it: "
              f"{constants(after)}. The machine's GEMM rate moved by {100 * (after['flops'] / cal['flops'] - 1):+.1f}% "
              "between them; the predictions use the mean of the two (`--hardware A,B`)."]
    else:
        L += [command(R.cmd["compare"]), "", f"The calibration here: {constants(cal)}."]
    L += ["The model predicts each bench/parallel.py figure from these constants alone (nothing fitted to the "
          "bench). Error = predicted / measured - 1; for the communication shares, the difference in points.", ""]
    rows = []
    for r in R.compare["rows"]:
        if r["share"]:
            rows.append([r["key"], pct(r["predicted"]), pct(r["measured"]), f"{100 * r['error']:+.1f} pt", ""])
        else:
            ok = abs(r["error"]) <= 0.2
            rows.append([r["key"], f"{r['predicted']:.3f}" if r["key"].startswith("speedup") else num(r["predicted"]),
                         f"{r['measured']:.3f}" if r["key"].startswith("speedup") else num(r["measured"]),
                         f"{100 * r['error']:+.1f}%", "yes" if ok else "**no**"])
    L += table(["figure", "predicted", "measured", "error", "within 20%"], rows)
    L += [f"![predicted against measured]({PLOTS['predicted']})", ""]
    dk = mach.get("data_parallel_optimal_k")
    L += [command(R.cmd["machine_model"]), "",
          f"What the model says for up to {mach.get('max_k', 8)} nodes like this one (the calibrated constants; "
          f"the link is this machine's MPI through shared memory), the 46M DNN at minibatch {mach['minibatch']}: "
          "data parallelism "
          + (f"pays off up to K = {dk:.2f} (computation = communication)" if isinstance(dk, NUMBER) else
             "has no crossing of computation and communication (the fixed cost bounds it)")
          + f", fastest at K = {mach['data_parallel_best_k']} ({mach['data_parallel_speedup']:.2f}x); model "
          f"parallelism optimal at K = {mach['model_parallel_optimal_k']:.2f}, fastest K = "
          f"{mach['model_parallel_best_k']} ({mach['model_parallel_speedup']:.2f}x); averaging keeps communication "
          f"under 5% when every >= {mach['averaging_every_for_5pct']} minibatches.", ""]

    # ---- the papers
    S = R.seide
    L += ["## The papers' numbers beside ours (Seide et al. 2014)", "",
          command(R.cmd["seide_model"]), "",
          "Interspeech 2014 (\"1-bit SGD\") and ICASSP 2014 (\"On parallelizability of SGD\"), the 46M DNN on NVIDIA "
          "K20X GPUs (../shared/REFERENCES.md §2-§3); \"model\" = `pynnet-parallel-model --preset seide2014-k20x` "
          "(3.95 TFLOP/s, 250 GB/s, PCIe 6 GB/s; its GEMM efficiency curve fitted to Table 1, nothing fitted to the "
          "parallel figures: docs/notes/parallel_model.md); \"ours\" = this CPU, the same DNN "
          "(bench/train_throughput.py, one process).", ""]
    rows = []
    for n in sorted(SEIDE_TABLE1_MS):
        ours = ""
        if f"fps_sgd_mb{n}" in tp:
            ours = f"{1e3 * n / tp[f'fps_sgd_mb{n}']:,.0f} / {1e3 * n / tp[f'fps_ngsgd_mb{n}']:,.0f}"
        rows.append([n, SEIDE_TABLE1_MS[n], f"{1e3 * S[(1.0, n)]['single']['total']:.0f}", ours])
    L += ["Table 1, one node, time per minibatch:", ""]
    L += table(["minibatch N", "paper, one K20X (ms)", "model (ms)",
                f"ours, {tp['threads']} CPU threads, SGD / NG-SGD (ms)"], rows)
    rows = []
    for n in sorted(SEIDE_TABLE4_KFPS):
        d8, h42 = hw_row(S[(32.0, n)], 8, 1), hw_row(S[(32.0, n)], 4, 2)
        rows.append([n, SEIDE_TABLE4_KFPS[n], f"{d8['frames_per_s'] / 1e3:.1f}" if d8 else "-",
                     f"{h42['frames_per_s'] / 1e3:.1f}" if h42 else "-"])
    L += ["Table 4, 1-bit SGD with double buffering on 8 GPUs, kframes/s:", ""]
    L += table(["minibatch N", "paper (4 servers x 2 GPUs)", "model, 8 data-parallel", "model, 4 x 2 hybrid"], rows)
    rows = []
    for n in sorted(SEIDE_TABLE5):
        one, eight = SEIDE_TABLE5[n]
        d8 = hw_row(S[(32.0, n)], 8, 1)
        m1 = S[(32.0, n)]["single"]["frames_per_s"] / 1e3
        rows.append([f"N = {n}, 8 GPUs", f"{one} -> {eight} kfps: {eight / one:.1f}x ({eight / one / 8:.2f} per GPU)",
                     f"{m1:.1f} -> {d8['frames_per_s'] / 1e3:.1f} kfps: {d8['speedup']:.1f}x" if d8 else "-", ""])
    for m in ("1bit", "1bit_db"):
        s = par[f"speedup_{m}"]
        rows.append([f"ours, {'double buffering, ' if m == '1bit_db' else ''}N = {mb1}, 2 CPU ranks", "", "",
                     f"{s:.2f}x ({s / 2:.2f} per worker; {s / ind:.2f} of this machine's ceiling)"])
    L += ["Table 5, 1-bit SGD speed-up and efficiency per worker:", ""]
    L += table(["case", "paper", "model", "ours"], rows)
    d1, d8k = S[(1.0, 1024)], S[(32.0, 8192)]
    dk = d1.get("data_parallel_optimal_k")
    best8 = hw_row(d8k, 8, 1)
    L += ["ICASSP 2014, how many nodes pay off (the 46M DNN):", ""]
    L += table(["claim", "the model (--preset seide2014-k20x)"], [
        ["data parallelism at N = 1024 does not scale to 2 GPUs (K ≈ 1.4 < 2)",
         (f"K = {dk:.2f}" if isinstance(dk, NUMBER) else "no crossing") +
         f"; 2 GPUs {hw_row(d1, 2, 1)['speedup']:.2f}x, fastest K = {d1['data_parallel_best_k']} "
         f"({d1['data_parallel_speedup']:.2f}x)"],
        ["model parallelism is optimal at 3 GPUs in one server",
         f"continuous K = {d1['model_parallel_optimal_k']:.2f}, fastest K = {d1['model_parallel_best_k']} "
         f"({d1['model_parallel_speedup']:.2f}x)"],
        ["larger minibatches with 1-bit compression: 5x or more",
         f"N = 8192, 1 bit, 8 GPUs: {best8['speedup']:.2f}x" if best8 else "-"]])
    L += [f"![Seide et al. and the model]({PLOTS['seide']})", ""]

    # ---- features
    L += ["## Feature extraction (`bench/features.py`)", "", command(R.cmd["features"]), "",
          f"× real time per core ({feat.get('measure', 'audio seconds / CPU seconds of one process')}; "
          f"{feat.get('audio_seconds', 60):g} s of generated speech-like audio per measurement).", ""]
    variants = [("program", "whole program `pynnet-compute-*-feats` (read WAV, compute, write ark,scp), dither 1.0"),
                ("dither1", "`FeatureComputer.compute`, dither 1.0 (noise added to the waveform)"),
                ("dither0", "`FeatureComputer.compute`, `--dither=0`"),
                ("frame_dither", "`FeatureComputer.compute`, `--dither-mode=frame` (Kaldi's per-frame noise)"),
                ("knf_naive_dither0", "kaldi-native-fbank called naively (ndarray in, dither 0)")]
    rows = [[("**" + what + "**") if v == "program" else what] +
            [f"{feat[f'{k}_{r}_{v}_xrt']:.0f}" for r in ("8k", "16k") for k in ("mfcc", "fbank")]
            for v, what in variants]
    L += table(["× real time per core", "8 kHz MFCC", "8 kHz fbank (40)", "16 kHz MFCC", "16 kHz fbank (40)"], rows)

    # ---- decoding threads
    L += ["## Decoding with --num-threads (`bench/decode_threads.py`)", ""]
    if R.decode is not None:
        dc = R.decode
        n = dc["threads"]
        L += [command(R.cmd["decode_threads"]), ""]
        L += table(["system", "utterances", "1 process (s)", f"{n} (s)", "speed-up", "identical lattices"],
                   [[dc.get("system", "?"), dc["utterances"], f"{dc['wall_s_1']:.2f}",
                     f"{dc.get(f'wall_s_{n}', float('nan')):.2f}", f"{dc['speedup']:.2f}",
                     "yes" if dc.get("identical_lattices") else "**no**"]])
    else:
        L += ["Not run: it decodes a recipe's test set (egs/synth/exp/tri2 and data/test must exist: run "
              "`egs/synth/run.sh` first, then `bench/run_all.sh` includes it).", ""]

    # ---- the recipe
    L += ['## The GMM ladder and the benches outside run_all.sh', '', 'Measured by hand, not by this run (2026-12-05, Intel Xeon VM, 2 cores, nothing else running):', '', '| what | figure | command |', '|---|---|---|', '| the default recipe, fresh clone, install included (stages 0-16, 19) | 28 min 12 s, of it stages 9-13 (tri3, tri4, fMLLR alignments and features) 7 min 7 s | `git clone ... && cd egs/synth && ./run.sh` at d7f3c4f |', '| default test run | 16 min 14 s of tests (1220 passed, 28 skipped), 17 min 23 s with the install | `git clone /work/main /tmp/ci && /tmp/ci/.ci/run` at 166d6d8 |', "| `bench/kaldi_gmm_ladder.sh` (Kaldi's mono..tri4 beside ours) | not run yet: no Kaldi build finished | `KALDI_ROOT=... bench/kaldi_gmm_ladder.sh` after `egs/synth/run.sh --stop-stage 12` |", '| `bench/kill_resume.py` with the new stages 9-13 | not run yet at this code | `python bench/kill_resume.py` |', '']
    L += ["## The recipe", "",
          f"Word error rates and the recipe's own run times (stage by stage, with the install) are in "
          f"[egs/synth/RESULTS]({rel}) and the README, with the commands that produced them.", ""]
    return L


def write(R: Results, out_md: str) -> list[str]:
    """The markdown and its PNGs, each by rename once all of them rendered."""
    d = os.path.dirname(os.path.abspath(out_md))
    text = "\n".join(render(R, out_md)).rstrip() + "\n"
    plot_parallel = _bench_parallel_plot()
    makers = {"gemm": lambda f: plot_gemm(R.tp, f), "loader": lambda f: plot_loader(R.loader, f),
              "speedup": lambda f: plot_parallel(R.par, f), "bytes": lambda f: plot_bytes(R.par, f),
              "predicted": lambda f: plot_predicted(R.compare["rows"], f), "seide": lambda f: plot_seide(R.seide, f)}
    written = []
    with contextlib.ExitStack() as stack:
        for key, make in makers.items():
            path = os.path.join(d, PLOTS[key])
            tmp = stack.enter_context(atomic_path(path))
            with open(tmp, "wb") as f:
                make(f)
            _plt().close("all")
            written.append(path)
        with atomic_write(out_md) as f:
            f.write(text)
    return written + [out_md]


@cli
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="the dir bench/run_all.sh --out wrote")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    a = p.parse_args(argv)
    R = Results(a.results)
    for path in write(R, a.out):
        rel = os.path.relpath(path)
        print(f"wrote {path if rel.startswith('..') else rel}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
