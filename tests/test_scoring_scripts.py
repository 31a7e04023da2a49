"""Kaldi's other scoring and decoding script names: steps/scoring/score_kaldi_wer.sh,
steps/scoring/score_kaldi_cer.sh (character error rate) and steps/decode_si.sh, on the toy
system of tests/test_decode.py."""
from __future__ import annotations

import gzip
import shutil
import subprocess

import pytest

from test_decode import ROOT, Toy, _env, _setup_exp

# The toy's six words, written as Chinese words (and one markup word) for CER scoring.
CWORDS = {0: "<eps>", 1: "你好", 2: "世界", 3: "中国", 4: "[noise]", 5: "北京市", 6: "上海"}
UTTS = {"spkA-u1": [1, 2, 3], "spkA-u2": [5, 6], "spkB-u3": [4, 1]}
# The references differ from what was said (the decoder's output on this clean audio):
REF = {"spkA-u1": "你好 世界 中国",  # 6 characters, hyp the same: 0 errors
       "spkA-u2": "北京 上海市",     # 北京上海市 vs 北京市上海: 1 ins + 1 del (3 subs otherwise)
       "spkB-u3": "[noise] 你"}      # [noise] 你 vs [noise] 你 好: 1 ins ([noise] is one token)
# CER 3 / 13 (2 ins, 1 del); by words: u2 2 subs, u3 1 sub of 7 words.
GRID = ["--min-lmwt", "1", "--max-lmwt", "4", "--word-ins-penalty", "0.0,0.5"]


