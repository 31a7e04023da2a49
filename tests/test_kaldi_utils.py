"""Kaldi compatibility of the data-dir and lang scripts recipes call: combine_data.sh /
fix_data_dir.sh with standard names among the extra files (utt2uniq filled in as Kaldi does),
prepare_lang.sh refusing silence-probability dict dirs, the utils/data/ aliases,
utils/data/get_utt2num_frames.sh, utils/data/get_frame_shift.sh, utils/apply_map.pl and
utils/shuffle_list.pl.

Where Kaldi's own script can run here (perl and bash, with a stand-in for the feat-to-len binary),
it is taken from a Kaldi git mirror at test time ($PYNNET_KALDI_GIT, default
/work/.mirror/kaldi-asr+kaldi/repo) and its output compared with ours; those checks are skipped
when there is no mirror."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_datadir import _corrupt, keys, make_dir, read, write

TOP = Path(__file__).resolve().parents[1]
UTILS = TOP / "utils"
VENV_BIN = TOP / "tools/venv/bin"
KALDI_GIT = os.environ.get("PYNNET_KALDI_GIT", "/work/.mirror/kaldi-asr+kaldi/repo")
# our utils/ is not on PATH: the scripts must find what they need themselves
ENV = dict(os.environ, LC_ALL="C", PATH=f"{VENV_BIN}:{os.environ['PATH']}")


def run(*args, cwd=None, input=None, env=None):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env or ENV, capture_output=True,
                          input=input, text=isinstance(input, str) or input is None)


def one_error_line(r) -> str:
    assert r.returncode != 0, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def kaldi_tree(root: Path, files: list[str]) -> Path:
    """Kaldi's egs/wsj/s5/<file> for each of ``files`` under ``root`` (plus an empty path.sh), or
    skip the test."""
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed")
    if not os.path.isdir(KALDI_GIT) or shutil.which("git") is None:
        pytest.skip(f"no Kaldi git mirror at {KALDI_GIT} (set PYNNET_KALDI_GIT)")
    for name in files:
        r = subprocess.run(["git", "-C", KALDI_GIT, "show", f"HEAD:egs/wsj/s5/{name}"], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot read {name} from {KALDI_GIT}: {r.stderr.decode().strip()}")
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(r.stdout)
        (root / name).chmod(0o755)
    (root / "path.sh").write_text("")
    return root


def kaldi_env(root: Path) -> dict:
    return dict(os.environ, LC_ALL="C", PATH=f"{root / 'bin'}:{root / 'utils'}:{os.environ['PATH']}")


def feat_to_len_shim(root: Path) -> None:
    """Kaldi's `feat-to-len` for Kaldi's scripts: ours, as it is (it takes --print-args and
    "scp:<command> |" rspecifiers as Kaldi's does)."""
    (root / "bin").mkdir(exist_ok=True)
    (root / "bin/feat-to-len").symlink_to(VENV_BIN / "pynnet-feat-to-len")


def write_feats(d: Path, frames: dict[str, int], ark: Path) -> None:
    import kaldiio
    import numpy as np
    with kaldiio.WriteHelper(f"ark,scp:{ark},{d}/feats.scp") as w:
        for u, n in frames.items():
            w(u, np.zeros((n, 2), np.float32))


def data_files(d: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(d.iterdir()) if p.is_file()}


# --- combine_data.sh / fix_data_dir.sh: standard names among the extra files ---------------------

def test_combine_utt2uniq_in_some_sources(tmp_path):
    """Kaldi's combine_data.sh: utt2uniq is combined when any source has it, the others get the
    identity map; `--extra-files utt2uniq` (as Kaldi's speed-perturbation recipes pass it) is the
    same as leaving it out."""
    a = make_dir(tmp_path / "a", spks=("spkA", "spkB"), per_spk=2)
    b = make_dir(tmp_path / "b", spks=("spkC",), per_spk=3)
    write(a / "utt2uniq", [f"{u} orig-{u}" for u in keys(a / "utt2spk")])
    for extra in ("utt2uniq", "", "utt2uniq utt2num_frames utt2dur"):
        dest = tmp_path / f"c{len(extra)}"
        r = run(UTILS / "combine_data.sh", "--extra-files", extra, dest, a, b)
        assert r.returncode == 0, r.stderr
        assert read(dest / "utt2uniq") == [f"{u} orig-{u}" for u in keys(a / "utt2spk")] + \
            [f"{u} {u}" for u in keys(b / "utt2spk")]
        assert f"made utt2uniq for {b}" in r.stderr
        assert len(read(dest / "utt2num_frames")) == 7 and len(read(dest / "utt2dur")) == 7
        assert run(UTILS / "validate_data_dir.sh", dest).returncode == 0
    # no source has one: none is made
    r = run(UTILS / "combine_data.sh", "--extra-files", "utt2uniq", tmp_path / "n", b, make_dir(tmp_path / "e", spks=("spkE",)))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "n/utt2uniq").exists()


