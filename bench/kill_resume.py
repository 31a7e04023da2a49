#!/usr/bin/env python3
"""Kill harness (issue 19 item 1): SIGKILL the egs/synth recipe at random moments inside each kind of
stage, rerun the same command, and check that the run completes with the uninterrupted run's outputs.

    nice -n 10 python bench/kill_resume.py [--kills-per-kind 1] [--max-minutes 60] [--seed 1]
        [--kinds features,graph,...] [--work-dir DIR --keep] [--control]

The recipe is a copy of egs/synth (run.sh as it is, but for its install check) in <work-dir>/run, on
a small synthesized corpus (--train-hours, --dev-minutes, --test-minutes) with small models
(--recipe-opts). It is run once uninterrupted, one stage at a time (--stage N --stop-stage N): the
reference. Before each stage the recipe dir is copied aside, so that a kill inside stage N costs
one stage: the copy is put back at <work-dir>/run (the same path: scp files hold absolute paths),
the stage is started in a new session, the whole process group is SIGKILLed at a random moment
inside the chosen step (a kind's instance, e.g. the decoding of exp/tri1/decode_dev: seeded
uniform over 5-95% of its duration in the reference), the same command is run again, and the
recipe dir is compared with the reference's after that stage: every file, byte for byte (gzip
files by their contents), but for logs and timings (IGNORE). Steps of the stage that ended before
the chosen one began are copied from the reference first (as they were when the kill came):
a kill in the 1-bit DNN does not train the three DNNs before it again.

Kinds (KINDS) and their instances in the recipe (recipe_steps): features (stages 1, 13), GMM training
(3, 5, 7, 9, 11), alignment (5, 7, 9, 11, 13), graph building (4, 6, 8, 10, 12), DBN (14), the DNNs of
stage 15 (2-worker averaging, 1 worker, 2-worker 1-bit averaging, 2-worker 1-bit SGD), decoding and
scoring (4, 6, 8, 10, 12, 16; scoring also stage 19's exp/RESULTS). --kills-per-kind N kills each kind N times, in its
instances in turn (from a seeded random one). After each kill the rerun waits until no process
of the killed run is left: those that escaped the process group (mpiexec's proxy and the MPI
ranks run in sessions of their own; the proxy ends the ranks within a second or two once
mpiexec is gone) are counted as escaped_but_ended, those still running after 10 s are killed and
counted as stray_processes. Temp files the kill left behind that the reference does not have are
listed as leftovers (junk the rerun did not trust), not mismatches. checkpoint.pt files are
compared without their wall-clock fields (TIMING_KEYS).

Ends with ONE JSON line: kills tried, kills survived (the rerun exited 0), mismatches (kills whose
rerun's outputs differ from the reference's), and per kind. --control first reruns every stage
once without a kill and compares it the same way (what is not deterministic shows up there).
Not in the default test run (~30 min at one kill per kind on 2 cores); tests/test_kill_resume.py
runs one kill per kind on toy data with these helpers.
"""
from __future__ import annotations

import argparse
import fnmatch
import gzip
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KINDS = ("features", "gmm_training", "alignment", "graph", "dbn", "dnn_1worker", "dnn_2worker_avg",
         "dnn_1bit_avg", "dnn_1bit_sgd", "decoding", "scoring")

# Not compared: logs and what records wall-clock time.
IGNORE = ("*/log/*", "log/*", "*.log", "*/rtf", "exp/make_mfcc/*", "exp/make_fbank/*",
          # make_mfcc.sh moves an existing feats.scp aside first, as Kaldi's does (a rerun finds one)
          "*/.backup/*", "*/.split_data.lock", "db/summary.json")
# Compared by their %WER lines only (the table also has the decodes' real-time factors).
WER_LINES_ONLY = ("exp/RESULTS",)
MODEL_FILES = ("*.mdl", "*.nnet", "*.dbn", "*.rbm", "*/tree", "*/HCLG.fst", "*/ali.*.gz", "*.feature_transform")


# --------------------------------------------------------------------------- processes
def _stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read().decode(errors="replace")
    except OSError:
        return None
    return s[s.rfind(")") + 2:].split()   # state ppid pgrp session ...


