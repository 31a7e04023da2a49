"""CTMs (time-marked words) from lattices: steps/get_ctm.sh, steps/get_ctm_fast.sh and
pynnet-lattice-to-ctm on a toy with position-dependent phones and silence, decoded by
steps/decode.sh from features whose word and silence boundaries are planted, so every word's
start and duration are known; and Kaldi's word-alignment rules on hand-made paths."""
from __future__ import annotations

import gzip
import shutil
import subprocess

import numpy as np
import pytest

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before kaldifst)
import kaldifst

from pynnet.bin.ctm import lattice_to_ctm_main
from pynnet.decode.ctm import align_lattice_words, align_words, best_path_arcs, grid_path_arcs, read_word_boundary
from pynnet.decode.lattice import best_paths, from_fst_text, path_cost, read_lattice_ark
from pynnet.hmm.ali_io import TransitionTables
from pynnet.io.errors import PynnetError
from test_decode import ROOT, WORDS, _env, _setup_exp

# Phones: 1 SIL (optional silence), then position-dependent ones: 2 A_B 3 A_E 4 B_B 5 B_E 6 C_S
# 7 D_B 8 D_I 9 D_E.  Word ids and names are test_decode's (1 one ... 6 six).
SIL = 1
PD_PHONES = list(range(1, 10))
PD_LEXICON = {1: [2, 5], 2: [4, 3], 3: [6], 4: [7, 8, 9], 5: [2, 8, 5], 6: [7, 3]}
WORD_BOUNDARY = {1: "nonword", 2: "begin", 3: "end", 4: "begin", 5: "end", 6: "singleton",
                 7: "begin", 8: "internal", 9: "end"}
TOPO = ("<Topology>\n<TopologyEntry>\n<ForPhones> " + " ".join(map(str, PD_PHONES)) + " </ForPhones>\n"
        + "".join(f"<State> {s} <PdfClass> {s} <Transition> {s} 0.75 <Transition> {s + 1} 0.25 </State>\n"
                  for s in range(3))
        + "<State> 3 </State>\n</TopologyEntry>\n</Topology>")
FPS = 2              # frames per HMM state in the features: a phone is 6 frames
UTTS = {"spkA-u1": [1, 2, 3], "spkA-u2": [4, 5], "spkB-u3": [6, 1, 2, 2], "spkB-u4": [3],
        "spkC-u5": [5, 6]}
LMWTS = (5, 6, 7)


class PdToy:
    """A monophone system (one Gaussian per pdf, far apart) over PD_PHONES, an HCLG word loop
    with optional silence, and features that follow ``plan`` exactly (little noise)."""

    def __init__(self):
        topo = khg.HmmTopology()
        topo.read(TOPO)
        self.ctx = khg.monophone_context_dependency(PD_PHONES, [0] + [3] * len(PD_PHONES))
        self.tm = khg.TransitionModel(self.ctx, topo)
        self.D = self.tm.num_pdfs
        self.am = khg.AmDiagGmm()
        for pdf in range(self.D):
            g = khg.DiagGmm(1, self.D)
            g.set_means(3.0 * np.eye(self.D)[pdf:pdf + 1])
            g.set_invvars(np.ones((1, self.D)))
            g.set_weights(np.ones(1))
            g.compute_gconsts()
            self.am.add_pdf(g)
        self.hclg = self._word_loop()

    def _word_loop(self):
        # L: one path per word from state 0 back to 0, and a silence loop at 0
        lines, n = [f"0 0 {SIL} 0"], 1
        for w, phones in PD_LEXICON.items():
            prev = 0
            for i, p in enumerate(phones):
                nxt = 0 if i == len(phones) - 1 else n
                n += nxt != 0
                lines.append(f"{prev} {nxt} {p} {w if i == 0 else 0}")
                prev = nxt
        lex = kaldifst.compile(s="\n".join(lines + ["0"]) + "\n", acceptor=False)
        gc = khg.TrainingGraphCompiler(self.tm, self.ctx, lex, [], khg.TrainingGraphCompilerOptions())
        arcs, base = [], 1
        for w in PD_LEXICON:          # 0 -> (silence* w silence*) -> 0
            g = gc.compile_graph_from_text([w])
            for ln in g.to_str().strip().split("\n"):
                f = ln.split()
                if len(f) >= 4:
                    arcs.append(f"{int(f[0]) + base} {int(f[1]) + base} {f[2]} {f[3]} {f[4] if len(f) > 4 else 0}")
                else:
                    arcs.append(f"{int(f[0]) + base} 0 0 0 {f[1] if len(f) > 1 else 0}")
            arcs.append(f"0 {g.start + base} 0 0 1.0")
            base += g.num_states
        arcs.sort(key=lambda ln: ln.split()[0] != "0")   # the first line's state is the start
        return kaldifst.compile(s="\n".join(arcs + ["0 0"]) + "\n", acceptor=False)

    @staticmethod
    def plan(words: list[int]) -> list[tuple[int, list[int]]]:
        """(word, or 0 for silence; its phones): silence first, after every second word, last."""
        out = [(0, [SIL])]
        for i, w in enumerate(words):
            out.append((w, PD_LEXICON[w]))
            if i % 2 == 1 or i == len(words) - 1:
                out.append((0, [SIL]))
        return out

    def feats(self, words: list[int], seed: int = 0) -> np.ndarray:
        pdfs = [3 * (p - 1) + k for _, phones in self.plan(words) for p in phones for k in range(3)]
        x = 3.0 * np.eye(self.D)[np.repeat(pdfs, FPS)]
        return (x + np.random.default_rng(seed).normal(0, 0.3, x.shape)).astype(np.float32)


