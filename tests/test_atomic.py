"""Atomic writes: files and staged directories renamed into place get the modes the umask gives
(as shell-redirected output does), not mkstemp's 0600 / mkdtemp's 0700."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

# Writes, under the umask it is started with, one of each thing we write atomically: a file
# (atomic_write, atomic_path), a text archive, a data dir and its split, a lang dir (prepare_lang,
# a staged dir) and a lang dir with G.fst (format_lm, a staged copy).
SCRIPT = r"""
import os, sys
from pynnet.io.kaldi_libs import import_kaldilm
import_kaldilm()
from pynnet.io.atomic import atomic_path, atomic_write
from pynnet.decode.io import TextArkWriter
from pynnet.io.datadir import DataDir, write_data_dir, split_data_dir
from pynnet.hmm.lang import prepare_lang
from pynnet.hmm.graph import format_lm
from pynnet.hmm.lm import train_lm

out = sys.argv[1]
os.makedirs(out)
with atomic_write(os.path.join(out, "a.txt")) as f:
    f.write("x\n")
with atomic_path(os.path.join(out, "b.bin")) as tmp:
    with open(tmp, "wb") as f:
        f.write(b"y")
with TextArkWriter("ark,t:" + os.path.join(out, "c.ark")) as w:
    w.write("u1 1 2\n")
utts = [f"s{i % 3}-u{i}" for i in range(6)]
dd = DataDir("", {"utt2spk": {u: u.split("-")[0] for u in utts}, "text": {u: "ab cd" for u in utts}})
write_data_dir(dd, os.path.join(out, "data"))
split_data_dir(os.path.join(out, "data"), 2)
dic = os.path.join(out, "dict")
os.makedirs(dic)
for name, text in (("silence_phones.txt", "SIL\nSPN\n"), ("nonsilence_phones.txt", "a\nb\nc\nd\n"),
                   ("optional_silence.txt", "SIL\n"), ("lexicon.txt", "<unk> SPN\nab a b\ncd c d\n")):
    with open(os.path.join(dic, name), "w") as f:
        f.write(text)
prepare_lang(dic, "<unk>", os.path.join(out, "tmp"), os.path.join(out, "lang"))
lm = train_lm([["ab", "cd"], ["cd"], ["ab", "ab", "cd"]], order=2, verbose=False)
lm.write_arpa(os.path.join(out, "lm.arpa"))
format_lm(os.path.join(out, "lang"), os.path.join(out, "lm.arpa"), None, os.path.join(out, "lang_test"),
          verbose=False)
"""


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_modes_follow_umask(tmp_path, umask):
    out = tmp_path / "out"
    r = subprocess.run(["sh", "-c", f'umask {umask:03o} && exec "$0" -c "$1" "$2"', sys.executable,
                       SCRIPT, str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    seen = {"file": 0, "dir": 0}
    for root, dirs, files in os.walk(out):
        for name, kind in [(d, "dir") for d in dirs] + [(f, "file") for f in files]:
            p = os.path.join(root, name)
            want = (0o777 if kind == "dir" else 0o666) & ~umask
            assert stat.S_IMODE(os.lstat(p).st_mode) == want, (os.path.relpath(p, out), oct(want))
            seen[kind] += 1
    for p in ("a.txt", "b.bin", "c.ark", "data/utt2spk", "data/split2/1/text", "lang/phones.txt",
              "lang/L.fst", "lang_test/G.fst", "lang_test/phones/silence.txt"):
        assert (out / p).is_file(), p
    for p in ("data/split2", "data/split2/2", "lang", "lang/phones", "lang_test"):
        assert (out / p).is_dir(), p


def test_mode_change_refused_is_not_an_error(tmp_path, monkeypatch):
    """A file system that refuses chmod (vfat/exFAT without 'quiet', some FUSE mounts) keeps
    mkstemp's / mkdtemp's mode: the write itself still succeeds, and no temp is left behind."""
    from pynnet.io import atomic

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chmod", refuse)
    monkeypatch.setattr(os, "fchmod", refuse)
    with atomic.atomic_write(tmp_path / "a.txt") as f:
        f.write("x\n")
    with atomic.atomic_path(tmp_path / "b.bin") as tmp:
        with open(tmp, "wb") as f:
            f.write(b"y")
    fd, tmp = atomic.make_temp_file(str(tmp_path), ".c.")
    os.close(fd)
    d = atomic.make_temp_dir(str(tmp_path), ".d.")
    assert (tmp_path / "a.txt").read_text() == "x\n"
    assert (tmp_path / "b.bin").read_bytes() == b"y"
    assert os.path.isfile(tmp) and os.path.isdir(d)
    os.unlink(tmp)
    os.rmdir(d)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]
