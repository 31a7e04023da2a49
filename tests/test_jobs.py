"""utils/run.pl and utils/slurm.pl: Kaldi's `$cmd JOB=1:N log/foo.JOB.log prog ... JOB` runners.
slurm.pl is run against a fake `sbatch` (put on PATH here) that runs the array tasks locally."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[1]
RUN = TOP / "utils/run.pl"
SLURM = TOP / "utils/slurm.pl"


def sh(*args, cwd, env=None):
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=60)


def log_lines(p: Path) -> list[str]:
    return p.read_text().splitlines()


def check_header(lines: list[str], cmd: str, code: int) -> list[str]:
    """Kaldi's log layout; returns the command's own output lines."""
    assert lines[0] == f"# {cmd}"
    assert lines[1].startswith("# Started at ") and lines[2] == "#"
    assert lines[-2].startswith("# Accounting: time=") and " threads=" in lines[-2]
    assert lines[-1].startswith(f"# Ended (code {code}) at ") and lines[-1].endswith(" seconds")
    assert ", elapsed time " in lines[-1]
    return lines[3:-2]


def test_job_substitution_pipes_and_header(tmp_path):
    r = sh(RUN, "JOB=1:3", "exp/a/log/foo.JOB.log", "echo", "job JOB of 3", "|", "sed", "s/job/J/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for j in (1, 2, 3):
        out = check_header(log_lines(tmp_path / f"exp/a/log/foo.{j}.log"), f'echo "job {j} of 3" | sed s/job/J/', 0)
        assert out == [f"J {j} of 3"]
    # stderr goes to the log too; an argument with a double quote is single-quoted, as in Kaldi
    r = sh(RUN, "x.log", "echo", 'say "hi"', ">&2", cwd=tmp_path)
    assert r.returncode == 0
    assert check_header(log_lines(tmp_path / "x.log"), "echo 'say \"hi\"' >&2", 0) == ['say "hi"']


def test_other_job_names_and_single_job(tmp_path):
    r = sh(RUN, "TASK=4:5", "log/t.TASK.log", "echo", "TASK", cwd=tmp_path)
    assert r.returncode == 0
    assert check_header(log_lines(tmp_path / "log/t.5.log"), "echo 5", 0) == ["5"]
    assert not (tmp_path / "log/t.1.log").exists()
    r = sh(RUN, "JOB=2", "log/s.JOB.log", "echo", "JOB", cwd=tmp_path)
    assert r.returncode == 0 and log_lines(tmp_path / "log/s.2.log")[3] == "2"


def test_failing_job_names_its_log(tmp_path):
    r = sh(RUN, "JOB=1:4", "exp/b/log/f.JOB.log", "[", "JOB", "-ne", "3", "]", cwd=tmp_path)
    assert r.returncode == 1
    assert "run.pl: 1 / 4 failed, log is in exp/b/log/f.3.log" in r.stderr.splitlines()
    check_header(log_lines(tmp_path / "exp/b/log/f.3.log"), "[ 3 -ne 3 ]", 1)
    check_header(log_lines(tmp_path / "exp/b/log/f.2.log"), "[ 2 -ne 3 ]", 0)
    # one argument with spaces is quoted (Kaldi): it is a command name, not a command line
    r = sh(RUN, "q.log", "exit 0", cwd=tmp_path)
    assert r.returncode == 1 and 'exit 0: command not found' in (tmp_path / "q.log").read_text()
    r = sh(RUN, "one.log", "exit", "7", cwd=tmp_path)
    assert r.returncode == 1 and "run.pl: job failed, log is in one.log" in r.stderr
    check_header(log_lines(tmp_path / "one.log"), "exit 7", 7)


def test_failure_inside_a_pipeline_fails_the_job(tmp_path):
    # e.g. pynnet-nnet-forward ... | decoder: the decoder exits 0 on partial input, the job must not
    r = sh(RUN, "JOB=1:2", "log/p.JOB.log", "[", "JOB", "-ne", "2", "]", "|", "cat", cwd=tmp_path)
    assert r.returncode == 1
    assert "run.pl: 1 / 2 failed, log is in log/p.2.log" in r.stderr.splitlines()
    check_header(log_lines(tmp_path / "log/p.1.log"), "[ 1 -ne 2 ] | cat", 0)


def test_jobs_run_in_parallel_and_max_jobs_run(tmp_path):
    # separate arguments, as Kaldi scripts pass them: one argument with spaces would be quoted
    stamp = "date +%s.%N ; sleep 0.6 ; date +%s.%N"

    def intervals(name):
        out = []
        for j in (1, 2, 3):
            t = check_header(log_lines(tmp_path / f"log/{name}.{j}.log"), stamp, 0)
            out.append((float(t[0]), float(t[1])))
        return sorted(out)

    assert sh(RUN, "--max-jobs-run", 3, "JOB=1:3", "log/p.JOB.log", *stamp.split(), cwd=tmp_path).returncode == 0
    iv = intervals("p")
    assert all(iv[k + 1][0] < iv[k][1] for k in range(2)), iv  # each starts before the previous ends
    assert sh(RUN, "--max-jobs-run", 1, "JOB=1:3", "log/q.JOB.log", *stamp.split(), cwd=tmp_path).returncode == 0
    iv = intervals("q")
    assert all(iv[k + 1][0] >= iv[k][1] for k in range(2)), iv  # one at a time


def test_bad_usage(tmp_path):
    r = sh(RUN, "JOB=1:3", "log/same.log", "true", cwd=tmp_path)
    assert r.returncode == 1 and "putting the output into just one log file (log/same.log)" in r.stderr
    r = sh(RUN, "JOB=3:1", "log/x.JOB.log", "true", cwd=tmp_path)
    assert r.returncode == 1 and "invalid job range JOB=3:1" in r.stderr
    r = sh(RUN, "JOB=0:2", "log/x.JOB.log", "true", cwd=tmp_path)
    assert r.returncode == 1 and "start must be strictly positive" in r.stderr
    assert sh(RUN, "--max-jobs-run", "zero", "x.log", "true", cwd=tmp_path).returncode == 1
    assert sh(RUN, "only.log", cwd=tmp_path).returncode == 1
    assert sh(RUN, cwd=tmp_path).returncode == 1
    # queue options from cmd.sh are accepted and ignored
    assert sh(RUN, "--mem", "4G", "--num-threads", 2, "--gpu", 0, "-l", "arch=*64", "ok.log", "true",
              cwd=tmp_path).returncode == 0
    assert "threads=2" in (tmp_path / "ok.log").read_text()


def test_pick_failed_reruns_only_failed_jobs(tmp_path):
    (tmp_path / "flag").write_text("")
    cmd = "echo run >> ran.JOB ; [ JOB -ne 2 ] || [ ! -e flag ]".split()
    assert sh(RUN, "JOB=1:3", "log/k.JOB.log", *cmd, cwd=tmp_path).returncode == 1
    (tmp_path / "flag").unlink()
    r = sh(RUN, "--pick", "failed", "JOB=1:3", "log/k.JOB.log", *cmd, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [(tmp_path / f"ran.{j}").read_text().count("run") for j in (1, 2, 3)] == [1, 2, 1]


def test_kill9_of_the_process_group_leaves_no_job_running(tmp_path):
    """A recipe killed with kill -9 -- -PGID (a crash, an impatient user): the jobs are in run.pl's
    process group, as Kaldi's, so none survives to keep writing into exp/ beside a rerun."""
    tag = f"{time.time_ns() % 10**9}"
    p = subprocess.Popen(["setsid", str(RUN), "JOB=1:2", "log/k.JOB.log", "sleep", f"40.{tag}", "|", "cat"],
                         cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def running():
        out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        return [ln for ln in out.splitlines() if ln.strip() == f"sleep 40.{tag}"]

    try:
        for _ in range(200):
            if len(running()) == 2:
                break
            time.sleep(0.05)
        assert len(running()) == 2
    finally:
        os.killpg(p.pid, signal.SIGKILL)   # setsid: run.pl leads its own group
    p.wait(timeout=10)
    for _ in range(100):
        if not running():
            break
        time.sleep(0.05)
    assert not running()


def test_sigterm_kills_running_jobs(tmp_path):
    p = subprocess.Popen([str(RUN), "JOB=1:2", "log/z.JOB.log", "sleep", "30", ";", "echo", "finished"], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(100):
        if all((tmp_path / f"log/z.{j}.log").exists() for j in (1, 2)):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=25)   # (a hang guard: the jobs sleep 30 s)
    assert p.returncode != 0 and "interrupted" in err
    for j in (1, 2):  # killed before "echo finished": no output, and the signal in the log
        lines = log_lines(tmp_path / f"log/z.{j}.log")
        assert lines[-1].startswith("# Ended (code 143; signal 15)") and lines[3:-2] == []


# --- slurm.pl with a fake sbatch ----------------------------------------------------------------

FAKE_SBATCH = r'''#!/usr/bin/env python3
"""Fake sbatch: records its arguments, runs the array tasks here (SLURM_ARRAY_TASK_ID set,
output to --output with %a expanded) and, like sbatch --wait, returns when all are done with
nonzero status if any failed.  FAKE_SBATCH_SKIP=k makes task k vanish (as if Slurm killed it)."""
import os, re, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SBATCH_ARGS"], "a") as f:
    f.write("\t".join(args) + "\n")
opts = dict(a.split("=", 1) for a in args[:-1] if a.startswith("--") and "=" in a)
script = args[-1]
m = re.fullmatch(r"(\d+)-(\d+)(?:%(\d+))?", opts["--array"])
if "--wait" not in args:
    print("Submitted batch job 42")  # a real sbatch would return now; the tasks never report back
    sys.exit(0)
worst = 0
for i in range(int(m.group(1)), int(m.group(2)) + 1):
    if os.environ.get("FAKE_SBATCH_SKIP") == str(i):
        worst = 1
        continue
    env = dict(os.environ, SLURM_ARRAY_TASK_ID=str(i), SLURM_ARRAY_JOB_ID="42")
    with open(opts["--output"].replace("%a", str(i)), "w") as out:
        rc = subprocess.run(["bash", script], env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    worst = max(worst, rc)
print("Submitted batch job 42")
sys.exit(1 if worst else 0)
'''


@pytest.fixture
def slurm_env(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sbatch").write_text(FAKE_SBATCH)
    (bindir / "sbatch").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_SBATCH_ARGS=str(tmp_path / "sbatch.args"))
    return env


def test_slurm_array_job(tmp_path, slurm_env):
    r = sh(SLURM, "--partition", "gpu", "--time", "1:00:00", "--mem", "4G", "--num-threads", 2, "--gpu", 1,
           "--max-jobs-run", 2, "--qos=high", "JOB=1:3", "exp/c/log/g.JOB.log", "echo", "task JOB", "|", "tr", "a-z", "A-Z",
           cwd=tmp_path, env=slurm_env)
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "sbatch.args").read_text().splitlines()
    assert len(calls) == 1  # ONE array job
    a = calls[0].split("\t")
    for want in ("--wait", "--array=1-3%2", "--partition=gpu", "--time=1:00:00", "--mem=4G", "--cpus-per-task=2",
                 "--gres=gpu:1", "--qos=high", "--job-name=g", "--output=exp/c/log/q/g.%a.out"):
        assert want in a, (want, a)
    assert a[-1] == "exp/c/log/q/g.sh"
    for j in (1, 2, 3):
        lines = log_lines(tmp_path / f"exp/c/log/g.{j}.log")
        assert check_header(lines, f'echo "task {j}" | tr a-z A-Z', 0) == [f"TASK {j}"]
        assert "threads=2" in lines[-2]
        assert (tmp_path / f"exp/c/log/q/g.{j}.log.status").read_text().strip() == "0"


