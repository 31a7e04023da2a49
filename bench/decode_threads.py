#!/usr/bin/env python3
"""Decoding speed-up of --num-threads (N decoding processes in one job) over one process.

    python bench/decode_threads.py [--recipe egs/synth] [--system tri2] [--threads 2] [--repeats 2]

Needs a recipe that has run (its data/test, exp/<system>/final.mdl and exp/<system>/graph): decodes
data/test with pynnet-gmm-latgen-faster as steps/decode.sh does (one job, the system's
cmvn_opts/delta_opts, OMP_NUM_THREADS=1 as path.sh sets it), alternately with --num-threads 1
and --num-threads N, and checks that the lattices are byte-identical.  Wall time counts (that is
what --num-threads buys); the best of --repeats runs of each is used.  The last line printed is
one JSON object with the wall times, the speed-up and the CPU count.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recipe", default=os.path.join(ROOT, "egs", "synth"))
    p.add_argument("--system", default="tri2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args()
    exp = os.path.join(a.recipe, "exp", a.system)
    data = os.path.join(a.recipe, "data", "test")
    for f in (os.path.join(exp, "final.mdl"), os.path.join(exp, "graph", "HCLG.fst"), os.path.join(data, "feats.scp")):
        if not os.path.exists(f):
            sys.exit(f"{f}: not found (run the recipe first: egs/synth/run.sh)")
    read = lambda name: open(os.path.join(exp, name)).read().strip() if os.path.exists(os.path.join(exp, name)) else ""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{ROOT}/tools/venv/bin:" + os.environ["PATH"]}
    times: dict[int, list[float]] = {1: [], a.threads: []}
    digests: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.repeats):
            for n in (1, a.threads):
                out = os.path.join(tmp, f"lat.{n}.txt")
                cmd = ["pynnet-gmm-latgen-faster", "--max-active", "7000", "--beam", "13.0", "--lattice-beam", "6.0",
                       "--acoustic-scale", "0.083333", "--num-threads", str(n), f"--cmvn-opts={read('cmvn_opts')}",
                       *read("delta_opts").split(), os.path.join(exp, "final.mdl"),
                       os.path.join(exp, "graph", "HCLG.fst"), data, f"ark,t:{out}"]
                t0 = time.perf_counter()
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                times[n].append(time.perf_counter() - t0)
                if r.returncode != 0:
                    sys.exit(r.stderr)
                digests.add(hashlib.md5(open(out, "rb").read()).hexdigest())
                print(f"--num-threads {n}: {times[n][-1]:.2f} s", file=sys.stderr)
    best1, bestn = min(times[1]), min(times[a.threads])
    print(json.dumps({"system": a.system, "utterances": sum(1 for _ in open(os.path.join(data, "feats.scp"))),
                      "cpus": os.cpu_count(), "threads": a.threads, "wall_s_1": round(best1, 2),
                      f"wall_s_{a.threads}": round(bestn, 2), "speedup": round(best1 / bestn, 3),
                      "identical_lattices": len(digests) == 1}))
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
