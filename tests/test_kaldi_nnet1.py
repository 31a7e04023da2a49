"""Kaldi nnet1 feature transforms (final.feature_transform) and the nnet1 recipe lines of
steps/nnet/pretrain_dbn.sh and steps/nnet/train.sh (Kaldi's run_dnn.sh) on a toy corpus."""
import os
import subprocess

import numpy as np
import pytest
import torch

from pynnet.io.errors import PynnetError
from pynnet.nnet.kaldi_nnet1 import feature_transform_bytes, read_feature_transform, same_transform
from pynnet.nnet.model import FeatureTransform, load_model
from pynnet.nnet.toy import make_toy_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _transform(dim=3, context=2, seed=0) -> FeatureTransform:
    rng = np.random.default_rng(seed)
    t = FeatureTransform(dim, context)
    t.set_global_cmvn(rng.normal(size=dim), rng.uniform(0.5, 2.0, size=dim))
    return t


def test_feature_transform_text_is_kaldi_nnet1(tmp_path):
    t = _transform()
    text = feature_transform_bytes(t).decode()
    lines = text.splitlines()
    # what Kaldi's nnet-copy --binary=false prints for train.sh's splice + cmvn-to-nnet transform
    assert lines[:4] == ["<Nnet> ", "<Splice> 15 3 ", "[ -2 -1 0 1 2 ]", "<!EndOfComponent> "]
    assert lines[4] == "<AddShift> 15 15 " and lines[5].startswith("<LearnRateCoef> 0  [ ")
    assert lines[7] == "<Rescale> 15 15 " and lines[-1] == "</Nnet> "
    shift = np.array(lines[5].split("[")[1].split("]")[0].split(), float)
    assert np.allclose(shift, t.shift.numpy(), rtol=1e-6)
    for binary in (False, True):
        p = tmp_path / f"ft.{binary}"
        p.write_bytes(feature_transform_bytes(t, binary))
        u = read_feature_transform(p)
        assert (u.input_dim, u.context) == (3, 2) and same_transform(t, u)
    assert (tmp_path / "ft.True").read_bytes()[:8] == b"\0B<Nnet>"


def test_feature_transform_older_kaldi_form_and_bad_input(tmp_path):
    # older Kaldi writes no <LearnRateCoef> and no <!EndOfComponent>; the shift varies over the
    # spliced frames (CMVN of the spliced features)
    shift = np.arange(10, dtype=float) - 4.5
    scale = np.linspace(0.4, 0.5, 10)
    p = tmp_path / "final.feature_transform"
    p.write_text("<Nnet> \n<Splice> 10 2 \n[ -2 -1 0 1 2 ]\n<AddShift> 10 10 \n [ "
                 + " ".join(map(str, shift)) + " ]\n<Rescale> 10 10 \n [ " + " ".join(map(str, scale)) + " ]\n</Nnet> \n")
    t = read_feature_transform(p)
    assert t.context == 2 and np.allclose(t.shift.numpy(), shift) and np.allclose(t.scale.numpy(), scale)
    x = torch.arange(12, dtype=torch.float32).reshape(6, 2)
    y = t(x)   # splice, then (x + shift) * scale
    assert torch.allclose(y[2], (x[0:5].reshape(-1) + torch.tensor(shift, dtype=torch.float32))
                          * torch.tensor(scale, dtype=torch.float32))
    bad = {
        "<Nnet>\n<Splice> 6 2\n[ -1 0 1 ]\n<Sigmoid> 6 6\n</Nnet>\n": "component <Sigmoid> in the feature transform",
        "<Nnet>\n<Splice> 6 2\n[ -2 0 2 ]\n</Nnet>\n": "splice offsets [-2, 0, 2]",
        "<Nnet>\n<Splice> 7 2\n[ -1 0 1 ]\n</Nnet>\n": "<Splice> of 2 inputs and 3 offsets cannot have 7 outputs",
        "<Nnet>\n<Splice> 6 2\n[ -1 0 1 ]\n<AddShift> 6 6\n [ 1 2 3 ]\n</Nnet>\n": "<AddShift> of dimension 6x6 with 3 values",
        "<Nnet>\n<AddShift> 2 2\n [ 1 2 ]\n</Nnet>\n": "feature transform made of <AddShift>",
        "<Nnet>\n<Splice> 6 2\n[ -1 0 1 ]\n<Rescale> 6 6\n [ 1 2 3 4 5 nan ]\n</Nnet>\n": "NaN or inf",
        "<Nnet>\n<Splice> 6 2\n[ -1 0 1 ": "not a Kaldi nnet1 feature transform",
    }
    for text, msg in bad.items():
        p.write_text(text)
        with pytest.raises(PynnetError, match="final.feature_transform: .*" + msg.replace("[", r"\[").replace("]", r"\]")):
            read_feature_transform(p)
    with pytest.raises(PynnetError, match="no such file"):
        read_feature_transform(tmp_path / "missing")


