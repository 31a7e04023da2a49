"""pynnet-mpirun: starts the ranks of a parallel training (mpiexec, srun, or a hostfile through
them) and turns the launcher's view of a failure into one line naming the rank.

A rank that times out in a collective names the missing ranks itself (pynnet.parallel.comm).
A rank killed outright (kill -9, the OOM killer, a node lost) can say nothing, and mpiexec only
reports a pid ("BAD TERMINATION ... PID 2258 RUNNING AT host ... EXIT CODE: 9"): each rank
records its host and pid in <log-dir>/ranks/<rank> at its start, so the pid is mapped back to the
rank here, and <log-dir>/last_checkpoint (rank 0 writes it) says where a rerun resumes.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
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


def run(num_workers: int, mpirun: str, log_dir: str, command: list[str], backend: str = "mpi") -> int:
    """Runs ``mpirun command`` and returns its exit status, with one line on stderr for a
    failure no rank explained."""
    launcher = shlex.split(mpirun) if mpirun else ["mpiexec", "-n", str(num_workers)]
    if not launcher:
        raise PynnetError("--mpirun is empty")
    if shutil.which(launcher[0]) is None:
        raise PynnetError(f"cannot start the {num_workers} ranks: no '{launcher[0]}' on PATH (tools/install.sh "
                          "installs mpich's mpiexec; on a cluster use its MPI launcher, e.g. --mpirun 'srun --mpi=pmi2')")
    if not command:
        raise PynnetError("no command to run")
    d = os.path.join(log_dir, "ranks")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(log_dir, exist_ok=True)
    env = dict(os.environ)
    if backend == "torch":   # the torch.distributed rendezvous (rank 0's host on a cluster: set it)
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", str(free_port()))
    # (hydra reports a dead rank on stdout: both streams are read, and passed on to stderr)
    proc = subprocess.Popen(launcher + command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True, errors="replace", bufsize=1)

    def forward(signum, frame):
        proc.send_signal(signum)
    old = signal.signal(signal.SIGTERM, forward)
    tail: deque[str] = deque(maxlen=200)
    try:
        for line in proc.stdout:
            sys.stderr.write(line)
            tail.append(line.rstrip("\n"))
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, old)
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