def test_slurm_failed_task(tmp_path, slurm_env):
    r = sh(SLURM, "JOB=1:3", "exp/d/log/h.JOB.log", "[", "JOB", "-ne", "2", "]", cwd=tmp_path, env=slurm_env)
    assert r.returncode == 1
    assert "slurm.pl: 1 / 3 failed, log is in exp/d/log/h.2.log" in r.stderr.splitlines()
    check_header(log_lines(tmp_path / "exp/d/log/h.2.log"), "[ 2 -ne 2 ]", 1)
    # a rerun that succeeds must not see the stale status of the failed run
    r = sh(SLURM, "JOB=1:3", "exp/d/log/h.JOB.log", "true", cwd=tmp_path, env=slurm_env)
    assert r.returncode == 0, r.stderr


def test_slurm_vanished_task_and_missing_sbatch(tmp_path, slurm_env):
    env = dict(slurm_env, FAKE_SBATCH_SKIP="3")
    r = sh(SLURM, "JOB=1:3", "log/v.JOB.log", "true", cwd=tmp_path, env=env)
    assert r.returncode == 1
    assert "slurm.pl: job 3 left no exit status" in r.stderr
    assert "slurm.pl: 1 / 3 failed, log is in log/v.3.log" in r.stderr
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if not os.path.exists(os.path.join(p, "sbatch")))
    r = sh(SLURM, "JOB=1:2", "log/w.JOB.log", "true", cwd=tmp_path, env=env)
    assert r.returncode == 1 and "sbatch not found" in r.stderr
    r = sh(SLURM, "JOB=1:2", "log/w.log", "true", cwd=tmp_path, env=slurm_env)
    assert r.returncode == 1 and "just one log file" in r.stderr