def _argv(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _procs() -> list[tuple[int, list[str], list[str]]]:
    """(pid, /proc/pid/stat fields after the command name, argv) of every process but this one."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            st = _stat_fields(pid)
            if st and len(st) > 3:
                out.append((int(pid), st, _argv(pid)))
    return out


def group_processes(leader: int) -> list[list[str]]:
    """argv of every live process of the process group or session that ``leader`` leads."""
    return [a for _, st, a in _procs() if a and str(leader) in (st[2], st[3])]


def _cwd_in(pid: int, path: str) -> bool:
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return cwd == path or cwd.startswith(path + "/")


@dataclass
class Instance:
    """One step of a kind inside a run: active while a process runs ``script`` (an argv[0] or
    argv[1] ending so) whose last argument is ``last_arg`` (any with None), unless one runs
    ``unless`` with that last argument too. ``output``: the dir it writes (copied from the
    reference when a later step of the same run is the one killed)."""
    kind: str
    name: str
    script: tuple[str, ...]
    last_arg: str | None = None
    unless: str | None = None
    output: str | None = None

    def _runs(self, procs: list[list[str]], script: tuple[str, ...]) -> bool:
        for a in procs:
            if any(x.endswith(s) for x in a[:2] for s in script) and (self.last_arg is None or a[-1] == self.last_arg):
                return True
        return False

    def active(self, procs: list[list[str]]) -> bool:
        return self._runs(procs, self.script) and not (self.unless and self._runs(procs, (self.unless,)))


@dataclass
class Step:
    """A command run in the recipe dir (one recipe stage, or one script in the tests)."""
    name: str
    cmd: list[str]
    instances: list[Instance] = field(default_factory=list)


@dataclass
class Outcome:
    rc: int | None
    seconds: float
    first: dict[str, float] = field(default_factory=dict)   # instance -> first seen active (s from start)
    last: dict[str, float] = field(default_factory=dict)
    killed_at: float | None = None
    inside: bool | None = None
    escaped: list[str] = field(default_factory=list)   # out of the group, ended by themselves
    strays: list[str] = field(default_factory=list)    # out of the group, still running: killed
    timed_out: bool = False


def run_step(step: Step, cwd: str, log_path: str, env: dict | None = None, timeout: float = 3600,
             target: str | None = None, delay: float = 0.0, poll: float = 0.03) -> Outcome:
    """Run ``step.cmd`` in ``cwd`` in a new session, output to ``log_path``, noting when each of its
    instances is active; with ``target``, SIGKILL the whole process group ``delay`` seconds after
    that instance is first seen (Outcome.inside: whether it was still active then)."""
    t0 = time.monotonic()
    out = Outcome(rc=None, seconds=0.0)
    by_name = {i.name: i for i in step.instances}
    with open(log_path, "w") as log:
        p = subprocess.Popen(step.cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        while True:
            rc = p.poll()
            now = time.monotonic() - t0
            procs = group_processes(p.pid) if rc is None else []
            for inst in step.instances:
                if procs and inst.active(procs):
                    out.first.setdefault(inst.name, now)
                    out.last[inst.name] = now
            if rc is not None:
                break
            if target is not None and target in out.first and now >= out.first[target] + delay:
                out.inside = by_name[target].active(procs)
                os.killpg(p.pid, signal.SIGKILL)
                out.killed_at = now
                break
            if now > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                out.timed_out = True
                break
            time.sleep(poll)
        out.rc = p.wait()
    out.seconds = time.monotonic() - t0
    if out.killed_at is not None or out.timed_out:
        out.escaped, out.strays = kill_strays(cwd, p.pid)
    return out


def kill_strays(path: str, group: int, grace: float = 10.0, settle: float = 0.5) -> tuple[list[str], list[str]]:
    """After the SIGKILL of process group ``group``: wait until its processes are gone (the rerun
    must not start beside them) and until every other process in or on ``path`` (one that
    escaped the group: mpiexec's proxy and the MPI ranks run in sessions of their own) has ended,
    SIGKILLing those still there after ``grace`` seconds. Returns (the argv of those that escaped
    the group and ended by themselves within ``grace``, the argv of those killed here: a job that
    would have gone on writing there beside the rerun)."""
    escaped: dict[int, str] = {}
    killed: dict[int, str] = {}
    path = os.path.realpath(path)
    t0 = time.monotonic()
    quiet_since, give_up = None, t0 + grace + 120
    while time.monotonic() < give_up:
        left = False
        late = time.monotonic() - t0 > grace
        for pid, st, a in _procs():
            if st[0] == "Z":
                continue   # exited, not yet reaped
            mine = str(group) in (st[2], st[3])
            if mine or _cwd_in(pid, path) or any(path in x for x in a):
                left = True
                if not mine:
                    escaped.setdefault(pid, shlex.join(a)[:300])
                if mine or late:
                    if not mine:
                        killed[pid] = escaped[pid]
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        now = time.monotonic()
        if left:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= settle:
            return [a for p, a in escaped.items() if p not in killed], list(killed.values())
        time.sleep(0.05)
    raise RuntimeError(f"processes of group {group} or in {path} still run {grace + 120:.0f} s after SIGKILL")


# --------------------------------------------------------------------------- trees
def copy_tree(src: str, dst: str) -> None:
    """cp -a: modes, times and symlinks as they are (scripts compare times: mkgraph.sh, split_data)."""
    if os.path.lexists(dst):
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", src, dst], check=True)


def _files(root: str) -> dict[str, os.stat_result]:
    out = {}
    for d, dirs, files in os.walk(root):
        for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = os.lstat(p)
    return out


def _ignored(rel: str, ignore: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(rel, pat) for pat in ignore)


def is_temp(rel: str) -> bool:
    """What the atomic writes and the scripts use as temp names (.x.<random>.tmp, x.tmp, .split2.x/)."""
    parts = rel.split("/")
    return parts[-1].endswith(".tmp") or ".tmp." in parts[-1] or any(
        re.match(r"\.(old_)?split\d+(utt)?\.", p) for p in parts[:-1])


def _content(path: str) -> bytes:
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:   # a truncated gzip file: its bytes, marked
        with open(path, "rb") as f:
            return b"<unreadable gzip: " + str(e).encode() + b">" + f.read()


# Fields of a training checkpoint that record wall-clock time (its models and states must be equal).
TIMING_KEYS = ("seconds", "frames_per_sec")


def _untimed(x):
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k not in TIMING_KEYS}
    if isinstance(x, (list, tuple)):
        return [_untimed(v) for v in x]
    return x


def _same_objects(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and \
            a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and \
            all(_same_objects(a[k], b[k]) for k in a)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and \
            all(_same_objects(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _same_checkpoints(a: str, b: str) -> bool:
    """checkpoint.pt files: the same but for TIMING_KEYS."""
    import torch

    try:
        x, y = (torch.load(p, map_location="cpu", weights_only=False) for p in (a, b))
    except Exception:  # noqa: BLE001 - unreadable: compare the bytes
        return _content(a) == _content(b)
    return _same_objects(_untimed(x), _untimed(y))


def _wer_lines(path: str) -> list[str]:
    with open(path, errors="replace") as f:
        return [ln for ln in f if ln.startswith("%WER")]


def compare_trees(trial: str, ref: str, ignore: tuple[str, ...] = IGNORE) -> tuple[list[dict], list[str]]:
    """(mismatches, leftovers) of ``trial`` against ``ref``: files missing, extra (not temp files)
    or different (kind: wer, model or other); leftovers: temp files only in ``trial``."""
    a, b = _files(trial), _files(ref)
    mism, left = [], []
    for rel in sorted(set(a) | set(b)):
        if _ignored(rel, ignore):
            continue
        pa, pb = os.path.join(trial, rel), os.path.join(ref, rel)
        kind = ("wer" if rel in WER_LINES_ONLY or re.search(r"(^|/)(best_wer|wer_\d+_[\d.]+)$", rel) else
                "model" if any(fnmatch.fnmatch(rel, m) for m in MODEL_FILES) else "other")
        if rel not in b:
            if is_temp(rel):
                left.append(rel)
            else:
                mism.append({"path": rel, "problem": "extra", "kind": kind})
            continue
        if rel not in a:
            mism.append({"path": rel, "problem": "missing", "kind": kind})
            continue
        sa, sb = a[rel], b[rel]
        if os.path.islink(pa) or os.path.islink(pb):
            if not (os.path.islink(pa) and os.path.islink(pb) and os.readlink(pa) == os.readlink(pb)):
                mism.append({"path": rel, "problem": "link differs", "kind": kind})
            continue
        if sa.st_size == sb.st_size and sa.st_mtime_ns == sb.st_mtime_ns:
            continue   # copied from the same file (untouched by the step)
        if rel in WER_LINES_ONLY:
            same = _wer_lines(pa) == _wer_lines(pb)
        elif os.path.basename(rel) == "checkpoint.pt":
            same = _same_checkpoints(pa, pb)
        else:
            same = _content(pa) == _content(pb)
        if not same:
            mism.append({"path": rel, "problem": "differs", "kind": kind})
    return mism, left


# --------------------------------------------------------------------------- kill trials
@dataclass
class Kill:
    kind: str
    step: str
    instance: str
    fraction: float


def plan_kills(steps: list[Step], kinds: tuple[str, ...], per_kind: int, rng: random.Random,
               fractions: tuple[float, float] = (0.05, 0.95)) -> list[Kill]:
    """``per_kind`` kills of each kind, in its instances in turn from a random one; each at a
    random fraction (uniform in ``fractions``) of the instance's duration."""
    plan = []
    for kind in kinds:
        where = [(s.name, i.name) for s in steps for i in s.instances if i.kind == kind]
        if not where or per_kind <= 0:
            continue
        start = rng.randrange(len(where))
        for k in range(per_kind):
            s, i = where[(start + k) % len(where)]
            plan.append(Kill(kind, s, i, rng.uniform(*fractions)))
    return plan


def _log(msg: str) -> None:
    print(f"kill_resume: {msg}", file=sys.stderr, flush=True)


def _tail(path: str, n: int = 15) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-n:])


