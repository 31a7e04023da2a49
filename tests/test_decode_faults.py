"""steps/nnet/decode.sh and steps/decode.sh when things go wrong around the decoding itself:
the lattices cannot be written (disk full, a file size limit), a data dir without ``text``
(unlabelled data: decode, do not score), and steps/decode.sh --transform-dir (fMLLR transforms of
another dir: applied; another number of jobs, none there, another dimension: one-line errors)."""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

from pynnet.nnet.model import Dnn, save_model
from pynnet.nnet.toy import make_toy_corpus, make_toy_graph

from gmm_corpus import script_env as _env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def dnn_setup(tmp_path_factory):
    """A toy word corpus (with text), its word-loop HCLG, and an exp dir with an untrained DNN
    (random weights, priors from counts) and the corpus's final.mdl: enough to decode."""
    root = tmp_path_factory.mktemp("decfault")
    data, ali = make_toy_corpus(str(root), num_utts=8, num_words=8, frames=(30, 60))
    make_toy_graph(str(root / "graph"), 8)
    exp = root / "exp" / "dnn"
    exp.mkdir(parents=True)
    m = Dnn(6, [16], 12, "sigmoid", context=2, input_pipeline={"apply_cmvn": True, "delta_order": 0})
    m.init_random(7)
    torch.manual_seed(7)
    with torch.no_grad():
        m.affines[-1].wb.normal_()
    m.set_priors_from_counts(np.arange(1, 13, dtype=float))
    save_model(exp / "final.nnet", m)
    shutil.copy(os.path.join(ali, "final.mdl"), exp / "final.mdl")
    return root, data, exp


def _decode(script, *args, ulimit_f=None, timeout=120):
    cmd = " ".join(f"'{a}'" for a in [script, *args])
    if ulimit_f is not None:
        cmd = f"ulimit -f {ulimit_f}; {cmd}"
    return subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _lattice_write_fails(dec, r, script):
    """The one-line reason names the lattice file and says that writing it failed; rc 1, no lattices."""
    assert r.returncode == 1, r.stdout + r.stderr
    reason = [ln for ln in r.stderr.splitlines() if "decoding failed" in ln]
    assert len(reason) == 1, r.stderr
    assert reason[0].startswith(f"{script}: decoding failed: "), reason[0]
    assert "lat.1.gz" in reason[0] and "writing" in reason[0] and "failed" in reason[0], reason[0]
    assert "disk full or a file size limit" in reason[0], reason[0]
    assert "closed by its reader" not in reason[0], reason[0]
    assert not list(dec.glob("lat.*.gz")), list(dec.glob("lat.*"))
    assert not os.path.exists(dec / "scoring_kaldi")