def planted(words: list[int], with_silence: bool = False) -> list[tuple[str, str, str]]:
    """(start, duration, word) of the planted pieces, as nbest-to-ctm prints them."""
    out, frame = [], 0
    for w, phones in PdToy.plan(words):
        n = len(phones) * 3 * FPS
        if w or with_silence:
            out.append((f"{frame * 0.01:.2f}", f"{n * 0.01:.2f}", WORDS[w]))
        frame += n
    return out


def _sh(*args, cwd=ROOT):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    """A decode dir of the toy (steps/decode.sh, scored over LMWTS); the graph dir has
    phones/word_boundary.int.  Tests copy it before changing anything."""
    tmp = tmp_path_factory.mktemp("ctm")
    toy = PdToy()
    exp, graph, data = _setup_exp(tmp, toy, UTTS)
    (graph / "phones").mkdir()
    (graph / "phones" / "word_boundary.int").write_text("".join(f"{p} {k}\n" for p, k in WORD_BOUNDARY.items()))
    dec = exp / "decode_test"
    r = _sh(f"{ROOT}/steps/decode.sh", "--nj", "2", "--acwt", "0.1", "--scoring-opts",
            f"--min-lmwt {LMWTS[0]} --max-lmwt {LMWTS[-1]}", graph, data, dec)
    assert r.returncode == 0, r.stderr + r.stdout
    return toy, tmp


def _copy(decoded, tmp_path):
    toy, src = decoded
    shutil.copytree(src, tmp_path / "x")
    root = tmp_path / "x"
    return toy, root / "exp" / "mono" / "graph", root / "data" / "test", root / "exp" / "mono" / "decode_test"


def _ctm(path) -> dict[str, list[tuple[str, ...]]]:
    out: dict[str, list[tuple[str, ...]]] = {}
    for ln in path.read_text().splitlines():
        f = ln.split()
        out.setdefault(f[0], []).append(tuple(f[1:]))
    return out


