"""Failed utterances in the feature stage, with Kaldi's semantics: compute-{mfcc,fbank}-feats warns
once per failed utterance and succeeds when any utterance got features; steps/make_mfcc.sh warns
on a count mismatch (fix_data_dir.sh drops the rest), fails below 95%, and on failure leaves the
previous feats.scp in place, still reading the previous features."""
from __future__ import annotations

import os
import subprocess

import kaldiio
import numpy as np
import pytest
import soundfile as sf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = 8000


def _wav(path, seconds: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    sf.write(str(path), (rng.standard_normal(int(seconds * RATE)) * 3000).astype(np.int16), RATE,
             subtype="PCM_16")


def _run(fn, args, capsys):
    rc = fn(args)
    return rc, capsys.readouterr().err


def test_bad_utterances_are_one_warning_each_and_the_rest_is_written(tmp_path, capsys):
    from pynnet.bin.feat import compute_fbank_feats, compute_mfcc_feats
    _wav(tmp_path / "r.wav", 1.0)
    (tmp_path / "wav.scp").write_text(f"gone /no/such/gone.wav\nr {tmp_path}/r.wav\n")
    # r-b ends 1 s past the recording; r-c is 10 ms, too short for one 25 ms frame; gone-a's
    # recording does not exist
    (tmp_path / "segments").write_text("gone-a gone 0.0 0.5\nr-a r 0.0 0.5\nr-b r 0.5 2.0\nr-c r 0.9 0.91\n")
    out = [f"ark,scp:{tmp_path}/o.ark,{tmp_path}/o.scp"]
    opts = ["--sample-frequency=8000", f"--segments={tmp_path}/segments", "--min-segment-length=0",
            f"--write-num-frames=ark,t:{tmp_path}/nf", f"--write-utt2dur=ark,t:{tmp_path}/dur"]
    for prog in (compute_mfcc_feats, compute_fbank_feats):
        rc, err = _run(prog, opts + [f"scp:{tmp_path}/wav.scp"] + out, capsys)
        assert rc == 0, err
        assert not [ln for ln in err.splitlines() if ln.startswith("ERROR")], err
        warnings = [ln for ln in err.splitlines() if ln.startswith("WARNING")]
        for utt, why in (("gone-a", "no such audio file"), ("r-b", "too far past the end"),
                         ("r-c", "too short for one frame")):
            mine = [ln for ln in warnings if utt in ln]
            assert len(mine) == 1 and why in mine[0], (utt, err)
        assert len(warnings) == 3, err
        assert "Done 1 out of 4 utterances" in err and "3 failed" in err
        assert list(kaldiio.load_scp(str(tmp_path / "o.scp"))) == ["r-a"]
        assert [ln.split()[0] for ln in open(tmp_path / "nf")] == ["r-a"]
        assert [ln.split()[0] for ln in open(tmp_path / "dur")] == ["r-a"]

    # no utterance got features: exit 1 with one ERROR line, and no output files at all
    for name in ("o.ark", "o.scp", "nf", "dur"):
        os.remove(tmp_path / name)
    (tmp_path / "segments").write_text("gone-a gone 0.0 0.5\nr-b r 0.5 2.0\n")
    rc, err = _run(compute_mfcc_feats, opts + [f"scp:{tmp_path}/wav.scp"] + out, capsys)
    errors = [ln for ln in err.splitlines() if ln.startswith("ERROR")]
    assert rc == 1 and len(errors) == 1 and "no utterance produced features (2 failed" in errors[0], err
    assert not set(os.listdir(tmp_path)) & {"o.ark", "o.scp", "nf", "dur"}


# -- steps/make_mfcc.sh ---------------------------------------------------------------------------

N_UTTS = 20


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{ROOT}/utils:{ROOT}/tools/venv/bin:" + env["PATH"]
    env["LC_ALL"] = "C"
    return env


def _data_dir(d, missing=()):
    """N_UTTS short recordings, one utterance each (utterances in ``missing`` point at no file)."""
    d.mkdir(parents=True, exist_ok=True)
    utts = [f"spk{i % 2}-u{i:02d}" for i in range(N_UTTS)]
    for i, u in enumerate(utts):
        _wav(d / f"{u}.wav", 0.2 + 0.01 * i, seed=i)
    (d / "wav.scp").write_text("".join(
        f"{u} {d}/{'no-such-' if u in missing else ''}{u}.wav\n" for u in sorted(utts)))
    (d / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in sorted(utts)))
    (d / "spk2utt").write_text("".join(
        f"{s} {' '.join(u for u in sorted(utts) if u.startswith(s))}\n" for s in ("spk0", "spk1")))
    return utts


def _sh(cmd, cwd, timeout=120):
    return subprocess.run(cmd, shell=True, cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _conf(tmp_path):
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "mfcc.conf").write_text("--sample-frequency=8000\n")


def _feats(d):
    return {u: np.array(m) for u, m in kaldiio.load_scp(str(d / "feats.scp")).items()}


