"""Kaldi job runners: utils/run.pl (local processes), utils/slurm.pl (one sbatch array job) and
utils/queue.pl (one Grid Engine qsub array job).

Calling convention (Kaldi's):  run.pl [options] [JOB=1:N] <log> <command...>
JOB (any identifier) is replaced by the job number in the log name and in the command; the
command runs through bash (so "|" pipes work) with stdout+stderr appended to the log, which
starts with ``# <command>`` / ``# Started at <date>`` and ends with ``# Accounting: ...`` /
``# Ended (code N) at <date>, elapsed time S seconds``.  Any failed job makes the runner print
``run.pl: F / N failed, log is in <first failed log>`` and exit 1.

Only the standard library is used, so utils/run.pl works with any python3.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

JOB_RANGE = re.compile(r"^([A-Za-z_]\w*)=(\d+):(\d+)$", re.ASCII)
JOB_SINGLE = re.compile(r"^([A-Za-z_]\w*)=(\d+)$", re.ASCII)


def _is_count(v: str) -> bool:
    """ASCII digits only: str.isdigit() is also true of '²', which int() rejects.  (Not
    pynnet.io.tables.ascii_int: this module uses the standard library only.)"""
    return v.isascii() and v.isdigit()


# Options that take no argument (qsub's -V); every other option takes exactly one, except -pe (two).
_NO_ARG = {"-V"}


class UsageError(Exception):
    pass


@dataclass
class JobSpec:
    """What to run: the command string (already quoted for bash), the log template, and the
    job range; ``opts`` are the options in the order given (name, value)."""
    prog: str
    cmd: str
    log: str
    jobname: str | None = None
    start: int = 1
    end: int = 1
    opts: list[tuple[str, str]] = field(default_factory=list)

    def log_for(self, job: int) -> str:
        return self.log.replace(self.jobname, str(job)) if self.jobname else self.log

    def cmd_for(self, job: int) -> str:
        return self.cmd.replace(self.jobname, str(job)) if self.jobname else self.cmd

    @property
    def jobs(self) -> range:
        return range(self.start, self.end + 1)

    def opt(self, name: str, default: str | None = None) -> str | None:
        val = default
        for k, v in self.opts:
            if k == name:
                val = v
        return val


def kaldi_quote(arg: str) -> str:
    """Quote an argument the way Kaldi's run.pl does: words without whitespace stay as they are
    (so a separate "|" argument is a pipe and "ark:-" stays bare); others are quoted."""
    if re.fullmatch(r"\S+", arg):
        return arg
    if '"' in arg:
        return "'" + arg + "'"
    return '"' + arg + '"'


def parse_args(argv: list[str], prog: str) -> JobSpec:
    """Parse ``[options] [JOB=a:b] <log> <command...>``; options and the job range may be
    interleaved (Kaldi allows both orders)."""
    args = list(argv)
    opts: list[tuple[str, str]] = []
    jobname, start, end = None, 1, 1
    for _ in range(2):
        while len(args) >= 2 and args[0].startswith("-"):
            sw = args.pop(0)
            if sw in _NO_ARG:
                opts.append((sw, ""))
                continue
            if "=" in sw and sw.startswith("--"):
                k, v = sw.split("=", 1)
                opts.append((k, v))
                continue
            val = args.pop(0)
            if sw == "-pe" and args:
                val += " " + args.pop(0)
            opts.append((sw, val))
        if args:
            m = JOB_RANGE.match(args[0])
            m1 = JOB_SINGLE.match(args[0])
            if m:
                jobname, start, end = m.group(1), int(m.group(2)), int(m.group(3))
                if start > end:
                    raise UsageError(f"invalid job range {args[0]}")
                if start <= 0:
                    raise UsageError(f"invalid job range {args[0]}, start must be strictly positive")
                args.pop(0)
            elif m1:
                jobname, start, end = m1.group(1), int(m1.group(2)), int(m1.group(2))
                if start <= 0:
                    raise UsageError(f"invalid job range {args[0]}, start must be strictly positive")
                args.pop(0)
            elif re.match(r".+=.*:.*$", args[0]):
                print(f"{prog}: WARNING: suspicious first argument {args[0]}", file=sys.stderr)
    if len(args) < 2:
        raise UsageError("need a log file and a command")
    log = args.pop(0)
    if jobname and end > start and jobname not in log:
        raise UsageError(f"you are trying to run a parallel job but putting the output into just one log file ({log})")
    cmd = " ".join(kaldi_quote(a) for a in args)
    return JobSpec(prog, cmd, log, jobname, start, end, opts)


def _date() -> str:
    return time.strftime("%a %b %e %H:%M:%S %Z %Y")


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc; just ``pid`` where there is no /proc)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [pid]
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue   # gone meanwhile
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])   # after "(comm) state"
        children.setdefault(ppid, []).append(int(e))
    out, todo = [], [pid]
    while todo:
        q = todo.pop()
        out.append(q)
        todo.extend(children.get(q, []))
    return out


class JobRunner:
    """Runs jobs as bash processes and remembers them so that SIGINT/SIGTERM to run.pl is
    forwarded to each job's whole process tree (pipelines included). The jobs stay in run.pl's
    process group, as Kaldi's: a signal to the group (Ctrl-C, ``timeout``, ``kill -9 -- -PGID``
    of a recipe) reaches every job, so none is left running after a kill -9 of the recipe."""

    def __init__(self) -> None:
        self.procs: set[subprocess.Popen] = set()
        self.lock = threading.RLock()   # (kill_all runs in a signal handler: it may interrupt a holder)
        self.stopping = False

    def run(self, cmd: str, log: str, threads: int = 1) -> int:
        if self.stopping:
            return 130
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        t0 = time.time()
        with open(log, "w") as f:
            f.write(f"# {cmd}\n# Started at {_date()}\n#\n")
        with open(log, "a") as f:
            with self.lock:
                if self.stopping:
                    return 130
                # pipefail: a failing stage of a job pipeline (forward | decoder) fails the job
                p = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], stdin=subprocess.DEVNULL, stdout=f,
                                     stderr=subprocess.STDOUT)
                self.procs.add(p)
            rc = p.wait()
            with self.lock:
                self.procs.discard(p)
        if rc < 0:
            code, status = 128 - rc, f"code {128 - rc}; signal {-rc}"
        else:
            code, status = rc, f"code {rc}"
        elapsed = int(round(time.time() - t0))
        with open(log, "a") as f:
            f.write(f"# Accounting: time={elapsed} threads={threads}\n")
            f.write(f"# Ended ({status}) at {_date()}, elapsed time {elapsed} seconds\n")
        return code

    def kill_all(self, sig: int) -> None:
        with self.lock:
            self.stopping = True
            for p in list(self.procs):
                for pid in _process_tree(p.pid):
                    try:
                        os.kill(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass


def _previous_status(log: str) -> str:
    """'done', 'failed' or 'incomplete' from an existing log's ``# Ended`` line (for --pick)."""
    try:
        with open(log, errors="replace") as f:
            ended = [ln for ln in f if ln.startswith("# Ended (code ")]
    except FileNotFoundError:
        return "incomplete"
    if not ended:
        return "incomplete"
    return "done" if ended[-1].startswith("# Ended (code 0)") else "failed"