def _one_error_line(r, *words):
    assert r.returncode == 1, r.stderr + r.stdout
    lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("run.pl: ")]  # (the job runner's)
    assert len(lines) == 1, r.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_get_ctm_words_and_times(decoded, tmp_path):
    """steps/get_ctm.sh: per LM weight, score_LMWT/test.ctm has the scoring's best words at that
    weight, at the planted times; --print-silence true adds the silences as <eps>, which then
    tile each utterance."""
    _, graph, data, dec = _copy(decoded, tmp_path)
    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", LMWTS[0], "--max-lmwt", LMWTS[-1], data, graph, dec)
    assert r.returncode == 0, r.stderr + r.stdout
    for lmwt in LMWTS:
        ctm = _ctm(dec / f"score_{lmwt}" / "test.ctm")
        hyp = {ln.split()[0]: ln.split()[1:] for ln in
               (dec / "scoring_kaldi" / "penalty_0.0" / f"{lmwt}.txt").read_text().splitlines()}
        assert {u: [f[3] for f in ctm.get(u, [])] for u in hyp} == hyp
        for utt, words in UTTS.items():
            assert ctm[utt] == [("1",) + p for p in planted(words)], utt
    assert not (dec / f"score_{LMWTS[-1] + 1}").exists()
    assert all((dec / "scoring" / "log" / f"get_ctm.{j}.log").exists() for j in (1, 2))
    assert not list((dec / "scoring").glob("ctm.*"))        # (the jobs' pieces)
    # the lines as nbest-to-ctm prints them
    assert (dec / "score_5" / "test.ctm").read_text().splitlines()[:2] == [
        "spkA-u1 1 0.06 0.12 one", "spkA-u1 1 0.18 0.12 two"]

    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", 7, "--max-lmwt", 7, "--print-silence", "true",
            data, graph, dec)
    assert r.returncode == 0, r.stderr + r.stdout
    ctm = _ctm(dec / "score_7" / "test.ctm")
    for utt, words in UTTS.items():
        assert ctm[utt] == [("1",) + p for p in planted(words, with_silence=True)]
        starts = [float(f[1]) for f in ctm[utt]]
        ends = [float(f[1]) + float(f[2]) for f in ctm[utt]]
        assert starts[0] == 0 and np.allclose(starts[1:], ends[:-1])   # contiguous
        n_frames = sum(len(ph) * 3 * FPS for _, ph in PdToy.plan(words))
        assert abs(ends[-1] - n_frames * 0.01) < 1e-6
    assert set(ctm) == {ln.split()[0] for ln in (data / "feats.scp").read_text().splitlines()}


def test_get_ctm_segments(decoded, tmp_path):
    """--use-segments true (the default) with data/segments: times relative to the recording
    (segment start added, 2 decimals) and <file> <channel> for <utt> 1, as utils/convert_ctm.pl;
    without reco2file_and_channel it is an error, as in Kaldi; --use-segments false ignores them."""
    _, graph, data, dec = _copy(decoded, tmp_path)
    begin = {u: 1.25 + 10 * i for i, u in enumerate(sorted(UTTS))}
    (data / "segments").write_text("".join(
        f"{u} rec-{u.split('-')[0]} {begin[u]:.2f} {begin[u] + 3:.2f}\n" for u in sorted(UTTS)))
    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", 6, "--max-lmwt", 6, data, graph, dec)
    _one_error_line(r, "reco2file_and_channel")
    assert not (dec / "score_6").exists()
    (data / "reco2file_and_channel").write_text("".join(
        f"rec-{s} {s}-audio A\n" for s in sorted({u.split('-')[0] for u in UTTS})))
    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", 6, "--max-lmwt", 6, data, graph, dec)
    assert r.returncode == 0, r.stderr + r.stdout
    lines = (dec / "score_6" / "test.ctm").read_text().splitlines()
    expected = [f"{u.split('-')[0]}-audio A {float(s) + begin[u]:.2f} {d} {w}"
                for u in sorted(UTTS) for s, d, w in planted(UTTS[u])]
    assert lines == expected
    assert lines[0] == "spkA-audio A 1.31 0.12 one"
    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", 6, "--max-lmwt", 6, "--use-segments", "false",
            data, graph, dec)
    assert r.returncode == 0, r.stderr + r.stdout
    assert (dec / "score_6" / "test.ctm").read_text().splitlines()[0] == "spkA-u1 1 0.06 0.12 one"
    # an utterance the segments file lacks
    (data / "segments").write_text((data / "segments").read_text().split("\n", 1)[1])
    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", 6, "--max-lmwt", 6, data, graph, dec)
    _one_error_line(r, "spkA-u1", "segments", "get_ctm.1.log")
    assert not (dec / "score_6" / "test.ctm").exists()


