"""kill -9 and rerun, one kill per kind of step (issue 19 item 1), at toy size: the steps of
egs/synth run one by one on the --tiny synthesized corpus (features, a monophone system and its
graph, decode and scoring, alignments, DBN, and DNNs on 1 worker, on 2 averaging workers and with
1-bit SGD); each kind's step is SIGKILLed (its whole process group) at a seeded random moment
inside it, run again with the same command, and the whole dir then compared with the
uninterrupted run's, file by file (bench/kill_resume.py's helpers; that bench does the same with
the whole recipe, stage by stage)."""
from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys

import pytest

from gmm_corpus import script_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("kill_resume", os.path.join(ROOT, "bench", "kill_resume.py"))
kr = importlib.util.module_from_spec(_spec)
sys.modules["kill_resume"] = kr   # (its dataclasses look their module up)
_spec.loader.exec_module(kr)
I, Step = kr.Instance, kr.Step

DNN = ["--max-epochs", "2", "--dbn", "exp/dbn/final.dbn", "--buffer-frames", "400", "--checkpoint-every", "2"]
TRAIN = ["data/train", "data/lang", "exp/mono_ali"]
KINDS = ("features", "gmm_training", "graph", "decoding", "scoring", "alignment", "dbn", "dnn_1worker",
         "dnn_2worker_avg", "dnn_1bit_sgd")


def _script(kind: str, name: str, script: str, *cmd: str, **kw) -> Step:
    """A step that runs ``script``, the instance of ``kind`` (its output: the last argument)."""
    return Step(name, [script, *cmd], [I(kind, name, (script,), cmd[-1], output=cmd[-1], **kw)])


def toy_steps() -> list[Step]:
    dec = "exp/mono/decode_test"
    return [
        Step("features", ["bash", "-c", "for x in train test; do steps/make_mfcc.sh --nj 2 data/$x exp/make_mfcc/$x mfcc"
                          " && steps/compute_cmvn_stats.sh data/$x exp/make_mfcc/$x mfcc || exit 1; done"],
             [I("features", "features", ("steps/make_mfcc.sh", "steps/compute_cmvn_stats.sh"))]),
        Step("lang", ["bash", "-c", 'utils/prepare_lang.sh data/local/dict "<unk>" data/local/lang_tmp data/lang'
                      " && steps/train_lm.sh --order 2 data/lang/words.txt data/local/lm/train.txt data/local/lm/lm.arpa.gz"
                      " && utils/format_lm.sh data/lang data/local/lm/lm.arpa.gz data/local/dict data/lang_test"]),
        _script("gmm_training", "exp/mono", "steps/train_mono.sh", "--nj", "2", "--num-iters", "3", "--totgauss", "80",
                "--realign-iters", "2", "data/train", "data/lang", "exp/mono"),
        _script("graph", "exp/mono/graph", "utils/mkgraph.sh", "data/lang_test", "exp/mono", "exp/mono/graph"),
        Step("decode", ["steps/decode.sh", "--nj", "2", "--beam", "8", "--lattice-beam", "3", "--max-active", "500",
                        "exp/mono/graph", "data/test", dec],
             [I("decoding", dec, ("steps/decode.sh",), dec, unless="steps/score_kaldi.sh", output=dec),
              I("scoring", f"{dec} (scoring)", ("steps/score_kaldi.sh",), dec)]),
        _script("alignment", "exp/mono_ali", "steps/align_si.sh", "--nj", "2", "data/train", "data/lang", "exp/mono",
                "exp/mono_ali"),
        _script("dbn", "exp/dbn", "steps/nnet/pretrain_dbn.sh", "--nn-depth", "2", "--hid-dim", "32", "--rbm-iter", "1",
                "data/train", "exp/dbn"),
        _script("dnn_1worker", "exp/dnn", "steps/nnet/train.sh", *DNN, *TRAIN, "exp/dnn"),
        _script("dnn_2worker_avg", "exp/dnn_avg", "steps/nnet/train.sh", *DNN, "--num-workers", "2", "--sync", "average",
                "--average-every", "2", *TRAIN, "exp/dnn_avg"),
        _script("dnn_1bit_sgd", "exp/dnn_1bit", "steps/nnet/train.sh", *DNN, "--num-workers", "2", "--sync", "1bit",
                "--optimizer", "adagrad", "--minibatch-size", "128", *TRAIN, "exp/dnn_1bit"),
    ]


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("kill_resume"))
    live = os.path.join(work, "run")
    kr.make_recipe(live)
    subprocess.run(["local/prepare_data.sh", "--tiny", "true", "--seed", "3", "--nj", "2", "db", "data"], cwd=live,
                   env=script_env(), check=True, capture_output=True, timeout=120)
    steps = toy_steps()
    # (the first half of each step: a run faster than the reference's is still killed inside)
    plan = kr.plan_kills(steps, KINDS, 1, random.Random(19), fractions=(0.1, 0.6))
    results, refs, complete = kr.run_trials(steps, live, work, plan, env=script_env(), timeout_factor=5)
    assert complete
    for r in results:   # (shown when a test fails)
        print(f"{r['kind']}: killed {r['delay']} s into {r['duration']} s, inside {r['inside']}, rerun "
              f"{r.get('rerun_seconds')} s, mismatches {r.get('mismatches')}, leftovers {r.get('leftovers')}, "
              f"escaped {len(r.get('escaped', []))}, strays {r.get('strays')}")
    return {r["kind"]: r for r in results}


