"""Frame pipeline: targets via the TransitionModel, CV hold-out, bounded chunked randomizer that
covers every frame once per epoch, double-buffered loader, splicing, deltas, global CMVN."""
import threading
import time

import numpy as np
import pytest
import torch

import pynnet.nnet.data as D
from pynnet.io.errors import PynnetError
from pynnet.nnet.model import FeatureTransform, splice_frames
from pynnet.nnet.toy import make_toy_corpus


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipe")
    data, ali = make_toy_corpus(str(root), num_utts=30, drop_ali=3)
    tr, cv, n = D.load_frame_sets(data, ali, apply_cmvn=True, delta_order=0, cv_percent=10, seed=3)
    return data, ali, tr, cv, n


def test_targets_are_pdfs_of_the_alignment(sets):
    data, ali, tr, cv, n = sets
    from pynnet.hmm.ali_io import read_alignments
    from pynnet.hmm.model_io import read_model
    tm, _ = read_model(f"{ali}/final.mdl")
    tids = read_alignments(ali)
    u = tr.utts[0]
    expect = np.array([tm.transition_id_to_pdf(int(t)) for t in tids[u]])
    assert np.array_equal(tr.targets[u], expect)
    assert n == tm.num_pdfs == 12


def test_cv_holdout_by_utterance(sets):
    data, ali, tr, cv, n = sets
    assert len(tr.utts) + len(cv.utts) == 27 and len(cv.utts) == 3
    assert not set(tr.utts) & set(cv.utts)
    tr2, cv2, _ = D.load_frame_sets(data, ali, apply_cmvn=True, delta_order=0, cv_percent=10, seed=3)
    assert cv2.utts == cv.utts   # deterministic for a seed
    _, cv3, _ = D.load_frame_sets(data, ali, apply_cmvn=True, delta_order=0, cv_percent=10, seed=4)
    assert cv3.utts != cv.utts


def _epoch(tr, epoch, buffer_frames, seed=1):
    tf = FeatureTransform(6, 0)
    chunks = D.plan_chunks(tr, epoch, seed, buffer_frames)
    loader = D.ChunkLoader(tr, chunks, tf, 0, [seed, epoch, 2])
    out = [(ch.index, ch.x[ch.order], ch.y[ch.order]) for ch in loader]
    return chunks, out


def test_randomizer_bounded_and_covers_every_frame_once(sets):
    _, _, tr, _, n = sets
    chunks, out = _epoch(tr, 1, buffer_frames=300)
    assert len(chunks) > 3
    for c in chunks:
        assert sum(tr.frames[u] for u in c) <= 300 or len(c) == 1
    assert sorted(u for c in chunks for u in c) == sorted(tr.utts)
    ys = torch.cat([y for _, _, y in out]).numpy()
    expect = np.concatenate([tr.targets[u] for u in tr.utts])
    assert len(ys) == tr.num_frames
    assert np.array_equal(np.bincount(ys, minlength=n), np.bincount(expect, minlength=n))
    # every feature row appears exactly once (rows are distinct random vectors)
    xs = torch.cat([x for _, x, _ in out])
    allx = torch.cat([torch.from_numpy(tr.reader.read(u)) for u in tr.utts])
    a = sorted(map(tuple, xs.numpy().round(5).tolist()))
    b = sorted(map(tuple, allx.numpy().round(5).tolist()))
    assert a == b
    # frames are shuffled inside a chunk, not left in utterance order
    _, x0, _ = out[0]
    first = torch.cat([torch.from_numpy(tr.reader.read(u)) for u in chunks[0]])
    assert not torch.equal(x0, first)


def test_epoch_order_is_deterministic_and_changes_per_epoch(sets):
    _, _, tr, _, _ = sets
    c1, o1 = _epoch(tr, 1, 300)
    c1b, o1b = _epoch(tr, 1, 300)
    c2, o2 = _epoch(tr, 2, 300)
    assert c1 == c1b and all(torch.equal(a[1], b[1]) for a, b in zip(o1, o1b))
    assert c1 != c2