def test_slurm_kaldi_config(tmp_path, slurm_env):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf/slurm.conf").write_text(
        "command sbatch --export=PATH --ntasks-per-node=1\n"
        "option time=* --time $0\n"
        "option mem=* --mem-per-cpu $0\n"
        "option mem=0   # nothing\n"
        "option num_threads=* --cpus-per-task $0\n"
        "default gpu=0\n"
        "option gpu=0 -p shared\n"
        "option gpu=* -p gpu --gres=gpu:$0\n")
    r = sh(SLURM, "--mem", "2G", "--gpu", 2, "--num-threads", 3, "--comment=x", "JOB=1:2", "log/k.JOB.log", "echo", "JOB",
           cwd=tmp_path, env=slurm_env)
    assert r.returncode == 0, r.stderr
    a = (tmp_path / "sbatch.args").read_text().splitlines()[-1].split("\t")
    assert a[:3] == ["--export=PATH", "--ntasks-per-node=1", "--wait"]
    joined = " ".join(a)
    assert "--mem-per-cpu 2G" in joined and "-p gpu --gres=gpu:2" in joined and "--cpus-per-task 3" in joined
    assert "--comment=x" in a and "-p shared" not in joined
    assert "threads=3" in (tmp_path / "log/k.2.log").read_text()
    r = sh(SLURM, "JOB=1:2", "log/k.JOB.log", "true", cwd=tmp_path, env=slurm_env)  # default gpu=0
    assert r.returncode == 0 and "-p\tshared" in (tmp_path / "sbatch.args").read_text().splitlines()[-1]
    (tmp_path / "bad.conf").write_text("opshun mem=* --mem $0\n")
    r = sh(SLURM, "--config", "bad.conf", "JOB=1:2", "log/k.JOB.log", "true", cwd=tmp_path, env=slurm_env)
    assert r.returncode == 1 and "bad.conf:1: cannot parse config line" in r.stderr