def _leftovers(featdir):
    return [f for f in os.listdir(featdir) if ".new." in f or f.endswith(".tmp")]


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "utils", "run.pl")), reason="needs utils/run.pl")
def test_make_mfcc_warns_on_a_few_failed_utterances_and_fix_data_dir_drops_them(tmp_path):
    d = tmp_path / "data" / "train"
    utts = _data_dir(d, missing={"spk1-u07"})
    _conf(tmp_path)
    r = _sh(f"{ROOT}/steps/make_mfcc.sh --nj 2 data/train exp/mfcc mfcc", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Succeeded creating MFCC features for train" in r.stdout
    assert f"{N_UTTS - 1} != {N_UTTS}" in r.stderr and "utils/fix_data_dir.sh data/train" in r.stderr
    got = _feats(d)
    assert sorted(got) == sorted(set(utts) - {"spk1-u07"})
    assert sorted(ln.split()[0] for ln in open(d / "utt2num_frames")) == sorted(got)
    assert {ln.split()[0]: int(ln.split()[1]) for ln in open(d / "utt2num_frames")} == \
        {u: m.shape[0] for u, m in got.items()}
    # the log says which utterance failed and why, on one line
    logs = "".join(open(tmp_path / "exp" / "mfcc" / f).read() for f in os.listdir(tmp_path / "exp" / "mfcc")
                   if f.endswith(".log"))
    assert [ln for ln in logs.splitlines() if ln.startswith("WARNING")] == [
        ln for ln in logs.splitlines() if "spk1-u07" in ln and "no such audio file" in ln]
    assert not _leftovers(tmp_path / "mfcc")

    # downstream, as with Kaldi: CMVN stats work with the utterance missing; the data dir does not
    # validate until utils/fix_data_dir.sh drops the utterance
    r = _sh(f"{ROOT}/steps/compute_cmvn_stats.sh data/train exp/mfcc mfcc", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(kaldiio.load_scp(str(d / "cmvn.scp"))) == ["spk0", "spk1"]
    r = _sh(f"{ROOT}/utils/validate_data_dir.sh --no-text data/train", tmp_path)
    assert r.returncode != 0
    r = _sh(f"{ROOT}/utils/fix_data_dir.sh data/train && {ROOT}/utils/validate_data_dir.sh --no-text data/train",
            tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    kept = [ln.split()[0] for ln in open(d / "utt2spk")]
    assert kept == sorted(got) and "spk1-u07" not in (d / "spk2utt").read_text()
    assert "spk1-u07" not in (d / "wav.scp").read_text()


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, "utils", "run.pl")), reason="needs utils/run.pl")
def test_make_mfcc_failure_keeps_the_previous_features(tmp_path):
    d = tmp_path / "data" / "train"
    utts = _data_dir(d)
    _conf(tmp_path)
    cmd = f"{ROOT}/steps/make_mfcc.sh --nj 2 --compress false data/train exp/mfcc mfcc"
    r = _sh(cmd, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    before, scp_before = _feats(d), (d / "feats.scp").read_text()
    nf_before = (d / "utt2num_frames").read_text()
    assert len(before) == N_UTTS

    def check_unchanged(r, *messages):
        assert r.returncode == 1, r.stdout + r.stderr
        for m in messages:
            assert m in r.stderr, r.stderr
        assert "is the previous one again" in r.stderr
        assert (d / "feats.scp").read_text() == scp_before
        after = _feats(d)      # the archives are the old ones too
        assert sorted(after) == sorted(before) and all(np.array_equal(after[u], before[u]) for u in before)
        assert (d / "utt2num_frames").read_text() == nf_before
        assert not _leftovers(tmp_path / "mfcc") and not _leftovers(d)
        assert (d / ".backup" / "feats.scp").exists() is False

    # 2 of 20 utterances fail (less than 95% left): an error; the data dir keeps its features
    _data_dir(d, missing={"spk0-u02", "spk1-u13"})
    r = _sh(cmd, tmp_path)
    check_unchanged(r, "less than 95%", "18 of 20", "no such audio file")
    # every utterance of a job fails: the job fails, and so does the script
    _data_dir(d, missing=set(utts))
    r = _sh(cmd, tmp_path)
    check_unchanged(r, "error computing mfcc features for train", "no utterance produced features")
    # the data dir does not validate: nothing is computed
    _data_dir(d)
    with open(d / "utt2spk", "a") as f:
        f.write("zzz-extra zzz\n")
    r = _sh(cmd, tmp_path)
    check_unchanged(r)
    # and a good run afterwards replaces the features, the old feats.scp going to .backup (Kaldi)
    _data_dir(d)
    (tmp_path / "conf" / "mfcc.conf").write_text("--sample-frequency=8000\n--num-ceps=10\n")
    r = _sh(cmd, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (d / ".backup" / "feats.scp").read_text() == scp_before
    new = _feats(d)
    assert sorted(new) == sorted(before) and all(m.shape[1] == 10 for m in new.values())
    assert not _leftovers(tmp_path / "mfcc") and not _leftovers(d)
