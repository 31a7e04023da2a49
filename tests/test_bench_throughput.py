"""bench/train_throughput.py (small model, --quick): it runs, prints ONE JSON line last with the keys
the DNN issue asks for, and its fractions are consistent with its own frames/s and peaks."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "bench", "train_throughput.py")


def _run(*args):
    env = {**os.environ, "PYTHONPATH": ROOT}
    r = subprocess.run([sys.executable, SCRIPT, "--quick", "--threads", "1", *args], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_throughput_json_has_the_issue_keys_and_consistent_fractions():
    res, err = _run("--steps", "2")
    for mb in (256, 1024):
        for k in ("peak_fraction_sgd", "peak_fraction_ngsgd", "ngsgd_overhead", "gemm_only_fraction"):
            assert f"{k}_mb{mb}" in res, k
        peak = res[f"gemm_gflops_mb{mb}"]
        assert res["gemm_gflops_lowest"] <= peak <= res["gemm_gflops"]
        for k in ("sgd", "ngsgd"):
            frac = 6 * res["params"] * res[f"fps_{k}_mb{mb}"] / (peak * 1e9)
            assert abs(frac - res[f"peak_fraction_{k}_mb{mb}"]) < 2e-3
            # the old definition divides by the highest peak of the whole run: never larger
            assert res[f"peak_fraction_{k}_mb{mb}_vs_highest"] <= res[f"peak_fraction_{k}_mb{mb}"] + 1e-3
        overhead = res[f"fps_sgd_mb{mb}"] / res[f"fps_ngsgd_mb{mb}"] - 1
        assert abs(overhead - res[f"ngsgd_overhead_mb{mb}"]) < 2e-3
    assert res["gemm_gflops"] > 0 and "% of the rounds' peak" in err


def test_time_preconditioner_reports_per_step_times():
    res, err = _run("--time-preconditioner", "64")
    assert 0 < res["precondition_ms_fastest"] < res["ngsgd_ms_fastest"]
    assert "preconditioner ms per step" in err