def trial(step: Step, live: str, before: str, after: str, ref: Outcome, logs: str, env: dict | None,
          kill: Kill | None, tag: str, timeout: float) -> dict:
    """One kill (or, ``kill`` None, a control rerun) of ``step``: ``live`` from ``before``, the
    steps that ended before the killed one began from ``after`` (the reference), run, kill, run
    again, compare with ``after``."""
    copy_tree(before, live)
    res: dict = {"step": step.name, "tag": tag}
    if kill is not None:
        t_start = ref.first.get(kill.instance)
        for inst in step.instances:
            if inst.output and t_start is not None and inst.name in ref.last and ref.last[inst.name] < t_start:
                copy_tree(os.path.join(after, inst.output), os.path.join(live, inst.output))
        dur = ref.last.get(kill.instance, 0.0) - ref.first.get(kill.instance, 0.0)
        delay = kill.fraction * dur
        res.update(kind=kill.kind, instance=kill.instance, delay=round(delay, 2), duration=round(dur, 2))
        o = run_step(step, live, os.path.join(logs, f"{tag}.killed.log"), env, timeout,
                     target=kill.instance, delay=delay)
        res.update(killed=o.killed_at is not None, inside=o.inside, strays=o.strays, escaped=o.escaped)
        if o.killed_at is None:
            res["note"] = f"not killed: the run ended (exit {o.rc}) first"
            if o.rc != 0:
                res.update(survived=False, error=_tail(os.path.join(logs, f"{tag}.killed.log")))
                return res
    o2 = run_step(step, live, os.path.join(logs, f"{tag}.rerun.log"), env, timeout)
    res.update(rerun_rc=o2.rc, rerun_seconds=round(o2.seconds, 1), survived=o2.rc == 0)
    if o2.rc != 0:
        res["error"] = _tail(os.path.join(logs, f"{tag}.rerun.log"))
    mism, left = compare_trees(live, after)
    res.update(mismatches=mism, leftovers=left)
    for m in mism:   # the evidence, beside the logs (the run dir is replaced by the next trial)
        src = os.path.join(live, m["path"])
        if os.path.isfile(src) and os.path.getsize(src) < 64 << 20:
            dst = os.path.join(logs, f"{tag}.mismatch", m["path"])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    return res


