"""pynnet-nnet-forward (posteriors, log-posteriors, pseudo-log-likelihoods as Kaldi arks) and the
steps/nnet scripts end to end on a toy corpus."""
import os
import subprocess

import kaldiio
import numpy as np
import pytest
import torch

from pynnet.bin.nnet import forward_main
from pynnet.nnet.data import FeatureReader
from pynnet.nnet.model import Dnn, save_model
from pynnet.nnet.toy import make_toy_corpus
from test_nnet_pipeline import _damaged_cmvn_scps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("fwd")
    data, ali = make_toy_corpus(str(root), num_utts=8)
    # the model consumes 12-dim (6 + deltas) features
    m = Dnn(12, [16, 16], 12, "sigmoid", context=2, input_pipeline={"apply_cmvn": True, "delta_order": 1})
    m.init_random(3)
    with torch.no_grad():
        m.transform.shift.normal_()
        m.affines[-1].wb.normal_()
    m.set_priors_from_counts(np.arange(1, 13, dtype=float))
    save_model(root / "final.nnet", m)
    return root, data, m


def _run(root, data, *opts):
    out = root / "out.ark"
    rc = forward_main([*opts, "--utt2spk", f"{data}/utt2spk", "--cmvn-scp", f"{data}/cmvn.scp",
                       str(root / "final.nnet"), f"scp:{data}/feats.scp", f"ark:{out}"])
    assert rc == 0
    return dict(kaldiio.load_ark(str(out)))


def test_forward_outputs(setup):
    root, data, m = setup
    reader = FeatureReader(data, apply_cmvn=True, delta_order=1)
    utt = sorted(reader.scp)[0]
    logits = _reference_logits(m, reader.read(utt))   # (checked against the model's own forward below)
    post = _run(root, data)
    assert len(post) == 8 and post[utt].shape == logits.shape
    assert np.allclose(post[utt].sum(1), 1.0, atol=1e-5)
    logp = torch.log_softmax(torch.from_numpy(logits), 1).numpy()
    assert np.allclose(np.log(post[utt]), logp, atol=1e-4)
    assert np.allclose(_run(root, data, "--apply-log")[utt], logp, atol=1e-5)
    assert np.allclose(_run(root, data, "--no-softmax")[utt], logits, atol=1e-5)
    priors = np.log(np.arange(1, 13) / 78.0)
    pll = _run(root, data, "--prior-subtract")[utt]
    assert np.allclose(pll, logp - priors, atol=1e-4)
    assert np.allclose(_run(root, data, "--no-softmax", "--prior-subtract")[utt], logits - priors, atol=1e-4)


