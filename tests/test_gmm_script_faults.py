"""steps/align_si.sh, steps/train_deltas.sh, steps/train_mono.sh (and make_mfcc.sh/make_fbank.sh)
when given wrong inputs: a lang dir with another phone set than the model's (refused, as
utils/mkgraph.sh and Kaldi's utils/lang/check_phones_compatible.sh), a --nj that is not a positive
integer, and a failing job (the reason, its log's ERROR line, is in the script's message)."""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess

import pytest

from gmm_corpus import make_corpus, make_dict, sh
from gmm_corpus import script_env as _env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A tiny corpus, its lang dir, a second lang dir with one more phone (lang2), and a briefly
    trained monophone system exp/mono (which also serves as an alignment dir)."""
    from pynnet.hmm.lang import prepare_lang

    d = tmp_path_factory.mktemp("gmmfault")
    make_corpus(str(d), num_spk=2, utts_per_spk=6, seed=5)
    for x in ("steps", "utils"):
        os.symlink(os.path.join(ROOT, x), d / x)
    dict2 = d / "dict2"
    make_dict(str(dict2))
    with open(dict2 / "nonsilence_phones.txt", "a") as f:
        f.write("g\n")
    with open(dict2 / "lexicon.txt", "a") as f:
        f.write("gag g a g\n")
    prepare_lang(str(dict2), "<unk>", str(d / "lang2_tmp"), str(d / "lang2"))
    sh(d, "steps/train_mono.sh", "--nj", "2", "--num-iters", "3", "--totgauss", "60", "--realign-iters", "2",
       "data/train", "lang", "exp/mono")
    return d


def _one_line_error(r):
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_align_si_refuses_a_lang_dir_with_other_phones(work):
    assert (work / "lang/phones.txt").read_text() != (work / "lang2/phones.txt").read_text()
    r = sh(work, "steps/align_si.sh", "--nj", "2", "data/train", "lang2", "exp/mono", "exp/ali_lang2", check=False)
    line = _one_line_error(r)
    assert "exp/mono/phones.txt" in line and "lang2/phones.txt" in line and "not compatible" in line, line
    assert not (work / "exp/ali_lang2").exists()
    # the right lang dir aligns
    r = sh(work, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/mono", "exp/ali")
    assert "12 of 12 utterances aligned" in r.stdout, r.stdout
    assert (work / "exp/ali/phones.txt").read_text() == (work / "lang/phones.txt").read_text()


def test_train_deltas_refuses_a_lang_dir_with_other_phones(work):
    r = sh(work, "steps/train_deltas.sh", "--num-iters", "2", "20", "100", "data/train", "lang2", "exp/mono",
           "exp/tri_lang2", check=False)
    line = _one_line_error(r)
    assert "exp/mono/phones.txt" in line and "lang2/phones.txt" in line and "not compatible" in line, line
    assert not (work / "exp/tri_lang2").exists()


def test_check_phones_compatible(work, tmp_path):
    chk = os.path.join(ROOT, "utils/lang/check_phones_compatible.sh")
    a, b = str(work / "lang/phones.txt"), str(work / "lang2/phones.txt")
    assert sh(work, chk, a, a).returncode == 0
    r = sh(work, chk, a, b, check=False)
    assert r.returncode == 1 and a in r.stderr and b in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    # only the disambiguation symbols differ: compatible (as Kaldi)
    fewer = tmp_path / "phones.txt"
    fewer.write_text("".join(ln + "\n" for ln in open(a).read().splitlines() if not ln.startswith("#1 ")))
    assert sh(work, chk, a, str(fewer)).returncode == 0
    # a model dir without phones.txt (older scripts): nothing to compare, as Kaldi
    assert sh(work, chk, str(tmp_path / "absent.txt"), a).returncode == 0


def _wav_data(work):
    """data/wavs: two utterances of noise as 16 kHz wav files, and conf/{mfcc,fbank}.conf."""
    import wave

    import numpy as np

    d = work / "data/wavs"
    if not d.exists():
        d.mkdir(parents=True)
        (work / "conf").mkdir(exist_ok=True)
        (work / "conf/mfcc.conf").write_text("--use-energy=false\n")
        (work / "conf/fbank.conf").write_text("--num-mel-bins=23\n")
        rng = np.random.default_rng(0)
        for u in ("u1", "u2"):
            with wave.open(str(d / f"{u}.wav"), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(16000)
                w.writeframes((rng.normal(0, 1000, 8000)).astype("<i2").tobytes())
        (d / "wav.scp").write_text("".join(f"{u} {d}/{u}.wav\n" for u in ("u1", "u2")))
        (d / "utt2spk").write_text("u1 s1\nu2 s1\n")
        (d / "spk2utt").write_text("s1 u1 u2\n")
    return "data/wavs"


@pytest.mark.parametrize("nj", ["abc", "-1", "0", ""])
def test_nj_must_be_a_positive_integer(work, nj):
    wavs = _wav_data(work)
    runs = {
        "steps/make_mfcc.sh": [wavs, "exp/feat_nj"],
        "steps/make_fbank.sh": [wavs, "exp/feat_nj"],
        "steps/train_mono.sh": ["data/train", "lang", "exp/mono_nj"],
        "steps/align_si.sh": ["data/train", "lang", "exp/mono", "exp/ali_nj"],
        "steps/train_deltas.sh": ["20", "100", "data/train", "lang", "exp/mono", "exp/tri_nj"],
    }
    for script, args in runs.items():
        if script == "steps/train_deltas.sh" and nj == "":
            continue  # empty is its default: the alignment dir's number of jobs
        r = sh(work, script, "--nj", nj, *args, check=False)
        line = _one_line_error(r)
        assert line == f"{script}: --nj must be a positive integer, got '{nj}'", (script, line)
    assert not (work / wavs / "feats.scp").exists()
    for p in ("exp/feat_nj", "exp/mono_nj", "exp/ali_nj", "exp/tri_nj"):
        assert not (work / p).exists(), p


def test_align_si_failed_job_gives_the_error(work):
    wrong = work / "exp/mono_wrongdim"
    if not wrong.exists():
        shutil.copytree(work / "exp/mono", wrong, symlinks=True)
        (wrong / "delta_opts").write_text("--delta-order 1\n")
    r = sh(work, "steps/align_si.sh", "--nj", "2", "data/train", "lang", "exp/mono_wrongdim", "exp/ali_wrongdim",
           check=False)
    assert r.returncode != 0
    reason = [ln for ln in r.stderr.splitlines() if ln.startswith("steps/align_si.sh: align failed: ERROR")]
    assert len(reason) == 1, r.stderr
    assert "(pynnet-gmm-align)" in reason[0] and "dimension 26 does not match the model's 39" in reason[0], reason
    assert "exp/ali_wrongdim/log/align.1.log" in reason[0], reason


def _bad_feats_data(work):
    """A copy of data/train in which the last utterance (in the second job's part) has features that
    cannot be read."""
    bad = work / "data/badfeats"
    if not bad.exists():
        shutil.copytree(work / "data/train", bad, ignore=shutil.ignore_patterns("split*"))
        lines = (bad / "feats.scp").read_text().splitlines()
        victim = lines[-1].split()[0]
        lines[-1] = f"{victim} {bad}/missing.ark:10"
        (bad / "feats.scp").write_text("\n".join(lines) + "\n")
    return "data/badfeats"


def test_train_mono_failed_job_gives_the_error(work):
    r = sh(work, "steps/train_mono.sh", "--nj", "2", "--num-iters", "2", _bad_feats_data(work), "lang",
           "exp/mono_bad", check=False)
    assert r.returncode != 0
    reason = [ln for ln in r.stderr.splitlines() if ln.startswith("steps/train_mono.sh: ") and "ERROR (" in ln]
    assert len(reason) == 1, r.stdout + r.stderr
    assert "failed: ERROR (pynnet-" in reason[0] and "(see exp/mono_bad/log/" in reason[0], reason
    assert "missing.ark" in reason[0], reason


def test_train_deltas_failed_job_gives_the_error(work):
    r = sh(work, "steps/train_deltas.sh", "--num-iters", "2", "20", "100", _bad_feats_data(work), "lang",
           "exp/mono", "exp/tri_bad", check=False)
    assert r.returncode != 0
    reason = [ln for ln in r.stderr.splitlines() if ln.startswith("steps/train_deltas.sh: ") and "ERROR (" in ln]
    assert len(reason) == 1, r.stdout + r.stderr
    assert reason[0].startswith("steps/train_deltas.sh: acc_tree failed: ERROR (pynnet-"), reason
    assert "missing.ark" in reason[0] and "(see exp/tri_bad/log/acc_tree.2.log)" in reason[0], reason


@pytest.fixture(scope="module")
def gmm_decode_setup(tmp_path_factory):
    from test_decode import UTTS, Toy, _setup_exp
    root = tmp_path_factory.mktemp("gmmfault_dec")
    exp, graph, data = _setup_exp(root, Toy(), UTTS)
    return root, exp, graph, data


def test_killed_decode_leaves_no_lattice_under_its_final_name(gmm_decode_setup):
    """decode.sh killed (SIGKILL: no trap runs) right after its jobs wrote their lattices and before
    it finished: no lat.N.gz (which --stage 1 would score as if complete); a rerun writes them."""
    root, exp, graph, data = gmm_decode_setup
    killer = root / "run_then_kill.sh"
    killer.write_text(f'#!/usr/bin/env bash\n{ROOT}/utils/run.pl "$@"\nkill -9 $PPID\n')
    killer.chmod(0o755)
    dec = exp / "dec_killed"
    r = subprocess.run([f"{ROOT}/steps/decode.sh", "--nj", "2", "--cmd", str(killer), str(graph), str(data),
                        str(dec)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stdout + r.stderr
    assert (dec / "log/decode.1.log").exists() and (dec / "log/decode.2.log").exists()
    assert not list(dec.glob("lat.*.gz")), sorted(os.listdir(dec))
    r = subprocess.run([f"{ROOT}/steps/decode.sh", "--nj", "2", "--skip-scoring", "true", str(graph), str(data),
                        str(dec)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in dec.glob("lat.*")) == ["lat.1.gz", "lat.2.gz"], sorted(os.listdir(dec))


def test_kaldi_layout_of_a_gmm_exp_dir(work):
    """What Kaldi's scripts read from our exp dirs: delta_opts holds add-deltas options that Kaldi's
    option parser takes (empty: its default order 2; '--delta-order 2' with a space is refused by
    it), training graphs as fsts.JOB.gz (gzipped fst archives, what align_si.sh --use-graphs
    reads), and a Kaldi-style '--delta-opts' option that reaches the feature pipeline."""
    mono = work / "exp/mono"
    assert (mono / "delta_opts").read_text() == "\n"
    for n in (1, 2):
        first_utt = (work / f"data/train/split2/{n}/feats.scp").read_text().split()[0]
        with gzip.open(mono / f"fsts.{n}.gz", "rb") as f:   # a Kaldi fst archive: "<key> <OpenFst magic>..."
            assert f.read(len(first_utt) + 5) == first_utt.encode() + b" \xd6\xfd\xb2\x7e"
    r = sh(work, "steps/align_si.sh", "--nj", "2", "--use-graphs", "true", "data/train", "lang", "exp/mono",
           "exp/ali_graphs")
    assert "12 of 12 utterances aligned" in r.stdout, r.stdout
    # a truncated graph archive is one error naming it, not a partial alignment
    bad = work / "exp/mono_badfsts"
    shutil.copytree(mono, bad, symlinks=True)
    blob = (bad / "fsts.2.gz").read_bytes()
    (bad / "fsts.2.gz").write_bytes(blob[:len(blob) // 2])
    r = sh(work, "steps/align_si.sh", "--nj", "2", "--use-graphs", "true", "data/train", "lang", "exp/mono_badfsts",
           "exp/ali_badfsts", check=False)
    assert r.returncode != 0 and "fsts.2.gz: corrupt or truncated gzip file" in r.stderr, r.stderr
    # --delta-opts as Kaldi's (here a first-order system: 26-dim features)
    sh(work, "steps/train_mono.sh", "--nj", "2", "--num-iters", "2", "--totgauss", "40", "--realign-iters", "1",
       "--delta-opts", "--delta-order=1", "--initial-beam", "8", "--retry-beam", "30", "data/train", "lang",
       "exp/mono_d1")
    assert (work / "exp/mono_d1/delta_opts").read_text() == "--delta-order=1\n"
    assert "--beam 8 --retry-beam 30" in (work / "exp/mono_d1/log/align.1.1.log").read_text()
    from pynnet.hmm.model_io import read_model
    assert read_model(str(work / "exp/mono_d1/final.mdl"))[1].dim == 26


def test_align_si_with_a_final_mat_of_the_wrong_dimension(work):
    """align_si.sh takes an LDA+MLLT system (final.mat + splice_opts); one whose final.mat does not
    fit the spliced features, or gives another dimension than the model's: the job's one-line
    reason names the matrix (or the model), exit 1, no alignments."""
    import kaldiio
    import numpy as np

    rng = np.random.default_rng(1)
    for name, shape, want in (
            ("mono_lda_in", (39, 50), "final.mat: transform is 39 x 50 but the features are 91-dimensional "
                                      "(wrong --splice-opts, or a final.mat of another system?)"),
            ("mono_lda_out", (20, 91), "feature dimension 20 does not match the model's 39 (exp/ali_mono_lda_out/"
                                       "final.mdl)")):
        lda = work / "exp" / name
        shutil.copytree(work / "exp/mono", lda, symlinks=True)
        (lda / "delta_opts").unlink()
        (lda / "splice_opts").write_text("--left-context=3 --right-context=3\n")
        kaldiio.save_mat(str(lda / "final.mat"), rng.normal(size=shape).astype(np.float32))
        ali = f"exp/ali_{name}"
        r = sh(work, "steps/align_si.sh", "--nj", "2", "data/train", "lang", f"exp/{name}", ali, check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        reason = [ln for ln in r.stderr.splitlines() if ln.startswith("steps/align_si.sh: ")]
        assert len(reason) == 1, r.stderr
        assert reason[0].startswith("steps/align_si.sh: align failed: ERROR (pynnet-gmm-align): "), reason
        assert want in reason[0] and f"(see {ali}/log/align.1.log)" in reason[0], reason
        if name == "mono_lda_in":
            assert f"{ali}/final.mat: transform is" in reason[0], reason
        assert "Traceback" not in r.stderr
        assert not list((work / ali).glob("ali.*")), sorted(os.listdir(work / ali))
        # (the align dir records the system's features: its final.mat and splice_opts, no delta_opts)
        assert (work / ali / "final.mat").read_bytes() == (lda / "final.mat").read_bytes()
        assert not (work / ali / "delta_opts").exists()


def test_a_killed_decode_leaves_no_previous_wer_to_report(gmm_decode_setup):
    """After a complete decode + scoring, a decode killed midway must not leave the old wer_* and
    scoring_kaldi/best_wer (a recipe's RESULTS stage would report them for lattices that are gone);
    scoring a decode dir with a lattice missing is an error, not a score of the rest."""
    root, exp, graph, data = gmm_decode_setup
    dec = exp / "dec_rescored"
    run = [f"{ROOT}/steps/decode.sh", "--nj", "2", str(graph), str(data), str(dec)]
    r = subprocess.run(run, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (dec / "scoring_kaldi/best_wer").exists() and list(dec.glob("wer_*"))
    killer = root / "kill_at_once.sh"
    killer.write_text("#!/usr/bin/env bash\nkill -9 $PPID\n")
    killer.chmod(0o755)
    r = subprocess.run([run[0], "--cmd", str(killer), *run[1:]], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == -9
    assert not (dec / "scoring_kaldi/best_wer").exists() and not list(dec.glob("wer_*"))
    # a complete decode again, then one lattice lost: scoring refuses
    subprocess.run(run, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=True)
    (dec / "lat.2.gz").unlink()
    r = subprocess.run([f"{ROOT}/steps/score_kaldi.sh", str(data), str(graph), str(dec)], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and f"no {dec}/lat.2.gz (of num_jobs 2): decoding incomplete?" in r.stderr, r.stderr
    assert not (dec / "scoring_kaldi/best_wer").exists()


def test_train_deltas_norm_vars(work):
    """Kaldi's deprecated --norm-vars true (train_mono.sh and train_deltas.sh) means
    --cmvn-opts --norm-vars=true, recorded in the experiment's cmvn_opts for later stages."""
    sh(work, "steps/train_deltas.sh", "--norm-vars", "true", "--num-iters", "2", "20", "100", "data/train", "lang",
       "exp/mono", "exp/tri_nv")
    assert "--norm-vars=true" in (work / "exp/tri_nv/cmvn_opts").read_text().split()