def _run(*args, timeout=600):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{ROOT}/utils:{ROOT}/tools/venv/bin:" + os.environ["PATH"]}
    return subprocess.run([str(a) for a in args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_kaldi_nnet1_recipe_lines(tmp_path):
    """Kaldi's run_dnn.sh: pretrain_dbn.sh with --cmvn-opts/--delta-opts, then train.sh
    --feature-transform <dbn>/final.feature_transform --dbn <dbn>/<N>.dbn --hid-layers 0 in the
    six-argument form; also --feature-transform without a DBN; and Kaldi options we refuse."""
    data, ali = make_toy_corpus(str(tmp_path), num_utts=24)
    (tmp_path / "lang").mkdir()
    r = _run("utils/subset_data_dir_tr_cv.sh", "--cv-spk-percent", "25", data, tmp_path / "tr", tmp_path / "cv")
    assert r.returncode == 0, r.stderr
    dbn = tmp_path / "dbn"
    r = _run("steps/nnet/pretrain_dbn.sh", "--cmvn-opts", "--norm-means=true --norm-vars=false",
             "--delta-opts", "--delta-order=1", "--splice", "2", "--nn-depth", "2", "--hid-dim", "24",
             "--rbm-iter", "1", "--copy-feats", "false", tmp_path / "tr", dbn)
    assert r.returncode == 0, r.stderr
    assert os.readlink(dbn / "2.dbn") == "final.dbn"
    assert (dbn / "cmvn_opts").read_text().strip() == "--norm-means=true --norm-vars=false"
    ft = read_feature_transform(dbn / "final.feature_transform")
    assert (ft.input_dim, ft.context) == (12, 2)          # 6-dim features + deltas of order 1
    dnn = tmp_path / "dnn"
    r = _run("steps/nnet/train.sh", "--feature-transform", dbn / "final.feature_transform", "--dbn", dbn / "2.dbn",
             "--hid-layers", "0", "--learn-rate", "0.008", "--max-epochs", "2", "--network-type", "dnn",
             tmp_path / "tr", tmp_path / "cv", tmp_path / "lang", ali, ali, dnn)
    assert r.returncode == 0, r.stdout + r.stderr
    model = load_model(str(dnn / "final.nnet"))
    assert model.input_pipeline == {"apply_cmvn": True, "delta_order": 1}   # from the DBN dir's opts files
    assert same_transform(model.transform, ft) and same_transform(read_feature_transform(dnn / "final.feature_transform"), ft)
    assert (dnn / "delta_opts").read_text().strip() == "--delta-order=1"
    # random initialisation with a Kaldi feature transform: the model takes it as it is
    ft2 = _transform(dim=12, context=1, seed=3)
    (tmp_path / "my.feature_transform").write_bytes(feature_transform_bytes(ft2))
    r = _run("steps/nnet/train.sh", "--feature-transform", tmp_path / "my.feature_transform", "--cmvn-opts",
             "--norm-means=true", "--delta-opts", "--delta-order 1", "--hid-layers", "1", "--hid-dim", "16",
             "--max-epochs", "1", tmp_path / "tr", tmp_path / "cv", tmp_path / "lang", ali, ali, tmp_path / "dnn2")
    assert r.returncode == 0, r.stdout + r.stderr
    m2 = load_model(str(tmp_path / "dnn2" / "final.nnet"))
    assert same_transform(m2.transform, ft2) and m2.arch["hidden_dims"] == [16]
    # refused in one line, nothing trained
    for opts, msg in [(["--dbn", dbn / "2.dbn", "--hid-layers", "2"], "--hid-layers 2: with --dbn only 0"),
                      (["--cmvn-opts", "--norm-vars=true"], "variance normalisation is not supported"),
                      (["--network-type", "lstm"], "--network-type lstm: only dnn"),
                      (["--nnet-proto", "nnet.proto"], "--nnet-proto nnet.proto: not supported"),
                      (["--delta-opts", "--delta-window=3"], "option --delta-window=3 is not supported"),
                      (["--dbn", dbn / "2.dbn", "--feature-transform", tmp_path / "my.feature_transform",
                        "--cmvn-opts", "--norm-means=true", "--delta-opts", "--delta-order=1"],
                       "my.feature_transform: is not the feature transform of the DBN")]:
        out = tmp_path / "bad"
        r = _run("steps/nnet/train.sh", *opts, "--max-epochs", "1", tmp_path / "tr", tmp_path / "cv",
                 tmp_path / "lang", ali, ali, out)
        assert r.returncode == 1 and msg in r.stderr, (opts, r.stderr)
        assert not (out / "final.nnet").exists()
    r = _run("steps/nnet/pretrain_dbn.sh", "--input-vis-type", "bern", tmp_path / "tr", tmp_path / "dbn_bad")
    assert r.returncode == 1 and r.stderr.strip() == "steps/nnet/pretrain_dbn.sh: --input-vis-type bern: only gauss (a Gaussian-Bernoulli first RBM)"
