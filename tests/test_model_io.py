"""Kaldi GMM model files (final.mdl) and alignment files (ali.*.gz): formats, round trips, bad input."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import kaldi_hmm_gmm as khg  # noqa: I001  (before kaldifst)

from pynnet.hmm.ali_io import (TransitionTables, read_alignments, split_to_phones, tids_to_pdfs,
                               tids_to_phones, write_alignments, phone_lengths)
from pynnet.hmm.gmm import AmGmm
from pynnet.hmm.model_io import model_to_bytes, read_model, read_model_bytes, read_transition_model, write_model
from pynnet.io.errors import PynnetError

TOPO = """<Topology>
<TopologyEntry>
<ForPhones> 2 3 </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
<TopologyEntry>
<ForPhones> 1 </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State>
<State> 1 </State>
</TopologyEntry>
</Topology>"""

# A model as Kaldi's `gmm-copy --binary=false` prints it (old <Triples> token), written by hand:
# phone 1 has a 1-state HMM (pdf 0); 2 transition states, 4 transition ids; 2-dim, 2 pdfs.
KALDI_TEXT_MODEL = """<TransitionModel> 
<Topology> 
<TopologyEntry> 
<ForPhones> 
1 
</ForPhones> 
<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State> 
<State> 1 </State> 
</TopologyEntry> 
<TopologyEntry> 
<ForPhones> 
2 
</ForPhones> 
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State> 
<State> 1 </State> 
</TopologyEntry> 
</Topology> 
<Triples> 2 
1 0 0 
2 0 1 
</Triples> 
<LogProbs> 
 [ 0 -0.6931472 -0.6931472 -0.2876821 -1.386294 ]
</LogProbs> 
</TransitionModel> 
<DIMENSION> 2 <NUMPDFS> 2 <DiagGMM> 
<GCONSTS>  [ -1.837877 ]
<WEIGHTS>  [ 1 ]
<MEANS_INVVARS>  [
  0 0 ]
<INV_VARS>  [
  1 1 ]
</DiagGMM> 
<DiagGMM> 
<GCONSTS>  [ -2.464447 -11.54185 ]
<WEIGHTS>  [ 0.4 0.6 ]
<MEANS_INVVARS>  [
  1 -2 
  0.5 4 ]
<INV_VARS>  [
  2 4 
  0.25 1 ]
</DiagGMM> 
"""

# The newer <Tuples> form (separate self-loop pdf classes, as chain models use).
KALDI_TEXT_TUPLES = """<TransitionModel> 
<Topology> 
<TopologyEntry> 
<ForPhones> 
1 
</ForPhones> 
<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 <Transition> 0 0.5 <Transition> 1 0.5 </State> 
<State> 1 </State> 
</TopologyEntry> 
</Topology> 
<Tuples> 1 
1 0 0 1 
</Tuples> 
<LogProbs> 
 [ 0 -0.6931472 -0.6931472 ]
</LogProbs> 
</TransitionModel> 
<DIMENSION> 1 <NUMPDFS> 2 <DiagGMM> 
<GCONSTS>  [ -0.9189385 ]
<WEIGHTS>  [ 1 ]
<MEANS_INVVARS>  [
  0 ]
<INV_VARS>  [
  1 ]
</DiagGMM> 
<DiagGMM> 
<GCONSTS>  [ -1.418939 ]
<WEIGHTS>  [ 1 ]
<MEANS_INVVARS>  [
  1 ]
<INV_VARS>  [
  1 ]
