"""Lattice mathematics of nnet1 sequence training (pynnet.decode.sequence): every quantity against
brute-force enumeration of the complete paths of small random lattices, derivatives against finite
differences, state times on a real decode's lattice, and the one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

from pynnet.decode.decoder import DecodeConfig, GmmScorer, decode_gmm
from pynnet.decode.lattice import Lattice, from_fst_text, read_lattice_ark
from pynnet.decode.sequence import (forward_backward, frame_intervals, has_path, mmi_posteriors,
                                    mpe_posteriors, rescore_acoustics, state_times)
from pynnet.hmm.ali_io import TransitionTables
from pynnet.io.errors import PynnetError

from test_decode import Toy

# fake model: transition-ids 1..12; pdfs 0..5 (several tids per pdf); phones 1..4, phone 4 silence
PDF = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5])
PHONE = np.array([0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4])
NUM_PDFS, SIL = 6, [4]


def _tables(pdf=PDF, phone=PHONE) -> TransitionTables:
    n = pdf.size
    return TransitionTables(pdf, phone, np.arange(n), np.zeros(n, np.int32), np.zeros(n, bool),
                            np.zeros(n, bool), np.ones(5, bool))


def random_lattice(rng, T: int, per_frame: int = 3, extras: bool = True) -> Lattice:
    """States (frame, k); arcs with transition-ids go one frame on, epsilon arcs (some with words)
    stay in their frame; several finals at frame T with final costs.  ``extras``: a dead end, an
    unreachable state with arcs, and shuffled state numbers (start not 0, not top-sorted)."""
    node = {(f, k): f * per_frame + k for f in range(T + 1) for k in range(per_frame)}
    arcs = []

    def arc(s, d, tid):
        arcs.append((s, d, tid, int(rng.integers(0, 4)), rng.uniform(0, 2), rng.uniform(0, 3)))

    for f in range(T):
        for k in range(per_frame):
            ks = rng.choice(per_frame, size=int(rng.integers(1, 3)), replace=False)
            for k2 in ks:
                arc(node[f, k], node[f + 1, k2], int(rng.integers(1, PDF.size)))
    for f in range(T + 1):
        for k in range(per_frame - 1):
            if rng.random() < 0.4:
                arc(node[f, k], node[f, int(rng.integers(k + 1, per_frame))], 0)
    finals = [node[T, k] for k in range(per_frame) if k == 0 or rng.random() < 0.6]
    S = len(node)
    if extras:
        arc(node[0, 0], S, int(rng.integers(1, PDF.size)))          # dead end
        arc(S + 1, node[1, 1], int(rng.integers(1, PDF.size)))      # from an unreachable state
        arc(S + 1, node[0, 0], 0)                                   # ... even into the start state
        S += 2
    perm = rng.permutation(S) if extras else np.arange(S)
    a = np.array(arcs, dtype=object)
    src, dst = perm[a[:, 0].astype(int)], perm[a[:, 1].astype(int)]
    lat = Lattice(S, int(perm[0]), src.astype(np.int32), dst.astype(np.int32),
                   a[:, 2].astype(np.int32), a[:, 3].astype(np.int32), a[:, 4].astype(float),
                   a[:, 5].astype(float), perm[finals].astype(np.int32),
                   rng.uniform(0, 1, len(finals)), rng.uniform(0, 1, len(finals)))
    return lat if has_path(lat) else random_lattice(rng, T, per_frame, extras)


def paths(lat: Lattice) -> list[tuple[list[int], int]]:
    """All complete paths: (arc ids, final index)."""
    out, stack = [], [(lat.start, [])]
    fin = {int(s): i for i, s in enumerate(lat.final_state)}
    while stack:
        s, p = stack.pop()
        if s in fin:
            out.append((p, fin[s]))
        for a in np.flatnonzero(lat.src == s):
            stack.append((int(lat.dst[a]), p + [int(a)]))
    return out


class Enum:
    """Brute force over complete paths."""

    def __init__(self, lat, acoustic_scale, lm_scale, ref=None, criterion="smbr", one_sil=False):
        self.lat, P = lat, paths(lat)
        w = -(lm_scale * lat.graph + acoustic_scale * lat.acoustic)
        fw = -(lm_scale * lat.final_graph + acoustic_scale * lat.final_acoustic)
        logp = np.array([w[p].sum() + fw[f] for p, f in P])
        self.total = float(np.logaddexp.reduce(logp))
        self.prob = np.exp(logp - self.total)
        self.tids = [[int(lat.ilabel[a]) for a in p if lat.ilabel[a]] for p, _ in P]
        self.arcs = [p for p, _ in P]
        T = len(self.tids[0])
        self.T = T
        self.gamma = np.zeros(lat.num_arcs)
        for pr, p in zip(self.prob, self.arcs):
            self.gamma[p] += pr
        self.den = np.zeros((T, NUM_PDFS))
        for pr, tids in zip(self.prob, self.tids):
            self.den[np.arange(T), PDF[tids]] += pr
        if ref is not None:
            self.acc = np.array([sum(_correct(t, r, criterion, one_sil) for t, r in zip(tids, ref))
                                 for tids in self.tids], float)
            self.exp_acc = float(self.prob @ self.acc)
            self.deriv = np.zeros((T, NUM_PDFS))
            for pr, tids, a in zip(self.prob, self.tids, self.acc):
                self.deriv[np.arange(T), PDF[tids]] += pr * (a - self.exp_acc)


def _reference(rng, lat: Lattice) -> np.ndarray:
    """A reference alignment near the lattice: a random complete path's transition-ids, with
    some frames replaced by random ones and one by silence."""
    P = paths(lat)
    tids = [int(lat.ilabel[a]) for a in P[int(rng.integers(len(P)))][0] if lat.ilabel[a]]
    ref = np.array(tids)
    other = rng.random(ref.size) < 0.3
    ref[other] = rng.integers(1, PDF.size, int(other.sum()))
    ref[int(rng.integers(ref.size))] = int(rng.choice([9, 10, 11, 12]))
    return ref


def _correct(tid, ref, criterion, one_sil) -> float:
    lab = PDF if criterion == "smbr" else PHONE
    same = lab[tid] == lab[ref]
    sil, rsil = PHONE[tid] in SIL, PHONE[ref] in SIL
    return float(same or (sil and rsil)) if one_sil else float(same and not sil)


def test_forward_backward_and_state_times_match_enumeration():
    rng = np.random.default_rng(1)
    for trial in range(15):
        lat = random_lattice(rng, T=int(rng.integers(1, 6)))
        e = Enum(lat, 0.3, 0.8)
        times, T = state_times(lat)
        assert T == e.T and times[lat.start] == 0
        for p in e.arcs:
            k = 0
            for a in p:
                assert times[lat.src[a]] == k
                k += lat.ilabel[a] != 0
        gamma, total = forward_backward(lat, 0.3, 0.8)
        assert total == pytest.approx(e.total, abs=1e-10)
        np.testing.assert_allclose(gamma, e.gamma, atol=1e-12)
        # posteriors of the arcs with transition-ids sum to one per frame
        nz = lat.ilabel != 0
        per_frame = np.bincount(times[lat.src[nz]][gamma[nz] > 0], gamma[nz][gamma[nz] > 0], T)
        np.testing.assert_allclose(per_frame, 1.0, atol=1e-12)


@pytest.mark.parametrize("criterion", ["smbr", "mpfe"])
@pytest.mark.parametrize("one_sil", [False, True])
def test_mpe_matches_enumeration(criterion, one_sil):
    rng = np.random.default_rng(2 + one_sil + 2 * (criterion == "mpfe"))
    tables = _tables()
    for trial in range(12):
        lat = random_lattice(rng, T=int(rng.integers(1, 6)))
        T = state_times(lat)[1]
        ref = _reference(rng, lat)
        e = Enum(lat, 0.7, 1.3, ref, criterion, one_sil)
        derivs, acc = mpe_posteriors(lat, ref, tables, SIL, criterion=criterion,
                                     one_silence_class=one_sil, acoustic_scale=0.7, lm_scale=1.3)
        assert derivs.dtype == np.float32 and derivs.shape == (T, NUM_PDFS)
        assert acc == pytest.approx(e.exp_acc, abs=1e-10)
        np.testing.assert_allclose(derivs, e.deriv, atol=1e-6)


@pytest.mark.parametrize("criterion,one_sil", [("smbr", False), ("smbr", True), ("mpfe", False), ("mpfe", True)])
def test_mpe_derivative_is_d_expected_accuracy_d_scaled_loglike(criterion, one_sil):
    """Finite differences through rescore_acoustics: d E[acc] / d loglikes = acoustic_scale * derivs."""
    rng = np.random.default_rng(11)
    tables = _tables()
    kappa, largest = 0.6, 0.0
    for trial in range(3):
        lat = random_lattice(rng, T=4)
        T = state_times(lat)[1]
        ref = _reference(rng, lat)
        ll = rng.normal(0, 2, (T, NUM_PDFS))

        def acc(x):
            return mpe_posteriors(rescore_acoustics(lat, x, PDF), ref, tables, SIL, criterion=criterion,
                                  one_silence_class=one_sil, acoustic_scale=kappa, lm_scale=1.0)[1]

        derivs = mpe_posteriors(rescore_acoustics(lat, ll, PDF), ref, tables, SIL, criterion=criterion,
                                one_silence_class=one_sil, acoustic_scale=kappa)[0]
        fd = np.zeros_like(ll)
        h = 1e-5
        for t in range(T):
            for p in range(NUM_PDFS):
                d = np.zeros_like(ll)
                d[t, p] = h
                fd[t, p] = (acc(ll + d) - acc(ll - d)) / (2 * h)
        np.testing.assert_allclose(kappa * derivs, fd, atol=2e-6)
        largest = max(largest, np.abs(fd).max())
    assert largest > 1e-2          # (not trivially zero)


def test_rescore_acoustics():
    rng = np.random.default_rng(3)
    lat = random_lattice(rng, T=5)
    times, T = state_times(lat)
    ll = rng.normal(0, 1, (T, NUM_PDFS))
    new = rescore_acoustics(lat, ll, PDF)
    live = (lat.ilabel != 0) & (times[lat.src] >= 0)
    np.testing.assert_array_equal(new.acoustic[live], -ll[times[lat.src[live]], PDF[lat.ilabel[live]]])
    assert not new.acoustic[~live].any() and not new.final_acoustic.any()   # old scale 0: discarded
    kept = rescore_acoustics(lat, ll, PDF, old_acoustic_scale=0.5)
    np.testing.assert_allclose(kept.acoustic, 0.5 * lat.acoustic + new.acoustic)
    np.testing.assert_allclose(kept.final_acoustic, 0.5 * lat.final_acoustic)
    assert new.graph is lat.graph and lat.acoustic.any()                   # input untouched
    with pytest.raises(PynnetError, match=f"log-likelihoods have {T + 1} frames, the lattice {T} "):
        rescore_acoustics(lat, np.zeros((T + 1, NUM_PDFS)), PDF)
    with pytest.raises(PynnetError, match="the log-likelihoods have 3 columns"):
        rescore_acoustics(lat, np.zeros((T, 3)), PDF)
    with pytest.raises(PynnetError, match=r"lattice has transition-id \d+, the model has 1..4 "):
        rescore_acoustics(lat, ll, PDF[:5])


def test_mmi_matches_enumeration_and_drops_frames():
    rng = np.random.default_rng(4)
    tables = _tables()
    for trial in range(12):
        lat = random_lattice(rng, T=int(rng.integers(2, 6)))
        T = state_times(lat)[1]
        ll = rng.normal(0, 2, (T, NUM_PDFS))
        lat = rescore_acoustics(lat, ll, PDF)
        e = Enum(lat, 0.5, 1.0)
        # a reference along a lattice path, then one frame's pdf that no arc of that frame has
        ref = np.array(e.tids[int(rng.integers(len(e.tids)))])
        absent = [t for t in range(T) if e.den[t].min() == 0]
        if absent:
            t0 = absent[0]
            ref[t0] = 1 + int(np.flatnonzero(PDF[1:] == np.flatnonzero(e.den[t0] == 0)[0])[0])
        num = np.zeros((T, NUM_PDFS))
        num[np.arange(T), PDF[ref]] = 1
        for drop in (True, False):
            diff, st = mmi_posteriors(lat, ref, tables, acoustic_scale=0.5, drop_frames=drop, loglikes=ll)
            assert diff.dtype == np.float32 and diff.shape == (T, NUM_PDFS)
            dropped = [t for t in range(T) if e.den[t, PDF[ref[t]]] < 1e-20]
            assert st.dropped_frames.tolist() == dropped == absent[:1]
            want = e.den - num
            if drop:
                want[dropped] = 0
            np.testing.assert_allclose(diff, want, atol=1e-6)
            np.testing.assert_allclose(diff.sum(axis=1), 0, atol=1e-6)    # kept frames sum to zero
            assert st.lattice_loglike == pytest.approx(e.total, abs=1e-10)
            assert st.post_on_ali == pytest.approx(e.den[np.arange(T), PDF[ref]].sum(), abs=1e-6)
            assert st.objective == pytest.approx(0.5 * ll[np.arange(T), PDF[ref]].sum() - e.total, abs=1e-9)
            assert st.num_frames == T
    assert mmi_posteriors(lat, ref, tables)[1].objective is None
    assert frame_intervals([3, 4, 5, 9, 11, 12]) == "3..5frm 9..9frm 11..12frm"
    assert frame_intervals([]) == ""


def test_expected_accuracy_tends_to_frames_when_the_best_path_is_the_reference():
    rng = np.random.default_rng(5)
    tables = _tables()
    for trial in range(4):
        lat = random_lattice(rng, T=6)
        T = state_times(lat)[1]
        lat = rescore_acoustics(lat, rng.normal(0, 3, (T, NUM_PDFS)), PDF)
        e = Enum(lat, 1.0, 1.0)
        P = paths(lat)
        ac = [lat.acoustic[p].sum() for p, _ in P]
        ref = np.array(e.tids[int(np.argmin(ac))])
        for criterion, one_sil, sil in (("smbr", False, []), ("mpfe", False, []), ("smbr", True, SIL),
                                        ("mpfe", True, SIL)):
            accs = [mpe_posteriors(lat, ref, tables, sil, criterion=criterion, one_silence_class=one_sil,
                                   acoustic_scale=k)[1] for k in (0.1, 1.0, 10.0, 1000.0)]
            assert accs[-1] == pytest.approx(T, abs=1e-6), (criterion, accs)
            assert accs[0] < T - 1e-3
    # without one_silence_class, silence frames never count: at most the non-silence frames
    ref_sil = ref.copy()
    ref_sil[0] = 9
    acc = mpe_posteriors(lat, ref_sil, tables, SIL, acoustic_scale=1000.0)[1]
    assert acc <= T - 1 + 1e-9


@pytest.fixture(scope="module")
def toy():
    return Toy()


def test_real_decode_lattice(toy, tmp_path):
    """A decoder lattice (lattice beam 7) written in Kaldi's format and read back: state times give
    the alignment's length, rescoring with the decoder's own log-likelihoods gives back its acoustic
    costs (times and pdfs line up), per-frame posteriors sum to one, MPE and MMI work on it."""
    seq = [2, 5, 2, 6]
    x = toy.feats(seq, blend={1: (6, 0.45)}, noise=0.6, seed=3)
    r = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1, DecodeConfig(beam=16.0, lattice_beam=7.0))
    p = tmp_path / "lat.txt"
    p.write_text(r.lattice.to_kaldi_text("utt1"))
    (key, lat), = list(read_lattice_ark(f"ark:{p}"))
    tables = TransitionTables.from_model(toy.tm)
    times, T = state_times(lat)
    assert T == len(r.alignment) == len(x) and has_path(lat)
    ll = GmmScorer(toy.am).loglikes(x)
    new = rescore_acoustics(lat, ll, tables.pdf)
    nz = lat.ilabel != 0
    np.testing.assert_allclose(new.acoustic[nz], lat.acoustic[nz], rtol=1e-4, atol=1e-3)
    gamma, total = forward_backward(new, 0.1)
    np.testing.assert_allclose(np.bincount(times[lat.src[nz]], gamma[nz], T), 1.0, atol=1e-9)
    derivs, acc = mpe_posteriors(new, np.asarray(r.alignment), tables, [], acoustic_scale=0.1,
                                 num_pdfs=toy.tm.num_pdfs)
    assert derivs.shape == (T, toy.tm.num_pdfs) and 0 < acc <= T
    np.testing.assert_allclose(derivs.sum(axis=1), 0, atol=1e-4)   # sum_arcs gamma (c - c_avg) = 0 per frame
    diff, st = mmi_posteriors(new, np.asarray(r.alignment), tables, acoustic_scale=0.1)
    assert st.dropped_frames.size == 0 and 0 < st.post_on_ali <= T


def test_topology_is_shared_by_shape_not_by_identity():
    """rescore_acoustics and the posterior functions share one topology computation per lattice
    shape; a lattice changed in place, or another one, is not taken for the last one."""
    lat = from_fst_text("0\t1\t1\t0\t0,1\n1\t2\t0\t0\t0,1\n2\t0,0\n")
    assert state_times(lat)[0].tolist() == [0, 1, 1] and state_times(lat)[1] == 1
    lat.ilabel[1] = 2           # the epsilon arc 1 -> 2 now takes a frame
    assert state_times(lat)[0].tolist() == [0, 1, 2] and state_times(lat)[1] == 2
    other = from_fst_text("0\t1\t1\t0\t0,1\n1\t0,0\n")
    assert state_times(other)[1] == 1 and state_times(lat)[1] == 2


def test_errors_and_empty_lattices():
    tables = _tables()
    cyc = from_fst_text("0\t1\t1\t0\t0,1\n1\t0\t2\t0\t0,1\n1\t0,0\n")
    with pytest.raises(PynnetError, match="cycle"):
        state_times(cyc)
    uneven = from_fst_text("0\t1\t1\t0\t0,1\n1\t2\t2\t0\t0,1\n0\t2\t3\t0\t0,1\n2\t0,0\n")
    with pytest.raises(PynnetError, match="paths have different lengths: state 2 is reached after 1 and after 2 frames"):
        state_times(uneven)
    two_ends = from_fst_text("0\t1\t1\t0\t0,1\n1\t2\t2\t0\t0,1\n1\t0,0\n2\t0,0\n")
    with pytest.raises(PynnetError, match="final state 1 is at frame 1, the lattice reaches frame 2"):
        mpe_posteriors(two_ends, [1, 1], tables, SIL)
    ok = from_fst_text("0\t1\t1\t0\t0,1\n1\t2\t2\t0\t0,1\n2\t0,0\n")
    with pytest.raises(PynnetError, match="reference alignment has 3 frames, the lattice 2"):
        mpe_posteriors(ok, [1, 2, 3], tables, SIL)
    with pytest.raises(PynnetError, match="reference alignment has 3 frames, the lattice 2"):
        mmi_posteriors(ok, [1, 2, 3], tables)
    with pytest.raises(PynnetError, match="reference alignment has transition-id 13, the model has 1..12"):
        mmi_posteriors(ok, [1, 13], tables)
    with pytest.raises(PynnetError, match="reference alignment has transition-id 0"):
        mpe_posteriors(ok, [0, 1], tables, SIL)
    big = from_fst_text("0\t1\t1\t0\t0,1\n1\t2\t40\t0\t0,1\n2\t0,0\n")
    with pytest.raises(PynnetError, match="lattice has transition-id 40, the model has 1..12"):
        mpe_posteriors(big, [1, 2], tables, SIL)
    with pytest.raises(PynnetError, match="unknown criterion 'mpe'"):
        mpe_posteriors(ok, [1, 2], tables, SIL, criterion="mpe")
    with pytest.raises(PynnetError, match="log-likelihoods are 3x6"):
        mmi_posteriors(ok, [1, 2], tables, loglikes=np.zeros((3, 6)))
    # empty lattices: what Kaldi's readers give for an empty FST, and a lattice without a final state
    empty = Lattice(1, 0, *(np.zeros(0, np.int32),) * 4, *(np.zeros(0),) * 2,
                    np.zeros(0, np.int32), np.zeros(0), np.zeros(0))
    no_final = from_fst_text("0\t1\t1\t0\t0,1\n1\t2\t2\t0\t0,1\n")
    for lat in (empty, no_final):
        assert not has_path(lat)
        assert mpe_posteriors(lat, [1, 2], tables, SIL) is None
        assert mmi_posteriors(lat, [1, 2], tables) is None
        gamma, total = forward_backward(lat)
        assert total == -np.inf and not gamma.any()
        with pytest.raises(PynnetError, match="empty lattice: no path from the start state to a final state"):
            state_times(lat)
        with pytest.raises(PynnetError, match="empty lattice"):
            rescore_acoustics(lat, np.zeros((2, 6)), PDF)
    assert has_path(ok)
