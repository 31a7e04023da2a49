"""Decoding on a toy HCLG: a monophone model with hand-set Gaussians, a word-loop graph built
with kaldifst from kaldi-hmm-gmm's training-graph compiler, and features synthesised for a
known word sequence."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before kaldifst)
import kaldifst

from pynnet.decode.decoder import DecodeConfig, GmmScorer, decode_gmm, decode_loglikes, read_hclg
from pynnet.decode.lattice import best_paths, from_fst_text, path_cost, read_lattice_ark
from pynnet.io.errors import PynnetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOPO = """<Topology>
<TopologyEntry>
<ForPhones> 1 2 3 4 5 6 </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
</Topology>"""
PHONES = [1, 2, 3, 4, 5, 6]
# word id -> phones; words 5/6 share phone 5 and differ in one phone (acoustically close).
LEXICON = {1: [1, 2], 2: [3, 4], 3: [2, 3], 4: [4, 1], 5: [5, 6], 6: [5, 1]}
WORDS = {0: "<eps>", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


class Toy:
    def __init__(self, word_costs: dict[int, float] | None = None, sep: float = 3.0):
        topo = khg.HmmTopology()
        topo.read(TOPO)
        self.ctx = khg.monophone_context_dependency(PHONES, [0] + [3] * len(PHONES))
        self.tm = khg.TransitionModel(self.ctx, topo)
        self.D = self.tm.num_pdfs
        self.am = khg.AmDiagGmm()
        for p in range(self.D):  # pdf p: mean sep * e_p, unit variance, two components
            g = khg.DiagGmm(2, self.D)
            m = np.zeros((2, self.D))
            m[0, p] = sep
            m[1, p] = sep * 0.9
            g.set_means(m)
            g.set_invvars(np.ones((2, self.D)))
            g.set_weights(np.array([0.6, 0.4]))
            g.compute_gconsts()
            self.am.add_pdf(g)
        self.word_costs = word_costs or {w: 1.0 for w in LEXICON}
        self.hclg = self._hclg()

    def _hclg(self):
        # Lexicon transducer with a loop at state 0, as compile-train-graphs expects L.fst.
        lines, n = [], 1
        for w, ph in LEXICON.items():
            prev = 0
            for i, p in enumerate(ph):
                nxt = 0 if i == len(ph) - 1 else n
                n += 1 if nxt else 0
                lines.append(f"{prev} {nxt} {p} {w if i == 0 else 0}")
                prev = nxt
        lines.append("0")
        lex = kaldifst.compile(s="\n".join(lines) + "\n", acceptor=False)
        gc = khg.TrainingGraphCompiler(self.tm, self.ctx, lex, [], khg.TrainingGraphCompilerOptions())
        # Word loop: state 0 --eps/cost(w)--> word graph of w --eps--> 0; 0 is final.
        out, base = [], 1
        for w in LEXICON:
            wg = gc.compile_graph_from_text([w])
            finals = []
            for ln in wg.to_str().strip().split("\n"):
                f = ln.split()
                if len(f) >= 4:
                    out.append(f"{int(f[0]) + base} {int(f[1]) + base} {f[2]} {f[3]} "
                               f"{f[4] if len(f) > 4 else 0}")
                else:
                    finals.append((int(f[0]) + base, float(f[1]) if len(f) > 1 else 0.0))
            out.append(f"0 {wg.start + base} 0 0 {self.word_costs[w]}")
            out += [f"{s} 0 0 0 {c}" for s, c in finals]
            base += wg.num_states
        out.append("0 0")
        # AT&T text: the first line's source state is the start state, so list state 0 first.
        out.sort(key=lambda ln: ln.split()[0] != "0")
        return kaldifst.compile(s="\n".join(out) + "\n", acceptor=False)

    def pdfs_of_word(self, w: int) -> list[int]:
        # monophone tree: pdf = 3*(phone-1) + pdf-class
        return [3 * (p - 1) + k for p in LEXICON[w] for k in range(3)]

    def feats(self, words: list[int], frames_per_state: int = 3, noise: float = 0.4, seed: int = 0,
              blend: dict[int, tuple[int, float]] | None = None) -> np.ndarray:
        """Frames near each pdf's mean; ``blend`` = {position: (other word, weight)} mixes the
        means of another word's pdfs into that word (acoustic ambiguity)."""
        rng = np.random.default_rng(seed)
        rows = []
        for i, w in enumerate(words):
            pdfs = self.pdfs_of_word(w)
            other = None
            if blend and i in blend:
                other = self.pdfs_of_word(blend[i][0])
                lam = blend[i][1]
            for j, p in enumerate(pdfs):
                for _ in range(frames_per_state):
                    v = np.zeros(self.D)
                    v[p] = 3.0
                    if other is not None:
                        v *= 1 - lam
                        v[other[j]] += 3.0 * lam
                    rows.append(v)
        x = np.array(rows) + rng.normal(0, noise, (len(rows), self.D))
        return x.astype(np.float32)


@pytest.fixture(scope="module")
def toy():
    return Toy()


def test_gmm_loglikes_match_kaldi(toy):
    x = toy.feats([1, 2])
    ll = GmmScorer(toy.am).loglikes(x)
    ref = np.array([[toy.am.log_likelihood(p, x[t]) for p in range(toy.D)] for t in range(len(x))])
    assert np.abs(ll - ref).max() < 1e-3


