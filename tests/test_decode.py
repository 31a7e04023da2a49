"""Decoding on a toy HCLG: a monophone model with hand-set Gaussians, a word-loop graph built
with kaldifst from kaldi-hmm-gmm's training-graph compiler, and features synthesised for a
known word sequence."""
from __future__ import annotations

import gzip
import os
import re
import subprocess

import numpy as np
import pytest

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before kaldifst)
import kaldifst

from pynnet.decode.decoder import DecodeConfig, GmmScorer, decode_gmm, decode_loglikes, read_hclg
from pynnet.decode.lattice import _schedule, best_paths, from_fst_text, path_cost, read_lattice_ark
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
    # the C-level parser and the line-by-line parser read the decoder's text identically
    from pynnet.decode.lattice import _parse_fast, _parse_slow
    fast, slow = _parse_fast(r.lattice_text, None), _parse_slow(r.lattice_text)
    for f in ("src", "dst", "ilabel", "olabel", "graph", "acoustic", "final_state", "final_graph"):
        assert np.array_equal(getattr(fast, f), getattr(slow, f)), f
    assert fast.start == slow.start == lat.start and fast.num_states == slow.num_states
    # lattices are written unscaled: acoustic costs are -log-likelihoods, so the best path's
    # graph + acwt * acoustic equals minus the decoder's likelihood
    assert path_cost(lat, 1.0 / 0.1, 0.0, r.words) == pytest.approx(-r.likelihood, rel=1e-4)
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


# ------------------------------------------------------------------------------------------
# The programs and scripts end to end: exp dir with final.mdl, graph dir, data dir with feats
# ------------------------------------------------------------------------------------------

def _setup_exp(tmp_path, toy, utts: dict[str, list[int]], delta_order: int = 0):
    import kaldiio
    from pynnet.hmm.model_io import write_model

    exp = tmp_path / "exp" / "mono"
    graph = exp / "graph"
    data = tmp_path / "data" / "test"
    for d in (graph, data):
        d.mkdir(parents=True)
    write_model(str(exp / "final.mdl"), toy.tm, toy.am)
    (exp / "cmvn_opts").write_text("--norm-means=false\n")
    (exp / "delta_opts").write_text(f"--delta-order {delta_order}\n")
    toy.hclg.write(str(graph / "HCLG.fst"))
    (graph / "words.txt").write_text("".join(f"{w} {i}\n" for i, w in WORDS.items()))
    with kaldiio.WriteHelper(f"ark,scp:{data}/feats.ark,{data}/feats.scp") as wr:
        for i, (utt, words) in enumerate(sorted(utts.items())):
            wr(utt, toy.feats(words, seed=10 + i))
    (data / "text").write_text("".join(f"{u} {' '.join(WORDS[w] for w in ws)}\n" for u, ws in sorted(utts.items())))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in sorted(utts)))
    spk = sorted({u.split('-')[0] for u in utts})
    (data / "spk2utt").write_text("".join(f"{s} {' '.join(u for u in sorted(utts) if u.startswith(s + '-'))}\n"
                                          for s in spk))
    return exp, graph, data


UTTS = {"spkA-u1": [1, 2, 3], "spkA-u2": [4, 5], "spkB-u3": [6, 1, 2, 2], "spkB-u4": [3],
        "spkC-u5": [5, 6]}


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{ROOT}/utils:{ROOT}/tools/venv/bin:" + env["PATH"]
    env["LC_ALL"] = "C"
    return env