def test_loader_keeps_at_most_two_buffers(sets, monkeypatch):
    _, _, tr, _, _ = sets
    real = D.load_chunk
    loaded, lock = [], threading.Lock()

    def counting(*a, **k):
        ch = real(*a, **k)
        with lock:
            loaded.append(ch.index)
        return ch

    monkeypatch.setattr(D, "load_chunk", counting)
    tf = FeatureTransform(6, 0)
    chunks = D.plan_chunks(tr, 1, 0, 200)
    assert len(chunks) >= 6
    loader = D.ChunkLoader(tr, chunks, tf, 0, [0])
    consumed = 0
    for ch in loader:
        time.sleep(0.05)   # a slow trainer: the loader must not run ahead
        with lock:
            ahead = len(loaded) - consumed
        assert ahead <= 2, (len(loaded), consumed)
        consumed += 1
    assert consumed == len(chunks)
    # started mid-epoch, it continues from that chunk
    loader = D.ChunkLoader(tr, chunks, tf, 3, [0])
    assert [ch.index for ch in loader] == list(range(3, len(chunks)))


def test_loader_thread_runs_torch_single_threaded(sets, monkeypatch):
    # With its own OpenMP team of the trainer's size, the loader stalled the training's GEMMs:
    # two training threads were slower than one. The trainer's count must stay as it was.
    _, _, tr, _, _ = sets
    real = D.load_chunk
    seen = []

    def recording(*a, **k):
        seen.append(torch.get_num_threads())
        return real(*a, **k)

    monkeypatch.setattr(D, "load_chunk", recording)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        loader = D.ChunkLoader(tr, D.plan_chunks(tr, 1, 0, 200), FeatureTransform(6, 0), 0, [0])
        for _ in loader:
            assert torch.get_num_threads() == 2
        loader.close()
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_loader_errors_reach_the_trainer(sets, tmp_path):
    data, ali, tr, _, _ = sets
    import copy
    bad = copy.copy(tr)
    bad.reader = copy.copy(tr.reader)
    bad.reader.scp = dict(tr.reader.scp)
    bad.reader.scp[tr.utts[-1]] = str(tmp_path / "missing.ark") + ":10"
    chunks = D.plan_chunks(bad, 1, 0, 10 ** 6, shuffle=False)
    with pytest.raises(PynnetError, match=f"cannot read features of '{tr.utts[-1]}'"):
        list(D.ChunkLoader(bad, chunks, FeatureTransform(6, 0), 0, None))


def test_splice_replicates_edges():
    x = torch.arange(12, dtype=torch.float32).view(4, 3)
    s = splice_frames(x, 1)
    assert s.shape == (4, 9)
    assert torch.equal(s[0], torch.cat([x[0], x[0], x[1]]))
    assert torch.equal(s[2], torch.cat([x[1], x[2], x[3]]))
    assert torch.equal(s[3], torch.cat([x[2], x[3], x[3]]))


def test_add_deltas_matches_kaldi_formula():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 3)).astype(np.float32)
    y = D.add_deltas(x, 2)
    assert y.shape == (20, 9)
    xp = np.concatenate([x[:1]] * 4 + [x] + [x[-1:]] * 4)   # edge replication
    def delta(a, t):
        return sum(n * (a[t + n] - a[t - n]) for n in (1, 2)) / 10.0
    d1 = np.array([delta(xp, t) for t in range(2, len(xp) - 2)])   # on the padded signal
    d2 = np.array([delta(d1, t) for t in range(2, len(d1) - 2)])
    assert np.allclose(y[:, 3:6], d1[2:-2], atol=1e-5)
    # second order: Kaldi convolves the filters and clamps indices on the ORIGINAL features
    assert np.allclose(y[:, 6:9], d2, atol=1e-5)


def test_global_cmvn_and_per_speaker_cmvn(sets):
    _, _, tr, _, _ = sets
    mean, std = D.global_cmvn(tr, progress=False)
    allx = np.concatenate([tr.reader.read(u) for u in tr.utts]).astype(np.float64)
    assert np.allclose(mean, allx.mean(0), atol=1e-4) and np.allclose(std, allx.std(0), atol=1e-4)
    # per-speaker mean normalisation: each speaker's frames have ~zero mean
    spk_frames = {}
    for u in tr.utts:
        spk_frames.setdefault(tr.reader.utt2spk[u], []).append(tr.reader.read(u))
    for fr in spk_frames.values():
        # the stats cover all of the speaker's utterances, so only approximately zero on a subset
        assert np.abs(np.concatenate(fr).mean(0)).max() < 0.5
    tf = FeatureTransform(6, 2)
    tf.set_global_cmvn(mean, std)
    z = tf(torch.from_numpy(allx.astype(np.float32)))
    assert z.shape[1] == 30
    assert np.allclose(z[:, 12:18].mean(0).numpy(), 0, atol=1e-3)
    assert np.allclose(z[:, 12:18].std(0).numpy(), 1, atol=1e-2)