def test_decode_recovers_words(toy):
    seq = [1, 2, 3, 4, 5, 6, 2]
    r = decode_gmm(toy.hclg, toy.tm, toy.am, toy.feats(seq), 0.1)
    assert r.ok and not r.partial
    assert r.words == seq
    assert len(r.alignment) == r.num_frames == 3 * 3 * 2 * len(seq)
    # the alignment's pdfs are the ones the features were generated from
    t2p = np.asarray(toy.tm.transition_id_to_pdf_array())
    expect = [p for w in seq for p in toy.pdfs_of_word(w) for _ in range(3)]
    assert [int(t2p[t]) for t in r.alignment] == expect
    lat = r.lattice
    assert lat.num_arcs > len(r.alignment)  # a lattice, not just the best path
    bp = best_paths(lat, [1.0 / 0.1], [0.0])
    assert bp[(10.0, 0.0)] == seq


def test_matrix_decoder_equals_gmm_decodable(toy):
    """decode_loglikes on the GMM's own log-likelihoods = kaldi-hmm-gmm's GMM decoder."""
    for seed, seq in [(1, [3, 1, 4]), (2, [5, 6, 5, 2]), (3, [6])]:
        x = toy.feats(seq, seed=seed, noise=0.8)
        acwt = 0.1
        dec = khg.DecodableAmDiagGmmScaled(toy.am, toy.tm, x, acwt)
        d = khg.LatticeFasterDecoder(toy.hclg, khg.LatticeFasterDecoderConfig(beam=13.0, lattice_beam=6.0))
        ok, ali, words, like = khg.decode_utterance_lattice_faster(d, dec, toy.tm, "u", True)
        ll = np.array([[toy.am.log_likelihood(p, x[t]) for p in range(toy.D)] for t in range(len(x))])
        r = decode_loglikes(toy.hclg, toy.tm, ll, acwt, DecodeConfig(beam=13.0, lattice_beam=6.0))
        assert ok and r.ok
        assert r.words == list(words)  # (noisy audio: not always == seq; equality is the point)
        assert r.alignment == list(ali)
        assert r.likelihood == pytest.approx(like, rel=1e-4, abs=1e-3)


def test_lm_weight_and_penalty_move_output_in_expected_direction():
    # "six" is cheap in the grammar and "five" expensive; the audio is mostly "five" with some
    # "six" blended in.  Low LM weight trusts the audio (five), high LM weight the grammar (six).
    toy = Toy(word_costs={1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 6.0, 6: 0.5})
    x = toy.feats([2, 5, 2], blend={1: (6, 0.45)}, noise=0.3, seed=4)
    r = decode_gmm(toy.hclg, toy.tm, toy.am, x, 1.0 / 7, DecodeConfig(beam=30.0, lattice_beam=30.0))
    bp = best_paths(r.lattice, [1, 5, 15, 50], [0.0, 1.0])
    assert bp[(1.0, 0.0)] == [2, 5, 2]
    assert bp[(5.0, 0.0)] == [2, 6, 2]
    # a larger insertion penalty never gives more words, and at LMWT 15 it drops words
    for lm in (1.0, 5.0, 15.0, 50.0):
        assert len(bp[(lm, 1.0)]) <= len(bp[(lm, 0.0)])
    assert len(bp[(15.0, 1.0)]) < len(bp[(15.0, 0.0)])
    # each grid answer is the cheapest path under that grid point's cost
    for (lm, wip), words in bp.items():
        c = path_cost(r.lattice, lm, wip, words)
        for other in ([2, 5, 2], [2, 6, 2], [2]):
            assert c <= path_cost(r.lattice, lm, wip, other) + 1e-9


def test_insertion_penalty_reduces_words():
    # Hand-made lattice: path A = 3 short words, path B = 1 long word, slightly worse.
    text = "\n".join([
        "0\t1\t1\t1\t1,10", "1\t2\t2\t2\t1,10", "2\t3\t3\t3\t1,10",
        "0\t3\t4\t4\t3.5,31", "3\t0,0"])
    lat = from_fst_text(text)
    bp = best_paths(lat, [10.0], [0.0, 0.5, 1.0])
    assert bp[(10.0, 0.0)] == [1, 2, 3]   # 3 + 3 = 6.0 vs 3.5 + 3.1 = 6.6
    assert bp[(10.0, 1.0)] == [4]         # 9.0 vs 7.6
    assert bp[(10.0, 0.5)] == [4]         # 7.5 vs 7.1


def test_grid_matches_brute_force_on_random_lattices():
    rng = np.random.default_rng(7)
    for trial in range(20):
        n = 8
        lines = []
        for s in range(n - 1):
            for _ in range(rng.integers(1, 4)):
                d = int(rng.integers(s + 1, n))
                o = int(rng.integers(0, 4))
                lines.append(f"{s}\t{d}\t{s + 1}\t{o}\t{rng.uniform(0, 3):.3f},{rng.uniform(0, 30):.3f}")
        lines.append(f"{n - 1}\t0.5,0")
        lat = from_fst_text("\n".join(lines))
        bp = best_paths(lat, [7, 12, 17], [0.0, 0.5, 1.0])
        for (lm, wip), words in bp.items():
            c = path_cost(lat, lm, wip, words)
            # brute force: enumerate all paths
            best = np.inf
            stack = [(0, 0.0)]
            while stack:
                s, c0 = stack.pop()
                if s == n - 1:
                    best = min(best, c0 + 0.5)
                for a in np.flatnonzero(lat.src == s):
                    w = lat.graph[a] + lat.acoustic[a] / lm + (wip if lat.olabel[a] else 0)
                    stack.append((int(lat.dst[a]), c0 + w))
            if np.isfinite(best):
                assert c == pytest.approx(best, abs=1e-9)