def run_trials(steps: list[Step], live: str, work: str, plan: list[Kill], env: dict | None = None,
               control: tuple[str, ...] = (), deadline: float | None = None, timeout_factor: float = 10.0,
               on_result=None) -> tuple[list[dict], dict[str, Outcome], bool]:
    """Run ``steps`` in ``live`` one after another (the reference), and after each the planned
    kills of that step (and, for the steps named in ``control``, an uninterrupted rerun first).
    Returns (the trials' results, the reference's outcomes by step, whether every planned trial
    ran before ``deadline``)."""
    before, after, logs = (os.path.join(work, x) for x in ("before", "after", "logs"))
    os.makedirs(logs, exist_ok=True)
    results, refs, complete = [], {}, True
    for n, step in enumerate(steps):
        mine = [k for k in plan if k.step == step.name]
        ctl = step.name in control
        later = any(s.name in control or any(k.step == s.name for k in plan) for s in steps[n:])
        if deadline is not None and time.monotonic() > deadline and later:
            complete = False
            _log(f"out of time before {step.name}: the remaining trials are not run")
            break
        if not later:
            break
        if mine or ctl:
            copy_tree(live, before)
        _log(f"{step.name}: reference run")
        ref = run_step(step, live, os.path.join(logs, f"ref.{n}.log"), env)
        refs[step.name] = ref
        if ref.rc != 0:
            raise RuntimeError(f"{step.name} failed in the reference run (exit {ref.rc}): "
                               f"{_tail(os.path.join(logs, f'ref.{n}.log'))}")
        _log(f"{step.name}: {ref.seconds:.1f} s; " + ", ".join(
            f"{k} {ref.last[k] - ref.first[k]:.1f} s" for k in ref.first))
        if not (mine or ctl):
            continue
        os.rename(live, after)
        timeout = timeout_factor * ref.seconds + 300
        todo = ([None] if ctl else []) + mine
        for j, kill in enumerate(todo):
            if deadline is not None and time.monotonic() > deadline:
                complete = False
                break
            tag = f"{n}.{'control' if kill is None else j}"
            r = trial(step, live, before, after, ref, logs, env, kill, tag, timeout)
            for retry in range(2):   # ended before the moment (the reference ran slower): earlier
                if kill is None or r.get("killed") or not r.get("survived", True):
                    break
                kill = Kill(kill.kind, kill.step, kill.instance, kill.fraction / 3)
                r = trial(step, live, before, after, ref, logs, env, kill, f"{tag}.retry{retry + 1}", timeout)
            results.append(r)
            if on_result:
                on_result(r)
        if os.path.lexists(live):
            shutil.rmtree(live)
        os.rename(after, live)
        shutil.rmtree(before)
    return results, refs, complete