# --- queue.pl with a fake qsub ------------------------------------------------------------------

QUEUE = TOP / "utils/queue.pl"
FAKE_QSUB = r'''#!/usr/bin/env python3
"""Fake Grid Engine qsub: records its arguments; with -sync y runs tasks -t a:b here
(SGE_TASK_ID set, output to -o with $TASK_ID expanded) and exits nonzero if any failed."""
import os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SBATCH_ARGS"], "a") as f:
    f.write("\t".join(args) + "\n")
opt = {}
i = 0
while i < len(args) - 1:
    if args[i] == "-cwd":
        i += 1
        continue
    opt[args[i]] = args[i + 1]
    i += 2
assert opt.get("-sync") == "y", "queue.pl must wait for the array job"
a, b = map(int, opt["-t"].split(":"))
worst = 0
for t in range(a, b + 1):
    env = dict(os.environ, SGE_TASK_ID=str(t))
    with open(opt["-o"].replace("$TASK_ID", str(t)), "w") as out:
        worst = max(worst, subprocess.run(["bash", args[-1]], env=env, stdout=out, stderr=subprocess.STDOUT).returncode)
print('Your job-array 7.1-3:1 ("x") has been submitted')
sys.exit(1 if worst else 0)
'''


def test_queue_pl_with_default_config(tmp_path, slurm_env):
    (tmp_path / "bin/qsub").write_text(FAKE_QSUB)
    (tmp_path / "bin/qsub").chmod(0o755)
    r = sh(QUEUE, "--mem", "2G", "--num-threads", 4, "--max-jobs-run", 2, "JOB=1:3", "exp/e/log/m.JOB.log",
           "[", "JOB", "-ne", "3", "]", cwd=tmp_path, env=slurm_env)
    assert r.returncode == 1
    assert "queue.pl: 1 / 3 failed, log is in exp/e/log/m.3.log" in r.stderr.splitlines()
    a = (tmp_path / "sbatch.args").read_text().splitlines()[-1].split("\t")
    joined = " ".join(a)
    assert a[:8] == ["-v", "PATH", "-cwd", "-S", "/bin/bash", "-j", "y", "-l"]
    for want in ("-sync y", "-t 1:3", "-tc 2", "-N m", "-l mem_free=2G,ram_free=2G", "-pe smp 4"):
        assert want in joined, (want, joined)
    assert "-q g.q" not in joined
    check_header(log_lines(tmp_path / "exp/e/log/m.1.log"), "[ 1 -ne 3 ]", 0)
    assert "threads=4" in (tmp_path / "exp/e/log/m.1.log").read_text()
    r = sh(QUEUE, "--gpu", 1, "JOB=1:2", "exp/e/log/g.JOB.log", "echo", "JOB", cwd=tmp_path, env=slurm_env)
    assert r.returncode == 0, r.stderr
    assert "-l gpu=1 -q g.q" in (tmp_path / "sbatch.args").read_text().splitlines()[-1].replace("\t", " ")