def default_max_jobs(num_jobs: int) -> int:
    try:
        ncpu = len(os.sched_getaffinity(0))
    except AttributeError:
        ncpu = os.cpu_count() or 1
    # As Kaldi: a few more jobs than cores run all at once rather than leave a straggler round.
    return num_jobs if ncpu < num_jobs < 1.4 * ncpu else ncpu


def count_gpus() -> int:
    """GPU jobs run one per GPU (nvidia-smi -L), as Kaldi's run.pl does; 1 if that fails."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        n = sum(1 for ln in out.splitlines() if ln.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        n = 0
    if n == 0:
        print("run.pl: WARNING: failed to detect the number of GPUs from nvidia-smi, using 1", file=sys.stderr)
    return max(n, 1)


def report(spec: JobSpec, codes: dict[int, int]) -> int:
    failed = [j for j in spec.jobs if codes.get(j, 1) != 0]
    if not failed:
        return 0
    n = len(spec.jobs)
    if n == 1:
        print(f"{spec.prog}: job failed, log is in {spec.log_for(failed[0])}", file=sys.stderr)
        if "JOB" in spec.log and spec.jobname is None:
            print(f"{spec.prog}: probably you forgot to put JOB=1:$nj in your script.", file=sys.stderr)
    else:
        print(f"{spec.prog}: {len(failed)} / {n} failed, log is in {spec.log_for(failed[0])}", file=sys.stderr)
        if len(failed) > 1:
            print(f"{spec.prog}: failed jobs: {' '.join(map(str, failed))}", file=sys.stderr)
    return 1


RUN_USAGE = """usage: run.pl [options] [JOB=1:N] <log-file> <command...>
 e.g.: run.pl JOB=1:4 exp/foo/log/align.JOB.log gmm-align --beam=10 exp/foo/final.mdl "ark:feats.JOB.scp" \\| gzip -c \\> ali.JOB.gz