def test_get_ctm_fast(decoded, tmp_path):
    """steps/get_ctm_fast.sh: one job per lattice file, ctm.JOB and their concatenation ctm, the
    same lines as get_ctm.sh at that LM weight; --wip goes to the program as lattice-1best's."""
    _, graph, data, dec = _copy(decoded, tmp_path)
    out = tmp_path / "ctm_fast"
    r = _sh(f"{ROOT}/steps/get_ctm_fast.sh", "--lmwt", 6, data, graph, dec, out)
    assert r.returncode == 0, r.stderr + r.stdout
    assert (out / "num_jobs").read_text().strip() == "2"
    assert (out / "ctm").read_text() == (out / "ctm.1").read_text() + (out / "ctm.2").read_text()
    assert (out / "log" / "get_ctm.2.log").exists()
    r = _sh(f"{ROOT}/steps/get_ctm.sh", "--min-lmwt", 6, "--max-lmwt", 6, data, graph, dec)
    assert r.returncode == 0, r.stderr + r.stdout
    assert sorted((out / "ctm").read_text().splitlines()) == sorted(
        (dec / "score_6" / "test.ctm").read_text().splitlines())
    r = _sh(f"{ROOT}/steps/get_ctm_fast.sh", "--lmwt", 6, "--wip", 0.5, data, graph, dec, out)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "--lm-scale 6 --word-ins-penalty 0.5 " in (out / "log" / "get_ctm.1.log").read_text()
    r = _sh(f"{ROOT}/steps/get_ctm_fast.sh", data, graph, dec)
    assert r.returncode == 1 and r.stderr.startswith("Usage:")


def test_lattice_to_ctm_grid_is_the_per_point_passes(decoded, tmp_path):
    """--grid-word-ins-penalty: one pass for the LMWT x WIP grid gives, byte for byte, the ctm of
    each point's own pass (lattice-1best's --lm-scale LMWT --word-ins-penalty LMWT*WIP, or all
    weights at once for WIP 0), and the points do not all have the same path."""
    _, graph, data, dec = _copy(decoded, tmp_path)
    common = ["--word-symbol-table", str(graph / "words.txt"), str(graph / "phones" / "word_boundary.int"),
              str(dec.parent / "final.mdl"), str(dec / "lat.1.gz"), str(dec / "lat.2.gz")]
    lmwts, wips = range(5, 18), ["0.0", "0.5", "1.0"]
    assert lattice_to_ctm_main(["--min-lmwt", "5", "--max-lmwt", "17", "--grid-word-ins-penalty",
                                ",".join(wips)] + common + [str(tmp_path / "grid" / "LMWT_WIP.ctm")]) == 0
    assert lattice_to_ctm_main(["--min-lmwt", "5", "--max-lmwt", "17"] + common
                               + [str(tmp_path / "one" / "LMWT_0.0.ctm")]) == 0
    for lmwt in lmwts:
        for wip in wips[1:]:
            assert lattice_to_ctm_main(["--lm-scale", str(lmwt), "--word-ins-penalty", f"{lmwt * float(wip):g}"]
                                       + common + [str(tmp_path / "one" / f"{lmwt}_{wip}.ctm")]) == 0
    texts = set()
    for lmwt in lmwts:
        for wip in wips:
            grid = (tmp_path / "grid" / f"{lmwt}_{wip}.ctm").read_bytes()
            assert grid == (tmp_path / "one" / f"{lmwt}_{wip}.ctm").read_bytes(), (lmwt, wip)
            texts.add(grid)
    assert len(texts) > 2 and all(texts)
    assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == sorted(
        f"{lmwt}_{wip}.ctm" for lmwt in lmwts for wip in wips)
    # bad usage: one line, nothing written
    for opts, out, msg in [(["--grid-word-ins-penalty", "0.5"], "LMWT_WIP.ctm", "--max-lmwt"),
                           (["--min-lmwt", "5", "--max-lmwt", "6", "--grid-word-ins-penalty", "0.5"],
                            "LMWT.ctm", "LMWT and WIP"),
                           (["--min-lmwt", "5", "--max-lmwt", "6", "--grid-word-ins-penalty", "0.5,x"],
                            "LMWT_WIP.ctm", "'x'"),
                           (["--min-lmwt", "5", "--max-lmwt", "6", "--grid-word-ins-penalty", "0.5",
                             "--word-ins-penalty", "1"], "LMWT_WIP.ctm", "--word-ins-penalty")]:
        r = _sh("pynnet-lattice-to-ctm", *opts, *common, tmp_path / "bad" / out)
        _one_error_line(r, msg)
    assert not (tmp_path / "bad").exists()


