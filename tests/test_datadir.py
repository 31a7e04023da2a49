"""Data-dir tools (pynnet.io.datadir and utils/*data*.sh, split_scp.pl, filter_scp.pl, ...) on
generated data dirs, good and bad.  Bad input must give exactly one line `file:line: what`."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pynnet.bin import datadir as B
from pynnet.io import datadir as D
from pynnet.io.errors import PynnetError

TOP = Path(__file__).resolve().parents[1]
UTILS = TOP / "utils"
ENV = dict(os.environ, LC_ALL="C", PATH=f"{UTILS}:{TOP / 'tools/venv/bin'}:{os.environ['PATH']}")


# The programs behind the scripts; most checks call them in-process (a python start-up per call
# would make this file slow on a shared machine), test_scripts_end_to_end runs the real scripts.
INPROC = {
    "validate_data_dir.sh": ("pynnet-validate-data-dir", B.validate_main),
    "fix_data_dir.sh": ("pynnet-fix-data-dir", B.fix_main),
    "subset_data_dir.sh": ("pynnet-subset-data-dir", B.subset_main),
    "split_data.sh": ("pynnet-split-data", B.split_data_main),
    "combine_data.sh": ("pynnet-combine-data", B.combine_main),
    "copy_data_dir.sh": ("pynnet-copy-data-dir", B.copy_main),
    "split_scp.pl": ("pynnet-split-scp", B.split_scp_main),
    "filter_scp.pl": ("pynnet-filter-scp", B.filter_scp_main),
    "utt2spk_to_spk2utt.pl": ("pynnet-utt2spk-to-spk2utt", B.utt2spk_to_spk2utt_main),
}


@dataclasses.dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def sh(*args, cwd=None, input=None, real=False):
    """Run a utils script: in-process through its program unless ``real`` or stdin is needed."""
    name = Path(str(args[0])).name
    if not real and input is None and cwd is None and name in INPROC:
        prog, main = INPROC[name]
        out, err = io.StringIO(), io.StringIO()
        argv0 = sys.argv
        sys.argv = [prog]
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main([str(a) for a in args[1:]])
        finally:
            sys.argv = argv0
        return Result(rc, out.getvalue(), err.getvalue())
    return subprocess.run([str(a) for a in args], cwd=cwd, env=ENV, capture_output=True, text=True, input=input)


def write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def make_dir(path: Path, spks=("spkA", "spkB", "spkC"), per_spk=3, feats=True, cmvn=True,
             segments=False, extra=True) -> Path:
    """A valid Kaldi data dir: speaker-prefixed utterance ids, utterance k of a speaker lasting
    k*0.5 + (speaker index)*0.1 seconds."""
    path.mkdir(parents=True, exist_ok=True)
    utts = [(f"{s}-u{k}", s, (k * 0.5 + i * 0.1)) for i, s in enumerate(spks) for k in range(1, per_spk + 1)]
    utts.sort(key=lambda x: x[0].encode())
    write(path / "utt2spk", [f"{u} {s}" for u, s, _ in utts])
    write(path / "spk2utt", [f"{s} " + " ".join(u for u, t, _ in utts if t == s) for s in sorted(spks)])
    write(path / "text", [f"{u} HELLO WORLD {u.upper()}" for u, _, _ in utts])
    if segments:
        # one recording per speaker, utterances back to back
        write(path / "wav.scp", [f"{s}-rec /corpus/{s}.wav" for s in sorted(spks)])
        segs, t = [], {}
        for u, s, d in utts:
            st = t.get(s, 0.0)
            segs.append(f"{u} {s}-rec {st:.2f} {st + d:.2f}")
            t[s] = st + d
        write(path / "segments", segs)
        write(path / "reco2file_and_channel", [f"{s}-rec {s} A" for s in sorted(spks)])
    else:
        write(path / "wav.scp", [f"{u} sox /corpus/{u}.flac -t wav - |" for u, _, _ in utts])
    if feats:
        write(path / "feats.scp", [f"{u} /feats/raw.1.ark:{10 * i + 7}" for i, (u, _, _) in enumerate(utts)])
    if cmvn:
        write(path / "cmvn.scp", [f"{s} /feats/cmvn.ark:{i}" for i, s in enumerate(sorted(spks))])
    if extra:
        write(path / "utt2dur", [f"{u} {d:.2f}" for u, _, d in utts])
        write(path / "utt2num_frames", [f"{u} {int(d * 100) - 2}" for u, _, d in utts])
        write(path / "spk2gender", [f"{s} {'mf'[i % 2]}" for i, s in enumerate(sorted(spks))])
    return path


def read(p: Path) -> list[str]:
    return p.read_text().splitlines()


def keys(p: Path) -> list[str]:
    return [ln.split()[0] for ln in read(p)]


def error_line(r) -> str:
    """The single error line of a failed run (and check there is exactly one)."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR")]
    assert len(errs) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return errs[0]


# --- validate ---------------------------------------------------------------------------------

def test_validate_good_dirs(tmp_path):
    d = make_dir(tmp_path / "d")
    r = sh(UTILS / "validate_data_dir.sh", d)
    assert r.returncode == 0, r.stderr
    assert f"Successfully validated data-directory {d}" in r.stderr
    s = make_dir(tmp_path / "s", segments=True)
    assert sh(UTILS / "validate_data_dir.sh", s).returncode == 0
    dd = D.load_data_dir(s)
    assert dd.segments["spkA-u2"] == D.Segment("spkA-rec", 0.5, 1.5)
    assert dd.recordings == ["spkA-rec", "spkB-rec", "spkC-rec"]
    assert dd.spk2utt["spkB"] == ["spkB-u1", "spkB-u2", "spkB-u3"]
    assert dd.utt2num_frames["spkA-u1"] == 48
    assert dd.utt2dur["spkC-u1"] == pytest.approx(0.7)


def test_validate_optional_files_and_warnings(tmp_path):
    d = make_dir(tmp_path / "d", spks=("s1",), feats=False, cmvn=False)
    r = sh(UTILS / "validate_data_dir.sh", d)
    assert error_line(r) == f"ERROR (pynnet-validate-data-dir): {d}/feats.scp: no such file (if this is by design, specify --no-feats)"
    r = sh(UTILS / "validate_data_dir.sh", "--no-feats", d)
    assert r.returncode == 0
    assert "you have only one speaker" in r.stderr
    (d / "text").unlink()
    assert "specify --no-text" in error_line(sh(UTILS / "validate_data_dir.sh", "--no-feats", d))
    assert sh(UTILS / "validate_data_dir.sh", "--no-feats", "--no-text", d).returncode == 0
    # speaker-id not a prefix of the utterance-id: a warning only, as in Kaldi
    e = tmp_path / "e"
    e.mkdir()
    write(e / "utt2spk", ["a1 x", "a2 x", "b1 y"])
    write(e / "spk2utt", ["x a1 a2", "y b1"])
    r = sh(UTILS / "validate_data_dir.sh", "--no-feats", "--no-text", "--no-wav", e)
    assert r.returncode == 0, r.stderr
    assert "3 of 3 utterance-ids do not start with their speaker-id" in r.stderr