def test_decode_sh_and_scoring_end_to_end(tmp_path):
    """steps/decode.sh + steps/score_kaldi.sh on noisy audio: Kaldi's decode dir layout, a WER per
    grid point, best_wer = the minimum over the grid, wer_details of the best point."""
    import kaldiio
    toy = Toy(word_costs={1: 0.5, 2: 3.0, 3: 0.5, 4: 3.0, 5: 0.5, 6: 3.0})
    exp, graph, data = _setup_exp(tmp_path, toy, UTTS)
    with kaldiio.WriteHelper(f"ark,scp:{data}/feats.ark,{data}/feats.scp") as wr:
        for i, (utt, words) in enumerate(sorted(UTTS.items())):
            wr(utt, toy.feats(words, seed=20 + i, noise=1.1, frames_per_state=2))
    dec = exp / "decode_test"
    r = subprocess.run([f"{ROOT}/steps/decode.sh", "--nj", "2", "--acwt", "0.1",
                        "--scoring-opts", "--min-lmwt 1 --max-lmwt 20",
                        str(graph), str(data), str(dec)], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    # the real-time factor: the frames decoded (60 + 65 + ...: 100 a second) over the wall-clock time
    rtf = [ln for ln in r.stdout.splitlines() if "real-time factor" in ln]
    frames = sum(m.shape[0] for _, m in kaldiio.load_scp_sequential(f"{data}/feats.scp"))
    assert len(rtf) == 1 and re.fullmatch(
        rf"{re.escape(ROOT)}/steps/decode\.sh: real-time factor [0-9.]+ \({frames / 100:.1f} s of audio decoded in "
        r"[0-9.]+ s, 2 jobs\)", rtf[0]), r.stdout
    assert (dec / "rtf").read_text().splitlines()[0] == rtf[0]
    assert (dec / "num_jobs").read_text().strip() == "2"
    for j in (1, 2):
        assert (dec / f"lat.{j}.gz").exists() and (dec / "log" / f"decode.{j}.log").exists()
    lats = dict(read_lattice_ark(str(dec / "lat.1.gz")))
    lats.update(read_lattice_ark(f"ark:gunzip -c {dec}/lat.2.gz|"))
    assert sorted(lats) == sorted(UTTS)
    wers = {}
    for lmwt in range(1, 21):
        for wip in ("0.0", "0.5", "1.0"):
            hyp = (dec / "scoring_kaldi" / f"penalty_{wip}" / f"{lmwt}.txt").read_text().splitlines()
            assert sorted(h.split()[0] for h in hyp) == sorted(UTTS)
            wer = (dec / f"wer_{lmwt}_{wip}").read_text().splitlines()
            assert wer[0].startswith("compute-wer --text --mode=present ark:")
            assert wer[1].startswith("%WER ") and wer[1].split()[5] == "12,"
            assert wer[3] == "Scored 5 sentences, 0 not present in hyp."
            wers[f"wer_{lmwt}_{wip}"] = float(wer[1].split()[1])
    assert len(set(wers.values())) > 1, "grid points should differ on noisy audio"
    best = (dec / "scoring_kaldi" / "best_wer").read_text().split()
    assert best[0] == "%WER" and float(best[1]) == min(wers.values())
    assert wers[os.path.basename(best[-1])] == min(wers.values())
    details = dec / "scoring_kaldi" / "wer_details"
    lmwt, wip = (details / "lmwt").read_text().strip(), (details / "wip").read_text().strip()
    assert best[-1].endswith(f"wer_{lmwt}_{wip}")
    csid = [ln.split()[2:] for ln in (details / "per_utt").read_text().splitlines() if "#csid" in ln]
    s_i_d = [sum(int(c[k]) for c in csid) for k in (1, 2, 3)]
    assert sum(s_i_d) == int(best[3])                       # errors at the best point
    assert (details / "per_spk").read_text().splitlines()[-2].split()[:4] == ["SUM", "raw", "5", "12"]
    assert (details / "ops").exists()
    # --stage 1 re-scores the earlier decode's lattices (all of its jobs, whatever --nj says)
    r = subprocess.run([f"{ROOT}/steps/decode.sh", "--stage", "1", "--nj", "1",
                        "--scoring-opts", "--min-lmwt 1 --max-lmwt 20",
                        str(graph), str(data), str(dec)], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    assert (dec / "num_jobs").read_text().strip() == "2"
    assert (dec / "scoring_kaldi" / "best_wer").read_text().split() == best
    # the same lattices in Kaldi's binary form (OpenFst writes them): scoring gives the same WERs
    for j in (1, 2):
        blobs = []
        for utt, lat in read_lattice_ark(str(dec / f"lat.{j}.gz")):
            fst = kaldifst.Lattice()
            for _ in range(lat.num_states):
                fst.add_state()
            fst.start = lat.start
            for k in range(lat.num_arcs):
                fst.add_arc(int(lat.src[k]), kaldifst.LatticeArc(
                    int(lat.ilabel[k]), int(lat.olabel[k]),
                    kaldifst.LatticeWeight(float(lat.graph[k]), float(lat.acoustic[k])), int(lat.dst[k])))
            for st, g, ac in zip(lat.final_state.tolist(), lat.final_graph.tolist(), lat.final_acoustic.tolist()):
                fst.set_final(st, kaldifst.LatticeWeight(g, ac))
            fst.write(str(tmp_path / "one.fst"))
            blobs.append(utt.encode() + b" " + (tmp_path / "one.fst").read_bytes())
        with gzip.open(dec / f"lat.{j}.gz", "wb") as f:
            f.write(b"".join(blobs))
    for f in dec.glob("wer_*"):
        f.unlink()
    r = subprocess.run([f"{ROOT}/steps/score_kaldi.sh", "--min-lmwt", "1", "--max-lmwt", "20",
                        str(data), str(graph), str(dec)], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + r.stdout
    assert {f"wer_{l}_{p}": float((dec / f"wer_{l}_{p}").read_text().splitlines()[1].split()[1])
            for l in range(1, 21) for p in ("0.0", "0.5", "1.0")} == wers
    assert (dec / "scoring_kaldi" / "best_wer").read_text().split() == best


def test_decode_sh_dimension_mismatch_is_one_line(tmp_path):
    toy = Toy()
    exp, graph, data = _setup_exp(tmp_path, toy, {"spkA-u1": [1, 2]}, delta_order=2)
    r = subprocess.run([f"{ROOT}/steps/decode.sh", "--nj", "1", str(graph), str(data), str(exp / "decode")],
                       cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    err = [ln for ln in r.stderr.splitlines() if "decoding failed" in ln]
    assert len(err) == 1 and "feature dimension 54" in err[0] and "model's 18" in err[0]
    assert not list((exp / "decode").glob("lat.*.gz"))


def _setup_loglikes(tmp_path):
    """The toy exp dir, graph and data, and <tmp_path>/loglikes.ark: the GMM's log-likelihoods of
    the data (what a DNN's pseudo-log-likelihoods stand for); also returns the features."""
    import kaldiio
    toy = Toy()
    exp, graph, data = _setup_exp(tmp_path, toy, UTTS)
    scorer = GmmScorer(toy.am)
    feats = kaldiio.load_scp(str(data / "feats.scp"))
    with kaldiio.WriteHelper(f"ark:{tmp_path}/loglikes.ark") as wr:
        for utt in sorted(UTTS):
            wr(utt, scorer.loglikes(feats[utt]))
    return exp, graph, data, feats


def test_decode_faster_mapped_program(tmp_path):
    """The DNN path: loglikes ark -> lattices + words; same words as the GMM program."""
    import kaldiio
    exp, graph, data, feats = _setup_loglikes(tmp_path)
    env = _env()
    r = subprocess.run(["pynnet-decode-faster-mapped", "--acoustic-scale=0.1", "--beam=13", "--lattice-beam=6",
                        f"--word-symbol-table={graph}/words.txt", str(exp / "final.mdl"), str(graph / "HCLG.fst"),
                        f"ark:{tmp_path}/loglikes.ark", f"ark:|gzip -c > {tmp_path}/lat.1.gz",
                        f"ark,t:{tmp_path}/words.txt", f"ark:{tmp_path}/ali.1.gz"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    words = {ln.split()[0]: [int(w) for w in ln.split()[1:]] for ln in open(tmp_path / "words.txt")}
    assert words == UTTS
    from pynnet.hmm.ali_io import read_alignments
    alis = read_alignments(str(tmp_path / "ali.1.gz"))
    assert sorted(alis) == sorted(UTTS) and len(alis["spkA-u1"]) == feats["spkA-u1"].shape[0]
    r2 = subprocess.run(["pynnet-gmm-latgen-faster", "--acoustic-scale=0.1", "--beam=13", "--lattice-beam=6",
                         "--cmvn-opts", "--norm-means=false", "--delta-order", "0",
                         str(exp / "final.mdl"), str(graph / "HCLG.fst"), str(data),
                         f"ark,t:{tmp_path}/lat.gmm.txt", f"ark,t:{tmp_path}/words.gmm.txt"],
                        env=env, capture_output=True, text=True, timeout=120)
    assert r2.returncode == 0, r2.stderr
    assert open(tmp_path / "words.gmm.txt").read() == open(tmp_path / "words.txt").read()
    # grid scoring of the mapped decoder's lattices with the program steps/score_kaldi.sh runs
    r3 = subprocess.run(["pynnet-lattice-best-path-grid", "--min-lmwt", "9", "--max-lmwt", "10",
                         "--word-symbol-table", str(graph / "words.txt"), str(tmp_path / "lat.1.gz"),
                         str(tmp_path / "scoring")], env=env, capture_output=True, text=True, timeout=120)
    assert r3.returncode == 0, r3.stderr
    hyp = (tmp_path / "scoring" / "penalty_0.0" / "10.txt").read_text().splitlines()
    assert hyp[0] == "spkA-u1 one two three"
    # wrong number of columns: one-line error naming the rspecifier
    with kaldiio.WriteHelper(f"ark:{tmp_path}/bad.ark") as wr:
        wr("u1", np.zeros((5, 7), np.float32))
    r4 = subprocess.run(["pynnet-decode-faster-mapped", str(exp / "final.mdl"), str(graph / "HCLG.fst"),
                         f"ark:{tmp_path}/bad.ark", f"ark:{tmp_path}/lat.bad.gz"],
                        env=env, capture_output=True, text=True, timeout=120)
    assert r4.returncode == 1 and r4.stderr.count("\n") == 1
    assert "have 7 columns but the model" in r4.stderr and "18 pdfs" in r4.stderr
    assert not (tmp_path / "lat.bad.gz").exists()
    # a graph made for another model (mkgraph's num_pdfs differs): one-line error
    (graph / "num_pdfs").write_text("42\n")
    r5 = subprocess.run(["pynnet-decode-faster-mapped", str(exp / "final.mdl"), str(graph / "HCLG.fst"),
                         f"ark:{tmp_path}/loglikes.ark", f"ark:{tmp_path}/lat.x.gz"],
                        env=env, capture_output=True, text=True, timeout=120)
    assert r5.returncode == 1 and r5.stderr.count("\n") == 1 and "graph/model mismatch" in r5.stderr
    # '\u0661\u0668' is not 18 (int() read it so): Kaldi's integers are ASCII
    (graph / "num_pdfs").write_text("\u0661\u0668\n", encoding="utf-8")
    r6 = subprocess.run(["pynnet-decode-faster-mapped", str(exp / "final.mdl"), str(graph / "HCLG.fst"),
                         f"ark:{tmp_path}/loglikes.ark", f"ark:{tmp_path}/lat.x.gz"],
                        env=env, capture_output=True, text=True, timeout=120)
    assert r6.returncode == 1 and "num_pdfs:1: expected one integer" in r6.stderr


def test_decoders_num_threads_give_the_same_outputs(tmp_path):
    """--num-threads N (latgen-faster-parallel): N decoding processes, outputs identical to one's
    and in input order; an error inside a worker is the usual one-line error."""
    exp, graph, data, _ = _setup_loglikes(tmp_path)
    outs = {}
    for threads in ("1", "2", "3"):
        r = subprocess.run(["pynnet-decode-faster-mapped", "--num-threads", threads, "--beam=13",
                            str(exp / "final.mdl"), str(graph / "HCLG.fst"), f"ark:{tmp_path}/loglikes.ark",
                            f"ark,t:{tmp_path}/lat.{threads}.txt", f"ark,t:{tmp_path}/words.{threads}.txt",
                            f"ark,t:{tmp_path}/ali.{threads}.txt"], env=_env(), capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        outs[threads] = [(tmp_path / f"{w}.{threads}.txt").read_bytes() for w in ("lat", "words", "ali")]
        r = subprocess.run(["pynnet-gmm-latgen-faster", "--num-threads", threads, "--beam=13", "--cmvn-opts",
                            "--norm-means=false", "--delta-order", "0", str(exp / "final.mdl"),
                            str(graph / "HCLG.fst"), str(data), f"ark,t:{tmp_path}/glat.{threads}.txt"],
                           env=_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs[threads].append((tmp_path / f"glat.{threads}.txt").read_bytes())
    assert outs["2"] == outs["1"] and outs["3"] == outs["1"]
    keys = [ln.split()[0] for ln in outs["1"][1].decode().splitlines()]
    assert keys == sorted(UTTS)
    # a feature dimension the model does not take, found in a worker process: one line, no lattices
    r = subprocess.run(["pynnet-gmm-latgen-faster", "--num-threads", "2", "--cmvn-opts", "--norm-means=false",
                        "--delta-order", "2", str(exp / "final.mdl"), str(graph / "HCLG.fst"), str(data),
                        f"ark,t:{tmp_path}/bad.txt"], env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "feature dimension" in r.stderr and not (tmp_path / "bad.txt").exists()
    r = subprocess.run(["pynnet-decode-faster-mapped", "--num-threads", "0", str(exp / "final.mdl"),
                        str(graph / "HCLG.fst"), f"ark:{tmp_path}/loglikes.ark", f"ark,t:{tmp_path}/bad.txt"],
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "--num-threads must be at least 1" in r.stderr


def test_kaldi_text_lattice_roundtrip_and_bad_input(tmp_path):
    text = "0\t1\t3\t5\t1.5,2.25\n0\t2\t4\t0\t0.5,1\n1\t3\t6\t0\t0,3.5\n2\t3\t7\t6\t2,1\n3\t0.5,0\n"
    lat = from_fst_text(text)
    out = lat.to_kaldi_text("utt1")
    # Kaldi: key, newline, AT&T arcs "src dst in out graph,acoustic" (tabs), final lines, blank line
    assert out == "utt1 \n" + text + "\n"
    p = tmp_path / "lat.1.gz"
    with gzip.open(p, "wt") as f:
        f.write(out + lat.to_kaldi_text("utt2"))
    got = list(read_lattice_ark(str(p)))
    assert [k for k, _ in got] == ["utt1", "utt2"]
    assert got[1][1].to_kaldi_text("utt1") == out
    # CompactLattice text (what lattice-copy --write-compact writes): word on the arc, tids in weight
    clat = from_fst_text("0\t1\t5\t1.5,2.25,3_3_4\n1\t2\t6\t1,1,5\n2\t0,0,\n")
    assert best_paths(clat, [10.0], [0.0])[(10.0, 0.0)] == [5, 6]
    # truncated archive (no terminating blank line), garbage lines, binary data
    bad = tmp_path / "trunc.txt"
    bad.write_text(out.rstrip("\n") + "\n")
    with pytest.raises(PynnetError, match="not terminated"):
        list(read_lattice_ark(f"ark:{bad}"))
    bad.write_text("utt1 \n0\t1\tx\t5\t1,2\n\n")
    with pytest.raises(PynnetError, match=r"trunc.txt:2: bad lattice line"):
        list(read_lattice_ark(f"ark,t:{bad}"))
    bad.write_bytes(b"utt1 \x00B\x01\x02\xff\xfe\n")
    with pytest.raises(PynnetError):
        list(read_lattice_ark(str(bad)))
    with pytest.raises(PynnetError, match="no such file"):
        list(read_lattice_ark(str(tmp_path / "missing.gz")))


def test_text_lattice_fields_split_at_spaces_and_tabs_only(tmp_path):
    # Kaldi reads a key up to ASCII whitespace and splits lattice lines at spaces and tabs: 'u\u00a01'
    # is one key (str.split() made it a key with trailing text); runs of spaces and tabs and CRLF
    # still separate; '0\u00a01' is no state (it was two fields), nor is '\u0661' (int() read 1)
    text = "0\t1\t3\t5\t1.5,2.25\n0\t2\t4\t0\t0.5,1\n1\t3\t6\t0\t0,3.5\n2\t3\t7\t6\t2,1\n3\t0.5,0\n"
    ref = from_fst_text(text).to_kaldi_text("k")
    spaced = "0  1 \t3 5\t1.5,2.25\r\n0 2 4 0 0.5,1\r\n1\t\t3 6 0 0,3.5\n 2 3 7 6 2,1 \n3  0.5,0\n"
    p = tmp_path / "lat.txt"
    p.write_text("u\u00a01 \n" + spaced + "\n" + "u2\u00a0\r\n" + text + "\r\n", encoding="utf-8")
    got = list(read_lattice_ark(f"ark:{p}"))
    assert [k for k, _ in got] == ["u\u00a01", "u2\u00a0"]
    assert all(lat.to_kaldi_text("k") == ref for _, lat in got)
    for bad in ("0\u00a01\t3\t5\t1.5,2.25", "0\t\u0661\t3\t5\t1.5,2.25", "0\t1\t3\t5\t1.5,2\u00a0",
                "0\t1\t3\t5\t1_5,2"):
        p.write_text("u1 \n" + bad + "\n1\t0.5,0\n\n", encoding="utf-8")
        with pytest.raises(PynnetError, match="lat.txt:2: bad lattice line"):
            list(read_lattice_ark(f"ark:{p}"))
    p.write_text("u\u00a01 x\n" + text + "\n", encoding="utf-8")
    with pytest.raises(PynnetError, match="lat.txt:1: expected a lattice after the key 'u\u00a01'"):
        list(read_lattice_ark(f"ark:{p}"))


def test_decode_errors(toy, tmp_path):
    with pytest.raises(PynnetError, match="has 5 columns but the model has 18 pdfs"):
        decode_loglikes(toy.hclg, toy.tm, np.zeros((10, 5)), 0.1, utt="u9")
    ll = np.zeros((4, toy.D))
    ll[1, 2] = np.nan
    with pytest.raises(PynnetError, match="NaN"):
        decode_loglikes(toy.hclg, toy.tm, ll, 0.1)
    assert not decode_loglikes(toy.hclg, toy.tm, np.zeros((0, toy.D)), 0.1).ok
    with pytest.raises(PynnetError, match="feature dimension 3 does not match the model dimension 18"):
        GmmScorer(toy.am).loglikes(np.zeros((5, 3)))
    junk = tmp_path / "HCLG.fst"
    junk.write_text("not an fst")
    with pytest.raises(PynnetError, match="cannot read as an OpenFst graph"):
        read_hclg(junk)
    # too few frames to get through any word: no final state; partial output only if allowed
    x = toy.feats([1])[:2]
    r = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1, DecodeConfig(allow_partial=False))
    assert not r.ok and r.partial
    r = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1, DecodeConfig(allow_partial=True))
    assert r.ok and r.partial and len(r.alignment) == 2


def test_adaptive_beam_keeps_best_path(toy):
    """The max-active emulation (small lattice beam first, widened until its best path is as good
    as a max-active best-path search) gives the full-beam answer on clean and noisy audio."""
    for seed, noise in [(5, 0.5), (6, 1.0), (7, 1.3)]:
        x = toy.feats([2, 4, 6, 1], seed=seed, noise=noise)
        full = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1,
                          DecodeConfig(beam=16.0, lattice_beam=4.0, adaptive_beam=False))
        adap = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1,
                          DecodeConfig(beam=16.0, lattice_beam=4.0, max_active=7000, adaptive_beam=True))
        assert adap.words == full.words and adap.likelihood == pytest.approx(full.likelihood, rel=1e-5)
        assert adap.lattice.num_arcs <= full.lattice.num_arcs
        # the narrowest beam tried (lattice beam + 2) already matched the max-active best path
        assert full.beam == 16.0 and adap.beam == 6.0


def test_adaptive_beam_widens_until_the_best_path_is_matched(toy, monkeypatch):
    """A target no narrow beam can meet (the max-active best path made 1000 cheaper) widens the
    beam step by step (6, 8, ..., 14: each one's best path compared) up to the full beam."""
    import pynnet.decode.decoder as dec

    real, calls = dec._path_cost, []

    def cost(kaldifst, best):
        calls.append(real(kaldifst, best))
        return calls[-1] - (1000.0 if len(calls) == 1 else 0.0)

    monkeypatch.setattr(dec, "_path_cost", cost)
    x = toy.feats([2, 4, 6, 1], seed=5, noise=0.5)
    adap = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1,
                      DecodeConfig(beam=16.0, lattice_beam=4.0, max_active=7000, adaptive_beam=True))
    assert adap.beam == 16.0 and len(calls) == 1 + 5
    monkeypatch.setattr(dec, "_path_cost", real)
    full = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1, DecodeConfig(beam=16.0, lattice_beam=4.0, adaptive_beam=False))
    assert adap.words == full.words and adap.likelihood == pytest.approx(full.likelihood, rel=1e-5)


def test_adaptive_beam_does_not_settle_for_partial_path(toy):
    """A max-active search that reaches no final state gives a partial best path (final costs
    ignored), cheaper than any complete one; a narrow lattice beam that also lost the final states
    matched it, so the decode came out partial where the full beam reaches a final state."""
    x = toy.feats([1, 3, 5], seed=6, noise=0.5)[:-7]  # ends inside the last word
    full = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1,
                      DecodeConfig(beam=16.0, lattice_beam=4.0, adaptive_beam=False))
    adap = decode_gmm(toy.hclg, toy.tm, toy.am, x, 0.1,
                      DecodeConfig(beam=16.0, lattice_beam=4.0, max_active=7000, adaptive_beam=True))
    assert full.ok and not full.partial
    assert adap.ok and not adap.partial
    assert adap.words == full.words and adap.likelihood == pytest.approx(full.likelihood, rel=1e-5)


# ------------------------------------------------------------------ Kaldi binary lattices
def _compact_lattice_bytes(start: int, states: list[tuple[tuple, list[tuple]]]) -> bytes:
    """An OpenFst binary VectorFst of Kaldi's CompactLattice arc type, laid out as OpenFst's
    FstHeader + VectorFst::WriteFst and Kaldi's CompactLatticeWeightTpl::Write store it.
    ``states``: per state (final weight, [(word, weight, dst)]), weights (graph, acoustic, tids);
    a final weight of None is Zero (inf, inf)."""
    import struct

    def string(x: str) -> bytes:
        return struct.pack("<i", len(x)) + x.encode()

    def weight(w) -> bytes:
        g, a, tids = w if w is not None else (float("inf"), float("inf"), [])
        return struct.pack("<ffi", g, a, len(tids)) + struct.pack(f"<{len(tids)}i", *tids)

    out = [struct.pack("<i", 2125659606), string("vector"), string("compactlattice44"),
           struct.pack("<iiQqqq", 2, 0, 0, start, len(states), sum(len(arcs) for _, arcs in states))]
    for final, arcs in states:
        out.append(weight(final) + struct.pack("<q", len(arcs)))
        for word, w, dst in arcs:
            out.append(struct.pack("<ii", word, word) + weight(w) + struct.pack("<i", dst))
    return b"".join(out)


# Two word sequences over 6 frames: "5 6" (tids 3 3 4 | 5 5) or "7" (tids 8 8 8 8 8), final tid 9.
CLAT_STATES = [(None, [(5, (1.5, 2.25, [3, 3, 4]), 1), (7, (0.5, 9.5, [8, 8, 8, 8, 8]), 2)]),
               (None, [(6, (1.0, 1.0, [5, 5]), 2)]),
               ((0.5, 0.25, [9]), [])]
CLAT_TEXT = ("0\t1\t5\t1.5,2.25,3_3_4\n0\t2\t7\t0.5,9.5,8_8_8_8_8\n1\t2\t6\t1,1,5_5\n2\t0.5,0.25,9\n")


def _frames_per_path(lat) -> set[int]:
    """The numbers of transition-ids (frames) over all complete paths of a state-level lattice."""
    lengths: dict[int, set[int]] = {lat.start: {0}}
    order = np.argsort(lat.src, kind="stable")
    for _ in range(lat.num_states):     # relax until stable (small acyclic lattices)
        for a in order.tolist():
            s, d = int(lat.src[a]), int(lat.dst[a])
            step = 1 if lat.ilabel[a] else 0
            lengths.setdefault(d, set()).update(x + step for x in lengths.get(s, ()))
    return set().union(*(lengths.get(int(s), set()) for s in lat.final_state))


def test_binary_compact_lattice_reads_as_its_text_form(tmp_path):
    # what latgen-faster writes: "key " then the CompactLattice FST, no binary marker
    data = _compact_lattice_bytes(0, CLAT_STATES)
    p = tmp_path / "lat.1.gz"
    with gzip.open(p, "wb") as f:
        f.write(b"utt1 " + data + b"utt2 \n" + CLAT_TEXT.encode() + b"\n" + b"utt3 " + data)
    got = dict(read_lattice_ark(str(p)))
    assert list(got) == ["utt1", "utt2", "utt3"]
    ref = got["utt2"]                       # the text CompactLattice (Kaldi's ark,t form)
    for lat in (got["utt1"], got["utt3"]):
        assert lat.to_kaldi_text("k") == ref.to_kaldi_text("k")
    # expanded as ConvertLattice does: one arc per transition-id, the word and weight on the first
    assert ref.num_arcs == 3 + 5 + 2 + 1 and sorted(ref.ilabel.tolist()) == [3, 3, 4, 5, 5, 8, 8, 8, 8, 8, 9]
    assert _frames_per_path(ref) == {6}
    # graph + acoustic / LMWT: "7" costs 0.5 + 9.5 / LMWT, "5 6" 2.5 + 3.25 / LMWT (finals alike)
    assert best_paths(ref, [1.0, 10.0], [0.0]) == {(1.0, 0.0): [5, 6], (10.0, 0.0): [7]}


def test_binary_state_level_lattice_written_by_openfst(tmp_path):
    # a Lattice (lattice4 arcs) written by OpenFst itself (kaldifst), as lattice-copy
    # --write-compact=false writes it, read beside its text form
    rng = np.random.default_rng(7)
    lat = kaldifst.Lattice()
    states = [lat.add_state() for _ in range(6)]
    lat.start = states[0]
    for s in range(5):
        for d in range(s + 1, min(s + 3, 6)):
            lat.add_arc(s, kaldifst.LatticeArc(int(rng.integers(1, 50)), int(rng.integers(0, 4)),
                                               kaldifst.LatticeWeight(float(rng.normal()), float(rng.normal() * 10)),
                                               d))
    lat.set_final(5, kaldifst.LatticeWeight(0.25, 1.5))
    lat.set_final(4, kaldifst.LatticeWeight(2.0, 0.0))
    lat.write(str(tmp_path / "one.fst"))
    data = (tmp_path / "one.fst").read_bytes()
    text = from_fst_text(lat.to_str(), start=0).to_kaldi_text("a")
    (tmp_path / "lat.ark").write_bytes(b"a " + data + b"b " + data + text.replace("a \n", "c \n").encode())
    got = list(read_lattice_ark(f"ark:cat {tmp_path}/lat.ark|"))
    assert [k for k, _ in got] == ["a", "b", "c"]
    assert all(x.to_kaldi_text("a") == text for _, x in got)
    lm, pen = [4.0, 12.0], [0.0, 1.5]
    assert best_paths(got[0][1], lm, pen) == best_paths(got[2][1], lm, pen)
    # cut anywhere inside the FST: "truncated" naming the key; an arc to a state beyond the last
    for cut in (3, 40, 90, len(data) - 5):
        (tmp_path / "cut.ark").write_bytes(b"a " + data + b"b " + data[:cut])
        with pytest.raises(PynnetError, match=r"cut.ark: binary lattice for 'b' is truncated"):
            list(read_lattice_ark(str(tmp_path / "cut.ark")))
    last_arc_dst = len(data) - 16 - 4            # (state 5: final weight + no arcs; state 4's last arc)
    assert data[last_arc_dst:last_arc_dst + 4] == b"\x05\x00\x00\x00"
    (tmp_path / "dst.ark").write_bytes(b"a " + data[:last_arc_dst] + b"\x06\x00\x00\x00" + data[last_arc_dst + 4:])
    with pytest.raises(PynnetError, match="an arc to a state that does not exist"):
        list(read_lattice_ark(str(tmp_path / "dst.ark")))


def test_binary_lattice_bad_input(tmp_path):
    data = _compact_lattice_bytes(0, CLAT_STATES)
    p = tmp_path / "lat.1.gz"

    def read(blob: bytes):
        with gzip.open(p, "wb") as f:
            f.write(blob)
        return list(read_lattice_ark(str(p)))

    with pytest.raises(PynnetError, match=r"lat.1.gz: binary lattice for 'u2' is truncated"):
        read(b"u1 " + data + b"u2 " + data[:-7])
    negative = data.replace(b"\x03\x00\x00\x00\x03\x00\x00\x00", b"\xfd\xff\xff\xff\x03\x00\x00\x00", 1)
    with pytest.raises(PynnetError, match=r"binary lattice for 'u1' is corrupt \(bad string length\)"):
        read(b"u1 " + negative)
    bad_dst = data[:-4 - 8 - 4 - 16] + data[-4 - 8 - 4 - 16:].replace(b"\x02\x00\x00\x00", b"\x09\x00\x00\x00", 1)
    with pytest.raises(PynnetError, match="an arc to a state that does not exist"):
        read(b"u1 " + bad_dst)
    # an FST of another arc type (a graph, not a lattice): named in one line
    g = kaldifst.StdVectorFst()
    g.add_state()
    g.start = 0
    g.set_final(0, 0.0)
    g.write(str(tmp_path / "g.fst"))
    with pytest.raises(PynnetError, match=r"unsupported binary FST \(vector, arc type standard\)"):
        read(b"u1 " + (tmp_path / "g.fst").read_bytes())
    # the program that scoring runs: one line, nonzero exit, no traceback
    read(b"u1 " + data)  # (valid: leaves p in place for the next run)
    with gzip.open(p, "wb") as f:
        f.write(b"u1 " + data[:40])
    r = subprocess.run(["pynnet-lattice-best-path-grid", "--min-lmwt", "9", "--max-lmwt", "10",
                        str(p), str(tmp_path / "scoring")], env=_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "binary lattice for 'u1' is truncated" in r.stderr and not (tmp_path / "scoring").exists()


KGRAPH_GIT = os.environ.get("PYNNET_KGRAPH_GIT", "/work/.mirror/koala999cn+kGraph/repo")


@pytest.mark.skipif(not os.path.isdir(KGRAPH_GIT), reason="no git mirror of koala999cn/kGraph")
def test_real_kaldi_binary_lattices(tmp_path):
    """Ten CompactLattices written by Kaldi's latgen (binary, a 120k-word Mandarin system), from
    a public repository's test data read at test time: every lattice parses to its end, and all
    complete paths of a lattice cover the same number of frames (the transition-id strings were
    read whole)."""
    p = tmp_path / "lat.1"
    p.write_bytes(subprocess.run(["git", "-C", KGRAPH_GIT, "show", "HEAD:test/data/lat.1"],
                                 capture_output=True, check=True).stdout)
    lats = list(read_lattice_ark(f"ark:{p}"))
    assert len(lats) == 10 and all(k.startswith("CVTE201703_") for k, _ in lats)
    for key, lat in lats:
        assert lat.final_state.size > 0 and np.all(lat.ilabel >= 0)
        # longest and shortest path in frames, by the Viterbi schedule of the scorer
        lo = np.full(lat.num_states, np.inf)
        hi = np.full(lat.num_states, -np.inf)
        lo[lat.start] = hi[lat.start] = 0
        step = (lat.ilabel > 0).astype(float)
        for blk, _, _ in _schedule(lat).blocks:
            np.minimum.at(lo, lat.dst[blk], lo[lat.src[blk]] + step[blk])
            np.maximum.at(hi, lat.dst[blk], hi[lat.src[blk]] + step[blk])
        frames = set(lo[lat.final_state]) | set(hi[lat.final_state])
        assert len(frames) == 1 and 100 < frames.pop() < 1000, key
        assert len(best_paths(lat, [10.0], [0.0])[(10.0, 0.0)]) > 0


def test_fast_parser_leaves_compact_lattice_lines_to_the_slow_one():
    """A CompactLattice arc ``s d w g,a,tid`` with one transition-id has six numbers, as a Lattice
    arc has: the fast parser must not read it as one (the words were lost); nor other lines that
    are not ``s d i o g,a`` (four fields, a final's string of transition-ids)."""
    from pynnet.decode.lattice import _parse_fast, _parse_slow
    text = "0\t1\t5\t0,10.5,3\n1\t2\t6\t0,1.5,4\n2\t0,0,\n"
    assert _parse_fast(text, None) is None
    lat = from_fst_text(text)
    assert best_paths(lat, [10.0], [0.0])[(10.0, 0.0)] == [5, 6] == \
        best_paths(_parse_slow(text), [10.0], [0.0])[(10.0, 0.0)]
    assert lat.ilabel.tolist() == [3, 4] and lat.olabel.tolist() == [5, 6]
    for odd in ("0 1 5 0,10.5,3\n1 2 6 0,1.5,4\n2 0,0,\n",          # spaces
                "0\t1\t5\t0,10.5,3\n1\t2\t6\t7\t1.5,4\n2\t0,0\n",     # one of each kind
                "0\t1\t5\t7\n1\t2\t6\t7\t1,2\n2\t0,0\n",              # a Lattice arc of weight One
                "0\t1.5,2,3_4\n",                                     # a final's transition-ids
                "0\t1\t5\t6\t1.5,2.5\n1\t0,0,3\n"):
        assert _parse_fast(odd, None) is None, odd
        assert np.array_equal(from_fst_text(odd).olabel, _parse_slow(odd).olabel)
    assert from_fst_text("0\t1.5,2,3_4\n").ilabel.tolist() == [3, 4]
    # what the fast parser takes: Lattice arcs, tab- or space-separated, as Kaldi and kaldifst print them
    for ok in ("0\t1\t3\t5\t1.5,2.25\n1\t2\t6\t0\t0,3.5\n2\t0.5,0\n",
               "0 1 3 5 1.5,2.25\n1  2\t6 0 0,3.5 \n2\n", "0\t1\t3\t5\t1.5,2.25\n1\t0,0"):
        fast, slow = _parse_fast(ok, None), _parse_slow(ok)
        assert fast is not None, ok
        for f in ("src", "dst", "ilabel", "olabel", "graph", "acoustic", "final_state", "final_graph"):
            assert np.array_equal(getattr(fast, f), getattr(slow, f)), (ok, f)


def test_lattice_with_no_path_is_left_out_of_the_hypotheses(tmp_path):
    """An empty lattice (Kaldi's text writer: the key and an empty line; binary: an FST with no
    states) reads as a lattice with no path, in both forms; pynnet-lattice-best-path-grid gives
    it no hypothesis line (Kaldi's lattice-best-path: "Best-path failed for key", nothing written,
    so compute-wer --mode=present leaves the utterance out) and counts it; none with a path: exit 1."""
    from pynnet.decode.lattice import empty_lattice
    text = "0\t1\t3\t5\t1.5,2.25\n0\t2\t4\t0\t0.5,1\n1\t3\t6\t0\t0,3.5\n2\t3\t7\t6\t2,1\n3\t0.5,0\n"
    full = from_fst_text(text)
    assert empty_lattice().to_kaldi_text("u2") == "u2 \n\n"
    p = tmp_path / "lat.1.gz"
    with gzip.open(p, "wb") as f:
        f.write(full.to_kaldi_text("u1").encode() + b"u2 \n\n" + b"u3 " + _compact_lattice_bytes(-1, [])
                + full.to_kaldi_text("u4").encode())
    got = dict(read_lattice_ark(str(p)))
    assert list(got) == ["u1", "u2", "u3", "u4"]
    for utt in ("u2", "u3"):
        assert got[utt].final_state.size == 0 and got[utt].num_arcs == 0
        assert best_paths(got[utt], [10.0], [0.0]) == {(10.0, 0.0): []}
        assert best_paths(got[utt], [10.0], [0.0, 1.0], none_if_no_path=True) == {(10.0, 0.0): None,
                                                                                   (10.0, 1.0): None}
    assert best_paths(got["u1"], [10.0], [0.0], none_if_no_path=True) == {(10.0, 0.0): [5]}
    # a lattice whose final state cannot be reached has no path either
    assert best_paths(from_fst_text("0\t1\t3\t5\t1,1\n2\t0,0\n"), [10.0], [0.0], none_if_no_path=True) == \
        {(10.0, 0.0): None}

    def grid(lats, out):
        return subprocess.run(["pynnet-lattice-best-path-grid", "--min-lmwt", "9", "--max-lmwt", "10",
                               "--word-ins-penalty", "0.0,0.5", str(lats), str(out)], env=_env(),
                              capture_output=True, text=True, timeout=120)
    r = grid(p, tmp_path / "scoring")
    assert r.returncode == 0, r.stderr
    for pen in ("0.0", "0.5"):
        for lmwt in (9, 10):
            assert (tmp_path / "scoring" / f"penalty_{pen}" / f"{lmwt}.txt").read_text() == "u1 5\nu4 5\n"
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("WARNING")]
    assert warnings == [f"WARNING (pynnet-lattice-best-path-grid): Best-path failed for key {u} (the lattice "
                        "has no complete path)" for u in ("u2", "u3")], r.stderr
    assert "LOG (pynnet-lattice-best-path-grid): Done 2 lattices, failed for 2" in r.stderr
    with gzip.open(tmp_path / "none.gz", "wb") as f:
        f.write(b"u2 \n\nu3 \n\n")
    r = grid(tmp_path / "none.gz", tmp_path / "none")
    assert r.returncode == 1 and r.stderr.count("ERROR") == 1, r.stderr
    assert "best path failed for all 2 lattices (none has a complete path)" in r.stderr
    assert not (tmp_path / "none").exists()


def test_latgen_zero_length_utterance_is_a_warning(tmp_path):
    """Kaldi's latgen-faster(-mapped): an utterance with no frames (Kaldi's empty matrix is 0 x 0)
    is warned about ("Zero-length utterance"), counted as failed, and the others are decoded."""
    import kaldiio
    exp, graph, data, feats = _setup_loglikes(tmp_path)
    loglikes = dict(kaldiio.load_ark(str(tmp_path / "loglikes.ark")))
    with kaldiio.WriteHelper(f"ark:{tmp_path}/with_empty.ark") as wr:
        wr("aaa-empty", np.zeros((0, 0), np.float32))
        for utt in sorted(UTTS):
            wr(utt, loglikes[utt])
        wr("zzz-empty", np.zeros((0, 18), np.float32))
    with kaldiio.WriteHelper(f"ark:{tmp_path}/feats_empty.ark") as wr:
        wr("aaa-empty", np.zeros((0, 0), np.float32))
        wr("spkA-u1", feats["spkA-u1"])
    runs = [("pynnet-decode-faster-mapped", "with_empty.ark", threads, len(UTTS)) for threads in ("1", "2")]
    runs.append(("pynnet-gmm-latgen-faster", "feats_empty.ark", "1", 1))
    for prog, ark, threads, n_ok in runs:
        extra = ["--cmvn-opts", "--norm-means=false", "--delta-order", "0"] if "gmm" in prog else []
        r = subprocess.run([prog, "--num-threads", threads, *extra, str(exp / "final.mdl"), str(graph / "HCLG.fst"),
                            f"ark:{tmp_path}/{ark}", f"ark,t:{tmp_path}/lat.txt", f"ark,t:{tmp_path}/words.txt"],
                           env=_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("WARNING")]
        empties = ["aaa-empty", "zzz-empty"] if "mapped" in prog else ["aaa-empty"]
        assert warnings == [f"WARNING ({prog}): Zero-length utterance: {u}" for u in empties], r.stderr
        assert f"LOG ({prog}): Done {n_ok} utterances, failed for {len(empties)}" in r.stderr
        words = [ln.split()[0] for ln in (tmp_path / "words.txt").read_text().splitlines()]
        assert words == sorted(UTTS)[:n_ok]
    # nothing decoded at all: exit 1, as Kaldi's (after the same warnings)
    with kaldiio.WriteHelper(f"ark:{tmp_path}/only_empty.ark") as wr:
        wr("u0", np.zeros((0, 0), np.float32))
    r = subprocess.run(["pynnet-decode-faster-mapped", str(exp / "final.mdl"), str(graph / "HCLG.fst"),
                        f"ark:{tmp_path}/only_empty.ark", f"ark,t:{tmp_path}/lat0.txt"],
                       env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Zero-length utterance: u0" in r.stderr and "failed for 1" in r.stderr


def _children(pid: int) -> set[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return set()


def _cpu_taken(stderr: str) -> float:
    line = [ln for ln in stderr.splitlines() if "CPU time taken" in ln]
    assert len(line) == 1, stderr
    return float(line[0].split()[5].rstrip("s:"))


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
                    reason="no /proc/PID/task/TID/children")
def test_num_threads_sigterm_stops_the_decoding_processes(tmp_path):
    """--num-threads 2 given SIGTERM (run.pl killing the job) while both decoding processes are
    in long decodes: the program ends within a couple of seconds, leaving no process behind (it
    used to wait for the running decodes); and without SIGTERM the logged CPU time counts the
    decoding processes' CPU (it used to count only the parent's)."""
    import signal
    import time

    import kaldiio
    exp, graph, _, _ = _setup_loglikes(tmp_path)
    rng = np.random.default_rng(3)
    with kaldiio.WriteHelper(f"ark:{tmp_path}/long.ark") as wr:
        for k in range(4):      # ~8 s each here (every state of the toy graph stays in the beam)
            wr(f"long{k}", rng.normal(0, 3, (250000, 18)).astype(np.float32))
    cmd = ["pynnet-decode-faster-mapped", "--num-threads", "2", "--beam", "50", "--lattice-beam", "0.1",
           str(exp / "final.mdl"), str(graph / "HCLG.fst")]
    p = subprocess.Popen(cmd + [f"ark:{tmp_path}/long.ark", f"ark,t:{tmp_path}/lat.txt"], env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while len(_children(p.pid)) < 2 and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        workers = _children(p.pid)
        assert len(workers) == 2, workers
        time.sleep(1.0)             # both are decoding now
        t0 = time.time()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
        took = time.time() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    assert err.rstrip().endswith("ERROR (pynnet-decode-faster-mapped): terminated"), err
    assert took < 3.0, f"took {took:.1f} s to stop"
    assert not [w for w in workers if os.path.exists(f"/proc/{w}")], "decoding processes left behind"
    assert not (tmp_path / "lat.txt").exists()

    # the CPU time of a decode with 2 processes is about that of 1 process (the decoding's)
    with kaldiio.WriteHelper(f"ark:{tmp_path}/mid.ark") as wr:
        for k in range(4):
            wr(f"mid{k}", rng.normal(0, 3, (20000, 18)).astype(np.float32))
    cpu = {}
    for threads in ("1", "2"):
        r = subprocess.run(cmd[:2] + [threads] + cmd[3:] + [f"ark:{tmp_path}/mid.ark", f"ark,t:{tmp_path}/m.txt"],
                           env=_env(), capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cpu[threads] = _cpu_taken(r.stderr)
    assert cpu["2"] > 0.7 * cpu["1"], cpu