def summarize(results: list[dict], kinds: tuple[str, ...]) -> dict:
    kills = [r for r in results if r.get("killed")]
    per = {}
    for kind in kinds:
        ks = [r for r in kills if r["kind"] == kind]
        if ks:
            per[kind] = {"tried": len(ks), "survived": sum(r["survived"] for r in ks),
                         "mismatches": sum(bool(r.get("mismatches")) for r in ks),
                         "inside": sum(bool(r.get("inside")) for r in ks)}
    controls = [r for r in results if r.get("tag", "").endswith("control")]
    return {"kills_tried": len(kills), "kills_survived": sum(r["survived"] for r in kills),
            "mismatches": sum(bool(r.get("mismatches")) for r in kills),
            "mismatched_files": sum(len(r.get("mismatches", ())) for r in kills),
            "kills_inside_step": sum(bool(r.get("inside")) for r in kills),
            "not_killed": sum(1 for r in results if "kind" in r and not r.get("killed")),
            "leftover_files": sum(len(r.get("leftovers", ())) for r in results),
            "stray_processes": sum(len(r.get("strays", ())) for r in results),
            "escaped_but_ended": sum(len(r.get("escaped", ())) for r in results),
            "controls": len(controls), "control_mismatches": sum(bool(r.get("mismatches")) for r in controls),
            "kinds": per}