</DiagGMM> 
"""


def make_model(seed: int = 0, dim: int = 5):
    rng = np.random.default_rng(seed)
    topo = khg.HmmTopology()
    topo.read(TOPO)
    ctx = khg.monophone_context_dependency([1, 2, 3], topo.get_phone_to_num_pdf_classes())
    tm = khg.TransitionModel(ctx, topo)
    ws, ms, vs = [], [], []
    for _ in range(tm.num_pdfs):
        m = int(rng.integers(1, 4))
        w = rng.random(m) + 0.1
        ws.append(w / w.sum())
        ms.append(rng.normal(0, 3, (m, dim)))
        vs.append(rng.random((m, dim)) + 0.2)
    return tm, AmGmm.from_params(ws, ms, vs).to_khg()


def test_binary_round_trip_is_byte_identical(tmp_path):
    tm, am = make_model()
    p1, p2 = tmp_path / "a.mdl", tmp_path / "b.mdl"
    write_model(p1, tm, am, binary=True)
    data = p1.read_bytes()
    assert data.startswith(b"\0B<TransitionModel> <Topology> ")
    tm2, am2 = read_model(p1)
    write_model(p2, tm2, am2, binary=True)
    assert p2.read_bytes() == data
    assert tm2.__getstate__()[2:6] == tm.__getstate__()[2:6]
    assert np.array_equal(tm2.log_probs, tm.log_probs)


def test_text_round_trip_and_binary_cross_check(tmp_path):
    tm, am = make_model(1)
    text = model_to_bytes(tm, am, binary=False)
    assert text.startswith(b"<TransitionModel> \n<Topology> \n") and b"<Triples> " in text
    tm_t, am_t = read_model_bytes(text)
    text2 = model_to_bytes(tm_t, am_t, binary=False)
    # Only the gconsts may move in the 7th digit: Kaldi recomputes them from the (rounded)
    # parameters on reading.  A model read from text writes back byte-identically.
    diff = [(a, b) for a, b in zip(text.split(b"\n"), text2.split(b"\n")) if a != b]
    assert all(a.startswith(b"<GCONSTS>") for a, _ in diff)
    assert model_to_bytes(*read_model_bytes(text2), binary=False) == text2
    tm_b, am_b = read_model_bytes(model_to_bytes(tm, am, binary=True))
    # text keeps 7 significant digits, as Kaldi's text streams
    a, b = AmGmm.from_khg(am_t), AmGmm.from_khg(am_b)
    for p in range(a.num_pdfs):
        np.testing.assert_allclose(a.means(p), b.means(p), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a.weights[p], b.weights[p], rtol=1e-6)
    np.testing.assert_allclose(tm_t.log_probs, tm_b.log_probs, rtol=1e-6)
    # the transition-model part matches kaldi-hmm-gmm's own (Kaldi's) text writer: the same layout
    # byte for byte once numbers are masked (it prints 6 digits, Kaldi's files 7) ...
    import re
    mask = lambda b: re.sub(rb"-?\d+(\.\d+)?(e-?\d+)?", b"N", b)  # noqa: E731
    assert mask(text.split(b"<DIMENSION>")[0]) == mask(str(tm).encode())
    # ... and the same numbers
    ours = text.split(b"<DIMENSION>")[0].split()
    theirs = str(tm).encode().split()
    assert len(ours) == len(theirs)
    for x, y in zip(ours, theirs):
        if x != y:
            assert abs(float(x) - float(y)) < 1e-5


def test_reads_kaldi_written_text_model_and_writes_it_back_identically(tmp_path):
    path = tmp_path / "final.mdl"
    path.write_text(KALDI_TEXT_MODEL)
    tm, am = read_model(path)
    assert tm.num_pdfs == 2 and am.num_pdfs == 2 and am.dim == 2 and am.num_gauss == 3
    assert tm.num_transition_ids == 4
    assert tm.transition_id_to_pdf_array()[1:5] == [0, 0, 1, 1]
    g = AmGmm.from_khg(am)
    np.testing.assert_allclose(g.means(1), [[0.5, -0.5], [2.0, 4.0]])
    np.testing.assert_allclose(g.vars(1), [[0.5, 0.25], [4.0, 1.0]])
    np.testing.assert_allclose(np.exp(tm.log_probs[3:5]), [0.75, 0.25], rtol=1e-6)
    # our text writer reproduces Kaldi's text byte for byte (precision 7, spacing, newlines)
    assert model_to_bytes(tm, am, binary=False).decode() == KALDI_TEXT_MODEL
    # gconsts in the file are recomputed, as Kaldi does; check them against the formula
    # log w - D/2 log(2 pi) - 1/2 sum log var - 1/2 sum mean^2/var, by hand:
    want = [np.log(0.4) - np.log(2 * np.pi) + 0.5 * np.log(8) - 0.5 * (0.5 + 1.0),
            np.log(0.6) - np.log(2 * np.pi) + 0.5 * np.log(0.25) - 0.5 * (1.0 + 16.0)]
    np.testing.assert_allclose(g.gconsts(1), want, rtol=1e-6)
    np.testing.assert_allclose(am.get_pdf(1).gconsts, want, rtol=1e-6)


def test_reads_tuples_format():
    tm, am = read_model_bytes(KALDI_TEXT_TUPLES.encode())
    assert tm.num_pdfs == 2
    # self-loop (tid 1) uses the self-loop pdf 1, forward transition (tid 2) pdf 0
    assert tm.transition_id_to_pdf_array()[1:3] == [1, 0]
    assert model_to_bytes(tm, am, binary=False).decode() == KALDI_TEXT_TUPLES
    data = model_to_bytes(tm, am, binary=True)
    assert model_to_bytes(*read_model_bytes(data), binary=True) == data


def test_derived_tables_match_kaldi_hmm_gmm():
    tm, am = make_model()
    tm2, _ = read_model_bytes(model_to_bytes(tm, am))
    s1, s2 = tm.__getstate__(), tm2.__getstate__()
    assert s1[2:6] == s2[2:6]
    np.testing.assert_allclose(s1[7], s2[7], rtol=1e-6)


def nnet_style_model(tm, am, binary: bool) -> bytes:
    """A final.mdl as Kaldi's nnet2/nnet3/chain write it: the TransitionModel, then the network."""
    head = model_to_bytes(tm, am, binary=binary).split(b"<DIMENSION>")[0]
    return head + (b"<Nnet3> \ninput-node name=input dim=40\n" if not binary
                   else b"<Nnet3> \x04\x00\x00\x00garbage for a GMM reader")