def test_combine_matches_kaldi(tmp_path):
    """The same sources through Kaldi's combine_data.sh (with its fix_data_dir.sh) and ours give
    the same files, utt2uniq of a source without one included."""
    k = kaldi_tree(tmp_path / "k", [f"utils/{n}" for n in (
        "combine_data.sh", "fix_data_dir.sh", "parse_options.sh", "utt2spk_to_spk2utt.pl",
        "spk2utt_to_utt2spk.pl", "filter_scp.pl")])
    for root in (k, tmp_path):
        a = make_dir(root / "a", spks=("spkA", "spkB"), per_spk=2)
        b = make_dir(root / "b", spks=("spkC", "spkD"), per_spk=3)
        write(a / "utt2uniq", [f"{u} orig-{u}" for u in keys(a / "utt2spk")])
        write(b / "utt2lang", [f"{u} en" for u in keys(b / "utt2spk")])  # not in every source
        _corrupt(b, "text", lambda L: L[:-1])  # fix_data_dir drops an utterance
    (k / "data").mkdir()
    kr = run("utils/combine_data.sh", "--extra-files", "utt2uniq utt2num_frames", "data/c", "a", "b", cwd=k,
             env=kaldi_env(k))
    assert kr.returncode == 0, kr.stdout + kr.stderr
    r = run(UTILS / "combine_data.sh", "--extra-files", "utt2uniq utt2num_frames", tmp_path / "c",
            tmp_path / "a", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    ours, kaldis = data_files(tmp_path / "c"), data_files(k / "data/c")
    assert set(ours) == set(kaldis) and "utt2uniq" in ours and "utt2lang" not in ours
    assert ours == kaldis


def test_fix_data_dir_standard_extra_files(tmp_path):
    d = make_dir(tmp_path / "d")
    write(d / "utt2uniq", [f"{u} {u.split('-')[0]}-orig" for u in keys(d / "utt2spk")])
    _corrupt(d, "text", lambda L: [ln for ln in L if not ln.startswith("spkB-u2")])
    r = run(UTILS / "fix_data_dir.sh", "--utt-extra-files", "utt2num_frames utt2uniq utt2dur",
            "--spk-extra-files", "spk2gender", d)
    assert r.returncode == 0, r.stderr
    for name in ("utt2num_frames", "utt2uniq", "utt2dur", "text", "feats.scp"):
        assert keys(d / name) == keys(d / "utt2spk") and len(read(d / name)) == 8, name
    assert len(read(d / ".backup/utt2uniq")) == 9
    assert run(UTILS / "validate_data_dir.sh", d).returncode == 0
    # a standard file named with the wrong kind is still refused, in one line, nothing changed
    before = data_files(d)
    line = one_error_line(run(UTILS / "fix_data_dir.sh", "--utt-extra-files", "cmvn.scp", d))
    assert "cannot use 'cmvn.scp' as an extra utt-keyed file: it is a standard file keyed by speaker" in line
    line = one_error_line(run(UTILS / "fix_data_dir.sh", "--spk-extra-files", "utt2dur", d))
    assert "cannot use 'utt2dur' as an extra spk-keyed file: it is a standard file keyed by utterance" in line
    assert data_files(d) == before


def test_combine_extra_file_with_segments_from_utt2dur(tmp_path):
    """A source without segments (made from its utt2dur) keeps its extra files' kinds."""
    a = make_dir(tmp_path / "a", spks=("spkA",), segments=True)
    b = make_dir(tmp_path / "b", spks=("spkB",))
    for d in (a, b):
        write(d / "utt2foo", [f"{u} x" for u in keys(d / "utt2spk")])
    r = run(UTILS / "combine_data.sh", "--extra-files", "utt2foo utt2uniq", tmp_path / "c", a, b)
    assert r.returncode == 0, r.stderr
    assert len(read(tmp_path / "c/utt2foo")) == 6 and len(read(tmp_path / "c/segments")) == 6


# --- prepare_lang.sh: silence-probability dict dirs ------------------------------------------------

def make_dict(d: Path) -> Path:
    d.mkdir(parents=True)
    write(d / "silence_phones.txt", ["SIL", "SPN"])
    write(d / "optional_silence.txt", ["SIL"])
    write(d / "nonsilence_phones.txt", ["a", "b"])
    write(d / "lexicon.txt", ["<unk> SPN", "ab a b", "ba b a"])
    return d


@pytest.mark.parametrize("name,lines", [
    ("lexiconp_silprob.txt", ["<unk> 1.0 0.5 1.0 1.0 SPN", "ab 1.0 0.2 1.1 0.9 a b", "ba 1.0 0.3 1.0 1.0 b a"]),
    ("silprob.txt", ["<s> 0.9", "</s>_s 1.1", "</s>_n 0.8", "overall 0.2"]),
])
def test_prepare_lang_refuses_silprob_dict(tmp_path, name, lines):
    d = make_dict(tmp_path / "data/local/dict")
    write(d / name, lines)
    (tmp_path / "utils").symlink_to(UTILS)
    r = run("utils/prepare_lang.sh", "data/local/dict", "<unk>", "data/local/lang", "data/lang", cwd=tmp_path)
    assert one_error_line(r) == (f"ERROR (pynnet-prepare-lang): data/local/dict/{name}: pronunciation-dependent "
                                 "silence probabilities (Kaldi's dict_dir_add_pronprobs.sh) are not supported")
    assert r.returncode == 1
    assert not (tmp_path / "data/lang").exists() and not (tmp_path / "data/local/lang").exists()
    # the same dict dir without it makes a lang dir
    (d / name).unlink()
    r = run("utils/prepare_lang.sh", "data/local/dict", "<unk>", "data/local/lang", "data/lang", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "data/lang/L.fst").exists()


def test_prepare_lang_phone_symbol_table(tmp_path):
    """--phone-symbol-table: a new dict dir (other phone order, more words) keeps the phone ids of
    the lang dir a model was trained with; a new phone, or other position dependency, is refused."""
    (tmp_path / "utils").symlink_to(UTILS)
    make_dict(tmp_path / "dict_a")
    assert run("utils/prepare_lang.sh", "dict_a", "<unk>", "tmp_a", "lang_a", cwd=tmp_path).returncode == 0
    d = make_dict(tmp_path / "dict_b")
    write(d / "nonsilence_phones.txt", ["b", "a"])                  # would give a_*, b_* other ids
    write(d / "lexicon.txt", ["<unk> SPN", "ab a b", "ba b a", "aa a a", "aab a a b", "aab2 a a b"])
    r = run("utils/prepare_lang.sh", d.name, "<unk>", "tmp_b0", "lang_b0", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "lang_b0/phones.txt").read_text() != (tmp_path / "lang_a/phones.txt").read_text()
    r = run("utils/prepare_lang.sh", "--phone-symbol-table", "lang_a/phones.txt", d.name, "<unk>", "tmp_b", "lang_b",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    a_ids = dict(ln.split() for ln in (tmp_path / "lang_a/phones.txt").read_text().splitlines())
    b_ids = dict(ln.split() for ln in (tmp_path / "lang_b/phones.txt").read_text().splitlines())
    assert {p: i for p, i in b_ids.items() if not p.startswith("#")} == {p: i for p, i in a_ids.items() if not p.startswith("#")}
    # "aab" and "aab2" share a pronunciation: more disambiguation symbols, numbered on from #0
    dis_a, dis_b = ([int(ids[f"#{k}"]) for k in range(sum(p.startswith("#") for p in ids))] for ids in (a_ids, b_ids))
    assert len(dis_b) > len(dis_a) and dis_b == list(range(dis_a[0], dis_a[0] + len(dis_b)))
    ids = [int(i) for i in b_ids.values()]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert (tmp_path / "lang_b/phones/silence.csl").read_text() == (tmp_path / "lang_a/phones/silence.csl").read_text()
    assert run(UTILS / "lang/check_phones_compatible.sh", "lang_a/phones.txt", "lang_b/phones.txt",
               cwd=tmp_path).returncode == 0
    # a phone the table does not have; a table without word positions
    write(d / "nonsilence_phones.txt", ["b", "a", "c"])
    write(d / "lexicon.txt", ["<unk> SPN", "ab a b", "ca c a"])
    r = run("utils/prepare_lang.sh", "--phone-symbol-table", "lang_a/phones.txt", d.name, "<unk>", "tmp_c", "lang_c",
            cwd=tmp_path)
    assert one_error_line(r) == "ERROR (pynnet-prepare-lang): lang_a/phones.txt: phone 'c_B' of the dict dir is not in the phone symbol table"
    assert not (tmp_path / "lang_c").exists()
    write(d / "nonsilence_phones.txt", ["b", "a"])
    write(d / "lexicon.txt", ["<unk> SPN", "ab a b"])
    r = run("utils/prepare_lang.sh", "--position-dependent-phones", "false", "--phone-symbol-table",
            "lang_a/phones.txt", d.name, "<unk>", "tmp_d", "lang_d", cwd=tmp_path)
    assert "the table has position-dependent phones, but --position-dependent-phones is false" in one_error_line(r)


# --- utils/data/ aliases ---------------------------------------------------------------------------

def recipe_dir(tmp_path: Path) -> Path:
    """A recipe dir as egs/synth: utils -> <top>/utils (a symlink), data/ inside."""
    rec = tmp_path / "egs/x"
    rec.mkdir(parents=True)
    (rec / "utils").symlink_to(os.path.relpath(UTILS, rec))
    return rec


def test_utils_data_aliases(tmp_path):
    rec = recipe_dir(tmp_path)
    make_dir(rec / "data/train", spks=("spkA", "spkB", "spkC", "spkD"), per_spk=3)
    make_dir(rec / "data/other", spks=("spkE",), per_spk=2)
    ok = lambda *a: run(*a, cwd=rec)  # noqa: E731

    r = ok("utils/data/validate_data_dir.sh", "data/train")
    assert r.returncode == 0 and "Successfully validated" in r.stderr, r.stderr
    r = ok("utils/data/validate_data_dir.sh", "--no-such-opt", "data/train")
    assert r.returncode == 1 and "utils/validate_data_dir.sh: unknown option --no-such-opt" in r.stderr
    # same utterances as the utils/ script
    for opts in (["--first"], ["--speakers"], []):
        assert ok("utils/data/subset_data_dir.sh", *opts, "data/train", 5, "data/s1").returncode == 0
        assert ok("utils/subset_data_dir.sh", *opts, "data/train", 5, "data/s2").returncode == 0
        assert data_files(rec / "data/s1") == data_files(rec / "data/s2")
    assert ok("utils/data/split_data.sh", "--per-utt", "data/train", 3).returncode == 0
    assert [len(read(rec / f"data/train/split3utt/{k}/utt2spk")) for k in (1, 2, 3)] == [4, 4, 4]
    assert ok("utils/data/split_data.sh", "data/train", 2).returncode == 0
    assert sorted(os.listdir(rec / "data/train/split2")) == ["1", "2"]
    r = ok("utils/data/split_data.sh")
    assert r.returncode == 1 and "Usage: utils/split_data.sh" in r.stderr
    r = ok("utils/data/combine_data.sh", "--extra-files", "utt2uniq", "data/all", "data/train", "data/other")
    assert r.returncode == 0, r.stderr
    assert len(read(rec / "data/all/utt2spk")) == 14
    _corrupt(rec / "data/all", "text", lambda L: L[1:])
    r = ok("utils/data/fix_data_dir.sh", "--utt-extra-files", "utt2num_frames", "data/all")
    assert r.returncode == 0, r.stderr
    assert len(read(rec / "data/all/utt2num_frames")) == 13
    # from anywhere, through the symlink, and with the script's own directory as the cwd
    r = run(rec / "utils/data/validate_data_dir.sh", rec / "data/train", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run("./validate_data_dir.sh", rec / "data/train", cwd=UTILS / "data")
    assert r.returncode == 0, r.stderr


# --- utils/data/get_utt2num_frames.sh --------------------------------------------------------------

FRAMES = {"spkA-u1": 48, "spkA-u2": 97, "spkA-u3": 150, "spkB-u1": 58, "spkB-u2": 107, "spkB-u3": 160}


def test_get_utt2num_frames_from_feats(tmp_path):
    d = make_dir(tmp_path / "d", spks=("spkA", "spkB"), feats=False, extra=False)
    write_feats(d, FRAMES, tmp_path / "raw.ark")
    r = run(UTILS / "data/get_utt2num_frames.sh", "--nj", 4, "--cmd", "run.pl", d)
    assert r.returncode == 0, r.stderr
    assert read(d / "utt2num_frames") == [f"{u} {n}" for u, n in FRAMES.items()]
    assert len(list((d / "log").glob("get_utt2num_frames.*.log"))) == 4
    assert not [p for p in os.listdir(d) if p.startswith(".get_utt2num_frames")]
    assert run(UTILS / "validate_data_dir.sh", "--no-wav", d).returncode == 0
    # there already: left alone
    write(d / "utt2num_frames", ["spkA-u1 1"])
    r = run(UTILS / "data/get_utt2num_frames.sh", d)
    assert r.returncode == 0 and "already present" in r.stderr and read(d / "utt2num_frames") == ["spkA-u1 1"]
    # more jobs than utterances; an unreadable feature file fails naming the log, nothing written
    (d / "utt2num_frames").unlink()
    assert run(UTILS / "data/get_utt2num_frames.sh", "--nj", 20, d).returncode == 0
    assert len(read(d / "utt2num_frames")) == 6
    (d / "utt2num_frames").unlink()
    (tmp_path / "raw.ark").unlink()
    r = run(UTILS / "data/get_utt2num_frames.sh", "--nj", 2, d)
    assert r.returncode == 1 and "get_utt2num_frames.1.log" in r.stderr
    assert not (d / "utt2num_frames").exists()
    assert not [p for p in os.listdir(d) if p.startswith(".get_utt2num_frames")]


def test_get_utt2num_frames_from_utt2dur(tmp_path):
    """Without feats.scp, Kaldi's int((duration - frame_overlap) / frame_shift)."""
    d = make_dir(tmp_path / "d", spks=("spkA", "spkB"), feats=False, extra=False)
    durs = {u: round(n * 0.01 + 0.0173, 4) for u, n in FRAMES.items()}
    write(d / "utt2dur", [f"{u} {v}" for u, v in durs.items()])
    r = run(UTILS / "data/get_utt2num_frames.sh", d)
    assert r.returncode == 0, r.stderr
    assert read(d / "utt2num_frames") == [f"{u} {int((v - 0.015) / 0.01)}" for u, v in durs.items()]
    assert read(d / "utt2num_frames") == [f"{u} {n}" for u, n in FRAMES.items()]
    (d / "utt2num_frames").unlink()
    r = run(UTILS / "data/get_utt2num_frames.sh", "--frame-shift", "0.02", "--frame-overlap", "0", d)
    assert r.returncode == 0, r.stderr
    assert read(d / "utt2num_frames") == [f"{u} {int(v / 0.02)}" for u, v in durs.items()]
    # an utterance shorter than a frame: one line naming it, nothing written
    (d / "utt2num_frames").unlink()
    write(d / "utt2dur", [f"{u} {v if u != 'spkB-u1' else 0.02}" for u, v in durs.items()])
    line = one_error_line(run(UTILS / "data/get_utt2num_frames.sh", d))
    assert line.endswith(f"{d}/utt2dur:4: utterance spkB-u1 of 0.02 seconds is shorter than one frame (0 frames)")
    assert not (d / "utt2num_frames").exists()


def test_get_utt2num_frames_matches_kaldi_from_utt2dur(tmp_path):
    k = kaldi_tree(tmp_path / "k", ["utils/parse_options.sh", "utils/data/get_utt2num_frames.sh",
                                    "utils/data/get_utt2dur.sh"])
    durs = {u: round(n * 0.0123 + 0.0171, 4) for u, n in FRAMES.items()}
    for root in (k, tmp_path):
        d = make_dir(root / "d", spks=("spkA", "spkB"), feats=False, extra=False)
        write(d / "utt2dur", [f"{u} {v}" for u, v in durs.items()])
    opts = ["--frame-shift", "0.0123", "--frame-overlap", "0.011"]
    kr = run("utils/data/get_utt2num_frames.sh", *opts, "d", cwd=k, env=kaldi_env(k))
    assert kr.returncode == 0, kr.stdout + kr.stderr
    r = run(UTILS / "data/get_utt2num_frames.sh", *opts, tmp_path / "d")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "d/utt2num_frames").read_text() == (k / "d/utt2num_frames").read_text()


# --- utils/data/get_frame_shift.sh -----------------------------------------------------------------

def test_get_frame_shift(tmp_path):
    d = make_dir(tmp_path / "d", spks=("spkA", "spkB"), feats=False, extra=False)
    script = UTILS / "data/get_frame_shift.sh"
    line = one_error_line(run(script, d))
    assert line == f"{script}: {d}/feats.scp does not exist"
    write_feats(d, FRAMES, tmp_path / "raw.ark")
    # durations 10 ms a frame + 25 ms: just above 0.01, which Kaldi rounds down to it
    write(d / "utt2dur", [f"{u} {n * 0.01 + 0.015:.3f}" for u, n in FRAMES.items()])
    r = run(script, d)
    assert r.returncode == 0 and r.stdout == "0.01\n", r.stderr
    assert read(d / "frame_shift") == ["0.01"]
    # data/frame_shift is printed as it is
    write(d / "frame_shift", ["0.03"])
    assert run(script, d).stdout == "0.03\n"
    (d / "frame_shift").unlink()
    write(d / "utt2dur", [f"{u} {n * 0.0123456789:.7f}" for u, n in FRAMES.items()])
    r = run(script, d)
    assert r.stdout == "0.0123457\n" and read(d / "frame_shift") == ["0.0123457"], r.stderr
    # no utt2dur and nothing to make it from: 0.01, with a warning
    (d / "frame_shift").unlink()
    (d / "utt2dur").unlink()
    (d / "wav.scp").unlink()
    r = run(script, d)
    assert r.returncode == 0 and r.stdout == "0.01\n" and "assuming a frame shift of 0.01" in r.stderr
    assert not (d / "frame_shift").exists()


@pytest.mark.parametrize("per_frame,offset", [(0.01, 0.015), (0.0123456789, 0.0), (0.03, 0.02), (0.0101, 0.0)])
def test_get_frame_shift_matches_kaldi(tmp_path, per_frame, offset):
    k = kaldi_tree(tmp_path / "k", ["utils/parse_options.sh", "utils/data/get_frame_shift.sh"])
    feat_to_len_shim(k)
    for root in (k, tmp_path):
        d = make_dir(root / "d", spks=("spkA", "spkB"), feats=False, extra=False)
        write_feats(d, FRAMES, root / "raw.ark")
        write(d / "utt2dur", [f"{u} {n * per_frame + offset:.6f}" for u, n in FRAMES.items()])
    kr = run("utils/data/get_frame_shift.sh", "d", cwd=k, env=kaldi_env(k))
    assert kr.returncode == 0, kr.stderr
    r = run(UTILS / "data/get_frame_shift.sh", tmp_path / "d")
    assert r.returncode == 0, r.stderr
    assert r.stdout == kr.stdout
    assert (tmp_path / "d/frame_shift").read_text() == (k / "d/frame_shift").read_text()


# --- utils/apply_map.pl ----------------------------------------------------------------------------

MAP = ["A a1 a2", "B b", "C", "D  d1\td2 ", "B b2", "x-1 X"]
INPUTS = ["A B C", "  A\tB  ", "", "k A D x-1", "A"]


@pytest.mark.parametrize("opts", [[], ["-f", "2-"], ["-f", "1"], ["-f", "2:3"], ["-f", "-2"], ["-f", "3-"],
                                  ["--permissive"], ["--permissive", "-f", "2"], ["-f", "2", "--permissive"]])
def test_apply_map_matches_kaldi(tmp_path, opts):
    k = kaldi_tree(tmp_path, ["utils/apply_map.pl"])
    write(tmp_path / "map", MAP)
    for lines in (INPUTS, ["k A B", "k C D", "x-1 B"], ["A B C D"]):
        text = "".join(ln + "\n" for ln in lines)
        kr = run("perl", k / "utils/apply_map.pl", *opts, tmp_path / "map", input=text)
        r = run(UTILS / "apply_map.pl", *opts, tmp_path / "map", input=text)
        assert (r.returncode == 0) == (kr.returncode == 0), (kr.stderr, r.stderr)
        if kr.returncode == 0:
            assert r.stdout == kr.stdout
            # --permissive: the same warnings (one per field not in the map)
            assert r.stderr.replace(str(UTILS / "apply_map.pl"), "") == kr.stderr, r.stderr
        else:
            # Kaldi has printed the lines before the bad one; we print nothing
            key = kr.stderr.split("undefined key ")[1].split(" in ")[0]
            assert f"apply_map.pl: undefined key {key} in {tmp_path / 'map'}" in one_error_line(r)
            assert r.stdout == ""


def test_apply_map_errors(tmp_path):
    write(tmp_path / "map", ["A a", "B b"])
    m = tmp_path / "map"
    r = run(UTILS / "apply_map.pl", "-f", "2-", m, input="A A B\nB Z A\n")
    assert one_error_line(r) == f"apply_map.pl: undefined key Z in {m} (standard input, line 2)"
    assert r.returncode == 1 and r.stdout == ""
    r = run(UTILS / "apply_map.pl", "--permissive", m, input="A Z\n")
    assert r.returncode == 0 and r.stdout == "a Z\n" and r.stderr == f"apply_map.pl: warning! missing key Z in {m}\n"
    for bad in ("x", "0", "-", "2-x"):
        line = one_error_line(run(UTILS / "apply_map.pl", "-f", bad, m, input="A\n"))
        assert line.startswith(f"apply_map.pl: bad argument to -f option: '{bad}'")
    line = one_error_line(run(UTILS / "apply_map.pl", tmp_path / "nomap", input="A\n"))
    assert line.startswith(f"apply_map.pl: cannot open map file {tmp_path / 'nomap'}")
    write(tmp_path / "map2", ["A a", "  ", "B b"])
    assert one_error_line(run(UTILS / "apply_map.pl", tmp_path / "map2", input="A\n")) == \
        f"apply_map.pl: {tmp_path / 'map2'}:2: empty line"
    r = run(UTILS / "apply_map.pl", input="A\n")
    assert r.returncode == 1 and "Usage: apply_map.pl" in r.stderr and r.stdout == ""


# --- utils/shuffle_list.pl -------------------------------------------------------------------------

def test_shuffle_list_matches_kaldi(tmp_path):
    k = kaldi_tree(tmp_path, ["utils/shuffle_list.pl"])
    lines = [f"spk{i:04d} some words {i * 7 % 13}" for i in range(500)]
    write(tmp_path / "list", lines)
    for opts in ([], ["--srand", "0"], ["--srand", "1"], ["--srand", "777"], ["--srand", "4294967297"]):
        kr = run("perl", k / "utils/shuffle_list.pl", *opts, tmp_path / "list")
        r = run(UTILS / "shuffle_list.pl", *opts, tmp_path / "list")
        assert kr.returncode == 0 and r.returncode == 0, r.stderr
        assert r.stdout == kr.stdout and sorted(r.stdout.splitlines()) == sorted(lines)
        # from standard input, the same
        assert run(UTILS / "shuffle_list.pl", *opts, input=(tmp_path / "list").read_text()).stdout == kr.stdout


def test_shuffle_list_errors_and_seeds(tmp_path):
    write(tmp_path / "list", ["a", "b", "c"])
    # the order utils/subset_data_dir.sh --speakers and subset_data_dir_tr_cv.sh use (seed 0, 777)
    assert run(UTILS / "shuffle_list.pl", tmp_path / "list").stdout == "c\na\nb\n"
    a = run(UTILS / "shuffle_list.pl", "--srand", 777, tmp_path / "list").stdout
    assert sorted(a.splitlines()) == ["a", "b", "c"]
    # a last line without a newline gets one
    assert sorted(run(UTILS / "shuffle_list.pl", input="a\nb\nc").stdout.splitlines(keepends=True)) == \
        ["a\n", "b\n", "c\n"]
    assert one_error_line(run(UTILS / "shuffle_list.pl", "--srand", "x", tmp_path / "list")) == \
        'shuffle_list.pl: bad argument to --srand option: "x" (a non-negative integer)'
    r = run(UTILS / "shuffle_list.pl", "--foo")
    assert r.returncode == 1 and r.stderr.startswith("Usage: shuffle_list.pl") and r.stdout == ""
    line = one_error_line(run(UTILS / "shuffle_list.pl", tmp_path / "nolist"))
    assert line.startswith(f"shuffle_list.pl: cannot open {tmp_path / 'nolist'}")


def test_prepare_lang_share_silence_phones(tmp_path):
    """--share-silence-phones true (Kaldi's): one 'not-shared not-split' root for all silence
    phones, so the monophone and the tree-clustered triphone systems give sil and spn the same
    pdf for each HMM state (they differ only in transitions); the lang dir validates."""
    import sys
    sys.path.insert(0, str(TOP / "tests"))
    from gmm_corpus import make_corpus, make_dict, sh
    from pynnet.hmm.model_io import read_transition_model

    make_corpus(str(tmp_path), num_spk=2, utts_per_spk=6, seed=2)
    for x in ("steps", "utils"):
        (tmp_path / x).symlink_to(TOP / x)
    d = tmp_path / "dict_spn"
    make_dict(str(d))
    (d / "silence_phones.txt").write_text("sil\nspn\n")
    (d / "lexicon.txt").write_text((d / "lexicon.txt").read_text().replace("<unk> sil", "<unk> spn"))
    sh(tmp_path, "utils/prepare_lang.sh", "--share-silence-phones", "true", "dict_spn", "<unk>", "tmp_s", "lang_s")
    roots = (tmp_path / "lang_s/phones/roots.txt").read_text().splitlines()
    assert roots[0].split()[:2] == ["not-shared", "not-split"] and {"sil", "spn", "sil_B", "spn_E"} <= set(roots[0].split())
    assert all(r.startswith("shared split ") for r in roots[1:])
    assert (tmp_path / "lang_s/phones/sets.txt").read_text().splitlines()[0] == " ".join(roots[0].split()[2:])
    assert "SUCCESS" in sh(tmp_path, "utils/validate_lang.pl", "--skip-determinization-check", "lang_s").stdout
    sh(tmp_path, "steps/train_mono.sh", "--nj", "1", "--num-iters", "2", "--totgauss", "60", "data/train", "lang_s",
       "exp/mono")
    sh(tmp_path, "steps/train_deltas.sh", "--num-iters", "2", "40", "200", "data/train", "lang_s", "exp/mono", "exp/tri")
    phones = {p: int(i) for p, i in (ln.split() for ln in (tmp_path / "lang_s/phones.txt").read_text().splitlines())}
    for exp in ("mono", "tri"):
        tm = read_transition_model(str(tmp_path / "exp" / exp / "final.mdl"))
        pdfs: dict[int, dict[int, set[int]]] = {}
        for p, s, fwd, loop in (t.__getstate__() for t in tm.tuples):  # (phone, state, pdf, loop pdf)
            pdfs.setdefault(p, {}).setdefault(s, set()).update((fwd, loop))
        sil_ids = [phones[p] for p in roots[0].split()[2:] if phones[p] in pdfs]
        assert len(sil_ids) >= 2, exp
        assert all(pdfs[i] == pdfs[sil_ids[0]] for i in sil_ids), exp
        # the non-silence phones keep pdfs of their own
        nonsil = {phones[f"a_{x}"] for x in "BE"} & set(pdfs)
        assert all(not (set().union(*pdfs[i].values()) & set().union(*pdfs[sil_ids[0]].values())) for i in nonsil)
    # without the option: sil and spn have pdfs of their own
    sh(tmp_path, "utils/prepare_lang.sh", "dict_spn", "<unk>", "tmp_n", "lang_n")
    assert all(r.startswith("shared split ") for r in (tmp_path / "lang_n/phones/roots.txt").read_text().splitlines())
    assert 'expected "true" or "false" for --share-silence-phones' in one_error_line(
        run(UTILS / "prepare_lang.sh", "--share-silence-phones", "yes", "dict_spn", "<unk>", "tmp_x", "lang_x", cwd=tmp_path))