# --------------------------------------------------------------------------- the recipe
def make_recipe(live: str) -> None:
    """A copy of egs/synth at ``live``: its run.sh (without the install check: the environment is
    there, and the harness must not reinstall it), cmd.sh, conf/, local/; path.sh sources the
    toolkit's; steps/ and utils/ link to the toolkit's."""
    src = os.path.join(ROOT, "egs", "synth")
    os.makedirs(live)
    for name in ("cmd.sh", "conf", "local"):
        s = os.path.join(src, name)
        (shutil.copytree if os.path.isdir(s) else shutil.copy2)(s, os.path.join(live, name))
    run = open(os.path.join(src, "run.sh")).read()
    install = '"$PYNNET_ROOT/tools/install.sh"\n'
    if install not in run:
        raise RuntimeError("egs/synth/run.sh no longer has its install line: update make_recipe")
    with open(os.path.join(live, "run.sh"), "w") as f:
        f.write(run.replace(install, ": # (kill harness: no install check)\n"))
    os.chmod(os.path.join(live, "run.sh"), 0o755)
    with open(os.path.join(live, "path.sh"), "w") as f:
        f.write(f'. "{ROOT}/path.sh"\n')
    for name in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, name), os.path.join(live, name))


def recipe_steps(opts: list[str]) -> list[Step]:
    """The recipe's stages 1-16 and 19 (with --compare-parallel true) and the instances in each."""
    def stage(n: int, *instances: Instance) -> Step:
        return Step(f"stage {n}", ["./run.sh", "--stage", str(n), "--stop-stage", str(n), *opts], list(instances))

    def graph_and_decodes(exp: str, decoder: str, graph: bool = True) -> list[Instance]:
        out = [Instance("graph", f"{exp}/graph", ("utils/mkgraph.sh",), f"{exp}/graph", output=f"{exp}/graph")] if graph else []
        for x in ("dev", "test"):
            d = f"{exp}/decode_{x}"
            out += [Instance("decoding", d, (decoder,), d, unless="steps/score_kaldi.sh", output=d),
                    Instance("scoring", f"{d} (scoring)", ("steps/score_kaldi.sh",), d)]
        return out

    def gmm(script: str, exp: str) -> Instance:
        return Instance("gmm_training", exp, (script,), exp, output=exp)

    def ali(exp: str, script: str = "steps/align_si.sh") -> Instance:
        return Instance("alignment", exp, (script,), exp, output=exp)

    def dnn(kind: str, exp: str) -> Instance:
        return Instance(kind, exp, ("steps/nnet/train.sh",), exp, output=exp)

    feats = Instance("features", "stage 1 features", ("steps/make_mfcc.sh", "steps/make_fbank.sh",
                                                      "steps/compute_cmvn_stats.sh"))
    fmllr_feats = Instance("features", "stage 13 fMLLR features", ("steps/nnet/make_fmllr_feats.sh",))
    dnns = ("exp/dnn_avg", "exp/dnn", "exp/dnn_avg1bit", "exp/dnn_1bit")
    return [stage(1, feats), stage(2),
            stage(3, gmm("steps/train_mono.sh", "exp/mono")),
            stage(4, *graph_and_decodes("exp/mono", "steps/decode.sh")),
            stage(5, ali("exp/mono_ali"), gmm("steps/train_deltas.sh", "exp/tri1")),
            stage(6, *graph_and_decodes("exp/tri1", "steps/decode.sh")),
            stage(7, ali("exp/tri1_ali"), gmm("steps/train_deltas.sh", "exp/tri2")),
            stage(8, *graph_and_decodes("exp/tri2", "steps/decode.sh")),
            stage(9, ali("exp/tri2_ali"), gmm("steps/train_lda_mllt.sh", "exp/tri3")),
            stage(10, *graph_and_decodes("exp/tri3", "steps/decode.sh")),
            stage(11, ali("exp/tri3_ali", "steps/align_fmllr.sh"), gmm("steps/train_sat.sh", "exp/tri4")),
            stage(12, *graph_and_decodes("exp/tri4", "steps/decode_fmllr.sh")),
            stage(13, ali("exp/tri4_ali", "steps/align_fmllr.sh"), fmllr_feats),
            stage(14, Instance("dbn", "exp/dbn", ("steps/nnet/pretrain_dbn.sh",), "exp/dbn", output="exp/dbn")),
            stage(15, *(dnn(k, e) for k, e in zip(("dnn_2worker_avg", "dnn_1worker", "dnn_1bit_avg", "dnn_1bit_sgd"), dnns))),
            stage(16, *(i for e in dnns for i in graph_and_decodes(e, "steps/nnet/decode.sh", graph=False))),
            stage(19, Instance("scoring", "exp/RESULTS", ("pynnet-results",)))]