@pytest.mark.parametrize("binary", [True, False])
def test_transition_model_of_an_nnet_final_mdl(tmp_path, binary):
    tm, am = make_model()
    path = tmp_path / "final.mdl"
    path.write_bytes(nnet_style_model(tm, am, binary))
    got = read_transition_model(path)
    assert got.__getstate__()[2:6] == tm.__getstate__()[2:6]
    np.testing.assert_allclose(got.log_probs, tm.log_probs, rtol=1e-6)
    with pytest.raises(PynnetError, match=f"{path}.*<DIMENSION>"):
        read_model(path)          # the GMM reader says what it expected, naming the file
    # a GMM final.mdl gives the same transition model
    write_model(tmp_path / "gmm.mdl", tm, am, binary=binary)
    assert read_transition_model(tmp_path / "gmm.mdl").__getstate__()[2:6] == tm.__getstate__()[2:6]
    with pytest.raises(PynnetError, match="no such model file"):
        read_transition_model(tmp_path / "missing.mdl")


@pytest.mark.parametrize("cut", [1, 10, 200, -30, -3])
def test_truncated_binary_model_is_a_one_line_error(tmp_path, cut):
    tm, am = make_model()
    data = model_to_bytes(tm, am)
    bad = tmp_path / "bad.mdl"
    bad.write_bytes(data[:cut] if cut > 0 else data[:len(data) + cut])
    with pytest.raises(PynnetError, match=str(bad)):
        read_model(bad)


def test_garbage_and_inconsistent_text_models(tmp_path):
    bad = tmp_path / "x.mdl"
    bad.write_text(KALDI_TEXT_MODEL.replace("<NUMPDFS> 2", "<NUMPDFS> 3"))
    with pytest.raises(PynnetError, match="line"):
        read_model(bad)
    bad.write_text(KALDI_TEXT_MODEL.replace("<LogProbs> \n [ 0 -0.6931472", "<LogProbs> \n [ 0"))
    with pytest.raises(PynnetError, match="LogProbs"):
        read_model(bad)
    bad.write_text(KALDI_TEXT_MODEL.replace("  1 1 ]", "  1 -1 ]"))
    with pytest.raises(PynnetError, match="inverse variance"):
        read_model(bad)
    bad.write_text("hello world\n")
    with pytest.raises(PynnetError, match="TransitionModel"):
        read_model(bad)
    with pytest.raises(PynnetError, match="no such"):
        read_model(tmp_path / "missing.mdl")