Runs the N jobs in parallel on this machine (JOB is replaced by 1..N in the log name and command).
Options: --max-jobs-run N (default: number of cores; with --gpu N>0, number of GPUs), --pick all|failed|incomplete|none (re-run only those
jobs; judged from their logs), --num-threads N (recorded in the log); queue options (--mem, --gpu, -l ...)
are accepted and ignored so that cmd.sh can switch between run.pl, queue.pl and slurm.pl."""


def run_pl_main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(RUN_USAGE, file=sys.stderr)
        return 0 if argv else 1
    try:
        spec = parse_args(argv, "run.pl")
        max_jobs = None
        for k, v in spec.opts:
            if k in ("--max-jobs-run", "-tc"):
                if not _is_count(v) or int(v) <= 0:
                    raise UsageError(f"invalid option {k} {v}")
                max_jobs = int(v) if max_jobs is None else min(max_jobs, int(v))
        pick = spec.opt("--pick", "all")
        if pick not in ("all", "failed", "incomplete", "none"):
            raise UsageError(f"--pick must be one of all, failed, incomplete, none; got '{pick}'")
        threads = spec.opt("--num-threads", "1")
        if not _is_count(threads):
            raise UsageError(f"--num-threads must be a number, got '{threads}'")
    except UsageError as e:
        print(f"run.pl: {e}\n{RUN_USAGE}", file=sys.stderr)
        return 1
    if max_jobs is None:
        gpu = spec.opt("--gpu", "0")
        max_jobs = count_gpus() if _is_count(gpu) and int(gpu) > 0 else default_max_jobs(len(spec.jobs))
    runner = JobRunner()
    codes: dict[int, int] = {}

    def one(job: int) -> None:
        log = spec.log_for(job)
        if pick != "all":
            prev = _previous_status(log)
            # as Kaldi: done jobs are skipped, failed ones rerun only with 'failed', and
            # incomplete ones (no '# Ended' line) always run
            if prev == "done" or (prev == "failed" and pick in ("incomplete", "none")):
                codes[job] = 0 if prev == "done" else 1
                return
        try:
            codes[job] = runner.run(spec.cmd_for(job), log, int(threads))
        except OSError as e:
            print(f"run.pl: cannot run job {job} ({e.strerror}: {e.filename or log})", file=sys.stderr)
            codes[job] = 1

    def on_signal(sig, _frame):
        # once is enough: a second signal (a group kill and the caller's own forwarding both reach
        # us) must not run this again inside the first call
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        runner.kill_all(signal.SIGTERM)
        raise KeyboardInterrupt

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ThreadPoolExecutor(max_workers=max_jobs) as pool:
            list(pool.map(one, spec.jobs))
    except KeyboardInterrupt:
        print("run.pl: interrupted; killed the running jobs", file=sys.stderr)
        return 130
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return report(spec, codes)


# --- slurm.pl -------------------------------------------------------------------------------

SLURM_USAGE = """usage: slurm.pl [options] [JOB=1:N] <log-file> <command...>
Submits ONE sbatch array job (--array=1-N --wait); task k runs the command with JOB=k, logging
to the log with JOB=k, and records its exit status in <logdir>/q/<log>.status, which slurm.pl
checks afterwards (a failed job: 'slurm.pl: F / N failed, log is in <log>', exit 1).
Options: --partition P, --time T, --mem M (per job), --num-threads N (--cpus-per-task),
--gpu N (--gres=gpu:N), --max-jobs-run N (--array=...%N); any other --opt V / --opt=V / -x V is
passed to sbatch unchanged.  --config FILE (default conf/slurm.conf when it exists) maps the
options as Kaldi's slurm.conf does instead:
   command sbatch --export=PATH --ntasks-per-node=1
   option mem=* --mem-per-cpu $0        (name=* : any value, $0 is the value)
   option gpu=0 -p shared               (name=value : that value)
   option gpu=* -p gpu --gres=gpu:$0
   default gpu=0
