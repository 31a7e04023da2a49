"""bench/report.py on canned results shaped as the benches print them (no bench runs here): every
section, figure, command and PNG in the report; a missing or garbled input is one line naming the
file, and nothing is written; bench/run_all.sh's usage and its bad options."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(ROOT, "bench", "report.py")
RUN_ALL = os.path.join(ROOT, "bench", "run_all.sh")
PNGS = ["perf_gemm_peak.png", "perf_loader.png", "parallel_speedup.png", "perf_bytes_per_frame.png",
        "perf_predicted_vs_measured.png", "perf_seide.png"]

# the last lines the benches printed (bench/train_throughput.py, bench/parallel.py, bench/loader.py)
TRAIN_THROUGHPUT = {
    "bench": "train_throughput", "threads": 2, "cpu": "x86_64", "torch": "2.13.0+cpu", "params": 45122648,
    "loadavg_at_start": 0.41, "clock": "wall", "device": "cpu", "gemm_gflops": 183.7, "gemm_gflops_lowest": 169.3}
for _mb, _v in ((256, (183.7, 0.927, 0.905, 606.6, 0.894, 0.875, 583.0, 0.859, 0.815, 0.041, 0.075)),
                (1024, (180.9, 0.957, 0.965, 614.9, 0.92, 0.928, 600.4, 0.899, 0.878, 0.024, 0.051))):
    # (bench/train_throughput.py's names: gemm_only_fraction_mb256_median, ..._mb256_vs_highest)
    for _k, _x in zip(("gemm_gflops_mb", "gemm_only_fraction_mb", "gemm_only_fraction_mb@_median", "fps_sgd_mb",
                       "peak_fraction_sgd_mb", "peak_fraction_sgd_mb@_median", "fps_ngsgd_mb",
                       "peak_fraction_ngsgd_mb", "peak_fraction_ngsgd_mb@_median", "ngsgd_overhead_mb",
                       "ngsgd_overhead_mean_mb"), _v):
        TRAIN_THROUGHPUT[_k.replace("@", str(_mb)) if "@" in _k else f"{_k}{_mb}"] = _x
    for _k in ("gemm_only_fraction", "peak_fraction_sgd", "peak_fraction_ngsgd"):
        TRAIN_THROUGHPUT[f"{_k}_mb{_mb}_vs_highest"] = 0.8

PARALLEL = {
    "model_params": 45122648, "minibatch": 128, "steps": 30, "fps_k1": 290.5, "speedup_independent": 1.675,
    "speedup_avg1": 1.208, "bytes_per_frame_avg1": 1420332.0, "comm_fraction_avg1": 0.2046,
    "speedup_avg10": 1.589, "bytes_per_frame_avg10": 142033.2, "comm_fraction_avg10": 0.0307,
    "speedup_avg50": 1.68, "bytes_per_frame_avg50": 28406.6, "comm_fraction_avg50": 0.0082,
    "speedup_allreduce": 1.133, "bytes_per_frame_allreduce": 1410083.3, "comm_fraction_allreduce": 0.1641,
    "speedup_avg1bit": 1.325, "bytes_per_frame_avg1bit": 4498.8, "comm_fraction_avg1bit": 0.0135,
    "speedup_mp2": 1.21, "bytes_per_frame_mp2": 230400.0, "comm_fraction_mp2": 0.21,
    "speedup_1bit": 1.503, "bytes_per_frame_1bit": 11252.5, "comm_fraction_1bit": 0.1764,
    "speedup_1bit_db": 1.323, "bytes_per_frame_1bit_db": 22505.0, "comm_fraction_1bit_db": 0.0319,
    "minibatch_1bit": 1024, "fps_k1_adagrad_mb_1bit": 268.1, "comm_hidden_fraction_db": 0.954,
    "bytes_ratio_fp32_vs_1bit": 31.33, "quantize_fraction_mb1024": 0.0582, "bytes_ratio_avg_vs_avg1bit": 31.57,
    "fps_ratio_allreduce_vs_ddp": 1.103, "fps_ratio_avg10_vs_torch_averager": 1.18}

LOADER = {
    "bench": "loader", "threads": 2, "loadavg_at_start": 0.3, "model": "440-4x512-428", "optimizer": "ngsgd",
    "utterances": 2000, "frames": 199734, "setup_seconds": 1.9, "loader_fps": 412345.6, "minibatch": 256,
    "rounds": 2, "train_fps_in_memory": 12543.2, "train_fps_with_loader": 12011.8,
    "train_fps_in_memory_all": [12401.0, 12543.2], "train_fps_with_loader_all": [11890.3, 12011.8],
    "loader_overhead": 0.0424, "loader_overhead_all": [0.0424, 0.031, 0.052], "loader_core_share": 0.0304}

FEATURES = {f"{k}_{r}_{v}_xrt": x for k in ("mfcc", "fbank") for r, x in (("8k", 912.5), ("16k", 417.1))
            for v in ("dither1", "dither0", "frame_dither", "knf_naive_dither0", "program")}
FEATURES.update(mfcc_xrt_per_core=912.5, fbank_xrt_per_core=912.5, mfcc_16k_xrt_per_core=417.1,
                fbank_16k_xrt_per_core=417.1, audio_seconds=60.0,
                measure="audio seconds / CPU seconds of one process, best of 3")

CALIBRATION = {"calibration": "pynnet-parallel-model --calibrate", "name": "calibrated:vm", "cores": 2,
               "loadavg_at_start": 0.5, "flops": 47.9e9, "gemm_efficiency": 1.0, "gemm_half_frames": 0.0,
               "mem_bw": 7.05e9, "link_bw": 0.69e9, "latency": 0.0019,
               "single": {"threads": 1, "flops": 47.9e9}, "concurrent": {"flops": 24.5e9, "ranks": 2}}

COMPARE = {"calibration": "hw.json", "bench": "parallel.json", "minibatch": 128, "minibatch_1bit": 1024,
           "rows": [{"key": "fps_k1", "predicted": 301.0, "measured": 290.5, "error": 0.036, "share": False},
                    {"key": "speedup_independent", "predicted": 1.7, "measured": 1.675, "error": 0.015,
                     "share": False},
                    {"key": "fps_avg10", "predicted": 470.0, "measured": 461.6, "error": 0.018, "share": False},
                    {"key": "speedup_avg10", "predicted": 1.62, "measured": 1.589, "error": 0.0195, "share": False},
                    {"key": "comm_fraction_avg10", "predicted": 0.04, "measured": 0.0307, "error": 0.0093,
                     "share": True},
                    {"key": "speedup_1bit_db", "predicted": 1.70, "measured": 1.323, "error": 0.285,
                     "share": False}],
           "max_abs_error": 0.285}


def model_json(n: int, z: float, name: str = "seide2014-k20x") -> dict:
    """The fields of a pynnet-parallel-model --json object the report reads (numbers made up)."""
    one = 0.05 + n * 1.1e-4
    row = lambda kd, km: {"k_data": kd, "k_model": km, "minibatch": n, "compute": one / (kd * km), "post": 0.005,
                          "update": 0.002, "comm": 0.06, "comm_exposed": 0.0, "total": one / (0.8 * kd * km) if
                          kd * km > 1 else one, "frames_per_s": n * 0.8 * kd * km / one if kd * km > 1 else n / one,
                          "speedup": 0.8 * kd * km if kd * km > 1 else 1.0}
    return {"hardware": {"name": name}, "scheme": {"z": z, "double_buffering": True}, "minibatch": n, "max_k": 8,
            "single": row(1, 1), "data_parallel_optimal_k": 1.48, "data_parallel_fixed_cost_bound": None,
            "data_parallel_best_k": 3, "data_parallel_speedup": 1.63, "model_parallel_optimal_k": 3.48,
            "model_parallel_best_k": 3, "model_parallel_speedup": 2.62, "averaging_every": 10,
            "averaging_best_k": 8, "averaging_speedup": 7.7, "averaging_efficiency": 0.96,
            "averaging_every_for_5pct": 8, "data_parallel": [row(k, 1) for k in range(1, 9)],
            "model_parallel": [row(1, k) for k in range(1, 9)],
            "hybrid": [row(kd, km) for kd in range(1, 9) for km in range(1, 9) if kd * km <= 8]}


SEIDE_CASES = [(n, 1.0) for n in (256, 512, 1024, 2048, 4096, 8192)] + \
    [(n, 32.0) for n in (1024, 2048, 2880, 4096, 8192, 16384, 32768, 65536, 92160)]

RESULTS = {"train_throughput": (TRAIN_THROUGHPUT, "python bench/train_throughput.py"),
           "loader": (LOADER, "python bench/loader.py"),
           "parallel": (PARALLEL, "python bench/parallel.py --steps 30 --minibatch 128"),
           "features": (FEATURES, "python bench/features.py --repeats 3"),
           "calibration": (CALIBRATION, "pynnet-parallel-model --calibrate --out $RESULTS/calibration.json"),
           "compare": (COMPARE, "pynnet-parallel-model --hardware $RESULTS/calibration.json --compare-bench "
                                "$RESULTS/parallel.json --json"),
           "machine_model": (model_json(1024, 1.0, "calibrated:vm"),
                             "pynnet-parallel-model --hardware $RESULTS/calibration.json --json")}


@pytest.fixture
def results(tmp_path):
    d = tmp_path / "results"
    d.mkdir()
    for name, (obj, cmd) in RESULTS.items():
        # (a bench's stdout: its JSON line last)
        (d / f"{name}.json").write_text(json.dumps(obj) + "\n")
        (d / f"{name}.cmd").write_text(cmd + "\n")
    (d / "seide_model.jsonl").write_text("".join(json.dumps(model_json(n, z)) + "\n" for n, z in SEIDE_CASES))
    (d / "seide_model.cmd").write_text("pynnet-parallel-model --preset seide2014-k20x --minibatch N --z Z --json\n")
    (d / "meta.json").write_text(json.dumps({"commit": "abc1234", "dirty": 0, "started": "2026-12-02 15:00 UTC",
                                             "loadavg": "0.41 0.52 0.60"}) + "\n")
    (d / "timings.tsv").write_text("calibration\t21\t0.41 0.52 0.60\ntrain_throughput\t180\t0.95 0.60 0.61\n"
                                   "parallel\t700\t1.02 0.80 0.70\n")
    return d


def _report(results, out):
    return subprocess.run([sys.executable, REPORT, str(results), "--out", str(out)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MPLBACKEND": "Agg"})


def test_report_has_every_section_figure_command_and_png(results, tmp_path):
    out = tmp_path / "docs" / "PERFORMANCE.md"
    r = _report(results, out)
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    for section in ("## Targets", "## Training step against the GEMM peak", "## The data loader's overhead",
                    "## Data-parallel and model-parallel training", "## Predicted against measured",
                    "## The papers' numbers beside ours", "## Feature extraction", "## Decoding with --num-threads",
                    "## The recipe"):
        assert section in md, section
    for name, (_, cmd) in RESULTS.items():
        assert f"`. ./path.sh && {cmd}`" in md, name
    assert "pynnet-parallel-model --preset seide2014-k20x" in md
    for png in PNGS:
        assert f"]({png})" in md, png
        data = (out.parent / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, png
    assert not [f for f in os.listdir(out.parent) if f.endswith(".tmp")]
    # the figures: GEMM peak fractions, NG-SGD overhead, the loader, every mode's speed-up, bytes, peers
    for s in ("**0.859**", "**0.899**", "4.1%", "2.4%", "412,346", "12,543", "12,012", "**4.2%**",
              "1,420,332", "4,499", "95% of the exchanges hidden", "1.10", "1.18", "31.3", "31.6", "0.058",
              "model parallelism: each layer split over the 2 ranks", "912", "417"):
        assert s in md, s
    for m in ("avg1", "avg10", "avg50", "allreduce", "avg1bit", "1bit", "1bit_db", "mp2"):
        assert f"{PARALLEL[f'speedup_{m}']:.2f}" in md, m
    # predicted vs measured, with the 20% verdict per row and in the targets
    assert "| speedup_1bit_db | 1.700 | 1.323 | +28.5% | **no** |" in md
    assert "| comm_fraction_avg10 | 4.0% | 3.1% | +0.9 pt |" in md
    assert "4 of 5 (largest error 28.5%)" in md
    # the papers: Table 1 ms, Table 4 kfps, Table 5 ratios, ICASSP's K, beside ours
    for s in ("| 256 | 59 |", "| 8192 | 955 |", "| 92160 | 50 |", "7.5 -> 26.9 kfps: 3.6x (0.45 per GPU)",
              "8.2 -> 51.6 kfps: 6.3x (0.79 per GPU)", "K = 1.48", "continuous K = 3.48", "0.75 per worker"):
        assert s in md, s
    # the targets, met or not, the machine-bound one explained by the ceiling
    targets = md.split("## Targets")[1].split("\n## ")[0]
    assert targets.count("**met**") == 11 and targets.count("not met") == 2
    assert "machine-bound: two ranks that never communicate reach only 1.68" in targets
    assert "abc1234" in md and "0.41 0.52 0.60" in md and "egs/synth/RESULTS" in md
    assert "Not run" in md.split("## Decoding")[1]
    assert "| train_throughput | 180 | 0.95 0.60 0.61 |" in md and "Other jobs were running" not in md


def test_report_says_when_other_jobs_loaded_the_machine(results, tmp_path):
    (results / "timings.tsv").write_text("calibration\t21\t0.41 0.5 0.6\nparallel\t700\t3.20 2.1 1.5\n")
    out = tmp_path / "PERFORMANCE.md"
    r = _report(results, out)
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    assert "**Other jobs were running on the machine during this run**" in md and "up to 3.20 at the steps'" in md


@pytest.mark.parametrize("damage", ["missing", "garbled", "no_key", "not_number", "no_cmd", "seide_case"])
def test_bad_results_are_one_line_naming_the_file_and_nothing_is_written(results, tmp_path, damage):
    out = tmp_path / "docs" / "PERFORMANCE.md"
    out.parent.mkdir()
    out.write_text("old report\n")
    bad = results / "parallel.json"
    if damage == "missing":
        bad.unlink()
    elif damage == "garbled":
        bad.write_text('mpiexec: something\n{"fps_k1": 290.5, "speedup_avg1": \n')
    elif damage == "no_key":
        bad.write_text(json.dumps({k: v for k, v in PARALLEL.items() if k != "speedup_mp2"}) + "\n")
    elif damage == "not_number":
        bad.write_text(json.dumps({**PARALLEL, "speedup_avg10": "fast"}) + "\n")
    elif damage == "no_cmd":
        bad = results / "parallel.cmd"
        bad.unlink()
    else:
        bad = results / "seide_model.jsonl"
        bad.write_text("".join(json.dumps(model_json(n, z)) + "\n" for n, z in SEIDE_CASES if n != 2880))
    r = _report(results, out)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert os.listdir(out.parent) == ["PERFORMANCE.md"] and out.read_text() == "old report\n"


def test_run_all_usage_and_bad_options():
    r = subprocess.run(["bash", RUN_ALL, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("usage: bench/run_all.sh") and "--quick" in r.stdout
    for bad in (["--frobnicate"], ["--out"], ["extra-arg"]):
        r = subprocess.run(["bash", RUN_ALL, *bad], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, (bad, r.stderr)
        assert r.stderr.startswith("bench/run_all.sh: ") and not r.stdout


def test_report_with_the_calibration_after_the_bench_gives_both_and_the_drift(results, tmp_path):
    after = dict(CALIBRATION, flops=CALIBRATION["flops"] * 0.9, loadavg_at_start=0.33)
    (results / "calibration_after.json").write_text(json.dumps(after) + "\n")
    (results / "calibration_after.cmd").write_text(
        "pynnet-parallel-model --calibrate --out $RESULTS/calibration_after.json\n")
    out = tmp_path / "PERFORMANCE.md"
    r = _report(results, out)
    assert r.returncode == 0, r.stderr
    md = out.read_text().split("## Predicted against measured")[1].split("\n## ")[0]
    assert "`. ./path.sh && pynnet-parallel-model --calibrate --out $RESULTS/calibration_after.json`" in md
    assert "right before bench/parallel.py" in md and "right after it" in md
    assert "moved by -10.0% between them" in md and "load average 0.33" in md