def test_get_ctm_bad_input(decoded, tmp_path):
    """One line and exit 1, no ctm: wrong usage, --decode-mbr true, a missing lattice, a missing
    word-boundary file, a lattice with transition-ids the model does not have."""
    _, graph, data, dec = _copy(decoded, tmp_path)
    get_ctm = f"{ROOT}/steps/get_ctm.sh"
    r = _sh(get_ctm, data, graph)
    assert r.returncode == 1 and r.stderr.startswith("Usage:")
    _one_error_line(_sh(get_ctm, "--decode-mbr", "true", data, graph, dec), "--decode-mbr")
    _one_error_line(_sh(get_ctm, "--min-lmwt", 9, "--max-lmwt", 8, data, graph, dec), "--min-lmwt")
    lat2 = (dec / "lat.2.gz").read_bytes()
    (dec / "lat.2.gz").unlink()
    _one_error_line(_sh(get_ctm, data, graph, dec), "lat.2.gz")
    (dec / "lat.2.gz").write_bytes(lat2)
    (graph / "phones" / "word_boundary.int").rename(graph / "wb")
    _one_error_line(_sh(get_ctm, data, graph, dec), "word_boundary.int")
    (graph / "phones" / "align_lexicon.int").write_text("1 1 2 5\n")
    _one_error_line(_sh(get_ctm, data, graph, dec), "align_lexicon.int", "not supported")
    (graph / "wb").rename(graph / "phones" / "word_boundary.int")
    # a lattice with a transition-id beyond the model's
    lats = list(read_lattice_ark(str(dec / "lat.1.gz")))
    lats[0][1].ilabel[lats[0][1].ilabel > 0] = 9999
    with gzip.open(dec / "lat.1.gz", "wt") as f:
        f.write("".join(lat.to_kaldi_text(u) for u, lat in lats))
    r = _sh(get_ctm, "--min-lmwt", 6, "--max-lmwt", 6, data, graph, dec)
    _one_error_line(r, "transition-id 9999", "get_ctm.1.log")
    assert not (dec / "score_6").exists() or not list((dec / "score_6").iterdir())
    # a word-boundary file naming a phone the model lacks
    (graph / "phones" / "word_boundary.int").write_text("1 nonword\n12 begin\n")
    r = _sh("pynnet-lattice-to-ctm", graph / "phones" / "word_boundary.int", dec.parent / "final.mdl",
            dec / "lat.2.gz", tmp_path / "o.ctm")
    _one_error_line(r, "phone 12")
    (graph / "phones" / "word_boundary.int").write_text("1 nonword\n2 middle\n")
    _one_error_line(_sh("pynnet-lattice-to-ctm", graph / "phones" / "word_boundary.int",
                        dec.parent / "final.mdl", dec / "lat.2.gz", tmp_path / "o.ctm"), ":2:", "middle")
    assert not (tmp_path / "o.ctm").exists()


# ------------------------------------------------------------------ the rules, on made-up paths
@pytest.fixture(scope="module")
def tables():
    return TransitionTables.from_model(PdToy().tm)


def _kinds():
    kinds = np.zeros(10, np.int8)
    from pynnet.decode import ctm
    for p, k in WORD_BOUNDARY.items():
        kinds[p] = getattr(ctm, k.upper())
    return kinds


def _tids(t: TransitionTables, phones: list[int], frames: int = 2) -> list[int]:
    """A reordered path through ``phones``: per state its forward transition-id, then
    frames-1 self-loops."""
    out = []
    for p in phones:
        for s in range(3):
            sel = (t.phone == p) & (t.hmm_state == s)
            fwd = int(np.flatnonzero(sel & ~t.self_loop)[0])
            loop = int(np.flatnonzero(sel & t.self_loop)[0])
            out += [fwd] + [loop] * (frames - 1)
    return out