def test_validate_non_printable_text(tmp_path):
    # as Kaldi's: text with characters outside [:print:] and [:space:] is refused unless --non-print;
    # Unicode spaces (no-break, ideographic) are spaces, not errors
    d = make_dir(tmp_path / "d")
    _corrupt(d, "text", lambda L: L[:1] + ["spkA-u2 HELLO\u00a0THERE\u3000X"] + L[2:])
    assert sh(UTILS / "validate_data_dir.sh", d).returncode == 0
    _corrupt(d, "text", lambda L: L[:2] + ["spkA-u3 HEL\x01LO"] + L[3:])
    assert error_line(sh(UTILS / "validate_data_dir.sh", d)) == (
        f"ERROR (pynnet-validate-data-dir): {d}/text:3: text contains 1 lines with non-printable characters "
        "(e.g. utterance 'spkA-u3'; --non-print allows them)")
    r = sh(UTILS / "validate_data_dir.sh", "--non-print", d)
    assert r.returncode == 0, r.stderr


def test_validate_usage(tmp_path):
    r = sh(UTILS / "validate_data_dir.sh", real=True)
    assert r.returncode == 1 and "Usage:" in r.stderr
    r = sh(UTILS / "validate_data_dir.sh", "--bogus", tmp_path, real=True)
    assert r.returncode == 1 and "unknown option --bogus" in r.stderr
    r = sh(UTILS / "validate_data_dir.sh", tmp_path / "nope", real=True)
    assert r.returncode == 1 and "no such directory" in r.stderr


def _corrupt(d: Path, name: str, fn) -> None:
    lines = read(d / name) if (d / name).exists() else []
    write(d / name, fn(lines))


BAD_INPUTS = [
    # (file to corrupt, how, expected "file:line: what" suffix after the dir path)
    ("utt2spk", lambda L: [L[1], L[0]] + L[2:], "utt2spk:2: not sorted (LC_ALL=C): 'spkA-u1' after 'spkA-u2' (run utils/fix_data_dir.sh)"),
    ("text", lambda L: L[:2] + [L[1]] + L[2:], "text:3: duplicate key 'spkA-u2' (first on line 2)"),
    ("utt2spk", lambda L: L[:3] + ["spkB-u1"] + L[4:], "utt2spk:4: expected at least 2 fields, got 1: 'spkB-u1'"),
    ("utt2spk", lambda L: L[:3] + ["spkB-u1 spkB extra"] + L[4:], "utt2spk:4: expected at most 2 fields, got 3: 'spkB-u1 spkB extra'"),
    ("text", lambda L: [], "text: file is empty"),
    ("text", lambda L: L[:4] + [""] + L[4:], "text:5: empty line"),
    ("spk2utt", lambda L: [L[0], "spkB spkB-u1 spkB-u2", L[2]], "utt2spk:6: utterance 'spkB-u3' of speaker 'spkB' is missing from spk2utt"),
    ("spk2utt", lambda L: [L[0], "spkB spkB-u1 spkB-u2 spkB-u3 spkC-u1", L[2]], "spk2utt:2: utterance 'spkC-u1' is listed under speaker 'spkB' but utt2spk says 'spkC'"),
    ("spk2utt", lambda L: L[:2], "utt2spk:7: utterance 'spkC-u1' of speaker 'spkC' is missing from spk2utt"),
    ("text", lambda L: L[:3] + ["spkA-u4 EXTRA"] + L[3:], "text:4: utterance 'spkA-u4' is not in utt2spk"),
    ("text", lambda L: L[:8], "utt2spk:9: utterance 'spkC-u3' has no entry in text"),
    ("feats.scp", lambda L: L[1:], "utt2spk:1: utterance 'spkA-u1' has no entry in feats.scp"),
    ("wav.scp", lambda L: L[:4] + L[5:], "utt2spk:5: utterance 'spkB-u2' has no entry in wav.scp"),
    ("cmvn.scp", lambda L: L[:2], "spk2utt:3: speaker 'spkC' has no entry in cmvn.scp"),
    ("cmvn.scp", lambda L: L + ["spkD /x.ark:1"], "cmvn.scp:4: speaker 'spkD' is not in spk2utt"),
    ("spk2gender", lambda L: ["spkA male"] + L[1:], "spk2gender:1: gender must be 'm' or 'f', got 'male'"),
    ("utt2dur", lambda L: L[:2] + ["spkA-u3 0"] + L[3:], "utt2dur:3: expected a positive duration, got '0'"),
    ("utt2num_frames", lambda L: ["spkA-u1 12.5"] + L[1:], "utt2num_frames:1: expected a positive integer, got '12.5'"),
    # digits Python's int()/float() take or choke on but Kaldi does not read: one line, no traceback
    ("utt2num_frames", lambda L: L[:1] + ["spkA-u2 \u00b2"] + L[2:], "utt2num_frames:2: expected a positive integer, got '\u00b2'"),
    ("utt2num_frames", lambda L: L[:1] + ["spkA-u2 \u0661\u0662"] + L[2:], "utt2num_frames:2: expected a positive integer, got '\u0661\u0662'"),
    ("utt2dur", lambda L: L[:2] + ["spkA-u3 1_5"] + L[3:], "utt2dur:3: expected a number, got '1_5'"),
    ("text", lambda L: ["spkA-u1 <s> HELLO"] + L[1:], "text:1: transcript contains the illegal symbol <s>"),
    ("wav.scp", lambda L: ["spkA-u1 ~/a.wav"] + L[1:], "wav.scp:1: do not use tilde (~) in wav.scp: fopen does not expand it"),
]


@pytest.mark.parametrize("name,how,expected", BAD_INPUTS, ids=[e[2].split(":")[0] + ":" + e[2].split(":")[1] + "-" + str(i) for i, e in enumerate(BAD_INPUTS)])
def test_validate_bad_inputs(tmp_path, name, how, expected):
    d = make_dir(tmp_path / "d")
    _corrupt(d, name, how)
    assert error_line(sh(UTILS / "validate_data_dir.sh", d)) == f"ERROR (pynnet-validate-data-dir): {d}/{expected}"