def test_forward_kaldi_nnet1_options(setup, tmp_path, capsys):
    """What Kaldi's steps/nnet/decode.sh passes to nnet-forward: --no-softmax=true --prior-scale=1.0
    --class-frame-counts=ali_train_pdf.counts --use-gpu=no."""
    root, data, m = setup
    utt = sorted(FeatureReader(data, apply_cmvn=True, delta_order=1).scp)[0]
    logits = _run(root, data, "--no-softmax")[utt]
    counts = np.array([5, 0, 3, 9, 1, 1, 2, 7, 4, 4, 8, 6], float)   # pdf 1 unseen
    (tmp_path / "ali_train_pdf.counts").write_text("[ " + " ".join(str(int(c)) for c in counts) + " ]\n")
    got = _run(root, data, "--no-softmax=true", "--prior-scale=0.5", "--use-gpu=no",
               f"--class-frame-counts={tmp_path}/ali_train_pdf.counts")[utt]
    log_prior = np.log(np.where(counts > 0, counts, 1) / counts.sum())
    seen = counts > 0
    assert np.allclose(got[:, seen], logits[:, seen] - 0.5 * log_prior[seen], atol=1e-4)
    assert np.all(got[:, ~seen] < -1e9)                 # an unseen pdf is disabled, as Kaldi's PdfPrior
    # with our --prior-subtract: log-softmax minus the file's priors instead of the model's
    logp = torch.log_softmax(torch.from_numpy(np.array(logits)), 1).numpy()
    got = _run(root, data, "--prior-subtract", f"--class-frame-counts={tmp_path}/ali_train_pdf.counts")[utt]
    assert np.allclose(got[:, seen], logp[:, seen] - log_prior[seen], atol=1e-4)
    assert np.allclose(_run(root, data, "--apply-log=true", "--no-softmax=false")[utt], logp, atol=1e-5)
    # a bare Kaldi boolean flag right before a positional argument is the flag alone (=true)
    for flag, want in (("--no-softmax", logits), ("--apply-log", logp)):
        out = tmp_path / "bare.ark"
        assert forward_main(["--utt2spk", f"{data}/utt2spk", "--cmvn-scp", f"{data}/cmvn.scp", flag,
                             str(root / "final.nnet"), f"scp:{data}/feats.scp", f"ark:{out}"]) == 0
        assert np.allclose(dict(kaldiio.load_ark(str(out)))[utt], want, atol=1e-5), flag
    # bad input: one line each, nothing written
    bad = [(["--class-frame-counts", f"{tmp_path}/short.counts"], "short.counts: 3 frame counts for a model with 12 pdfs"),
           (["--class-frame-counts", f"{tmp_path}/junk.counts"], "junk.counts: expected '['"),
           (["--class-frame-counts", f"{tmp_path}/none.counts"], "none.counts: no such file"),
           (["--no-softmax=true", "--apply-log=true"], "--no-softmax and --apply-log together"),
           (["--no-softmax=yes"], "expected true or false"),
           (["--feature-transform", "final.feature_transform"], "holds its own feature transform"),
           (["--use-gpu", "maybe"], "invalid choice: 'maybe'"),
           (["--use-gpu", "no", "--device", "cpu"], "give --device or --use-gpu, not both")]
    (tmp_path / "short.counts").write_text("[ 1 2 3 ]\n")
    (tmp_path / "junk.counts").write_text("1 2 3\n")
    capsys.readouterr()
    for opts, msg in bad:
        out = tmp_path / "x.ark"
        rc = forward_main([*opts, "--utt2spk", f"{data}/utt2spk", "--cmvn-scp", f"{data}/cmvn.scp",
                           str(root / "final.nnet"), f"scp:{data}/feats.scp", f"ark:{out}"])
        err = capsys.readouterr().err
        assert rc == 1 and msg in err and len(err.strip().splitlines()) == 1, (opts, err)
        assert not out.exists()


def test_forward_errors(setup, capsys):
    root, data, m = setup
    rc = forward_main([str(root / "final.nnet"), f"scp:{data}/feats.scp", f"ark:{root}/x.ark"])
    err = capsys.readouterr().err
    assert rc == 1 and "final.nnet: the model was trained with per-speaker CMVN: give --utt2spk and --cmvn-scp" in err
    # features of another dimension
    with kaldiio.WriteHelper(f"ark,scp:{root}/odd.ark,{root}/odd.scp") as w:
        w("spk0-utt0000", np.zeros((10, 5), np.float32))
    rc = forward_main(["--utt2spk", f"{data}/utt2spk", "--cmvn-scp", f"{data}/cmvn.scp", str(root / "final.nnet"),
                       f"scp:{root}/odd.scp", f"ark:{root}/x.ark"])
    err = capsys.readouterr().err
    assert rc == 1 and "utterance 'spk0-utt0000': feature dim 5 != CMVN stats dim 6" in err
    assert not (root / "x.ark").exists()      # nothing half-written
    (root / "bad.nnet").write_bytes(b"junk")
    rc = forward_main([str(root / "bad.nnet"), f"scp:{data}/feats.scp", f"ark:{root}/x.ark"])
    err = capsys.readouterr().err
    assert rc == 1 and "bad.nnet: cannot read model file" in err and len(err.strip().splitlines()) == 1
    rc = forward_main(["--device", "gpu", str(root / "final.nnet"), f"scp:{data}/feats.scp", f"ark:{root}/x.ark"])
    err = capsys.readouterr().err
    assert rc == 1 and "--device must be cpu or cuda[:N], not 'gpu'" in err and len(err.strip().splitlines()) == 1
    assert not (root / "x.ark").exists()