def test_global_cmvn_samples_utterances_at_random_beyond_max_frames(sets, monkeypatch):
    # over the limit, the first utterances in sorted order would be one or two speakers
    _, _, tr, _, _ = sets
    limit = tr.num_frames // 3
    real, read = D.read_example, []

    def recording(fs, u):
        read.append(u)
        return real(fs, u)

    monkeypatch.setattr(D, "read_example", recording)
    mean, std = D.global_cmvn(tr, max_frames=limit, progress=False)
    spk = tr.reader.utt2spk
    assert len({spk[u] for u in read}) == 4
    prefix = tr.utts[:len(read)]
    assert len({spk[u] for u in prefix}) <= 2 and set(read) != set(prefix)
    x = np.concatenate([tr.reader.read(u) for u in read]).astype(np.float64)
    assert len(x) >= limit and np.allclose(mean, x.mean(0), atol=1e-4) and np.allclose(std, x.std(0), atol=1e-4)
    read.clear()
    assert np.array_equal(D.global_cmvn(tr, max_frames=limit, progress=False)[0], mean)  # seeded


def test_length_mismatch_is_skipped_with_a_message(sets, capsys):
    _, _, tr, _, _ = sets
    import copy
    bad = copy.copy(tr)
    bad.targets = dict(tr.targets)
    u = tr.utts[1]
    bad.targets[u] = tr.targets[u][:-2]
    assert D.read_example(bad, u) is None
    assert f"utterance '{u}': {tr.frames[u]} feature frames but {tr.frames[u] - 2} alignment frames; skipping" \
        in capsys.readouterr().err
    ch = D.load_chunk(bad, tr.utts[:3], FeatureTransform(6, 0), 0, None)
    assert len(ch.y) == tr.frames[tr.utts[0]] + tr.frames[tr.utts[2]]
    assert torch.equal(ch.y[:tr.frames[tr.utts[0]]], torch.from_numpy(tr.targets[tr.utts[0]].astype(np.int64)))


def test_non_finite_features_are_skipped_with_a_message(tmp_path, capsys):
    import kaldiio
    data, ali = make_toy_corpus(str(tmp_path), num_utts=12)
    feats = dict(kaldiio.load_scp(f"{data}/feats.scp"))
    bad = sorted(feats)[:2]
    for u, v in zip(bad, (np.nan, np.inf)):
        m = feats[u].copy()
        m[3, 2] = v
        feats[u] = m
    kaldiio.save_ark(f"{data}/feats2.ark", {u: feats[u] for u in sorted(feats)}, scp=f"{data}/feats.scp")
    tr, cv, _ = D.load_frame_sets(data, ali, apply_cmvn=False, delta_order=0, cv_percent=10, seed=0)
    fs = D.FrameSet(tr.reader, tr.targets, sorted(tr.utts + cv.utts), tr.frames)
    mean, std = D.global_cmvn(fs, progress=False)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    ch = D.load_chunk(fs, fs.utts, FeatureTransform(6, 1), 0, None)
    assert torch.isfinite(ch.x).all() and len(ch.y) == sum(fs.frames[u] for u in fs.utts if u not in bad)
    err = capsys.readouterr().err
    for u in bad:
        assert f"WARNING: utterance '{u}': NaN or inf in its features; skipping" in err


def test_feature_dim_not_matching_the_model_is_an_error(sets):
    _, _, tr, _, _ = sets
    u = tr.utts[0]
    with pytest.raises(PynnetError, match=f"feature dim 6 of utterance '{u}' != model input dim 5") as e:
        D.load_chunk(tr, [u], FeatureTransform(5, 2), 0, None)
    assert f"feats.scp:{tr.reader.line[u]}" in str(e.value)


def test_missing_cmvn_is_an_error(tmp_path):
    data, ali = make_toy_corpus(str(tmp_path), num_utts=6)
    import os
    os.unlink(f"{data}/cmvn.scp")
    with pytest.raises(PynnetError, match="cmvn.scp: needed for --apply-cmvn true"):
        D.load_frame_sets(data, ali, apply_cmvn=True, delta_order=0, cv_percent=10, seed=0)