def _sh(*argv, timeout=300):
    return subprocess.run([f"{ROOT}/{argv[0]}", *argv[1:]], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    """A toy exp dir decoded by steps/decode.sh (not scored), its graph's words.txt in Chinese."""
    tmp = tmp_path_factory.mktemp("cer")
    exp, graph, data = _setup_exp(tmp, Toy(), UTTS)
    (graph / "words.txt").write_text("".join(f"{w} {i}\n" for i, w in CWORDS.items()), encoding="utf-8")
    (data / "text").write_text("".join(f"{u} {t}\n" for u, t in sorted(REF.items())), encoding="utf-8")
    r = _sh("steps/decode.sh", "--nj", "2", "--skip-scoring", "true", str(graph), str(data), str(exp / "decode"))
    assert r.returncode == 0, r.stderr + r.stdout
    return exp, graph, data


def _copy_decode(exp, name):
    """A fresh copy of the decode dir (lattices, num_jobs) to score."""
    dec = exp / name
    shutil.rmtree(dec, ignore_errors=True)
    dec.mkdir()
    for f in ("lat.1.gz", "lat.2.gz", "num_jobs"):
        shutil.copy(exp / "decode" / f, dec / f)
    return dec


def _edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[-1]


def _chars(words):
    return [w for word in words for w in ([word] if word == "[noise]" else list(word))]


def test_score_kaldi_wer_then_cer_stage_2(decoded):
    """aishell's local/score.sh: score_kaldi_wer.sh "$@"; score_kaldi_cer.sh --stage 2 "$@"."""
    exp, graph, data = decoded
    dec = _copy_decode(exp, "decode_wer_cer")
    r = _sh("steps/scoring/score_kaldi_wer.sh", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    said = {u: " ".join(CWORDS[w] for w in ws) for u, ws in UTTS.items()}
    hyp = (dec / "scoring_kaldi" / "penalty_0.0" / "1.txt").read_text(encoding="utf-8")
    assert hyp == "".join(f"{u} {said[u]}\n" for u in sorted(UTTS))  # the hand count below holds
    assert (dec / "scoring_kaldi" / "best_wer").read_text() == \
        f"%WER 42.86 [ 3 / 7, 0 ins, 0 del, 3 sub ] {dec}/wer_1_0.0\n"
    wer_files = {f.name: f.read_bytes() for f in dec.glob("wer_*")}
    assert len(wer_files) == 8

    # a hypothesis edited after the word scoring: --stage 2 scores the files it finds, not the lattices
    edited = dec / "scoring_kaldi" / "penalty_0.5" / "4.txt"
    edited.write_text(hyp.replace("spkA-u2 北京市 上海", "spkA-u2 北京 上海市"), encoding="utf-8")
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "2", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert r.stdout.splitlines()[-1] == f"%WER 7.69 [ 1 / 13, 1 ins, 0 del, 0 sub ] {dec}/cer_4_0.5"
    assert (dec / "scoring_kaldi" / "best_cer").read_text() == r.stdout.splitlines()[-1] + "\n"
    assert {f.name: f.read_bytes() for f in dec.glob("wer_*")} == wer_files  # words not rescored
    assert not list((dec / "scoring_kaldi" / "log").glob("best_path*.cer*"))
    assert (dec / "scoring_kaldi" / "test_filt.chars.txt").read_text(encoding="utf-8") == \
        "spkA-u1 你 好 世 界 中 国\nspkA-u2 北 京 上 海 市\nspkB-u3 [noise] 你\n"
    cer = (dec / "cer_1_0.0").read_text(encoding="utf-8").splitlines()
    assert cer[0] == (f"compute-wer --text --mode=present ark:{dec}/scoring_kaldi/test_filt.chars.txt "
                      f"ark,p:{dec}/scoring_kaldi/penalty_0.0/1.chars.txt")
    assert cer[1:] == ["%WER 23.08 [ 3 / 13, 2 ins, 1 del, 0 sub ]", "%SER 66.67 [ 2 / 3 ]",
                       "Scored 3 sentences, 0 not present in hyp."]
    # every grid point: the character edit distance of its hypotheses
    ref = {u: _chars(t.split()) for u, t in REF.items()}
    for pen in ("0.0", "0.5"):
        for lmwt in range(1, 5):
            hyps = (dec / "scoring_kaldi" / f"penalty_{pen}" / f"{lmwt}.txt").read_text(encoding="utf-8")
            errs = sum(_edit_distance(ref[ln.split()[0]], _chars(ln.split()[1:])) for ln in hyps.splitlines())
            assert (dec / f"cer_{lmwt}_{pen}").read_text().splitlines()[1].split()[3] == str(errs)
    details = dec / "scoring_kaldi" / "cer_details"
    assert (details / "lmwt").read_text() == "4\n" and (details / "wip").read_text() == "0.5\n"
    assert (details / "per_spk").read_text().splitlines()[-2].split() == \
        ["SUM", "raw", "3", "13", "13", "0", "1", "0", "1", "1"]
    assert "spkA-u2 #csid 5 0 0 0" in (details / "per_utt").read_text(encoding="utf-8")
    assert "insertion         ***          好    1" in (details / "ops").read_text(encoding="utf-8")

    # --stage 3 only picks the best again; --stats false writes no details
    shutil.rmtree(details)
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "3", "--stats", "false", *GRID,
            str(data), str(graph), str(dec))
    assert r.returncode == 0 and r.stdout.splitlines()[-1].endswith(f"{dec}/cer_4_0.5"), r.stderr
    assert not details.exists()


def test_score_kaldi_cer_from_the_lattices(decoded):
    """--stage 0 (the default) finds the word hypotheses itself, with their wer_* files, as Kaldi's."""
    exp, graph, data = decoded
    dec = _copy_decode(exp, "decode_cer")
    r = _sh("steps/scoring/score_kaldi_cer.sh", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert (dec / "scoring_kaldi" / "best_cer").read_text() == \
        f"%WER 23.08 [ 3 / 13, 2 ins, 1 del, 0 sub ] {dec}/cer_1_0.0\n"
    assert len(list(dec.glob("cer_*"))) == len(list(dec.glob("wer_*"))) == 8
    assert (dec / "wer_1_0.0").read_text().splitlines()[1] == "%WER 42.86 [ 3 / 7, 0 ins, 0 del, 3 sub ]"
    assert (dec / "scoring_kaldi" / "cer_details" / "per_utt").exists()
    # the word scoring again: the character results of the replaced hypotheses go
    r = _sh("steps/score_kaldi.sh", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert not list(dec.glob("cer_*")) and not (dec / "scoring_kaldi" / "best_cer").exists()
    assert not list(dec.glob("scoring_kaldi/penalty_*/*.chars.txt"))
    assert not (dec / "scoring_kaldi" / "cer_details").exists()
    assert (dec / "scoring_kaldi" / "wer_details" / "per_utt").exists()


def test_score_kaldi_cer_errors(decoded):
    exp, graph, data = decoded
    dec = _copy_decode(exp, "decode_cer_errors")
    # --stage 2 needs the hypotheses of a word scoring with the same grid
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "2", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 1
    assert r.stderr.strip() == (f"{ROOT}/steps/scoring/score_kaldi_cer.sh: no {dec}/scoring_kaldi/penalty_0.0/1.txt "
                                "(the word hypotheses are missing): score the words first (steps/score_kaldi.sh "
                                "or steps/scoring/score_kaldi_wer.sh with the same grid options), or use --stage 0")
    assert not list(dec.glob("cer_*"))
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--decode-mbr", "true", str(data), str(graph), str(dec))
    assert r.returncode == 1 and "--decode-mbr true is not supported" in r.stderr
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--no-such", "1", str(data), str(graph), str(dec))
    assert r.returncode == 1 and "invalid option --no-such" in r.stderr
    r = _sh("steps/scoring/score_kaldi_cer.sh", str(data), str(graph))
    assert r.returncode == 1 and r.stderr.startswith("Usage: ")


def test_decode_si_is_decode_sh(tmp_path):
    """steps/decode_si.sh is steps/decode.sh (a symlink, as in Kaldi): it decodes final.mdl; a SAT
    system's speaker-independent model is decoded with --model final.alimdl."""
    exp, graph, data = _setup_exp(tmp_path, Toy(), UTTS)

    def decode(script, name, *opts):
        r = _sh(script, "--nj", "2", "--skip-scoring", "true", *opts, str(graph), str(data), str(exp / name))
        assert r.returncode == 0, r.stderr + r.stdout
        return [(exp / name / f"lat.{j}.gz").read_bytes() for j in (1, 2)]

    plain = decode("steps/decode.sh", "plain")
    from pynnet.hmm.model_io import write_model
    other = Toy(sep=2.0)  # another model: other acoustic costs, other lattices
    write_model(str(exp / "final.alimdl"), other.tm, other.am)
    assert decode("steps/decode_si.sh", "si") == plain
    assert decode("steps/decode_si.sh", "si", "--model", str(exp / "final.alimdl")) != plain
    r = _sh("steps/decode_si.sh", "--nj", "2", str(graph), str(data))
    assert r.returncode == 1 and r.stderr.startswith("Usage: ")


def test_cer_stage_2_does_not_score_stale_hypotheses(decoded):
    """The word hypotheses of an earlier scoring go when the lattices are scored again (and the
    best paths fail) or decoded again: a CER --stage 2 run then says they are missing, one line,
    rather than printing a CER of the old lattices; a failed run leaves no grid.N behind."""
    exp, graph, data = decoded
    dec = _copy_decode(exp, "decode_stale")
    r = _sh("steps/score_kaldi.sh", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert (dec / "scoring_kaldi" / "penalty_0.0" / "1.txt").exists()
    missing = (f"{ROOT}/steps/scoring/score_kaldi_cer.sh: no {dec}/scoring_kaldi/penalty_0.0/1.txt (the word "
               "hypotheses are missing): score the words first (steps/score_kaldi.sh or "
               "steps/scoring/score_kaldi_wer.sh with the same grid options), or use --stage 0")

    # lat.1.gz truncated: the word scoring fails, and takes the old hypotheses with it
    text = gzip.decompress((dec / "lat.1.gz").read_bytes())
    (dec / "lat.1.gz").write_bytes(gzip.compress(text[:len(text) // 2]))
    r = _sh("steps/score_kaldi.sh", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 1 and "best_path" in r.stderr, r.stderr + r.stdout
    assert not list((dec / "scoring_kaldi").glob("grid.*"))
    assert not list((dec / "scoring_kaldi").glob("penalty_*/*.txt"))
    assert not list(dec.glob("wer_*")) and not (dec / "scoring_kaldi" / "best_wer").exists()
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "2", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 1 and r.stderr.strip() == missing, r.stderr + r.stdout
    assert "%WER" not in r.stdout and not list(dec.glob("cer_*"))

    # scored again, then decoded again (steps/decode.sh --skip-scoring true): the new lattices'
    # hypotheses are not there yet, so --stage 2 has nothing to score
    for f in ("lat.1.gz", "lat.2.gz"):
        shutil.copy(exp / "decode" / f, dec / f)
    r = _sh("steps/scoring/score_kaldi_cer.sh", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert list((dec / "scoring_kaldi").glob("penalty_*/*.chars.txt"))
    r = _sh("steps/decode.sh", "--nj", "2", "--skip-scoring", "true", str(graph), str(data), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert not list((dec / "scoring_kaldi").glob("penalty_*/*.txt"))
    assert not list(dec.glob("wer_*")) and not list(dec.glob("cer_*"))
    assert not (dec / "scoring_kaldi" / "wer_details").exists()
    assert not (dec / "scoring_kaldi" / "cer_details").exists()
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "2", *GRID, str(data), str(graph), str(dec))
    assert r.returncode == 1 and r.stderr.strip() == missing, r.stderr + r.stdout


def test_score_kaldi_leaves_out_utterances_whose_lattice_has_no_path(decoded, tmp_path):
    """An empty lattice (what Kaldi's writers write for an empty FST), in text or binary form:
    scoring goes on without that utterance's hypothesis, as Kaldi's lattice-best-path |
    compute-wer --mode=present: the WER of the others, [PARTIAL], 1 not present in hyp."""
    import kaldifst

    from pynnet.decode.lattice import read_lattice_ark
    exp, graph, data = decoded
    kaldifst.Lattice().write(str(tmp_path / "empty.fst"))
    empty_binary = (tmp_path / "empty.fst").read_bytes()
    wers = []
    for form, empty in (("text", b"spkA-u2 \n\n"), ("binary", b"spkA-u2 " + empty_binary)):
        dec = _copy_decode(exp, f"decode_nopath_{form}")
        lats = dict(read_lattice_ark(str(dec / "lat.1.gz")))
        assert sorted(lats) == ["spkA-u1", "spkA-u2"]
        (dec / "lat.1.gz").write_bytes(gzip.compress(lats["spkA-u1"].to_kaldi_text("spkA-u1").encode() + empty))
        r = _sh("steps/score_kaldi.sh", *GRID, str(data), str(graph), str(dec))
        assert r.returncode == 0, r.stderr + r.stdout
        assert "Best-path failed for key spkA-u2" in (dec / "scoring_kaldi" / "log" / "best_path.1.log").read_text()
        for pen in ("0.0", "0.5"):
            for lmwt in range(1, 5):
                hyp = (dec / "scoring_kaldi" / f"penalty_{pen}" / f"{lmwt}.txt").read_text(encoding="utf-8")
                assert [ln.split()[0] for ln in hyp.splitlines()] == ["spkA-u1", "spkB-u3"]
                wer = (dec / f"wer_{lmwt}_{pen}").read_text().splitlines()[1:]
                # u1 right (3 words), u3 one substitution (2 words); u2 not scored
                assert wer == ["%WER 20.00 [ 1 / 5, 0 ins, 0 del, 1 sub ] [PARTIAL]", "%SER 50.00 [ 1 / 2 ]",
                               "Scored 2 sentences, 1 not present in hyp."]
        assert "spkA-u2" not in (dec / "scoring_kaldi" / "wer_details" / "per_utt").read_text(encoding="utf-8")
        wers.append((dec / "scoring_kaldi" / "best_wer").read_text().split()[:-1])
    assert wers[0] == wers[1]


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """The noisy toy decode of tests/test_decode.py (not scored): its errors grow with the LM
    weight (0 at weights 1-6 with penalty 0.0, 8 from 12 up)."""
    import kaldiio

    from test_decode import UTTS as NOISY_UTTS
    tmp = tmp_path_factory.mktemp("grid")
    toy = Toy(word_costs={1: 0.5, 2: 3.0, 3: 0.5, 4: 3.0, 5: 0.5, 6: 3.0})
    exp, graph, data = _setup_exp(tmp, toy, NOISY_UTTS)
    with kaldiio.WriteHelper(f"ark,scp:{data}/feats.ark,{data}/feats.scp") as wr:
        for i, (utt, words) in enumerate(sorted(NOISY_UTTS.items())):
            wr(utt, toy.feats(words, seed=20 + i, noise=1.1, frames_per_state=2))
    r = _sh("steps/decode.sh", "--nj", "2", "--acwt", "0.1", "--skip-scoring", "true",
            str(graph), str(data), str(exp / "decode"))
    assert r.returncode == 0, r.stderr + r.stdout
    full = _copy_decode(exp, "decode_full")  # every weight, to compare with
    r = _sh("steps/score_kaldi.sh", "--min-lmwt", "1", "--max-lmwt", "30", "--lmwt-extend", "0",
            str(data), str(graph), str(full))
    assert r.returncode == 0, r.stderr + r.stdout
    return exp, graph, data, full


def _errors(dec, lmwt, wip):
    return int((dec / f"wer_{lmwt}_{wip}").read_text().splitlines()[1].split()[3])


def _wer_files(dec):
    return {f.name: f.read_text().splitlines()[1:] for f in dec.glob("wer_*")}


def test_grid_extended_below_its_bottom(noisy):
    """The best LM weight at the bottom of 10-17: the grid grows downwards (--lmwt-extend 1: one
    weight at a time) until the best is inside; only the new weights' best paths are computed, and
    the wer files, best_wer and wer_details cover the extended grid, as a scoring of it would."""
    exp, graph, data, full = noisy
    assert _errors(full, 10, "0.0") == 4 < min(_errors(full, l, w) for l in range(11, 18) for w in ("0.0", "0.5", "1.0"))
    dec = _copy_decode(exp, "decode_bottom")
    wips = ("0.0", "0.5", "1.0")
    r = _sh("steps/score_kaldi.sh", "--min-lmwt", "10", "--max-lmwt", "17", "--lmwt-extend", "1",
            str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    prog = f"{ROOT}/steps/score_kaldi.sh"
    assert [ln for ln in r.stdout.splitlines() if " grid " in ln] == [
        f"{prog}: the best LM weight 10 is at the bottom of the grid 10-17: extended to 9-17",
        f"{prog}: the best LM weight 9 is at the bottom of the grid 9-17: extended to 8-17"]
    assert min(_errors(full, 8, w) for w in wips) == min(_errors(full, 9, w) for w in wips) == 3  # 8 ties 9: inside
    assert r.stdout.splitlines()[-1] == f"%WER 25.00 [ 3 / 12, 0 ins, 2 del, 1 sub ] {dec}/wer_8_0.0"
    assert (dec / "scoring_kaldi" / "best_wer").read_text() == r.stdout.splitlines()[-1] + "\n"
    assert (dec / "scoring_kaldi" / "lmwt_grid").read_text() == "10 17 8 17\n"
    assert (dec / "scoring_kaldi" / "wer_details" / "lmwt").read_text() == "8\n"
    grid = {f"wer_{l}_{w}" for l in range(8, 18) for w in wips}
    got = _wer_files(dec)
    assert set(got) == grid and got == {k: v for k, v in _wer_files(full).items() if k in grid}
    assert sorted(p.name for p in (dec / "scoring_kaldi" / "penalty_0.5").glob("*.txt")) == \
        sorted(f"{l}.txt" for l in range(8, 18))
    # the last pass over the lattices computed weight 8 alone
    assert "for 1 LM weights x 3 penalties" in (dec / "scoring_kaldi" / "log" / "best_path.1.log").read_text()
    assert not list((dec / "scoring_kaldi").glob("grid.*"))

    # --stage 1 (pick the best again) and the CER scoring of the word hypotheses read the
    # extended grid back: all of weights 8-17 are scored by characters
    (dec / "scoring_kaldi" / "best_wer").unlink()
    r = _sh("steps/score_kaldi.sh", "--stage", "1", "--min-lmwt", "10", "--max-lmwt", "17",
            str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert f"{prog}: the grid 10-17 was extended to 8-17 by the word scoring ({dec}/scoring_kaldi/lmwt_grid)" \
        in r.stdout.splitlines()
    assert r.stdout.splitlines()[-1].endswith(f"{dec}/wer_8_0.0")
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "2", "--min-lmwt", "10", "--max-lmwt", "17",
            str(data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert {f.name for f in dec.glob("cer_*")} == {f"cer_{l}_{w}" for l in range(8, 18) for w in wips}
    assert (dec / "scoring_kaldi" / "cer_details" / "lmwt").read_text() in ("8\n", "9\n")
    # another grid than the one recorded is taken as given (its hypotheses are not all there)
    r = _sh("steps/scoring/score_kaldi_cer.sh", "--stage", "2", "--min-lmwt", "5", "--max-lmwt", "17",
            str(data), str(graph), str(dec))
    assert r.returncode == 1 and "penalty_0.0/5.txt (the word hypotheses are missing)" in r.stderr
    # a new word scoring without extension replaces the record
    r = _sh("steps/score_kaldi.sh", "--min-lmwt", "10", "--max-lmwt", "17", "--lmwt-extend", "0",
            str(data), str(graph), str(dec))
    assert r.returncode == 0 and "extended" not in r.stdout, r.stderr + r.stdout
    assert (dec / "scoring_kaldi" / "lmwt_grid").read_text() == "10 17 10 17\n"
    assert set(_wer_files(dec)) == {f"wer_{l}_{w}" for l in range(10, 18) for w in wips}


def test_grid_extended_past_its_top_up_to_the_cap(noisy, tmp_path):
    """References that the decoder matches at weights 10-12 (its hypotheses at weight 12): the best
    of 3-9 is at the top, 9, and the grid grows by 5 to 3-14, where the best is inside; with
    --max-lmwt-cap 10 it stops at 10 and says so."""
    exp, graph, data, full = noisy
    ref_data = tmp_path / "data"
    shutil.copytree(data, ref_data, ignore=shutil.ignore_patterns("split*"))
    shutil.copy(full / "scoring_kaldi" / "penalty_0.0" / "12.txt", ref_data / "text")
    prog = f"{ROOT}/steps/scoring/score_kaldi_wer.sh"
    dec = _copy_decode(exp, "decode_top")
    r = _sh("steps/scoring/score_kaldi_wer.sh", "--min-lmwt", "3", "--max-lmwt", "9",
            str(ref_data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert [ln for ln in r.stdout.splitlines() if " grid " in ln] == [
        f"{prog}: the best LM weight 9 is at the top of the grid 3-9: extended to 3-14"]
    assert r.stdout.splitlines()[-1] == f"%WER 0.00 [ 0 / 5, 0 ins, 0 del, 0 sub ] {dec}/wer_12_0.0"
    assert {f.name for f in dec.glob("wer_*")} == {f"wer_{l}_{w}" for l in range(3, 15) for w in ("0.0", "0.5", "1.0")}
    assert (dec / "scoring_kaldi" / "lmwt_grid").read_text() == "3 9 3 14\n"

    dec = _copy_decode(exp, "decode_cap")
    r = _sh("steps/scoring/score_kaldi_wer.sh", "--min-lmwt", "3", "--max-lmwt", "9", "--max-lmwt-cap", "10",
            str(ref_data), str(graph), str(dec))
    assert r.returncode == 0, r.stderr + r.stdout
    assert [ln for ln in r.stdout.splitlines() if " grid " in ln] == [
        f"{prog}: the best LM weight 9 is at the top of the grid 3-9: extended to 3-10",
        f"{prog}: the best LM weight 10 is at the top of the grid 3-10, the cap (--max-lmwt-cap 10): "
        "not extended further"]
    assert (dec / "scoring_kaldi" / "lmwt_grid").read_text() == "3 9 3 10\n"
    assert (dec / "scoring_kaldi" / "wer_details" / "lmwt").read_text() == "10\n"

    # bad options: one line, nothing scored
    dec = _copy_decode(exp, "decode_badopt")
    r = _sh("steps/score_kaldi.sh", "--lmwt-extend", "five", str(ref_data), str(graph), str(dec))
    assert r.returncode == 1 and r.stderr.strip() == \
        f"{ROOT}/steps/score_kaldi.sh: --lmwt-extend/--max-lmwt-cap must be integers", r.stderr
    assert not list(dec.glob("wer_*"))
