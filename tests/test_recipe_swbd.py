"""egs/swbd/run.sh, every stage, on the generated mini Switchboard (tests/swbd_fixture.py: SPHERE
conversations, ms98 transcripts and dictionary, an eval2000 with pem/stm/glm) at toy size through
options; and --stage N at a stage boundary ends with the same models and results as the
uninterrupted run."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

from tests.swbd_fixture import make_swbd_fixture

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RECIPE = os.path.join(ROOT, "egs", "swbd")
TOY = ["--nj", "2", "--decode-nj", "2", "--dev-utts", "12", "--short-utts", "60", "--mono-utts", "40",
       "--tri-utts", "1000", "--mono-gauss", "150", "--tri1-leaves", "120", "--tri1-gauss", "400",
       "--tri2-leaves", "150", "--tri2-gauss", "600", "--tri3-leaves", "150", "--tri3-gauss", "600",
       "--tri4-leaves", "150", "--tri4-gauss", "600", "--dnn-depth", "2", "--dnn-hid-dim", "64",
       "--rbm-iter", "1", "--dnn-opts", "--max-epochs 2", "--mono-opts", "--num-iters 8",
       "--tri-opts", "--num-iters 6 --realign-iters 3", "--decode-opts", "--beam 8 --lattice-beam 3 --max-active 700"]


def _recipe_copy(dst: str) -> str:
    """egs/swbd as a user's checkout has it (run.sh, local/, conf/, cmd.sh), outputs in ``dst``."""
    os.makedirs(dst)
    for name in ("run.sh", "cmd.sh"):
        shutil.copy(os.path.join(RECIPE, name), dst)
    for name in ("local", "conf"):
        shutil.copytree(os.path.join(RECIPE, name), os.path.join(dst, name))
    with open(os.path.join(dst, "path.sh"), "w") as f:
        f.write(f'. "{ROOT}/path.sh"\n')
    for name in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, name), os.path.join(dst, name))
    return dst


def _sha1(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def test_swbd_recipe_end_to_end_and_resume(tmp_path):
    fx = make_swbd_fixture(tmp_path / "corpora", train_conversations=4, utts_per_side=12)
    s5 = _recipe_copy(str(tmp_path / "s5c"))
    corpora = ["--swbd-dir", fx.swbd_dir, "--eval2000-audio", fx.eval2000_audio_dir,
               "--eval2000-text", fx.eval2000_text_dir]
    r = subprocess.run(["bash", "run.sh"] + corpora + TOY, cwd=s5, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    results = open(os.path.join(s5, "exp", "RESULTS")).read()
    wer = [line for line in results.splitlines() if line.startswith("%WER")]
    for system in ("mono", "tri1", "tri2", "tri3", "tri4", "dnn_avg"):
        assert any(f"exp/{system}/decode_eval2000_nosp_sw1_tg" in x for x in wer), results
        assert any(f"exp/{system}/decode_train_dev_nosp_sw1_tg" in x for x in wer), results
    assert any("SWBD subset" in x for x in wer) and any("CALLHM subset" in x for x in wer), results
    # eval2000 was scored with the stm and glm (sclite-style reports), train_dev without
    dec = os.path.join(s5, "exp", "dnn_avg", "decode_eval2000_nosp_sw1_tg")
    assert any(name.startswith("score_") for name in os.listdir(dec))
    assert os.path.isfile(os.path.join(dec, "scoring_sclite", "best_wer_swbd"))
    # subsets as s5c's
    for d in ("train_dev", "train_nodev", "train_30kshort", "train_100k_nodup", "train_nodup"):
        assert os.path.isfile(os.path.join(s5, "data", d, "feats.scp")), d
    n_dev = len(open(os.path.join(s5, "data", "train_dev", "utt2spk")).read().splitlines())
    assert n_dev == 12

    # resume at a stage boundary (the DBN, stage 15): same models, same results
    models = {p: _sha1(os.path.join(s5, p)) for p in ("exp/dbn/final.dbn", "exp/dnn_avg/final.nnet",
                                                      "exp/tri4/final.mdl")}
    for d in ("exp/dbn", "exp/dnn_avg"):
        shutil.rmtree(os.path.join(s5, d))
    r = subprocess.run(["bash", "run.sh", "--stage", "15"] + corpora + TOY, cwd=s5, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert {p: _sha1(os.path.join(s5, p)) for p in models} == models
    again = open(os.path.join(s5, "exp", "RESULTS")).read()
    assert [x for x in again.splitlines() if x.startswith("%WER")] == wer   # (the RTFs differ)


def test_swbd_recipe_names_what_is_missing(tmp_path):
    s5 = _recipe_copy(str(tmp_path / "s5c"))
    empty = tmp_path / "LDC97S62"
    empty.mkdir()
    r = subprocess.run(["bash", "run.sh", "--swbd-dir", str(empty), "--stop-stage", "1"], cwd=s5,
                       capture_output=True, text=True)
    assert r.returncode != 0
    last = [x for x in r.stderr.splitlines() if x.strip()][-1]
    assert last.startswith("ERROR") and str(empty) in last and "swb_ms98_transcriptions" in last, r.stderr
