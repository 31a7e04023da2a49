"""pynnet-mpirun: starts the ranks of a parallel training (mpiexec, srun, or a hostfile through
them) and turns the launcher's view of a failure into one line naming the rank.

A rank that times out in a collective names the missing ranks itself (pynnet.parallel.comm).
A rank killed outright (kill -9, the OOM killer, a node lost) can say nothing, and mpiexec only
reports a pid ("BAD TERMINATION ... PID 2258 RUNNING AT host ... EXIT CODE: 9"): each rank
records its host and pid in <log-dir>/ranks/<rank> at its start, so the pid is mapped back to the
rank here, and <log-dir>/last_checkpoint (rank 0 writes it) says where a rerun resumes.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import deque

from pynnet.io.errors import PynnetError

_HYDRA_PID = re.compile(r"PID (\d+) RUNNING AT (\S+)")
_HYDRA_CODE = re.compile(r"EXIT CODE: (\d+)")
_HYDRA_SIGNAL = re.compile(r"EXIT STRING: .*\(signal (\d+)\)")
_SRUN_TASK = re.compile(r"srun: error: (\S+): tasks? (\d+)[-\d,]*: (.+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _signal_name(num: int) -> str:
    try:
        return f"killed by signal {num} ({signal.Signals(num).name})"
    except ValueError:
        return f"killed by signal {num}"


def write_rank_info(log_dir: str, rank: int) -> None:
    """``<log_dir>/ranks/<rank>``: host and pid, so that the launcher can name a rank that died."""
    d = os.path.join(log_dir, "ranks")
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{rank}.tmp")
    with open(tmp, "w") as f:
        f.write(f"{socket.gethostname()} {os.getpid()}\n")
    os.replace(tmp, os.path.join(d, str(rank)))


def read_rank_pids(log_dir: str) -> dict[tuple[str, int], int]:
    """{(host, pid): rank} from <log_dir>/ranks/."""
    out = {}
    d = os.path.join(log_dir, "ranks")
    for name in os.listdir(d) if os.path.isdir(d) else []:
        if not name.isdigit():
            continue
        try:
            host, pid = open(os.path.join(d, name)).read().split()
            out[(host, int(pid))] = int(name)
        except (OSError, ValueError):
            continue
    return out


def explain_failure(lines: list[str], log_dir: str, num_workers: int, launcher: str) -> str | None:
    """One line for a job that failed without a rank saying why (None: a rank did say)."""
    if any(line.startswith("ERROR (") for line in lines):
        return None
    ranks = read_rank_pids(log_dir)
    try:
        last = open(os.path.join(log_dir, "last_checkpoint")).read().strip()
        resume = f"the last checkpoint is {last}: rerun the same command to resume from it"
    except OSError:
        resume = "no checkpoint was written yet: rerun the same command to start again"
    text = "\n".join(lines)
    m = _SRUN_TASK.search(text)
    if m:
        return f"rank {m.group(2)} (on {m.group(1)}) failed: {m.group(3).strip()}; {resume}"
    m = _HYDRA_PID.search(text)
    if m:
        pid, host = int(m.group(1)), m.group(2)
        sig, code = _HYDRA_SIGNAL.search(text), _HYDRA_CODE.search(text)
        how = _signal_name(int(sig.group(1))) if sig else f"exit code {code.group(1)}" if code else "no exit code"
        rank = ranks.get((host, pid))
        if rank is None:   # (hydra's host name may be the short one)
            rank = next((r for (h, p), r in ranks.items() if p == pid), None)
        who = f"rank {rank} (pid {pid} on {host})" if rank is not None else f"the rank with pid {pid} on {host}"
        return f"{who} died ({how}); {resume}"
    if not ranks:
        first = next((line.strip() for line in lines if line.strip()), "no output")
        return f"{launcher} could not start the {num_workers} ranks: {first}"
    return None


def _run_local(num_workers: int, command: list[str], env: dict, tail: deque, done_marker: str = "",
               grace: float = 10.0) -> int:
    """The ranks as children of this process (PYNNET_RANK / PYNNET_SIZE), their output merged
    line by line onto stderr; each death said at once. Returns 0 if every rank succeeded, else
    the first failure's status (128 + signal for a signal)."""
    import threading
    lock = threading.Lock()
    env = {k: v for k, v in env.items() if not k.startswith(("PMI_", "OMPI_COMM_WORLD_"))}
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              bufsize=1, env={**env, "PYNNET_RANK": str(r), "PYNNET_SIZE": str(num_workers)})
             for r in range(num_workers)]

    def pump(p):
        for line in p.stdout:
            with lock:
                sys.stderr.write(line)
                tail.append(line.rstrip("\n"))

    def forward(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    old = signal.signal(signal.SIGTERM, forward)
    threads = [threading.Thread(target=pump, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    first, done_at = 0, None
    try:
        left = set(range(num_workers))
        while left:
            # the job completed without a rank that hangs (dropped by the others): not forever
            if done_at is None and done_marker and os.path.exists(done_marker) and len(left) < num_workers:
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at > grace:
                for r in sorted(left):
                    with lock:
                        print(f"pynnet-mpirun: rank {r} (pid {procs[r].pid}) was dropped from the job and is still "
                              "running: killed", file=sys.stderr, flush=True)
                    procs[r].kill()
                done_at = math.inf
            for r in sorted(left):
                code = procs[r].poll()
                if code is None:
                    continue
                left.discard(r)
                if code != 0:
                    how = _signal_name(-code) if code < 0 else f"exit code {code}"
                    with lock:
                        print(f"pynnet-mpirun: rank {r} (pid {procs[r].pid}) ended ({how})", file=sys.stderr, flush=True)
                    first = first or (128 - code if code < 0 else code)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, old)
    for t in threads:
        t.join(5)
    return first


def run(num_workers: int, mpirun: str, log_dir: str, command: list[str], backend: str = "mpi",
        elastic: bool = False) -> int:
    """Runs ``mpirun command`` and returns its exit status, with one line on stderr for a
    failure no rank explained. ``elastic``: the job may lose ranks and go on (pynnet.parallel.elastic):
    this process hosts the ranks' key-value store and, without ``mpirun``, starts the ranks as
    its own children (one that dies ends no other), and the job has succeeded when its
    last rank 0 said so (<log-dir>/elastic_done.json), whatever the launcher's exit status."""
    # (elastic without a launcher of its own: the ranks are this process's children, so that one
    # that dies ends no other; mpich's hydra takes the others down with it even with
    # -disable-auto-cleanup)
    local = elastic and not mpirun
    launcher = ["local"] if local else shlex.split(mpirun) if mpirun else ["mpiexec", "-n", str(num_workers)]
    if not launcher:
        raise PynnetError("--mpirun is empty")
    if not local and shutil.which(launcher[0]) is None:
        raise PynnetError(f"cannot start the {num_workers} ranks: no '{launcher[0]}' on PATH (tools/install.sh "
                          "installs mpich's mpiexec; on a cluster use its MPI launcher, e.g. --mpirun 'srun --mpi=pmi2')")
    if not command:
        raise PynnetError("no command to run")
    d = os.path.join(log_dir, "ranks")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(log_dir, exist_ok=True)
    done_marker = os.path.join(log_dir, "elastic_done.json")
    if os.path.exists(done_marker):
        os.remove(done_marker)
    env = dict(os.environ)
    store = None
    if elastic:   # (the store outlives any rank: it lives here; on a cluster set MASTER_ADDR to this host)
        import datetime

        import torch.distributed as dist
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        try:
            store = dist.TCPStore(env["MASTER_ADDR"], int(env.get("MASTER_PORT", 0)), is_master=True,
                                  wait_for_workers=False, timeout=datetime.timedelta(seconds=60))
        except Exception as e:  # noqa: BLE001
            raise PynnetError(f"--elastic: cannot start the store on {env['MASTER_ADDR']}:{env.get('MASTER_PORT', 0)} "
                              f"({e})") from None
        env["MASTER_PORT"] = str(store.port)
        env["PYNNET_ELASTIC_STORE"] = "1"
    elif backend == "torch":   # the torch.distributed rendezvous (rank 0's host on a cluster: set it)
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", str(free_port()))
    tail: deque[str] = deque(maxlen=200)
    if local:
        rc = _run_local(num_workers, command, env, tail, done_marker)
    else:
        # (hydra reports a dead rank on stdout: both streams are read, and passed on to stderr)
        proc = subprocess.Popen(launcher + command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                text=True, errors="replace", bufsize=1)

        def forward(signum, frame):
            proc.send_signal(signum)
        old = signal.signal(signal.SIGTERM, forward)
        try:
            for line in proc.stdout:
                sys.stderr.write(line)
                tail.append(line.rstrip("\n"))
            rc = proc.wait()
        finally:
            signal.signal(signal.SIGTERM, old)
    if rc != 0 and elastic and os.path.exists(done_marker):
        try:
            events = json.load(open(done_marker))
        except (OSError, ValueError):
            events = []
        lost = sorted({r for e in events for r in e.get("ranks", [])})
        print(f"WARNING (pynnet-mpirun): the job completed without rank(s) {', '.join(map(str, lost)) or '?'} "
              f"(lost; {done_marker})" + ("" if local else f"; {os.path.basename(launcher[0])} exited with {rc}"),
              file=sys.stderr, flush=True)
        rc = 0
    del store
    if rc != 0:
        if not any(line.startswith("ERROR (") for line in tail):
            # a rank's message that mpiexec did not forward before the abort ended it
            for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                if name.endswith(".error"):
                    lines = open(os.path.join(d, name), errors="replace").read().splitlines()
                    for line in lines:
                        print(line, file=sys.stderr, flush=True)
                    tail.extend(lines)
        msg = explain_failure(list(tail), log_dir, num_workers, os.path.basename(launcher[0]))
        if msg:
            print(f"ERROR (pynnet-mpirun): {msg}", file=sys.stderr, flush=True)
    return rc