The sbatch script and Slurm's own output go to <logdir>/q/."""

_SLURM_MAP = {"--partition": "--partition", "-p": "--partition", "--time": "--time", "--mem": "--mem",
              "--num-threads": "--cpus-per-task", "--account": "--account", "--qos": "--qos"}


def sbatch_options(spec: JobSpec) -> tuple[list[str], int | None, int]:
    """(sbatch options, max jobs at once, threads) from the runner options."""
    out: list[str] = []
    max_jobs = None
    threads = 1
    for k, v in spec.opts:
        if k in ("--max-jobs-run", "-tc"):
            if not _is_count(v) or int(v) <= 0:
                raise UsageError(f"invalid option {k} {v}")
            max_jobs = int(v) if max_jobs is None else min(max_jobs, int(v))
        elif k == "--gpu":
            if not _is_count(v):
                raise UsageError(f"--gpu must be a number, got '{v}'")
            if int(v) > 0:
                out.append(f"--gres=gpu:{v}")
        elif k == "--num-threads":
            if not _is_count(v) or int(v) <= 0:
                raise UsageError(f"--num-threads must be a positive number, got '{v}'")
            threads = int(v)
            out.append(f"--cpus-per-task={v}")
        elif k in _SLURM_MAP:
            out.append(f"{_SLURM_MAP[k]}={v}")
        elif k in ("--config", "--pick", "-V", "-sync"):
            continue  # Kaldi queue options with no sbatch meaning here
        elif k.startswith("--"):
            out.append(f"{k}={v}" if v != "" else k)
        else:
            out.extend([k] + ([v] if v != "" else []))
    return out, max_jobs, threads


def read_slurm_config(path: str, text: str | None = None
                      ) -> tuple[list[str], dict[str, dict[str, list[str]]], dict[str, str]]:
    """Kaldi's conf/slurm.conf: ``command sbatch ...``, ``option name=value opts...`` (``name=*``
    with ``$0`` for the value), ``default name=value``.  Returns (command, options, defaults)."""
    command: list[str] = []
    options: dict[str, dict[str, list[str]]] = {}
    defaults: dict[str, str] = {}
    if text is None:
        with open(path, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise UsageError(f"{path}:{line}: not valid UTF-8") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] == "command" and len(words) >= 2:
            command = words[1:]
        elif words[0] in ("option", "default") and len(words) >= 2 and "=" in words[1]:
            name, value = words[1].split("=", 1)
            if words[0] == "default":
                defaults[name] = value
            else:
                options.setdefault(name, {})[value] = words[2:]
        else:
            raise UsageError(f"{path}:{n}: cannot parse config line: '{raw.strip()}'")
    return command, options, defaults


def config_sbatch_options(spec: JobSpec, config: str, text: str | None = None
                          ) -> tuple[list[str], list[str], int | None, int]:
    """(command, sbatch options, max jobs, threads) with the options mapped through a Kaldi
    slurm.conf; options it does not name are passed to sbatch as they are."""
    command, options, defaults = read_slurm_config(config, text)
    given: dict[str, str] = dict(defaults)
    passthrough: list[tuple[str, str]] = []
    max_jobs = None
    for k, v in spec.opts:
        if k in ("--max-jobs-run", "-tc"):
            if not _is_count(v) or int(v) <= 0:
                raise UsageError(f"invalid option {k} {v}")
            max_jobs = int(v) if max_jobs is None else min(max_jobs, int(v))
        elif k == "--config":
            continue
        elif k.startswith("--") and k[2:].replace("-", "_") in options:
            given[k[2:].replace("-", "_")] = v
        else:
            passthrough.append((k, v))
    out: list[str] = []
    for name, value in given.items():
        table = options.get(name, {})
        if value in table:
            out += table[value]
        elif "*" in table:
            out += [w.replace("$0", value) for w in table["*"]]
        else:
            raise UsageError(f"{config}: no 'option {name}=...' line for --{name.replace('_', '-')} {value}")
    threads = given.get("num_threads", "1")
    if not _is_count(threads) or int(threads) <= 0:
        raise UsageError(f"--num-threads must be a positive number, got '{threads}'")
    extra, _, _ = sbatch_options(JobSpec(spec.prog, spec.cmd, spec.log, opts=passthrough))
    return command or ["sbatch"], out + extra, max_jobs, int(threads)