def test_forward_damaged_cmvn_stats_are_one_line_errors(setup, tmp_path, capsys):
    root, data, m = setup
    _, scps = _damaged_cmvn_scps(data, str(tmp_path))
    for name, (scp, msg) in scps.items():
        out = tmp_path / f"{name}.out.ark"
        rc = forward_main(["--utt2spk", f"{data}/utt2spk", "--cmvn-scp", scp, str(root / "final.nnet"),
                           f"scp:{data}/feats.scp", f"ark:{out}"])
        err = capsys.readouterr().err
        # (zero counts gave NaN outputs; a vector, a cut ark: tracebacks)
        assert rc == 1 and f"{scp}:2: " in err and msg in err and len(err.strip().splitlines()) == 1, (name, err)
        assert not out.exists(), name


def test_forward_non_finite_features_are_an_error(setup, tmp_path, capsys):
    root, data, m = setup
    feats = dict(kaldiio.load_scp(f"{data}/feats.scp"))
    u = sorted(feats)[1]
    feats[u] = feats[u].copy()
    feats[u][2, 1] = np.inf
    kaldiio.save_ark(str(tmp_path / "f.ark"), feats, scp=str(tmp_path / "f.scp"))
    out = tmp_path / "out.ark"
    rc = forward_main(["--utt2spk", f"{data}/utt2spk", "--cmvn-scp", f"{data}/cmvn.scp", str(root / "final.nnet"),
                       f"scp:{tmp_path}/f.scp", f"ark:{out}"])
    err = capsys.readouterr().err
    assert rc == 1 and f"NaN or inf in the features of utterance '{u}'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_steps_train_six_argument_form(tmp_path):
    """Kaldi nnet1's steps/nnet/train.sh <data-tr> <data-cv> <lang> <ali-tr> <ali-cv> <exp-dir>."""
    data, ali = make_toy_corpus(str(tmp_path), num_utts=20)
    cv_data, cv_ali = make_toy_corpus(str(tmp_path), num_utts=4, utt_seed=3, name="cv", spk_prefix="cv")
    (tmp_path / "lang").mkdir()
    exp = tmp_path / "dnn"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(["steps/nnet/train.sh", "--nn-depth", "1", "--hid-dim", "16", "--splice", "1", "--max-epochs", "1",
                        data, cv_data, str(tmp_path / "lang"), ali, cv_ali, str(exp)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (exp / "final.nnet").exists()
    assert (exp / "cv_utts.list").read_text().split() == sorted(open(f"{cv_data}/utt2spk").read().split()[::2])
    assert len((exp / "train_utts.list").read_text().split()) == 20
    r = subprocess.run(["steps/nnet/train.sh", data, cv_data, str(tmp_path / "lang"), ali, str(tmp_path / "nope"),
                        str(exp)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.strip() == f"steps/nnet/train.sh: no such file {tmp_path}/nope/final.mdl"


def test_steps_pretrain_train_and_forward(tmp_path):
    """steps/nnet/pretrain_dbn.sh -> steps/nnet/train.sh --dbn -> pynnet-nnet-forward, as a recipe runs them."""
    data, ali = make_toy_corpus(str(tmp_path), num_utts=30)
    (tmp_path / "lang").mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(["steps/nnet/pretrain_dbn.sh", "--nn-depth", "2", "--hid-dim", "24", "--splice", "2",
                        data, str(tmp_path / "dbn")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "dbn" / "final.dbn").exists() and "reconstruction MSE" in open(tmp_path / "dbn/log/pretrain.log").read()
    exp = tmp_path / "dnn"
    r = subprocess.run(["steps/nnet/train.sh", "--dbn", str(tmp_path / "dbn/final.dbn"), "--max-epochs", "2",
                        "--cmd", "utils/run.pl", data, str(tmp_path / "lang"), ali, str(exp)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for f in ("final.nnet", "final.mdl", "nnet.init", "log/train.log", "log/train.json", "train_curve.png"):
        assert (exp / f).exists(), f
    assert "epoch 2:" in open(exp / "log/train.log").read()
    # wrong usage: one line on stderr, nonzero exit
    r = subprocess.run(["steps/nnet/train.sh", data, str(tmp_path / "lang"), str(tmp_path / "nope"), str(exp)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.strip() == f"steps/nnet/train.sh: no such file {tmp_path}/nope/final.mdl"
    r = subprocess.run(["steps/nnet/decode.sh", str(tmp_path / "graph"), data, str(exp / "decode")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no such file" in r.stderr and "HCLG.fst" in r.stderr


def test_train_and_decode_end_to_end(tmp_path):
    """steps/nnet/train.sh -> steps/nnet/decode.sh (nnet-forward | decode-faster-mapped | scoring)
    on a toy word corpus with a word-loop HCLG: the DNN recognises the held-out test words."""
    from pynnet.nnet.toy import make_toy_graph
    data, ali = make_toy_corpus(str(tmp_path), num_utts=60, num_words=8, frames=(30, 60))
    test, _ = make_toy_corpus(str(tmp_path), num_utts=12, num_words=8, frames=(30, 60), utt_seed=99, name="test")
    make_toy_graph(str(tmp_path / "graph"), 8)
    (tmp_path / "lang").mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(["steps/nnet/train.sh", "--nn-depth", "2", "--hid-dim", "64", "--max-epochs", "4",
                        data, str(tmp_path / "lang"), ali, str(tmp_path / "dnn")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["steps/nnet/decode.sh", "--nj", "2", "--scoring-opts", "--min-lmwt 1 --max-lmwt 12",
                        str(tmp_path / "graph"), test, str(tmp_path / "dnn/decode_test")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ERROR" not in r.stderr, r.stderr
    best = open(tmp_path / "dnn/decode_test/scoring_kaldi/best_wer").read()
    wer = float(best.split()[1])
    assert wer <= 15.0, best
    assert os.path.exists(tmp_path / "dnn/decode_test/lat.1.gz") and os.path.exists(tmp_path / "dnn/decode_test/lat.2.gz")
    # features that break after the first utterances: the forward fails while the decoder, given
    # the utterances before, exits 0; the job (a pipeline) and decode.sh must fail, not score a subset
    import shutil
    broken = tmp_path / "test_broken"
    shutil.copytree(test, broken)
    lines = (broken / "feats.scp").read_text().splitlines()
    lines[-1] = lines[-1].split()[0] + f" {tmp_path}/missing.ark:10"
    (broken / "feats.scp").write_text("\n".join(lines) + "\n")
    r = subprocess.run(["steps/nnet/decode.sh", "--nj", "1", str(tmp_path / "graph"), str(broken),
                        str(tmp_path / "dnn/decode_broken")], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0 and "decode_broken/log/decode.1.log" in r.stderr, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "dnn/decode_broken/scoring_kaldi/best_wer")
    # an unreadable model: decode.sh stops at reading its input pipeline, with the program's error
    shutil.copytree(tmp_path / "dnn", tmp_path / "dnn_bad", ignore=shutil.ignore_patterns("decode_*"))
    (tmp_path / "dnn_bad/final.nnet").write_bytes(b"not a model")
    r = subprocess.run(["steps/nnet/decode.sh", "--nj", "1", str(tmp_path / "graph"), test,
                        str(tmp_path / "dnn_bad/decode_test")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode != 0 and "ERROR (pynnet-nnet-info)" in r.stderr, r.stdout + r.stderr
    assert not os.path.exists(tmp_path / "dnn_bad/decode_test/log/decode.1.log")  # no job started


def test_forward_model_input_dim_mismatch(setup, capsys):
    # a model without per-speaker CMVN or deltas, for 5-dim features, given the 6-dim ones
    root, data, _ = setup
    m = Dnn(5, [8], 12, "sigmoid", context=1)
    m.init_random(0)
    save_model(root / "dim5.nnet", m)
    rc = forward_main([str(root / "dim5.nnet"), f"scp:{data}/feats.scp", f"ark:{root}/y.ark"])
    err = capsys.readouterr().err
    assert rc == 1 and "utterance 'spk0-utt0000': feature dim 6 != model input dim 5" in err
    assert len(err.strip().splitlines()) == 1 and not (root / "y.ark").exists()


def test_kaldi_compat_check_tool(tmp_path):
    # tools/kaldi_compat_check.py, for a Kaldi user's own final.mdl + HCLG.fst (docs/notes/nnet.md);
    # here on the toy model and graph, so that the tool itself keeps working
    import json
    import shutil
    import sys

    from pynnet.nnet.toy import make_toy_graph
    _, ali = make_toy_corpus(str(tmp_path), num_utts=4, num_words=8)
    kd = tmp_path / "kaldi"
    make_toy_graph(str(kd), 8)
    shutil.copy(f"{ali}/final.mdl", kd / "final.mdl")
    r = subprocess.run([sys.executable, "tools/kaldi_compat_check.py", str(kd), "--work", str(tmp_path / "w"),
                        "--utts", "30"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["model_bytes_differing_after_rewrite"] == 0 and out["utterances"] == 30
    assert out["cv_frame_acc_last_epoch"] > out["cv_frame_acc_first_epoch"]
    assert "Done 30 utterances, failed for 0" in out["decoded"]


def test_forward_into_a_reader_that_goes_away(setup):
    # e.g. the decoder failed: one line (no BrokenPipeError traceback) and a nonzero status
    import sys
    root, data, _ = setup
    # 50 copies of the utterances: far more output than a pipe buffer, so the writes must fail
    scp = [ln.split(None, 1) for ln in open(f"{data}/feats.scp").read().splitlines()]
    spk = dict(ln.split() for ln in open(f"{data}/utt2spk").read().splitlines())
    with open(root / "many.scp", "w") as f, open(root / "many.utt2spk", "w") as g:
        for i in range(50):
            for k, v in scp:
                f.write(f"{k}-{i:02d} {v}\n")
                g.write(f"{k}-{i:02d} {spk[k]}\n")
    prog = os.path.join(os.path.dirname(sys.executable), "pynnet-nnet-forward")
    r = subprocess.run(["bash", "-c", f'{prog} --utt2spk {root}/many.utt2spk --cmvn-scp {data}/cmvn.scp '
                        f'{root}/final.nnet scp:{root}/many.scp ark:- | head -c 10 >/dev/null; '
                        'echo "rc=${PIPESTATUS[0]}" >&2'], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert r.stderr.splitlines() == ["ERROR (pynnet-nnet-forward): the output pipe was closed by its reader", "rc=1"]


def _reference_logits(m: Dnn, feats: np.ndarray) -> np.ndarray:
    """The model's definition written out in float64 numpy: Kaldi's splice (edge frames repeated),
    <AddShift> and <Rescale>, affine layers, sigmoid / ReLU / p-norm (p=2 over consecutive groups,
    then rms-normalised rows, nnet2's PnormComponent + NormalizeComponent)."""
    c, T = m.arch["context"], feats.shape[0]
    idx = np.clip(np.arange(T)[:, None] + np.arange(-c, c + 1)[None, :], 0, T - 1)
    x = feats[idx].reshape(T, -1).astype(np.float64)
    x = (x + m.transform.shift.numpy()) * m.transform.scale.numpy()
    affs = m.affines
    for k, a in enumerate(affs):
        wb = a.wb.detach().numpy().astype(np.float64)
        x = x @ wb[:, :-1].T + wb[:, -1]
        if k == len(affs) - 1:
            break
        act = m.arch["activation"]
        if act == "sigmoid":
            x = 1.0 / (1.0 + np.exp(-x))
        elif act == "relu":
            x = np.maximum(x, 0.0)
        else:
            g = m.arch["pnorm_group"]
            y = np.sqrt((x.reshape(T, -1, g) ** 2).sum(2))
            x = y / np.sqrt((y ** 2).mean(1, keepdims=True))
    return x


@pytest.mark.parametrize("activation", ["sigmoid", "relu", "pnorm"])
def test_forward_matches_a_numpy_reference(activation):
    from pynnet.nnet.optim import make_optimizer

    m = Dnn(6, [8, 7], 5, activation, context=2, pnorm_group=3)
    m.init_random(1)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        m.transform.shift.copy_(torch.randn(m.transform.shift.shape, generator=g))
        m.transform.scale.copy_(torch.rand(m.transform.scale.shape, generator=g) + 0.5)
        for a in m.affines:
            a.wb[:, -1].copy_(torch.randn(a.out_dim, generator=g))
    feats = np.random.default_rng(3).normal(size=(17, 6)).astype(np.float32)
    want = _reference_logits(m, feats)
    with torch.no_grad():
        got = m.utterance_logits(torch.from_numpy(feats)).numpy()
    assert np.allclose(got, want, atol=1e-4), np.abs(got - want).max()
    # the training forward (an optimizer's hooks installed: the fused stack for sigmoid / ReLU)
    make_optimizer("sgd", m)
    x = m.transform(torch.from_numpy(feats))
    out = m(x)
    assert out.requires_grad and np.allclose(out.detach().numpy(), want, atol=1e-4)