def test_validate_speaker_sort(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    # sorted by utterance but not by speaker: splitting by speaker would break
    write(d / "utt2spk", ["a1 s2", "a2 s1", "a3 s2"])
    write(d / "spk2utt", ["s1 a2", "s2 a1 a3"])
    r = sh(UTILS / "validate_data_dir.sh", "--no-feats", "--no-text", "--no-wav", d)
    assert error_line(r).startswith(f"ERROR (pynnet-validate-data-dir): {d}/utt2spk:2: utt2spk is not sorted when sorted on speaker-id")
    assert sh(UTILS / "validate_data_dir.sh", "--no-feats", "--no-text", "--no-wav", "--no-spk-sort", d).returncode == 0


BAD_SEGMENTS = [
    (lambda L: L[:1] + ["spkA-u2 spkA-rec 1.5 0.5"] + L[2:], "segments:2: end time 0.5 is not after start time 1.5"),
    (lambda L: L[:1] + ["spkA-u2 spkA-rec -0.1 0.5"] + L[2:], "segments:2: negative start time -0.1"),
    (lambda L: L[:1] + ["spkA-u2 spkA-rec x 0.5"] + L[2:], "segments:2: start and end times must be numbers, got 'x 0.5'"),
    (lambda L: L[:1] + ["spkA-u2 spkA-rec 0.5"] + L[2:], "segments:2: expected at least 4 fields, got 3: 'spkA-u2 spkA-rec 0.5'"),
    (lambda L: L[:4] + ["spkB-u2 spkZ-rec 0.6 1.6"] + L[5:], "segments:5: recording 'spkZ-rec' is not in wav.scp"),
]


@pytest.mark.parametrize("how,expected", BAD_SEGMENTS)
def test_validate_bad_segments(tmp_path, how, expected):
    d = make_dir(tmp_path / "d", segments=True)
    _corrupt(d, "segments", how)
    assert error_line(sh(UTILS / "validate_data_dir.sh", d)) == f"ERROR (pynnet-validate-data-dir): {d}/{expected}"


def test_validate_segments_cross_checks(tmp_path):
    d = make_dir(tmp_path / "d", segments=True)
    _corrupt(d, "wav.scp", lambda L: L + ["spkD-rec /corpus/spkD.wav"])
    assert error_line(sh(UTILS / "validate_data_dir.sh", d)).endswith(f"{d}/wav.scp:4: recording 'spkD-rec' has no segments")
    d = make_dir(tmp_path / "e", segments=True)
    _corrupt(d, "reco2file_and_channel", lambda L: L[:2])
    assert error_line(sh(UTILS / "validate_data_dir.sh", d)).endswith(
        f"{d}/segments:7: recording 'spkC-rec' has no entry in reco2file_and_channel")
    _corrupt(d, "reco2file_and_channel", lambda L: L + ["spkC-rec spkC X"])
    assert error_line(sh(UTILS / "validate_data_dir.sh", d)).endswith(
        f"{d}/reco2file_and_channel:3: channel must be A or B, got 'X'")


# --- fix --------------------------------------------------------------------------------------

def test_fix_data_dir(tmp_path):
    d = make_dir(tmp_path / "d")
    _corrupt(d, "text", lambda L: [ln for ln in L if not ln.startswith("spkA-u2")][::-1])  # unsorted, one missing
    _corrupt(d, "feats.scp", lambda L: [ln for ln in L if not ln.startswith("spkB-u3")])
    _corrupt(d, "cmvn.scp", lambda L: [ln for ln in L if not ln.startswith("spkC")])  # drops all of spkC
    _corrupt(d, "utt2dur", lambda L: L + [L[0]])  # duplicate key: dropped with a warning
    before = {p.name: p.read_text() for p in d.iterdir() if p.is_file()}
    r = sh(UTILS / "fix_data_dir.sh", d)
    assert r.returncode == 0, r.stderr
    assert "kept 4 utterances out of 9" in r.stderr
    assert "dropping duplicate key 'spkA-u1'" in r.stderr
    assert keys(d / "utt2spk") == ["spkA-u1", "spkA-u3", "spkB-u1", "spkB-u2"]
    for f in ("text", "feats.scp", "wav.scp", "utt2dur", "utt2num_frames"):
        assert keys(d / f) == keys(d / "utt2spk"), f
    assert read(d / "spk2utt") == ["spkA spkA-u1 spkA-u3", "spkB spkB-u1 spkB-u2"]
    assert keys(d / "cmvn.scp") == keys(d / "spk2gender") == ["spkA", "spkB"]
    assert {p.name: p.read_text() for p in (d / ".backup").iterdir()} == before
    assert sh(UTILS / "validate_data_dir.sh", d).returncode == 0


def test_fix_data_dir_segments_and_errors(tmp_path):
    d = make_dir(tmp_path / "d", segments=True)
    _corrupt(d, "wav.scp", lambda L: L[1:])  # spkA-rec gone: its segments and utterances go too
    r = sh(UTILS / "fix_data_dir.sh", d)
    assert r.returncode == 0, r.stderr
    assert keys(d / "reco2file_and_channel") == ["spkB-rec", "spkC-rec"]
    assert not any(k.startswith("spkA") for k in keys(d / "utt2spk") + keys(d / "segments") + keys(d / "cmvn.scp"))
    assert sh(UTILS / "validate_data_dir.sh", d).returncode == 0
    e = make_dir(tmp_path / "e")
    write(e / "text", ["other-utt HI"])
    assert error_line(sh(UTILS / "fix_data_dir.sh", e)).startswith(
        f"ERROR (pynnet-fix-data-dir): {e}: no utterances remained")
    # malformed lines are not silently dropped
    f = make_dir(tmp_path / "f")
    _corrupt(f, "utt2spk", lambda L: L[:2] + ["spkA-u3"] + L[3:])
    assert error_line(sh(UTILS / "fix_data_dir.sh", f)) == \
        f"ERROR (pynnet-fix-data-dir): {f}/utt2spk:3: expected at least 2 fields, got 1: 'spkA-u3'"
    assert sh(UTILS / "fix_data_dir.sh", real=True).returncode == 1


def test_fix_keeps_utterances_whose_recording_lacks_reco2dur(tmp_path):
    # Kaldi decides utterances from feats.scp, text, segments, utt2lang and wav.scp only;
    # reco2dur and reco2file_and_channel are filtered to what is kept, never shrink it.
    d = make_dir(tmp_path / "d", spks=("a",), feats=False, cmvn=False, extra=False)
    write(d / "reco2dur", ["a-u1 0.50"])
    write(d / "reco2file_and_channel", ["a-u2 a-u2 A", "zz-gone zz A"])
    r = sh(UTILS / "fix_data_dir.sh", d)
    assert r.returncode == 0, r.stderr
    assert "kept 3 utterances out of 3" in r.stderr
    assert keys(d / "utt2spk") == keys(d / "wav.scp") == ["a-u1", "a-u2", "a-u3"]
    assert keys(d / "reco2dur") == ["a-u1"] and keys(d / "reco2file_and_channel") == ["a-u2"]
    assert "reco2dur lacks 2 of the kept utterances" in r.stderr
    # with segments: recordings come from segments and wav.scp
    e = make_dir(tmp_path / "e", segments=True)
    _corrupt(e, "reco2file_and_channel", lambda L: L[1:])
    write(e / "reco2dur", ["spkB-rec 3.0", "spkC-rec 3.3", "spkD-rec 1.0"])
    r = sh(UTILS / "fix_data_dir.sh", e)
    assert r.returncode == 0, r.stderr
    assert "kept 9 utterances out of 9" in r.stderr
    assert keys(e / "wav.scp") == ["spkA-rec", "spkB-rec", "spkC-rec"]
    assert keys(e / "reco2dur") == keys(e / "reco2file_and_channel") == ["spkB-rec", "spkC-rec"]
    assert "reco2file_and_channel lacks 1 of the kept recordings" in r.stderr


def test_fix_derives_utt2spk_from_spk2utt(tmp_path):
    d = make_dir(tmp_path / "d")
    (d / "utt2spk").unlink()
    assert sh(UTILS / "fix_data_dir.sh", d).returncode == 0
    assert len(read(d / "utt2spk")) == 9


# --- subset -----------------------------------------------------------------------------------

def test_subset_modes(tmp_path):
    d = make_dir(tmp_path / "d")
    all_utts = keys(d / "utt2spk")

    def subset(*args):
        dest = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
        r = sh(UTILS / "subset_data_dir.sh", *args[:-1], args[-1] if args[-1] != "DEST" else dest)
        assert r.returncode == 0, r.stderr
        assert sh(UTILS / "validate_data_dir.sh", dest).returncode == 0
        return dest, keys(dest / "utt2spk")

    assert subset("--first", d, 4, "DEST")[1] == all_utts[:4]
    assert subset("--last", d, 2, "DEST")[1] == all_utts[-2:]
    # by utt2num_frames: k*50 + i*10 - 2 -> u1 of A, B, C then u2 of A
    s, u = subset("--shortest", d, 4, "DEST")
    assert u == ["spkA-u1", "spkA-u2", "spkB-u1", "spkC-u1"]
    assert keys(s / "cmvn.scp") == ["spkA", "spkB", "spkC"]
    # Kaldi's subset_scp.pl on 9 lines, 3 needed: [0,4) needs 1 -> [2,4) -> line 3; [4,9) needs 2
    # -> [4,6) needs 1 -> line 5, [6,9) needs 1 -> [7,9) -> line 8 (0-based)
    assert subset(d, 3, "DEST")[1] == ["spkB-u1", "spkB-u3", "spkC-u3"]
    r1 = subset("--random", "--seed", 1, d, 4, "DEST")[1]
    assert r1 == subset("--random", "--seed", 1, d, 4, "DEST")[1]
    assert len(r1) == 4 and set(r1) <= set(all_utts)
    assert any(subset("--random", "--seed", s, d, 4, "DEST")[1] != r1 for s in (2, 3, 4))
    assert subset("--per-spk", d, 1, "DEST")[1] == ["spkA-u1", "spkB-u1", "spkC-u1"]
    # shuffle_list.pl (srand 0) keys spkA 0.1708.., spkB 0.7499.., spkC 0.0963.. -> C, A, B; C's 3
    # utterances are fewer than 4, so A is taken too
    sp = subset("--speakers", d, 4, "DEST")[1]
    assert sp == ["spkA-u1", "spkA-u2", "spkA-u3", "spkC-u1", "spkC-u2", "spkC-u3"]
    write(tmp_path / "ulist", ["spkC-u2", "spkA-u1", "nosuch"])
    s, u = subset("--utt-list", tmp_path / "ulist", d, "DEST")
    assert u == ["spkA-u1", "spkC-u2"]
    assert keys(s / "spk2gender") == ["spkA", "spkC"]
    assert subset("--utt-list", d, tmp_path / "ulist", "DEST")[1] == ["spkA-u1", "spkC-u2"]  # src-first order
    write(tmp_path / "slist", ["spkB"])
    assert subset("--spk-list", tmp_path / "slist", d, "DEST")[1] == ["spkB-u1", "spkB-u2", "spkB-u3"]


def test_subset_shortest_by_segments_and_utt2dur(tmp_path):
    # no utt2num_frames and no feats.scp (with feats.scp Kaldi's frame counts are used)
    d = make_dir(tmp_path / "d", segments=True, extra=False, feats=False, cmvn=False)
    r = sh(UTILS / "subset_data_dir.sh", "--shortest", d, 2, tmp_path / "s")
    assert r.returncode == 0, r.stderr
    assert keys(tmp_path / "s/utt2spk") == ["spkA-u1", "spkB-u1"]
    assert keys(tmp_path / "s/wav.scp") == ["spkA-rec", "spkB-rec"]
    assert sh(UTILS / "validate_data_dir.sh", "--no-feats", tmp_path / "s").returncode == 0
    e = make_dir(tmp_path / "e", extra=False, feats=False, cmvn=False)
    assert "need utt2num_frames, feats.scp, utt2dur or segments" in error_line(
        sh(UTILS / "subset_data_dir.sh", "--shortest", e, 2, tmp_path / "t"))


def test_subset_bad_usage(tmp_path):
    d = make_dir(tmp_path / "d")
    assert sh(UTILS / "subset_data_dir.sh", d, real=True).returncode == 1
    assert error_line(sh(UTILS / "subset_data_dir.sh", "--first", d, 10, tmp_path / "x")) == \
        f"ERROR (pynnet-subset-data-dir): {d}/utt2spk: cannot subset to 10 utterances: the data dir has only 9"
    assert "must be a positive integer, got 'many'" in error_line(sh(UTILS / "subset_data_dir.sh", d, "many", tmp_path / "x"))
    write(tmp_path / "ulist", ["spkA-u1", "spkA-u1"])
    assert error_line(sh(UTILS / "subset_data_dir.sh", "--utt-list", tmp_path / "ulist", d, tmp_path / "x")) == \
        f"ERROR (pynnet-subset-data-dir): {tmp_path}/ulist:2: duplicate id 'spkA-u1' (first on line 1)"
    assert not (tmp_path / "x").exists()


# --- split ------------------------------------------------------------------------------------

def test_split_data_by_speaker(tmp_path):
    d = make_dir(tmp_path / "d", spks=("s1", "s2", "s3", "s4", "s5"), per_spk=2)
    _corrupt(d, "utt2spk", lambda L: L)
    r = sh(UTILS / "split_data.sh", d, 3)
    assert r.returncode == 0, r.stderr
    parts = [d / "split3" / str(k) for k in (1, 2, 3)]
    spk_sets = [set(keys(p / "spk2utt")) for p in parts]
    assert set().union(*spk_sets) == {"s1", "s2", "s3", "s4", "s5"}
    assert sum(len(s) for s in spk_sets) == 5  # no speaker in two parts
    assert sorted(len(read(p / "utt2spk")) for p in parts) == [2, 4, 4]
    assert [u for p in parts for u in keys(p / "utt2spk")] == keys(d / "utt2spk")
    for p in parts:
        assert sh(UTILS / "validate_data_dir.sh", p).returncode == 0
        assert keys(p / "cmvn.scp") == keys(p / "spk2utt")
    # re-splitting replaces the old split
    assert sh(UTILS / "split_data.sh", d, 3).returncode == 0
    assert sorted(os.listdir(d / "split3")) == ["1", "2", "3"]


def test_split_data_per_utt_and_segments(tmp_path):
    d = make_dir(tmp_path / "d", segments=True, spks=("a", "b"), per_spk=3)
    assert sh(UTILS / "split_data.sh", "--per-utt", d, 4).returncode == 0
    sizes = [len(read(d / "split4utt" / str(k) / "utt2spk")) for k in range(1, 5)]
    assert sizes == [2, 2, 1, 1]
    # part 2 = a-u3, b-u1: both recordings and both speakers
    p2 = d / "split4utt/2"
    assert keys(p2 / "wav.scp") == ["a-rec", "b-rec"] and keys(p2 / "spk2utt") == ["a", "b"]
    assert keys(d / "split4utt/1/wav.scp") == ["a-rec"]
    assert error_line(sh(UTILS / "split_data.sh", d, 3)) == \
        f"ERROR (pynnet-split-data): {d}/spk2utt: cannot split into 3 parts: there are only 2 speakers (use --per-utt, or fewer jobs)"
    assert error_line(sh(UTILS / "split_data.sh", d, 0)) == \
        "ERROR (pynnet-split-data): <num-to-split> must be a positive integer, got '0'"
    assert sh(UTILS / "split_data.sh", d, real=True).returncode == 1


def test_split_counts_balance():
    assert D.split_counts([1] * 10, 3) == [4, 3, 3]
    assert D.split_counts([5, 1, 1, 1, 1, 1], 2) == [1, 5]
    assert sum(D.split_counts([3, 1, 4, 1, 5, 9, 2, 6], 4)) == 8
    assert all(c >= 1 for c in D.split_counts([100, 1, 1], 3))


# --- combine, copy ----------------------------------------------------------------------------

def test_combine_and_copy(tmp_path):
    a = make_dir(tmp_path / "a", spks=("a1", "a2"))
    r = sh(UTILS / "copy_data_dir.sh", "--utt-prefix", "sp0.9-", "--spk-prefix", "sp0.9-", a, tmp_path / "b")
    assert r.returncode == 0, r.stderr
    b = tmp_path / "b"
    assert keys(b / "utt2spk")[0] == "sp0.9-a1-u1" and read(b / "utt2spk")[0] == "sp0.9-a1-u1 sp0.9-a1"
    assert keys(b / "cmvn.scp") == ["sp0.9-a1", "sp0.9-a2"] and keys(b / "wav.scp")[0] == "sp0.9-a1-u1"
    (b / "spk2gender").unlink()  # not in every source: not combined
    r = sh(UTILS / "combine_data.sh", tmp_path / "c", a, b)
    assert r.returncode == 0, r.stderr
    assert "not combining spk2gender" in r.stderr
    c = tmp_path / "c"
    assert len(read(c / "utt2spk")) == 12 and not (c / "spk2gender").exists()
    assert sh(UTILS / "validate_data_dir.sh", c).returncode == 0
    assert error_line(sh(UTILS / "combine_data.sh", tmp_path / "x", a, a)) == \
        f"ERROR (pynnet-combine-data): {a}/utt2spk:1: utterance 'a1-u1' is also in {a}"
    assert sh(UTILS / "combine_data.sh", tmp_path / "x", real=True).returncode == 1


def test_combine_segments_with_plain(tmp_path):
    s = make_dir(tmp_path / "s", segments=True, spks=("r1",))
    p = make_dir(tmp_path / "p", spks=("r2",))
    r = sh(UTILS / "combine_data.sh", tmp_path / "c", s, p)
    assert r.returncode == 0, r.stderr
    c = tmp_path / "c"
    assert "r2-u2 r2-u2 0 1.00" in read(c / "segments")
    assert keys(c / "wav.scp") == ["r1-rec", "r2-u1", "r2-u2", "r2-u3"]
    assert sh(UTILS / "validate_data_dir.sh", c).returncode == 0
    (p / "utt2dur").unlink()
    assert "has no segments file and no utt2dur" in error_line(sh(UTILS / "combine_data.sh", tmp_path / "x", s, p))


def test_copy_keeps_recordings_with_segments(tmp_path):
    s = make_dir(tmp_path / "s", segments=True)
    r = sh(UTILS / "copy_data_dir.sh", "--utt-suffix", "-x", s, tmp_path / "t", real=True)  # a value like an option
    assert r.returncode == 0, r.stderr
    assert read(tmp_path / "t/wav.scp") == read(s / "wav.scp")
    assert read(tmp_path / "t/segments")[0] == "spkA-u1-x spkA-rec 0.00 0.50"
    assert sh(UTILS / "copy_data_dir.sh", "--bogus", "1", s, tmp_path / "u", real=True).returncode == 1
    assert sh(UTILS / "copy_data_dir.sh", s, real=True).returncode == 1


# --- scp tools --------------------------------------------------------------------------------

def test_utt2spk_spk2utt_roundtrip(tmp_path):
    d = make_dir(tmp_path / "d")
    r = sh(UTILS / "utt2spk_to_spk2utt.pl", d / "utt2spk")
    assert r.returncode == 0 and r.stdout.splitlines() == read(d / "spk2utt")
    r = sh(UTILS / "spk2utt_to_utt2spk.pl", input=(d / "spk2utt").read_text())
    assert r.stdout.splitlines() == read(d / "utt2spk")
    write(tmp_path / "bad", ["u1 s1", "u2"])
    assert error_line(sh(UTILS / "utt2spk_to_spk2utt.pl", tmp_path / "bad")) == \
        f"ERROR (pynnet-utt2spk-to-spk2utt): {tmp_path}/bad:2: expected at least 2 fields, got 1: 'u2'"


def test_filter_scp(tmp_path):
    d = make_dir(tmp_path / "d")
    write(tmp_path / "ids", ["spkB-u2 whatever", "spkA-u1", "zzz"])
    r = sh(UTILS / "filter_scp.pl", tmp_path / "ids", d / "text")
    assert r.stdout.splitlines() == ["spkA-u1 HELLO WORLD SPKA-U1", "spkB-u2 HELLO WORLD SPKB-U2"]
    r = sh(UTILS / "filter_scp.pl", "--exclude", tmp_path / "ids", d / "text")
    assert len(r.stdout.splitlines()) == 7 and "spkB-u2" not in r.stdout
    write(tmp_path / "spks", ["spkC"])
    r = sh(UTILS / "filter_scp.pl", "-f", 2, tmp_path / "spks", input=(d / "utt2spk").read_text())
    assert r.stdout.splitlines() == ["spkC-u1 spkC", "spkC-u2 spkC", "spkC-u3 spkC"]
    assert error_line(sh(UTILS / "filter_scp.pl", "-f", 3, tmp_path / "spks", d / "utt2spk")) == \
        f"ERROR (pynnet-filter-scp): {d}/utt2spk:1: line has 2 fields, cannot select field 3"
    assert sh(UTILS / "filter_scp.pl", real=True).returncode == 1


def test_split_scp(tmp_path):
    d = make_dir(tmp_path / "d", spks=("s1", "s2", "s3"), per_spk=3)
    outs = [tmp_path / f"o{k}.scp" for k in range(1, 5)]
    assert sh(UTILS / "split_scp.pl", d / "wav.scp", *outs).returncode == 0
    assert [len(read(o)) for o in outs] == [3, 2, 2, 2]
    assert sum((read(o) for o in outs), []) == read(d / "wav.scp")
    r = sh(UTILS / "split_scp.pl", f"--utt2spk={d / 'utt2spk'}", d / "wav.scp", *outs[:2])
    assert r.returncode == 0, r.stderr
    assert [len(read(o)) for o in outs[:2]] == [6, 3]
    r0 = sh(UTILS / "split_scp.pl", "-j", 3, 0, d / "wav.scp")
    r3 = sh(UTILS / "split_scp.pl", "-j", 3, 3, "--one-based", f"--utt2spk={d / 'utt2spk'}", d / "wav.scp")
    assert r0.stdout.splitlines() == read(d / "wav.scp")[:3]
    assert [ln.split()[0] for ln in r3.stdout.splitlines()] == ["s3-u1", "s3-u2", "s3-u3"]
    assert error_line(sh(UTILS / "split_scp.pl", d / "wav.scp", *[tmp_path / f"x{k}" for k in range(10)])) == \
        f"ERROR (pynnet-split-scp): {d}/wav.scp: refusing to split: 9 lines is fewer than the 10 output files"
    # a speaker's lines need not be adjacent: grouped by speaker (first appearance), as Kaldi does
    write(tmp_path / "mixed.scp", ["s1-u1 a", "s2-u1 b", "s1-u2 c", "s3-u1 d"])
    assert sh(UTILS / "split_scp.pl", f"--utt2spk={d / 'utt2spk'}", tmp_path / "mixed.scp", *outs[:2]).returncode == 0
    assert read(outs[0]) == ["s1-u1 a", "s1-u2 c"] and read(outs[1]) == ["s2-u1 b", "s3-u1 d"]
    write(tmp_path / "nospk.scp", ["s1-u1 a", "zz b"])
    assert error_line(sh(UTILS / "split_scp.pl", f"--utt2spk={d / 'utt2spk'}", tmp_path / "nospk.scp", *outs[:2])) == \
        f"ERROR (pynnet-split-scp): {tmp_path}/nospk.scp:2: 'zz' has no speaker in utt2spk"
    assert "out of range" in error_line(sh(UTILS / "split_scp.pl", "-j", 3, 3, d / "wav.scp"))
    assert sh(UTILS / "split_scp.pl", d / "wav.scp", real=True).returncode == 1


def test_filter_and_split_scp_keys_split_at_spaces_and_tabs_only(tmp_path):
    # Kaldi cuts fields at spaces and tabs only: 'u\u00a01' is one key (str.split() took 'u', so
    # every 'u ...' line passed the filter and --utt2spk looked speakers up by 'u')
    def w(path, lines):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    w(tmp_path / "ids", ["u\u00a01", "s\u00a02  x"])
    scp = ["u\u00a01\t a.ark:1", "u  b.ark:2", "u\u00a03 s\u00a02"]
    w(tmp_path / "in.scp", scp)
    assert sh(UTILS / "filter_scp.pl", tmp_path / "ids", tmp_path / "in.scp").stdout.splitlines() == scp[:1]
    r = sh(UTILS / "filter_scp.pl", "--exclude", tmp_path / "ids", tmp_path / "in.scp")
    assert r.stdout.splitlines() == scp[1:]
    r = sh(UTILS / "filter_scp.pl", "-f", 2, tmp_path / "ids", tmp_path / "in.scp")
    assert r.stdout.splitlines() == scp[2:]
    w(tmp_path / "utt2spk", ["u\u00a01 s\u00a01", "u\u00a02 s\u00a01", "v\u00a01 s\u00a02"])
    w(tmp_path / "in.scp", ["u\u00a01 a", "u\u00a02\tb", "v\u00a01 c"])
    r = sh(UTILS / "split_scp.pl", f"--utt2spk={tmp_path / 'utt2spk'}", tmp_path / "in.scp",
           tmp_path / "o1.scp", tmp_path / "o2.scp")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o2.scp").read_text(encoding="utf-8") == "v\u00a01 c\n"


# --- library API ------------------------------------------------------------------------------

def test_library_api(tmp_path):
    d = make_dir(tmp_path / "d", segments=True)
    dd = D.load_data_dir(d)
    assert D.validate(dd) == []
    sub = D.subset(dd, first=2)
    assert sub.utts == ["spkA-u1", "spkA-u2"] and sub.recordings == ["spkA-rec"]
    D.write_data_dir(sub, tmp_path / "sub")
    assert [w[:26] for w in D.validate_data_dir(tmp_path / "sub")] == ["you have only one speaker;"]
    parts = D.split_by_speaker(dd, 2)
    assert sorted(len(p) for p in parts) == [3, 6]
    with pytest.raises(PynnetError, match="cannot split into 4 parts"):
        D.split_by_speaker(dd, 4)
    # writing over a dir removes stale tables the new dir lacks
    D.write_data_dir(D.DataDir(str(tmp_path / "sub"), {"utt2spk": {"x-1": "x"}}), tmp_path / "sub")
    assert sorted(os.listdir(tmp_path / "sub")) == ["spk2utt", "utt2spk"]


def test_scripts_end_to_end(tmp_path):
    """The real bash scripts (parse_options.sh, usage checks, console programs on PATH)."""
    d = make_dir(tmp_path / "d")
    _corrupt(d, "text", lambda L: L[1:][::-1])
    steps = [
        ("fix_data_dir.sh", d),
        ("validate_data_dir.sh", d),
        ("subset_data_dir.sh", "--first", d, 4, tmp_path / "s"),
        ("split_data.sh", d, 2),
        ("copy_data_dir.sh", "--utt-prefix", "p-", "--spk-prefix", "p-", d, tmp_path / "c"),
        ("combine_data.sh", "--skip-fix", "true", tmp_path / "all", d, tmp_path / "c"),
        ("validate_data_dir.sh", tmp_path / "all"),
    ]
    for script, *args in steps:
        r = sh(UTILS / script, *args, real=True)
        assert r.returncode == 0, (script, r.stderr)
    assert len(read(tmp_path / "all/utt2spk")) == 16 and len(read(tmp_path / "s/utt2spk")) == 4
    r = sh(UTILS / "utt2spk_to_spk2utt.pl", d / "utt2spk", real=True)
    assert r.stdout.splitlines() == read(d / "spk2utt")
    r = sh(UTILS / "filter_scp.pl", tmp_path / "s/utt2spk", d / "text", real=True)
    assert len(r.stdout.splitlines()) == 4
    r = sh(UTILS / "split_scp.pl", "-j", 2, 1, d / "text", real=True)
    assert len(r.stdout.splitlines()) == 4
    r = sh(UTILS / "combine_data.sh", "--skip-fix", "maybe", tmp_path / "x", d, real=True)
    assert r.returncode == 1


def test_partition_matches_restrict(tmp_path):
    d = make_dir(tmp_path / "d", segments=True, spks=("a", "b", "c", "d"), per_spk=3)
    dd = D.load_data_dir(d)
    for parts in (D.split_by_speaker(dd, 3), D.split_by_utt(dd, 5)):
        for part, utts in zip(dd.partition(parts), parts):
            assert part.tables == dd.restrict(utts).tables


def _wav(path: Path, seconds: float, rate: int = 16000) -> None:
    import wave
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x01\x00" * int(seconds * rate))


def test_get_utt2dur(tmp_path):
    d = make_dir(tmp_path / "d", spks=("a", "b"), per_spk=2, extra=False)
    lens = {"a-u1": 0.5, "a-u2": 1.25, "b-u1": 0.1, "b-u2": 2.0}
    for u, sec in lens.items():
        _wav(tmp_path / f"{u}.wav", sec, 8000 if u == "b-u1" else 16000)
    # plain files and a pipe
    write(d / "wav.scp", [f"{u} {tmp_path}/{u}.wav" if u != "a-u2" else f"{u} cat {tmp_path}/{u}.wav |"
                          for u in lens])
    r = sh(UTILS / "data/get_utt2dur.sh", "--nj", 3, d, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = {k: float(v) for k, v in (ln.split() for ln in read(d / "utt2dur"))}
    assert got == pytest.approx(lens)
    assert len(list((d / "log").glob("get_durations.*.log"))) == 3
    assert sh(UTILS / "validate_data_dir.sh", d).returncode == 0
    r = sh(UTILS / "data/get_utt2dur.sh", d, cwd=tmp_path)
    assert r.returncode == 0 and "already exists" in r.stderr
    # a missing recording: the job fails and names its log
    (d / "utt2dur").unlink()
    (tmp_path / "b-u2.wav").unlink()
    r = sh(UTILS / "data/get_utt2dur.sh", "--nj", 2, d, cwd=tmp_path)
    assert r.returncode == 1 and f"run.pl: 1 / 2 failed, log is in {d}/log/get_durations.2.log" in r.stderr
    assert f"{d}/.get_utt2dur/wav.2.scp:2: no such audio file" in (d / "log/get_durations.2.log").read_text()
    assert not (d / "utt2dur").exists()
    # from segments
    s = make_dir(tmp_path / "s", segments=True, extra=False)
    assert sh(UTILS / "data/get_utt2dur.sh", s, cwd=tmp_path).returncode == 0
    assert read(s / "utt2dur")[1] == "spkA-u2 1"
    _corrupt(s, "segments", lambda L: L[:2] + ["spkA-u3 spkA-rec 2 1"] + L[3:])
    (s / "utt2dur").unlink()
    r = sh(UTILS / "data/get_utt2dur.sh", s, cwd=tmp_path)
    assert r.returncode == 1 and f"ERROR (get_utt2dur.sh): {s}/segments:3: bad segment" in r.stderr


def test_get_utt2dur_from_frames(tmp_path):
    """Kaldi's other two sources: frame_shift + utt2num_frames, and (no wav.scp) the lengths of
    feats.scp with --frame-shift or data/frame_shift: (frames + 1.5) x frame shift."""
    import kaldiio
    import numpy as np
    d = make_dir(tmp_path / "d", spks=("a", "b"), per_spk=2, feats=False, extra=False)
    frames = {"a-u1": 100, "a-u2": 37, "b-u1": 250, "b-u2": 8}
    write(d / "utt2num_frames", [f"{u} {n}" for u, n in frames.items()])
    write(d / "frame_shift", ["0.01"])
    r = sh(UTILS / "data/get_utt2dur.sh", d, cwd=tmp_path)
    assert r.returncode == 0 and "from " in r.stderr and "frame_shift,utt2num_frames" in r.stderr, r.stderr
    got = {k: float(v) for k, v in (ln.split() for ln in read(d / "utt2dur"))}
    assert got == pytest.approx({u: (n + 1.5) * 0.01 for u, n in frames.items()})
    # no frame_shift file: wav.scp is read (here its recordings do not exist: the jobs fail)
    (d / "utt2dur").unlink()
    (d / "frame_shift").unlink()
    r = sh(UTILS / "data/get_utt2dur.sh", "--nj", 1, d, cwd=tmp_path)
    assert r.returncode == 1 and "get_durations.1.log" in r.stderr and not (d / "utt2dur").exists()
    # no wav.scp either: the feature lengths, with --frame-shift
    (d / "wav.scp").unlink()
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/f.ark,{d}/feats.scp") as w:
        for u, n in frames.items():
            w(u, np.zeros((n, 3), np.float32))
    r = sh(UTILS / "data/get_utt2dur.sh", "--frame-shift", "0.03", d, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = {k: float(v) for k, v in (ln.split() for ln in read(d / "utt2dur"))}
    assert got == pytest.approx({u: (n + 1.5) * 0.03 for u, n in frames.items()})
    # data/frame_shift wins over the option (as in Kaldi); a bad one is one line naming it
    (d / "utt2dur").unlink()
    (d / "utt2num_frames").unlink()
    write(d / "frame_shift", ["0.02"])
    r = sh(UTILS / "data/get_utt2dur.sh", "--frame-shift", "0.03", d, cwd=tmp_path)
    assert r.returncode == 0 and f"using frame_shift=0.02 from {d}/frame_shift" in r.stderr
    assert float(read(d / "utt2dur")[0].split()[1]) == pytest.approx((100 + 1.5) * 0.02)
    (d / "utt2dur").unlink()
    write(d / "frame_shift", ["10ms"])
    r = sh(UTILS / "data/get_utt2dur.sh", d, cwd=tmp_path)
    assert r.returncode == 1 and f'ERROR (get_utt2dur.sh): {d}/frame_shift: bad frame shift "10ms"' in r.stderr
    assert not (d / "utt2dur").exists() and not (d / "utt2dur.tmp").exists()
    # fewer than half of the utterances with a duration: fails (Kaldi's rule), nothing written
    (d / "frame_shift").unlink()
    write(d / "utt2num_frames", ["a-u1 100"])
    write(d / "frame_shift", ["0.01"])
    r = sh(UTILS / "data/get_utt2dur.sh", d, cwd=tmp_path)
    assert r.returncode == 1 and "less than half of the utterances got a duration" in r.stderr
    assert not (d / "utt2dur").exists()
    write(d / "utt2num_frames", ["a-u1 100", "a-u2 x"])
    r = sh(UTILS / "data/get_utt2dur.sh", d, cwd=tmp_path)
    assert r.returncode == 1 and f"{d}/utt2num_frames:2: expected <utt> <num-frames>: a-u2 x" in r.stderr


def test_fix_drops_utterances_without_a_duration(tmp_path):
    # Kaldi's fix_data_dir.sh keeps only utterances with utt2dur and utt2num_frames entries (> 0:
    # ours refuses a non-positive one when it reads the dir)
    d = make_dir(tmp_path / "d")
    _corrupt(d, "utt2dur", lambda L: [ln for ln in L if not ln.startswith("spkA-u2")])
    _corrupt(d, "utt2num_frames", lambda L: [ln for ln in L if not ln.startswith("spkB-u1")])
    r = sh(UTILS / "fix_data_dir.sh", d, real=True)
    assert r.returncode == 0, r.stderr
    assert "spkA-u2" not in keys(d / "utt2spk") and "spkB-u1" not in keys(d / "utt2spk")
    assert len(keys(d / "utt2spk")) == 7 and keys(d / "text") == keys(d / "utt2spk")
    assert keys(d / "utt2dur") == keys(d / "utt2spk")


def test_extra_files(tmp_path):
    d = make_dir(tmp_path / "d")
    write(d / "utt2foo", [f"{u} x" for u in keys(d / "utt2spk")][::-1])
    write(d / "spk2bar", ["spkA 1", "spkB 2", "spkC 3"])
    _corrupt(d, "text", lambda L: [ln for ln in L if not ln.startswith("spkC")])
    r = sh(UTILS / "fix_data_dir.sh", "--utt-extra-files", "utt2foo", "--spk-extra-files", "spk2bar", d, real=True)
    assert r.returncode == 0, r.stderr
    assert keys(d / "utt2foo") == keys(d / "utt2spk") and len(read(d / "utt2foo")) == 6
    assert read(d / "spk2bar") == ["spkA 1", "spkB 2"]
    assert len(read(d / ".backup/utt2foo")) == 9
    e = make_dir(tmp_path / "e", spks=("spkE",))
    write(e / "utt2foo", [f"{u} y" for u in keys(e / "utt2spk")])
    r = sh(UTILS / "combine_data.sh", "--extra-files", "utt2foo", tmp_path / "c", d, e, real=True)
    assert r.returncode == 0, r.stderr
    assert len(read(tmp_path / "c/utt2foo")) == 9
    assert "cannot use 'text' as an extra" in error_line(sh(UTILS / "fix_data_dir.sh", "--utt-extra-files", "text", d))


def test_conf_and_frame_shift_travel(tmp_path):
    d = make_dir(tmp_path / "d")
    (d / "conf").mkdir()
    (d / "conf/mfcc.conf").write_text("--sample-frequency=8000\n")
    (d / "frame_shift").write_text("0.01\n")
    assert sh(UTILS / "copy_data_dir.sh", d, tmp_path / "c").returncode == 0
    assert sh(UTILS / "subset_data_dir.sh", "--first", d, 2, tmp_path / "s").returncode == 0
    assert sh(UTILS / "split_data.sh", d, 2).returncode == 0
    for x in (tmp_path / "c", tmp_path / "s", d / "split2/2"):
        assert (x / "conf/mfcc.conf").read_text() == "--sample-frequency=8000\n" and (x / "frame_shift").exists()


def test_remove_dup_utts(tmp_path):
    d = make_dir(tmp_path / "d")
    _corrupt(d, "text", lambda L: [f"{ln.split()[0]} UH  HUH" if i % 3 != 2 else ln for i, ln in enumerate(L)])
    r = sh(UTILS / "data/remove_dup_utts.sh", 2, d, tmp_path / "n", real=True)
    assert r.returncode == 0, r.stderr
    assert "reduced number of utterances from 9 to 5" in r.stderr
    assert keys(tmp_path / "n/utt2spk") == ["spkA-u1", "spkA-u2", "spkA-u3", "spkB-u3", "spkC-u3"]
    assert sh(UTILS / "validate_data_dir.sh", tmp_path / "n").returncode == 0
    assert sh(UTILS / "data/remove_dup_utts.sh", 2, d, real=True).returncode == 1
    (d / "text").unlink()
    assert error_line(sh(UTILS / "data/remove_dup_utts.sh", 2, d, tmp_path / "m", real=True)) == \
        f"ERROR (pynnet-remove-dup-utts): {d}/text: no such file (needed to find duplicate transcripts)"


def test_split_data_skips_current_split(tmp_path):
    d = make_dir(tmp_path / "d")
    assert sh(UTILS / "split_data.sh", d, 2).returncode == 0
    part = d / "split2/1/utt2spk"
    old = part.stat().st_mtime_ns
    for f in d.iterdir():
        if f.is_file():  # the data was made well before the split
            os.utime(f, ns=(old - 10**10, old - 10**10))
    assert sh(UTILS / "split_data.sh", d, 2).returncode == 0
    assert part.stat().st_mtime_ns == old  # up to date: not rewritten
    os.utime(d / "text", ns=(old + 10**9, old + 10**9))  # the data changed after the split
    assert sh(UTILS / "split_data.sh", d, 2).returncode == 0
    assert part.stat().st_mtime_ns > old
    assert not [p for p in os.listdir(d) if p.startswith(".split2") or p.startswith(".old_split")]


# --- Kaldi's field splitting: ASCII space and tab only -------------------------------------------

def test_split_fields_is_kaldis_rule():
    from pynnet.io import tables as T
    # every character str.split() cuts at besides space, tab and newline is "other space"
    other = {chr(c) for c in range(0x110000) if chr(c).isspace()} - set(" \t\n")
    assert set(T._OTHER_SPACE) == other
    assert T.split_fields(" a\t\tcaf\u00a0e  b\u3000c \t") == ["a", "caf\u00a0e", "b\u3000c"]
    assert T.split_fields("") == [] and T.split_fields(" \t ") == []
    assert T.split_key("  u1 \t s\u00a0x  y \t") == ("u1", "s\u00a0x  y")
    assert T.split_key("u1\u00a0s") == ("u1\u00a0s", "") and T.split_key(" \t") == ("", "")
    # blocks: clean ones go through str.split(); one odd line makes the block follow the rule
    assert list(T.split_lines(["a b\n", "c\td\n"])) == [["a", "b"], ["c", "d"]]
    assert list(T.split_lines(["a b\n", "x\u00a0y z\r\n", "e\x1cf\n"])) == [["a", "b"], ["x\u00a0y", "z"], ["e\x1cf"]]
    for c in other - {"\r"}:
        assert T.split_fields(f"a{c}b c") == [f"a{c}b", "c"], hex(ord(c))


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_non_breaking_space_is_part_of_a_field(tmp_path, eol):
    # The same files with LF (the fast reader) and CRLF (the line-by-line reader) read the same.
    d = tmp_path / "d"
    d.mkdir()
    (d / "utt2spk").write_text(eol.join(["s\u00a0x-u1 s\u00a0x", "s\u00a0x-u2 s\u00a0x", ""]))
    (d / "text").write_text(eol.join(["s\u00a0x-u1 caf\u00a0e  au\u00a0lait", "s\u00a0x-u2 caf e", ""]))
    (d / "segments").write_text(eol.join(["s\u00a0x-u1 r\u00a01 0.0 1.5", "s\u00a0x-u2 r\u00a01 1.5 2.0", ""]))
    (d / "wav.scp").write_text(eol.join(["r\u00a01 /x/r 1.wav", ""]))
    (d / "reco2file_and_channel").write_text(eol.join(["r\u00a01 r\u00a01 A", ""]))
    dd = D.load_data_dir(d, strict=False)
    assert dd.utt2spk == {"s\u00a0x-u1": "s\u00a0x", "s\u00a0x-u2": "s\u00a0x"}
    assert dd.text == {"s\u00a0x-u1": "caf\u00a0e  au\u00a0lait", "s\u00a0x-u2": "caf e"}
    assert dd.recordings == ["r\u00a01"]
    assert dd.segments["s\u00a0x-u1"] == D.Segment("r\u00a01", 0.0, 1.5)
    assert D.read_data_file(d, "utt2spk") == dd.utt2spk
    assert D.read_data_file(d, "reco2file_and_channel") == {"r\u00a01": "r\u00a01 A"}
    # one word, so these two transcripts differ
    assert len(D.remove_dup_utts(dd, 1).utts) == 2
    # a non-breaking space does not separate fields: one field, or three where two are allowed
    (d / "utt2spk").write_text(eol.join(["s\u00a0x-u1\u00a0s\u00a0x", ""]))
    with pytest.raises(PynnetError, match="utt2spk:1: expected at least 2 fields, got 1"):
        D.read_data_file(d, "utt2spk")
    (d / "utt2spk").write_text(eol.join(["u1 s x", ""]))
    with pytest.raises(PynnetError, match="utt2spk:1: expected at most 2 fields, got 3"):
        D.read_data_file(d, "utt2spk")


def test_subset_data_tr_cv(tmp_path):
    """utils/subset_data_dir_tr_cv.sh (Kaldi's nnet1 split): int(10% of the speakers), the first in
    shuffle_list.pl --srand 777 order, hold out; the rest train; whole speakers, nothing lost."""
    spks = [f"s{i:02d}" for i in range(23)]
    d = make_dir(tmp_path / "d", spks=spks, per_spk=2)
    r = sh(UTILS / "subset_data_dir_tr_cv.sh", d, tmp_path / "tr", tmp_path / "cv")
    assert r.returncode == 0, r.stderr
    assert "Speakers, src=23, trn=21, cv=2" in r.stdout
    want_cv = sorted(D.perl_shuffle(spks, 777)[:2])
    assert keys(tmp_path / "cv" / "spk2utt") == want_cv
    assert keys(tmp_path / "tr" / "spk2utt") == sorted(set(spks) - set(want_cv))
    assert sorted(keys(tmp_path / "tr" / "utt2spk") + keys(tmp_path / "cv" / "utt2spk")) == keys(d / "utt2spk")
    for x in ("tr", "cv"):
        assert sh(UTILS / "validate_data_dir.sh", tmp_path / x).returncode == 0
    # a given CV speaker list; --cv-spk-percent
    (tmp_path / "cv.list").write_text("s03\ns07\ns11\n")
    r = sh(UTILS / "subset_data_dir_tr_cv.sh", "--cv-spk-list", tmp_path / "cv.list", d, tmp_path / "tr2", tmp_path / "cv2")
    assert r.returncode == 0 and keys(tmp_path / "cv2" / "spk2utt") == ["s03", "s07", "s11"], r.stderr
    r = sh(UTILS / "subset_data_dir_tr_cv.sh", "--cv-spk-percent", "30", d, tmp_path / "tr3", tmp_path / "cv3")
    assert r.returncode == 0 and len(keys(tmp_path / "cv3" / "spk2utt")) == 6
    # bad input: one line, nothing written
    small = make_dir(tmp_path / "small", spks=("a1", "b1", "c1"))
    assert "0 CV and 3 training speakers of 3" in error_line(sh(UTILS / "subset_data_dir_tr_cv.sh", small,
                                                                   tmp_path / "tr4", tmp_path / "cv4"))
    (tmp_path / "bad.list").write_text("s03\nnobody\n")
    assert "bad.list: 1 of its 2 speakers are not in" in error_line(
        sh(UTILS / "subset_data_dir_tr_cv.sh", "--cv-spk-list", tmp_path / "bad.list", d, tmp_path / "tr5", tmp_path / "cv5"))
    assert "the training and CV destinations are the same directory" in error_line(
        sh(UTILS / "subset_data_dir_tr_cv.sh", d, tmp_path / "same", tmp_path / "same"))
    assert not any((tmp_path / x).exists() for x in ("tr4", "cv4", "tr5", "cv5", "same"))