DEFAULT_RECIPE_OPTS = ("--nj 2 --tri1-leaves 60 --tri1-gauss 300 --tri2-leaves 80 --tri2-gauss 400 --tri3-leaves 80 "
                       "--tri3-gauss 400 --tri4-leaves 80 --tri4-gauss 400 --rbm-iter 1 "
                       "--dnn-opts '--max-epochs 4' --compare-parallel true")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills-per-kind", type=int, default=1)
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    p.add_argument("--max-minutes", type=float, default=60.0,
                   help="no trial starts after this (the JSON line says whether all ran)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--control", action="store_true", help="also rerun each stage once without a kill")
    p.add_argument("--stages", default="", help="comma-separated stage numbers: trials only in these [all]")
    p.add_argument("--train-hours", default="0.05")
    p.add_argument("--dev-minutes", default="1")
    p.add_argument("--test-minutes", default="1")
    p.add_argument("--recipe-opts", default=DEFAULT_RECIPE_OPTS)
    p.add_argument("--work-dir", default="", help="default: a new dir in $TMPDIR, removed at the end")
    p.add_argument("--keep", action="store_true", help="keep --work-dir (logs, the results' details)")
    a = p.parse_args(argv)
    kinds = tuple(k for k in a.kinds.split(",") if k)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        p.error(f"unknown kind(s) {','.join(bad)}; the kinds: {','.join(KINDS)}")
    t0 = time.monotonic()
    deadline = t0 + 60 * a.max_minutes
    import tempfile
    work = a.work_dir or tempfile.mkdtemp(prefix="kill_resume.")
    os.makedirs(work, exist_ok=True)
    live = os.path.join(work, "run")
    for x in ("run", "before", "after", "logs"):
        if os.path.lexists(os.path.join(work, x)):
            shutil.rmtree(os.path.join(work, x))
    make_recipe(live)
    opts = shlex.split(a.recipe_opts)
    _log(f"work dir {work}; synthesizing the corpus ({a.train_hours} h train)")
    subprocess.run(["local/prepare_data.sh", "--tiny", "true", "--train-hours", a.train_hours, "--dev-minutes",
                    a.dev_minutes, "--test-minutes", a.test_minutes, "--seed", "1", "--nj", "2", "db", "data"],
                   cwd=live, check=True, stdout=subprocess.DEVNULL)
    steps = recipe_steps(opts)
    chosen = {f"stage {x}" for x in a.stages.split(",") if x} or {s.name for s in steps}
    plan = plan_kills([s for s in steps if s.name in chosen], kinds, a.kills_per_kind, random.Random(a.seed))
    control = tuple(s.name for s in steps if s.name in chosen) if a.control else ()
    _log(f"{len(plan)} kills planned: " + "; ".join(f"{k.kind} in {k.instance} at {100 * k.fraction:.0f}%" for k in plan))

    def report(r: dict) -> None:
        what = "control" if "kind" not in r else f"{r['kind']} ({r['instance']}, {r['delay']} s of {r['duration']} s)"
        state = ("survived" if r.get("survived") else "FAILED") + (
            f", {len(r['mismatches'])} MISMATCHES: {r['mismatches'][:5]}" if r.get("mismatches") else ", outputs equal")
        extra = "".join(f"; {k}: {r[k]}" for k in ("note", "strays", "leftovers") if r.get(k))
        if r.get("escaped"):
            extra += f"; {len(r['escaped'])} processes out of the group ended by themselves"
        _log(f"{r['step']}: {what}: {state}{extra}" + (f"\n{r['error']}" if r.get("error") else ""))

    results, refs, complete = run_trials(steps, live, work, plan, control=control, deadline=deadline,
                                         on_result=report)
    summary = summarize(results, kinds)
    summary.update(complete=complete, minutes=round((time.monotonic() - t0) / 60, 1),
                   reference_minutes=round(sum(o.seconds for o in refs.values()) / 60, 1),
                   kills_per_kind=a.kills_per_kind, seed=a.seed, train_hours=float(a.train_hours))
    if a.keep or a.work_dir:
        with open(os.path.join(work, "results.json"), "w") as f:
            json.dump({"summary": summary, "trials": results}, f, indent=1)
    if not (a.keep or a.work_dir):
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