def _status_file(qdir: str, log: str) -> str:
    return os.path.join(qdir, os.path.basename(log) + ".status")


@dataclass
class Backend:
    """What differs between slurm.pl and queue.pl: the submit command and its array/wait options."""
    prog: str
    usage: str
    conf_file: str
    task_var: str
    system: str
    status_hint: str
    default_config: str | None  # Kaldi's built-in config text, or None for our direct sbatch mapping

    def array_opts(self, spec: JobSpec, stem: str, qdir: str, max_jobs: int | None) -> list[str]:
        out = os.path.join(qdir, stem)
        if self.prog == "slurm.pl":
            array = f"{spec.start}-{spec.end}" + (f"%{max_jobs}" if max_jobs else "")
            return ["--wait", f"--array={array}", f"--job-name={stem}", f"--output={out}.%a.out"]
        return (["-sync", "y", "-t", f"{spec.start}:{spec.end}"] + (["-tc", str(max_jobs)] if max_jobs else [])
                + ["-N", stem, "-o", f"{out}.$TASK_ID.out"])


def _array_main(argv: list[str] | None, b: Backend) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run-task"]:
        return _run_task(argv[1:], b.prog)
    if not argv or argv[0] in ("-h", "--help"):
        print(b.usage, file=sys.stderr)
        return 0 if argv else 1
    try:
        spec = parse_args(argv, b.prog)
        config = spec.opt("--config") or (b.conf_file if os.path.isfile(b.conf_file) else None)
        if config and not os.path.isfile(config):
            raise UsageError(f"no such config file {config}")
        if config:
            submit_cmd, submit_opts, max_jobs, threads = config_sbatch_options(spec, config)
        elif b.default_config is not None:
            submit_cmd, submit_opts, max_jobs, threads = config_sbatch_options(
                spec, f"{b.prog} default configuration", b.default_config)
        else:
            submit_cmd = ["sbatch"]
            submit_opts, max_jobs, threads = sbatch_options(spec)
    except UsageError as e:
        print(f"{b.prog}: {e}\n{b.usage}", file=sys.stderr)
        return 1
    logdir = os.path.dirname(spec.log) or "."
    qdir = os.path.join(logdir, "q")
    stem = os.path.basename(spec.log)
    if spec.jobname:
        stem = re.sub(r"\.?" + re.escape(spec.jobname), "", stem)
    stem = re.sub(r"\.log$", "", stem) or "job"
    try:
        os.makedirs(qdir, exist_ok=True)
        for j in spec.jobs:
            stale = _status_file(qdir, spec.log_for(j))
            if os.path.exists(stale):
                os.unlink(stale)
        task = {"cmd": spec.cmd, "log": spec.log, "jobname": spec.jobname, "threads": threads, "qdir": qdir}
        spec_file = os.path.join(qdir, stem + ".json")
        with open(spec_file + ".tmp", "w") as f:
            json.dump(task, f)
        os.replace(spec_file + ".tmp", spec_file)
        script = os.path.join(qdir, stem + ".sh")
        me = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "utils", b.prog)
        with open(script + ".tmp", "w") as f:
            f.write(f"#!/bin/bash\n# written by {b.prog}; one array task per job\n"
                    f"cd {shlex.quote(os.getcwd())}\n"
                    f"exec {shlex.quote(sys.executable)} {shlex.quote(os.path.realpath(me))} --run-task "
                    f"{shlex.quote(os.path.abspath(spec_file))} \"${b.task_var}\"\n")
        os.replace(script + ".tmp", script)
        os.chmod(script, 0o755)
    except OSError as e:
        print(f"{b.prog}: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    cmd = submit_cmd + b.array_opts(spec, stem, qdir, max_jobs) + submit_opts + [script]
    with open(os.path.join(qdir, stem + ".submit"), "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n")
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except FileNotFoundError:
        print(f"{b.prog}: {submit_cmd[0]} not found on PATH (is {b.system} installed? use run.pl for local jobs)",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{b.prog}: interrupted (the array job may still be queued; see {b.status_hint})", file=sys.stderr)
        return 130
    codes: dict[int, int] = {}
    missing = []
    for j in spec.jobs:
        try:
            with open(_status_file(qdir, spec.log_for(j))) as f:
                codes[j] = int(f.read().strip() or 1)
        except (FileNotFoundError, ValueError):
            missing.append(j)
    if missing and len(missing) == len(spec.jobs) and r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"{b.prog}: {submit_cmd[0]} failed (exit {r.returncode}): {err}", file=sys.stderr)
        return 1
    for j in missing:
        print(f"{b.prog}: job {j} left no exit status (killed by {b.system}? see {os.path.join(qdir, stem)}.{j}.out)",
              file=sys.stderr)
    return report(spec, codes)


SLURM = Backend("slurm.pl", SLURM_USAGE, "conf/slurm.conf", "SLURM_ARRAY_TASK_ID", "Slurm", "squeue/scancel", None)

# Kaldi queue.pl's built-in configuration (used when there is no conf/queue.conf).
QUEUE_DEFAULT_CONFIG = """command qsub -v PATH -cwd -S /bin/bash -j y -l arch=*64*
option mem=* -l mem_free=$0,ram_free=$0
option mem=0
option num_threads=* -pe smp $0
option num_threads=1
default gpu=0
option gpu=0
option gpu=* -l gpu=$0 -q g.q
"""

QUEUE_USAGE = """usage: queue.pl [options] [JOB=1:N] <log-file> <command...>
Submits ONE Grid Engine array job (qsub -t 1:N -sync y); task k runs the command with JOB=k
($SGE_TASK_ID), logging to the log with JOB=k, and records its exit status in
<logdir>/q/<log>.status, which queue.pl checks afterwards ('queue.pl: F / N failed, log is in <log>').
Options (mapped through conf/queue.conf, or --config FILE, else Kaldi's default configuration):
--mem M (-l mem_free=M,ram_free=M), --num-threads N (-pe smp N), --gpu N (-l gpu=N -q g.q),
--max-jobs-run N (-tc N); other options go to qsub unchanged."""

QUEUE = Backend("queue.pl", QUEUE_USAGE, "conf/queue.conf", "SGE_TASK_ID", "Grid Engine", "qstat/qdel",
                QUEUE_DEFAULT_CONFIG)


def slurm_pl_main(argv: list[str] | None = None) -> int:
    return _array_main(argv, SLURM)


def queue_pl_main(argv: list[str] | None = None) -> int:
    return _array_main(argv, QUEUE)


def _run_task(argv: list[str], prog: str) -> int:
    """Inside an array task: run job ``$SLURM_ARRAY_TASK_ID`` / ``$SGE_TASK_ID`` and record its
    exit status."""
    if len(argv) != 2 or not _is_count(argv[1]):
        print(f"{prog}: --run-task <spec.json> <task-id>", file=sys.stderr)
        return 1
    with open(argv[0]) as f:
        t = json.load(f)
    job = int(argv[1])
    spec = JobSpec(prog, t["cmd"], t["log"], t["jobname"], job, job)
    log = spec.log_for(job)
    try:
        code = JobRunner().run(spec.cmd_for(job), log, t.get("threads", 1))
    except OSError as e:
        print(f"{prog}: cannot run job {job}: {e}", file=sys.stderr)
        code = 1
    status = _status_file(t["qdir"], log)
    with open(status + ".tmp", "w") as f:
        f.write(f"{code}\n")
    os.replace(status + ".tmp", status)
    return 0 if code == 0 else 1