@pytest.mark.parametrize("kind", KINDS)
def test_a_killed_step_reruns_to_the_same_outputs(trials, kind):
    r = trials[kind]
    assert r["killed"] and r["inside"], r
    assert r["survived"], r.get("error")
    assert not r["mismatches"], r["mismatches"]
    assert not r["strays"], r["strays"]   # every process of the step was in its process group


def test_compare_trees_finds_what_a_rerun_must_not_leave(tmp_path):
    """What the comparison tells apart: a half-written file, a missing one, an extra one, a
    leftover temp file (not a mismatch), logs (ignored), gzip files by their contents."""
    import gzip

    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "exp/x/log").mkdir(parents=True)
        (d / "exp/x/log/train.log").write_text(f"{d}\n")
        (d / "exp/x/missing").write_text("m")
        with gzip.GzipFile(d / "exp/x/ali.1.gz", "wb", mtime=int(d == a)) as f:   # other headers
            f.write(b"alignments")
    (b / "exp/x/final.mdl").write_bytes(b"model bytes")
    (a / "exp/x/final.mdl").write_bytes(b"model by")
    (a / "exp/x/missing").unlink()
    (a / "exp/x/extra").write_text("e")
    (a / "exp/x/.final.mdl.abc123.tmp").write_text("half")
    mism, left = kr.compare_trees(str(a), str(b))
    assert {(m["path"], m["problem"], m["kind"]) for m in mism} == {
        ("exp/x/final.mdl", "differs", "model"), ("exp/x/missing", "missing", "other"), ("exp/x/extra", "extra", "other")}
    assert left == ["exp/x/.final.mdl.abc123.tmp"]


def test_a_resumed_history_pickles_to_the_same_bytes(tmp_path):
    """final.nnet of a training resumed after a kill: its history (read back from checkpoint.pt:
    every key a str of its own) and the uninterrupted run's (shared literal keys) write the same
    bytes (they did not: pickle refers back to a str object it has written, not to an equal one)."""
    import pickle

    import torch

    from pynnet.nnet.model import save_atomic

    def history():
        return [{"epoch": e, "lr": 0.008, "cv_loss": 1.0 / (e + 1), "accepted": True} for e in range(3)]

    w = torch.arange(6.0).reshape(2, 3)
    fresh = {"format": "pynnet-nnet-v1", "state_dict": {"w": w}, "history": history()}
    resumed = {"format": "pynnet-nnet-v1", "state_dict": {"w": w},
               "history": [pickle.loads(pickle.dumps(h)) for h in history()]}   # one pickle per entry
    save_atomic(fresh, tmp_path / "a.nnet")
    save_atomic(resumed, tmp_path / "b.nnet")
    assert (tmp_path / "a.nnet").read_bytes() == (tmp_path / "b.nnet").read_bytes()
    back = torch.load(tmp_path / "b.nnet", weights_only=False)
    assert back["history"] == history() and torch.equal(back["state_dict"]["w"], w)