def test_dnn_decode_lattice_write_failure_names_the_file(dnn_setup):
    root, data, exp = dnn_setup
    dec = exp / "dec_ulimit"
    # 16 KiB: the job's gzipped lattices (~40 KiB) do not fit, its log (~2 KiB) and the split dir do
    r = _decode("steps/nnet/decode.sh", "--nj", "1", str(root / "graph"), data, str(dec), ulimit_f=16)
    _lattice_write_fails(dec, r, "steps/nnet/decode.sh")
    log = (dec / "log" / "decode.1.log").read_text()
    assert f"ERROR (gzip): writing {dec}/lat.1.gz failed" in log, log
    # without the limit the same decode succeeds (the limit alone made it fail), and is scored
    r = _decode("steps/nnet/decode.sh", "--nj", "1", "--scoring-opts", "--min-lmwt 9 --max-lmwt 10",
                str(root / "graph"), data, str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (dec / "lat.1.gz").stat().st_size > 16 * 1024
    assert (dec / "scoring_kaldi" / "best_wer").exists()


def test_dnn_decode_without_text_decodes_and_does_not_score(dnn_setup):
    root, data, exp = dnn_setup
    unlab = root / "unlabelled"
    shutil.copytree(data, unlab)
    os.unlink(unlab / "text")
    dec = exp / "dec_unlab"
    r = _decode("steps/nnet/decode.sh", "--nj", "1", str(root / "graph"), str(unlab), str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert f"steps/nnet/decode.sh: no {unlab}/text: lattices written to {dec}, not scoring" in out, out
    assert "score_kaldi" not in out and "ERROR" not in out, out
    assert out.rstrip().endswith(f"steps/nnet/decode.sh: done decoding {dec}"), out
    assert (dec / "lat.1.gz").stat().st_size > 0 and not (dec / "scoring_kaldi").exists()


@pytest.fixture(scope="module")
def gmm_setup(tmp_path_factory):
    from test_decode import UTTS, Toy, _setup_exp
    root = tmp_path_factory.mktemp("decfault_gmm")
    exp, graph, data = _setup_exp(root, Toy(), UTTS)
    return exp, graph, data


def test_gmm_decode_lattice_write_failure_names_the_file(gmm_setup):
    exp, graph, data = gmm_setup
    dec = exp / "dec_ulimit"
    # 8 KiB: the gzipped lattices (~20 KiB) do not fit, the log (~2 KiB) does
    r = _decode("steps/decode.sh", "--nj", "1", str(graph), str(data), str(dec), ulimit_f=8)
    _lattice_write_fails(dec, r, "steps/decode.sh")


def test_gmm_decode_without_text_decodes_and_does_not_score(gmm_setup, tmp_path):
    exp, graph, data = gmm_setup
    unlab = tmp_path / "unlabelled"
    shutil.copytree(data, unlab)
    os.unlink(unlab / "text")
    dec = exp / "dec_unlab"
    r = _decode("steps/decode.sh", "--nj", "2", str(graph), str(unlab), str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert f"steps/decode.sh: no {unlab}/text: lattices written to {dec}, not scoring" in out, out
    assert (dec / "lat.1.gz").exists() and (dec / "lat.2.gz").exists() and not (dec / "scoring_kaldi").exists()
    # --skip-scoring true: decoded, nothing said about scoring
    dec = exp / "dec_unlab_skip"
    r = _decode("steps/decode.sh", "--nj", "1", "--skip-scoring", "true", str(graph), str(unlab), str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not scoring" not in r.stdout + r.stderr and (dec / "lat.1.gz").exists()
    # --stage 1 (only score) on the unlabelled data: the same line, exit 0
    r = _decode("steps/decode.sh", "--stage", "1", str(graph), str(unlab), str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"no {unlab}/text: lattices written to {dec}, not scoring" in r.stdout, r.stdout + r.stderr


def test_dnn_decode_takes_kaldi_nnet1_options(dnn_setup, tmp_path):
    """Kaldi's steps/nnet/decode.sh options: --srcdir (a decode dir outside the exp dir),
    --class-frame-counts, --num-threads, --use-gpu, --max-mem/--parallel-opts (no effect here);
    the lattices are those of the plain decode. Unsupported ones are refused in one line."""
    root, data, exp = dnn_setup
    plain = exp / "dec_plain"
    r = _decode("steps/nnet/decode.sh", "--nj", "1", "--skip-scoring", "true", str(root / "graph"), data, str(plain))
    assert r.returncode == 0, r.stdout + r.stderr
    # the model's priors came from counts 1..12: the same counts as Kaldi's text vector
    (tmp_path / "ali_train_pdf.counts").write_text("[ " + " ".join(str(i) for i in range(1, 13)) + " ]\n")
    dec = tmp_path / "elsewhere" / "decode"
    r = _decode("steps/nnet/decode.sh", "--nj", "1", "--skip-scoring", "true", "--srcdir", str(exp),
                "--class-frame-counts", str(tmp_path / "ali_train_pdf.counts"), "--num-threads", "2",
                "--use-gpu", "no", "--max-mem", "50000000", "--parallel-opts", "", str(root / "graph"), data,
                str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (dec / "lat.1.gz").read_bytes() == (plain / "lat.1.gz").read_bytes()
    log = (dec / "log" / "decode.1.log").read_text()
    assert "--num-threads 2" in log and "--class-frame-counts" in log and "--use-gpu no" in log
    # other priors change the pseudo-log-likelihoods, so the lattices
    (tmp_path / "flat.counts").write_text("[ " + " ".join(["5"] * 12) + " ]\n")
    r = _decode("steps/nnet/decode.sh", "--nj", "1", "--skip-scoring", "true", "--srcdir", str(exp),
                "--class-frame-counts", str(tmp_path / "flat.counts"), str(root / "graph"), data,
                str(tmp_path / "flat"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "flat" / "lat.1.gz").read_bytes() != (plain / "lat.1.gz").read_bytes()
    for opts, msg in [(["--feature-transform", "x.feature_transform"], "--feature-transform x.feature_transform: "
                        "a pynnet DNN holds its own feature transform"),
                       (["--ivector", "ark:ivectors.ark"], "i-vector inputs are not supported"),
                       (["--use-gpu", "maybe"], "--use-gpu must be yes, no, optional or wait, not 'maybe'"),
                       (["--num-threads", "0"], "--num-threads must be a positive integer, not '0'"),
                       (["--class-frame-counts", str(tmp_path / "none.counts")], "no such file")]:
        r = _decode("steps/nnet/decode.sh", "--srcdir", str(exp), *opts, str(root / "graph"), data,
                    str(tmp_path / "bad"))
        assert r.returncode == 1 and msg in r.stderr and r.stderr.strip().count("\n") == 0, (opts, r.stderr)
        assert not (tmp_path / "bad" / "lat.1.gz").exists()


def test_gmm_decode_takes_kaldi_options(gmm_setup, tmp_path):
    exp, graph, data = gmm_setup
    plain, dec = exp / "dec_plain", exp / "dec_threads"
    r = _decode("steps/decode.sh", "--nj", "1", "--skip-scoring", "true", str(graph), str(data), str(plain))
    assert r.returncode == 0, r.stdout + r.stderr
    r = _decode("steps/decode.sh", "--nj", "1", "--skip-scoring", "true", "--num-threads", "2",
                "--parallel-opts", "", "--decode-extra-opts", "--prune-interval 25", str(graph), str(data), str(dec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (dec / "lat.1.gz").read_bytes() == (plain / "lat.1.gz").read_bytes()
    r = _decode("steps/decode.sh", "--nj", "1", "--decode-extra-opts", "--no-such-option 1", str(graph), str(data),
                str(exp / "dec_bad"))
    assert r.returncode == 1 and "no-such-option" in r.stderr, r.stderr


def _write_transforms(path, mats: dict) -> None:
    import kaldiio

    with kaldiio.WriteHelper(f"ark:{path}") as w:
        for spk, m in mats.items():
            w(spk, m.astype(np.float32))


def test_gmm_decode_transform_dir(gmm_setup, tmp_path):
    """steps/decode.sh --transform-dir: the fMLLR transforms trans.JOB of that dir (keyed by
    speaker) adapt the features: identity transforms decode as no transforms, others change the
    lattices. A dir with another number of jobs, or without trans.1: one line, exit 1, the decode
    dir untouched."""
    exp, graph, data = gmm_setup
    plain = exp / "dec_plain_td"
    r = _decode("steps/decode.sh", "--nj", "1", "--skip-scoring", "true", str(graph), str(data), str(plain))
    assert r.returncode == 0, r.stdout + r.stderr
    import kaldiio
    dim = next(iter(kaldiio.load_scp_sequential(f"{data}/feats.scp")))[1].shape[1]
    speakers = sorted(ln.split()[0] for ln in (data / "spk2utt").read_text().splitlines())
    ident, scaled = tmp_path / "ident", tmp_path / "scaled"
    for d, m in ((ident, np.eye(dim, dim + 1)), (scaled, np.hstack([0.3 * np.eye(dim), np.ones((dim, 1))]))):
        d.mkdir()
        _write_transforms(d / "trans.1", {spk: m for spk in speakers})
        (d / "num_jobs").write_text("1\n")
    outs = {}
    for d in (ident, scaled):
        dec = exp / f"dec_{d.name}"
        r = _decode("steps/decode.sh", "--nj", "1", "--skip-scoring", "true", "--transform-dir", str(d), str(graph),
                    str(data), str(dec))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"--fmllr {d}/trans.1" in (dec / "log/decode.1.log").read_text()
        outs[d.name] = (dec / "lat.1.gz").read_bytes()
    assert outs["ident"] == (plain / "lat.1.gz").read_bytes()
    assert outs["scaled"] != outs["ident"]

    # another number of jobs than the decode's
    dec = exp / "dec_td_bad"
    r = _decode("steps/decode.sh", "--nj", "2", "--transform-dir", str(ident), str(graph), str(data), str(dec))
    assert r.returncode == 1 and r.stderr.strip() == (
        f"steps/decode.sh: --transform-dir {ident} has 1 jobs, this decode 2: use --nj 1"), r.stderr
    assert not dec.exists()
    # no trans.1 (an align or decode dir without fMLLR)
    empty = tmp_path / "no_trans"
    empty.mkdir()
    (empty / "num_jobs").write_text("1\n")
    r = _decode("steps/decode.sh", "--nj", "1", "--transform-dir", str(empty), str(graph), str(data), str(dec))
    assert r.returncode == 1 and r.stderr.strip() == (
        f"steps/decode.sh: no such file {empty}/trans.1 (--transform-dir)"), r.stderr
    assert not dec.exists()
    # a refused rerun into an existing decode dir leaves it as it was (its num_jobs, lattices)
    before = sorted(os.listdir(plain)), (plain / "num_jobs").read_text()
    r = _decode("steps/decode.sh", "--nj", "2", "--transform-dir", str(ident), str(graph), str(data), str(plain))
    assert r.returncode == 1 and "has 1 jobs, this decode 2" in r.stderr, r.stderr
    assert (sorted(os.listdir(plain)), (plain / "num_jobs").read_text()) == before
    # transforms of another dimension: the decode's one-line reason
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    _write_transforms(wrong / "trans.1", {spk: np.eye(dim + 1, dim + 2) for spk in speakers})
    (wrong / "num_jobs").write_text("1\n")
    r = _decode("steps/decode.sh", "--nj", "1", "--transform-dir", str(wrong), str(graph), str(data), str(dec))
    assert r.returncode == 1, r.stdout + r.stderr
    reason = [ln for ln in r.stderr.splitlines() if ln.startswith("steps/decode.sh: ")]
    assert len(reason) == 1 and reason[0].startswith("steps/decode.sh: decoding failed: ERROR (pynnet-gmm-latgen-"
                                                     f"faster): {wrong}/trans.1: fMLLR transforms are {dim + 1} x "
                                                     f"{dim + 2} but the features are {dim}-dimensional"), r.stderr
    assert not list(dec.glob("lat.*"))