def _damaged_cmvn_scps(data, out):
    """cmvn.scp variants whose second speaker's stats are damaged: {name: (scp path, message)}."""
    import kaldiio
    good = dict(kaldiio.load_scp(f"{data}/cmvn.scp"))
    spks = sorted(good)
    raw = open(f"{data}/cmvn.ark", "rb").read()
    zero = good[spks[1]].copy()
    zero[0, -1] = 0.0
    bad = {"vector": good[spks[1]][0], "zero_count": zero}
    scps = {}
    for name, m in bad.items():
        kaldiio.save_ark(f"{out}/{name}.ark", {s: (m if s == spks[1] else good[s]) for s in spks},
                         scp=f"{out}/{name}.scp")
        scps[name] = (f"{out}/{name}.scp", "not Kaldi CMVN stats")
    # an ark cut inside the second speaker's matrix
    with open(f"{data}/cmvn.scp") as f:
        lines = f.read().splitlines()
    cut = int(lines[1].rsplit(":", 1)[1]) + 20
    open(f"{out}/trunc.ark", "wb").write(raw[:cut])
    with open(f"{out}/trunc.scp", "w") as f:
        f.writelines(f"{ln.split()[0]} {out}/trunc.ark:{ln.rsplit(':', 1)[1]}\n" for ln in lines)
    scps["truncated"] = (f"{out}/trunc.scp", "cannot read the CMVN stats of speaker")
    # an offset that does not point at a matrix
    with open(f"{out}/offset.scp", "w") as f:
        f.writelines(f"{ln.rsplit(':', 1)[0]}:{int(ln.rsplit(':', 1)[1]) + (2 if i == 1 else 0)}\n"
                     for i, ln in enumerate(lines))
    scps["offset"] = (f"{out}/offset.scp", "cannot read the CMVN stats of speaker")
    return spks[1], scps


def test_damaged_cmvn_stats_are_one_line_errors(tmp_path):
    import shutil
    data, ali = make_toy_corpus(str(tmp_path), num_utts=8)
    spk, scps = _damaged_cmvn_scps(data, str(tmp_path))
    utt = next(u for u in sorted(open(f"{data}/feats.scp").read().split()[::2]) if u.startswith(spk))
    for name, (scp, msg) in scps.items():
        shutil.copy(scp, f"{data}/cmvn.scp")
        reader = D.FeatureReader(data, apply_cmvn=True)
        with pytest.raises(PynnetError, match=msg) as e:
            reader.read(utt)
        assert "cmvn.scp:2: " in str(e.value) and "\n" not in str(e.value), name


def test_alignments_are_read_one_file_at_a_time(tmp_path):
    from pynnet.hmm.ali_io import read_alignments, read_alignments_by_file, write_alignments
    _, ali = make_toy_corpus(str(tmp_path), num_utts=8)
    alis = read_alignments(ali)
    keys = sorted(alis)
    import os
    import shutil
    split = tmp_path / "split"
    split.mkdir()
    shutil.copy(f"{ali}/final.mdl", split / "final.mdl")
    write_alignments(split / "ali.1.gz", {k: alis[k] for k in keys[:5]})
    write_alignments(split / "ali.2.gz", {k: alis[k] for k in keys[5:]})
    parts = list(read_alignments_by_file(str(split)))
    assert [os.path.basename(f) for f, _ in parts] == ["ali.1.gz", "ali.2.gz"]
    assert [sorted(p) for _, p in parts] == [keys[:5], keys[5:]]
    pdfs, n = D.read_pdf_alignments(str(split))
    assert sorted(pdfs) == keys and all(a.dtype == np.int16 for a in pdfs.values())
    # an utterance in two files is an error naming the second
    write_alignments(split / "ali.2.gz", {k: alis[k] for k in keys[4:]})
    with pytest.raises(PynnetError, match=f"ali.2.gz: duplicate utterance '{keys[4]}' in alignments"):
        D.read_pdf_alignments(str(split))
    with pytest.raises(PynnetError, match="ali.2.gz: duplicate utterance"):
        read_alignments(str(split))


def test_alignments_of_a_kaldi_nnet_system(tmp_path):
    """ali.*.gz with the final.mdl of a Kaldi nnet2/nnet3/chain dir (the TransitionModel followed
    by the network): only the transition model is read, as Kaldi's ali-to-pdf does."""
    import shutil
    from pynnet.hmm.model_io import model_to_bytes, read_model
    _, ali = make_toy_corpus(str(tmp_path), num_utts=8)
    want, n = D.read_pdf_alignments(ali)
    nnet = tmp_path / "nnet_ali"
    shutil.copytree(ali, nnet)
    head = model_to_bytes(*read_model(f"{ali}/final.mdl")).split(b"<DIMENSION>")[0]
    (nnet / "final.mdl").write_bytes(head + b"<Nnet3> \x04\x00\x00\x00not a GMM")
    got, n2 = D.read_pdf_alignments(str(nnet))
    assert n2 == n and sorted(got) == sorted(want)
    assert all(np.array_equal(got[u], want[u]) for u in want)