def test_gmm_copy_cli_text_binary_and_error(tmp_path):
    src = tmp_path / "t.mdl"
    src.write_text(KALDI_TEXT_MODEL)
    bindir = os.path.dirname(sys.executable)
    out = tmp_path / "b.mdl"
    r = subprocess.run([os.path.join(bindir, "pynnet-gmm-copy"), str(src), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    back = tmp_path / "t2.mdl"
    subprocess.run([os.path.join(bindir, "pynnet-gmm-copy"), "--binary", "false", str(out), str(back)], check=True)
    assert back.read_text() == KALDI_TEXT_MODEL
    (tmp_path / "bad.mdl").write_bytes(out.read_bytes()[:50])
    r = subprocess.run([os.path.join(bindir, "pynnet-gmm-copy"), str(tmp_path / "bad.mdl"), str(tmp_path / "o.mdl")],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.startswith("ERROR (pynnet-gmm-copy): ") and r.stderr.count("\n") == 1
    assert not (tmp_path / "o.mdl").exists()


# --------------------------------------------------------------------------- alignments
def test_alignment_round_trip_kaldi_int32_format(tmp_path):
    rng = np.random.default_rng(0)
    alis = {f"utt{i}": rng.integers(1, 30, size=int(rng.integers(0, 50))).astype(np.int32) for i in range(5)}
    write_alignments(tmp_path / "ali.1.gz", dict(list(alis.items())[:3]))
    write_alignments(tmp_path / "ali.2.gz", dict(list(alis.items())[3:]))
    raw = gzip.open(tmp_path / "ali.1.gz").read()
    # Kaldi BasicVectorHolder<int32>: "\0B" then size byte 4 + count, then size byte 4 + value each
    a0 = alis["utt0"]
    head = b"utt0 \0B\x04" + np.int32(a0.size).tobytes()
    assert raw.startswith(head)
    assert raw[len(head):len(head) + 5 * min(a0.size, 3)] == b"".join(b"\x04" + np.int32(v).tobytes() for v in a0[:3])
    back = read_alignments(tmp_path)
    assert list(back) == list(alis)
    # Kaldi rspecifiers as users type them
    assert list(read_alignments(f"ark:gunzip -c {tmp_path}/ali.*.gz|")) == list(alis)
    assert list(read_alignments(f"ark:{tmp_path}/ali.2.gz")) == list(alis)[3:]
    for k in alis:
        assert back[k].dtype == np.int32 and np.array_equal(back[k], alis[k])
    # the same alignments written again, later, elsewhere: the same bytes (no temp-file name or
    # time stamp in the gzip header), so reruns can be compared with md5sum
    (tmp_path / "again").mkdir()
    time.sleep(1.1)
    write_alignments(tmp_path / "again" / "ali.1.gz", dict(list(alis.items())[:3]))
    assert (tmp_path / "again" / "ali.1.gz").read_bytes() == (tmp_path / "ali.1.gz").read_bytes()


def test_bad_alignment_files(tmp_path):
    with pytest.raises(PynnetError, match="no ali"):
        read_alignments(tmp_path)
    (tmp_path / "ali.1.gz").write_bytes(gzip.compress(b"utt1 \0Bgarbage"))
    with pytest.raises(PynnetError, match="ali.1.gz"):
        read_alignments(tmp_path)
    import kaldiio
    with gzip.open(tmp_path / "ali.1.gz", "wb") as f:
        kaldiio.save_ark(f, {"u": np.zeros((2, 2), np.float32)})
    with pytest.raises(PynnetError, match="not an integer vector"):
        read_alignments(tmp_path)
    # an alignment dir with num_jobs 2 but only ali.1.gz (job 2 failed or was killed): an error,
    # not half the data
    d = tmp_path / "ali_dir"
    d.mkdir()
    write_alignments(d / "ali.1.gz", {"u1": np.array([1, 2], np.int32)})
    (d / "num_jobs").write_text("2\n")
    with pytest.raises(PynnetError, match=r"ali_dir: no ali.2.gz of the 2 jobs in num_jobs"):
        read_alignments(d)
    (d / "num_jobs").write_text("1\n")
    assert list(read_alignments(d)) == ["u1"]


def _phone_alignment(tm, phones_and_lengths):
    """A reordered alignment (forward transition first, then self-loops) as the training graphs make."""
    st = tm.__getstate__()
    tuples = [x.__getstate__() for x in st[0]]
    state2id = st[2]
    ali = []
    for phone, lens in phones_and_lengths:
        for hmm_state, n in enumerate(lens):
            ts = 1 + next(i for i, t in enumerate(tuples) if t[0] == phone and t[1] == hmm_state)
            tids = list(range(state2id[ts], state2id[ts + 1]))
            loop = [t for t in tids if tm.is_self_loop(t)][0]
            fwd = [t for t in tids if not tm.is_self_loop(t)][-1]
            ali += [fwd] + [loop] * (n - 1)
    return np.array(ali, np.int32)


def test_pdf_phone_views_and_split_to_phones():
    tm, _ = make_model()
    ali = _phone_alignment(tm, [(1, [4]), (2, [2, 3, 1]), (3, [1, 1, 5]), (1, [2])])
    t = TransitionTables.from_model(tm)
    phones = tids_to_phones(t, ali)
    assert phones.tolist() == [1] * 4 + [2] * 6 + [3] * 7 + [1] * 2
    pdfs = tids_to_pdfs(tm, ali)
    assert pdfs.tolist() == [np.asarray(tm.transition_id_to_pdf_array())[x] for x in ali]
    ok, pieces = split_to_phones(tm, ali)
    assert ok and [p.size for p in pieces] == [4, 6, 7, 2]
    assert phone_lengths(t, ali) == [(1, 4), (2, 6), (3, 7), (1, 2)]
    # cut in the middle of a phone: not a valid phone sequence
    ok, pieces = split_to_phones(tm, ali[:8])
    assert not ok
    with pytest.raises(PynnetError, match="out of range"):
        tids_to_pdfs(tm, np.array([0, 1], np.int32))
