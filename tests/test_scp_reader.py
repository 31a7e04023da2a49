"""pynnet.feat.tables.load_scp / load_scp_sequential: kaldiio's scp readers with keys split from
rxfilenames as Kaldi splits them, streaming as kaldiio does (a line at a time, not the whole
file in memory)."""
from __future__ import annotations

import tracemalloc

import kaldiio
import kaldiio.matio as km
import numpy as np
import pytest

from pynnet.feat.tables import load_scp, load_scp_sequential
from pynnet.io.errors import PynnetError


def _ark(tmp_path) -> tuple[str, int, np.ndarray]:
    """A one-matrix ark: (path, offset of the matrix, the matrix)."""
    mat = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = str(tmp_path / "a.ark")
    with open(path, "wb") as f:
        f.write(b"x ")
        off = f.tell()
        km.write_array(f, mat)
    return path, off, mat


def test_keys_and_lines_as_kaldi_splits_them(tmp_path):
    ark, off, mat = _ark(tmp_path)
    scp = tmp_path / "f.scp"
    # U+00A0 inside a key, tab and runs of spaces between fields, a CRLF line end, no final newline
    scp.write_bytes(f"u\u00a01 {ark}:{off}\n  u2\t \t{ark}:{off}  \r\nu\u20033 {ark}:{off}".encode())
    want = ["u\u00a01", "u2", "u\u20033"]
    got = list(load_scp_sequential(str(scp)))
    assert [k for k, _ in got] == want and all(np.array_equal(m, mat) for _, m in got)
    table = load_scp(str(scp))
    assert sorted(table) == sorted(want) and np.array_equal(table["u\u00a01"], mat)


def test_sequential_reader_is_lazy(tmp_path):
    """A bad line is an error when the reader gets to it (as with kaldiio alone), naming the
    file and line: the entries before it are read first."""
    ark, off, mat = _ark(tmp_path)
    scp = tmp_path / "f.scp"
    scp.write_text(f"u\u00a01 {ark}:{off}\nu2 {ark}:{off}\nbad\u00a0line\nu4 {ark}:{off}\n", encoding="utf-8")
    it = iter(load_scp_sequential(str(scp)))
    assert next(it)[0] == "u\u00a01"
    assert next(it)[0] == "u2"
    with pytest.raises(PynnetError, match=r"f\.scp:3: expected 'key rxfilename', got 'bad\u00a0line'"):
        next(it)
    with pytest.raises(PynnetError, match=r"f\.scp:3: expected 'key rxfilename'"):
        load_scp(str(scp))


def test_not_utf8_is_one_error(tmp_path):
    ark, off, _ = _ark(tmp_path)
    scp = tmp_path / "f.scp"
    scp.write_bytes(f"u1 {ark}:{off}\n".encode() + b"u\xff2 " + f"{ark}:{off}\n".encode())
    with pytest.raises(PynnetError, match=r"f\.scp: not valid UTF-8"):
        list(load_scp_sequential(str(scp)))
    with pytest.raises(PynnetError, match=r"f\.scp: not valid UTF-8"):
        load_scp(str(scp))


def test_memory_is_kaldiio_own(tmp_path):
    """A 50k-line scp (keys with U+00A0): the sequential reader holds a line at a time (it read
    the whole file into a StringIO: several times the file's size), and the random-access one
    about what kaldiio alone needs for its {key: rxfilename} dict."""
    ark, off, mat = _ark(tmp_path)
    n = 50_000
    nbsp, plain = tmp_path / "nbsp.scp", tmp_path / "plain.scp"
    for path, sep in ((nbsp, "\u00a0"), (plain, "-")):
        with open(path, "w", encoding="utf-8") as f:
            for i in range(n):
                f.write(f"spk{i % 7}{sep}utt-{i:07d} {ark}:{off}\n")
    size = nbsp.stat().st_size

    def peak(fn) -> int:
        tracemalloc.start()
        try:
            fn()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def read_all():
        count = 0
        for key, m in load_scp_sequential(str(nbsp)):
            count += 1
        assert count == n and key == f"spk{(n - 1) % 7}\u00a0utt-{n - 1:07d}"

    assert peak(read_all) < size // 10
    ours = peak(lambda: len(load_scp(str(nbsp))))
    theirs = peak(lambda: len(kaldiio.load_scp(str(plain))))
    assert ours < 1.3 * theirs, (ours, theirs, size)


def test_scp_rspecifier_from_a_command(tmp_path, capsys):
    """Kaldi's ``scp:cmd |`` (e.g. ``scp:utils/filter_scp.pl list feats.scp |``): the matrices of
    the listing the command prints; a failing command, or a listing naming a missing ark, is one
    error line naming the rspecifier (pynnet-feat-to-len, as Kaldi's get_utt2num_frames.sh calls it)."""
    from pynnet.bin.feat import feat_to_len
    from pynnet.feat.tables import read_matrices

    mats = {f"u{i}": np.full((i + 2, 3), i, np.float32) for i in range(4)}
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/a.ark,{tmp_path}/a.scp") as w:
        for k, m in mats.items():
            w(k, m)
    got = dict(read_matrices(f"scp:grep -v u2 {tmp_path}/a.scp |"))
    assert sorted(got) == ["u0", "u1", "u3"] and all(np.array_equal(got[k], mats[k]) for k in got)
    assert feat_to_len(["--print-args=false", f"scp:head -n 2 {tmp_path}/a.scp |", f"ark,t:{tmp_path}/len"]) == 0
    assert (tmp_path / "len").read_text() == "u0 2\nu1 3\n"
    for spec, msg in ((f"scp:grep -v u {tmp_path}/a.scp | false |", "command failed (exit status 1)"),
                      ("scp:echo u1 nope.ark:3 |", "No such file or directory: 'nope.ark'")):
        capsys.readouterr()
        assert feat_to_len([spec, f"ark,t:{tmp_path}/len2"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and spec in err[0] and msg in err[0], err
        assert not (tmp_path / "len2").exists()


def test_matrix_sum_rows(tmp_path, capsys):
    """pynnet-matrix-sum-rows (make_priors.sh's matrix-sum-rows | vector-sum): one Kaldi text vector;
    a column count that changes, or no matrices, is one error line and no output file."""
    from pynnet.bin.feat import matrix_sum_rows
    from pynnet.hmm.model_io import read_vector_file

    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((4, 3), np.float32)
    with kaldiio.WriteHelper(f"ark:{tmp_path}/m.ark") as w:
        w("u1", a)
        w("u2", b)
    assert matrix_sum_rows([f"ark:{tmp_path}/m.ark", str(tmp_path / "v")]) == 0
    assert np.allclose(read_vector_file(str(tmp_path / "v")), a.sum(0) + b.sum(0))
    with kaldiio.WriteHelper(f"ark:{tmp_path}/bad.ark") as w:
        w("u1", a)
        w("u2", np.ones((2, 4), np.float32))
    capsys.readouterr()
    assert matrix_sum_rows([f"ark:{tmp_path}/bad.ark", str(tmp_path / "v2")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "utterance 'u2' has 4 columns, the ones before 3" in err[0]
    (tmp_path / "empty.ark").write_bytes(b"")
    assert matrix_sum_rows([f"ark:{tmp_path}/empty.ark", str(tmp_path / "v2")]) == 1
    assert "no matrices" in capsys.readouterr().err and not (tmp_path / "v2").exists()