def test_align_words_rules(tables, tmp_path):
    kinds = _kinds()
    wb = tmp_path / "wb.int"
    wb.write_text("".join(f"{p} {k}\n" for p, k in WORD_BOUNDARY.items()))
    assert np.array_equal(read_word_boundary(wb), kinds)
    # silence, "four" (D_B D_I D_E), "three" (C_S), silence: 6 frames a phone
    path = _tids(tables, [SIL, 7, 8, 9, 6, SIL])
    al = align_words(tables, kinds, path, [4, 3])
    assert al.pieces == [(0, 0, 6), (4, 6, 18), (3, 24, 6), (0, 30, 6)] and al.error is None
    # the last word ends the path: forced out, no error
    al = align_words(tables, kinds, path[:30], [4, 3])
    assert al.pieces == [(0, 0, 6), (4, 6, 18), (3, 24, 6)] and al.error is None
    # a word cut short at the end: output, with an error
    al = align_words(tables, kinds, path[:20], [4])
    assert al.pieces == [(0, 0, 6), (4, 6, 14)] and "invalid word" in al.error
    # more labels than words: the next takes what is left (here the final silence), an error;
    # with nothing left they are dropped, an error
    al = align_words(tables, kinds, path, [4, 3, 1])
    assert al.pieces == [(0, 0, 6), (4, 6, 18), (3, 24, 6), (1, 30, 6)] and "invalid word" in al.error
    al = align_words(tables, kinds, path[:30], [4, 3, 1])
    assert al.pieces == [(0, 0, 6), (4, 6, 18), (3, 24, 6)] and "discarding word-ids" in al.error
    # phones without a label: a partial word (word 0)
    al = align_words(tables, kinds, path, [4])
    assert al.pieces == [(0, 0, 6), (4, 6, 18), (0, 24, 12)] and "partial word" in al.error
    # an internal phone where a word should begin: stuck till the end, all one piece
    al = align_words(tables, kinds, _tids(tables, [8, 9, SIL]), [4])
    assert al.pieces == [(4, 0, 18)] and "invalid word" in al.error
    # no labels at all, only silence
    assert align_words(tables, kinds, _tids(tables, [SIL, SIL]), []).pieces == [(0, 0, 6), (0, 6, 6)]
    with pytest.raises(PynnetError, match="transition-id 999 is not in the model"):
        align_words(tables, kinds, path + [999], [4, 3])


def test_word_labels_anywhere_on_the_path(tables):
    """Kaldi's lattices are CompactLattices whose word labels need not sit at the word's first
    frame (determinization moves them): the alignment does not depend on where they are."""
    kinds = _kinds()
    path = _tids(tables, [SIL, 2, 5, 4, 3, SIL, 6])          # sil one two sil three
    words = [1, 2, 3]
    expected = align_words(tables, kinds, path, words).pieces
    assert expected == [(0, 0, 6), (1, 6, 12), (2, 18, 12), (0, 30, 6), (3, 36, 6)]
    for cuts, labelled in (([3, 10, 40], [0, 1, 2]), ([1, 2, 3], [0, 1, 2]), ([20, 30], [0, 0, 0]),
                           ([20, 38], [1, 1, 2])):
        # a linear CompactLattice: arcs with the transition-ids between cuts, words on some
        bounds = [0] + cuts + [len(path)]
        arcs = []
        on = {}
        for k, w in zip(labelled, words):
            on.setdefault(k, []).append(w)
        state = 0
        for k in range(len(bounds) - 1):
            seg = "_".join(map(str, path[bounds[k]:bounds[k + 1]]))
            ws = on.get(k, [0])
            for j, w in enumerate(ws):
                arcs.append(f"{state} {state + 1} {w} 0.5,1.5,{seg if j == len(ws) - 1 else ''}")
                state += 1
        lat = from_fst_text("\n".join(arcs + [f"{state} 0,0,"]) + "\n")
        assert align_lattice_words(lat, tables, kinds, [10.0])[0].pieces == expected, cuts


def test_best_path_matches_scoring_and_lattice_1best_penalty():
    """best_path_arcs at LM scales L is the grid scorer's best path at (L, WIP 0), the same arcs
    for one scale or many; Kaldi's lattice-1best adds its penalty after the LM scaling (so it is
    the grid's WIP/L), and only a positive one."""
    rng = np.random.default_rng(3)
    lmwts = [1.0, 7.0, 15.0]
    for trial in range(30):
        S = 8
        lines = []
        for s in range(S - 1):
            for d in rng.choice(np.arange(s + 1, S), size=min(2, S - 1 - s), replace=False):
                lines.append(f"{s}\t{d}\t{int(rng.integers(1, 20))}\t{int(rng.integers(0, 4))}\t"
                             f"{rng.uniform(0, 5):.3f},{rng.uniform(0, 50):.3f}")
        lat = from_fst_text("\n".join(lines + [f"{S - 1}\t0,0"]) + "\n")
        together = best_path_arcs(lat, lmwts)
        for lmwt, arcs in zip(lmwts, together):
            assert np.array_equal(arcs, best_path_arcs(lat, [lmwt])[0])
            assert lat.src[arcs[0]] == lat.start and lat.dst[arcs[-1]] == S - 1
            assert np.array_equal(lat.dst[arcs[:-1]], lat.src[arcs[1:]])
            words = [int(w) for w in lat.olabel[arcs] if w]
            assert words == best_paths(lat, [lmwt], [0.0])[(lmwt, 0.0)]
            pen = 2.0 / lmwt
            arcs = best_path_arcs(lat, [lmwt], word_ins_penalty=2.0)[0]
            words = [int(w) for w in lat.olabel[arcs] if w]
            grid = best_paths(lat, [lmwt], [pen])[(lmwt, pen)]
            assert words == grid or abs(path_cost(lat, lmwt, pen, words) - path_cost(lat, lmwt, pen, grid)) < 1e-9
            assert np.array_equal(best_path_arcs(lat, [lmwt], word_ins_penalty=-3.0)[0],
                                  best_path_arcs(lat, [lmwt])[0])
    # no complete path: None; the empty path of a lattice whose start is final: no arcs
    assert best_path_arcs(from_fst_text("0\t1\t3\t1\t1,1\n"), [10.0]) == [None]
    assert best_path_arcs(from_fst_text("0\t1\t3\t1\t1,1\n0\t0,0\n"), [10.0])[0].size == 0


def test_grid_path_arcs_is_lattice_1best_per_point():
    """grid_path_arcs at (L, W) is best_path_arcs at LM scale L with lattice-1best's penalty L*W
    (the same arcs), scale-major, for any penalty list (repeats too); a negative grid penalty is
    added (as lattice-add-penalty), best_paths' WIP."""
    rng = np.random.default_rng(5)
    lmwts, wips = [1.0, 7.0, 12.0], [0.0, 0.5, 1.0, 0.5]
    for trial in range(30):
        S = 9
        lines = []
        for s in range(S - 1):
            for d in rng.choice(np.arange(s + 1, S), size=min(3, S - 1 - s), replace=False):
                lines.append(f"{s}\t{d}\t{int(rng.integers(1, 20))}\t{int(rng.integers(0, 3))}\t"
                             f"{rng.uniform(0, 5):.3f},{rng.uniform(0, 50):.3f}")
        lat = from_fst_text("\n".join(lines + [f"{S - 1}\t0,0"]) + "\n")
        grid = grid_path_arcs(lat, lmwts, wips)
        assert len(grid) == len(lmwts) * len(wips)
        for i, lmwt in enumerate(lmwts):
            for j, wip in enumerate(wips):
                assert np.array_equal(grid[i * len(wips) + j], best_path_arcs(lat, [lmwt], word_ins_penalty=lmwt * wip)[0])
        arcs = grid_path_arcs(lat, [7.0], [-2.0])[0]
        words = [int(w) for w in lat.olabel[arcs] if w]
        best = best_paths(lat, [7.0], [-2.0])[(7.0, -2.0)]
        assert words == best or abs(path_cost(lat, 7.0, -2.0, words) - path_cost(lat, 7.0, -2.0, best)) < 1e-9
    assert grid_path_arcs(from_fst_text("0\t1\t3\t1\t1,1\n"), [10.0], [0.0, 1.0]) == [None, None]
