"""NIST STM/CTM/GLM scoring (pynnet-score-stm, pynnet/score/stm.py) on hand-written files whose
counts are derived by hand, and egs/swbd/local/score_sclite.sh (and local/score.sh) end to end on
a decode dir of tests/test_ctm.py's toy, with segments, reco2file_and_channel, stm and glm."""
from __future__ import annotations

import re
import shutil
from pathlib import Path
import subprocess

import pytest

from pynnet.io.errors import PynnetError
from pynnet.score import stm as S
from test_ctm import PdToy, planted
from test_decode import ROOT, _env, _setup_exp

GLM = """;; a test GLM in the NIST1 format
* name "test.glm"
* desc "hub5-like rules"
* format = 'NIST1'
* max_nrules = '100'
* copy_no_hit = 'T'
* case_sensitive = 'F'

UH      =>  %HESITATION     / [ ] __ [ ] ;; hesitation token
UM      =>  %HESITATION     / [ ] __ [ ]
GONNA   =>  GOING TO                      ;; no context
'CAUSE  =>  BECAUSE ;; per AHD
FALKNER =>  FAULKNER / [WILLIAM ] __
WON     =>  [{WON / ONE}] / [ ] __ [ ]
;; INPUT_DEPENDENT_APPLICATION = "ctm"
HE'S    =>  [{HE IS / HE HAS}] / [ ] __ [ ]
;; INPUT_DEPENDENT_APPLICATION = "stm|ctm"
OK      =>  [O. K.] / [ ] __ [ ]
"""


def _sh(args, cwd=ROOT, timeout=300):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _one_error_line(r, *words):
    assert r.returncode == 1, r.stderr + r.stdout
    lines = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("run.pl: ")]
    assert len(lines) == 1, r.stderr
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def _write(tmp_path, stm: str, ctm: str, glm: str | None = GLM):
    (tmp_path / "ref.stm").write_text(stm)
    (tmp_path / "hyp.ctm").write_text(ctm)
    if glm is not None:
        (tmp_path / "test.glm").write_text(glm)
    return tmp_path / "ref.stm", tmp_path / "hyp.ctm", tmp_path / "test.glm"


def _score(tmp_path, stm, ctm, glm=GLM, *opts):
    ref, hyp, g = _write(tmp_path, stm, ctm, glm)
    out = tmp_path / "hyp.ctm.filt.sys"
    r = _sh(["pynnet-score-stm", *(["--glm", g] if glm is not None else []), *opts, ref, hyp, out])
    assert r.returncode == 0, r.stderr
    return out.read_text()


def _sum(report: str) -> tuple[int, int, list[float]]:
    """#Snt, #Wrd and the six percentages of the Sum/Avg row."""
    m = re.search(r"\| Sum/Avg *\| *(\d+) +(\d+) \|(.*)\|", report)
    assert m, report
    return int(m.group(1)), int(m.group(2)), [float(x) for x in m.group(3).split()]


def _wer(report: str) -> str:
    return [ln for ln in report.splitlines() if ln.startswith("%WER")][0]


# ------------------------------------------------------------------------- the parts, in-process

def _items(text: str, glm: S.Glm | None = None, ref: bool = True):
    if glm is not None:
        text = glm.apply_ref(text) if ref else " ".join(glm.apply_hyp_word(w) for w in text.split())
    return S.parse_items(text.upper(), frozenset({S.HESITATION}) if ref else frozenset())


def test_alignment_counts():
    """Levenshtein with sclite's weights: substitution, deletion, insertion, an optional word
    deleted at no cost (and matched: then counted), alternations either way, fragments."""
    cases = [  # ref, hyp, (corr, sub, del, ins)
        ("A B C", "A X C", (2, 1, 0, 0)),
        ("A B C", "A C", (2, 0, 1, 0)),
        ("A B C", "A B C D", (3, 0, 0, 1)),
        ("(UH) A B", "A B", (2, 0, 0, 0)),           # optional, deleted: no word, no error
        ("(UH) A B", "UH A B", (3, 0, 0, 0)),        # optional, matched: a correct word
        ("A (B) C", "A X C", (2, 0, 0, 1)),          # an optional word is not substituted
        ("(A B) C", "C", (1, 0, 0, 0)),              # parentheses around several words
        ("A { B C / D } E", "A D E", (3, 0, 0, 0)),
        ("A { B C / D } E", "A B C E", (4, 0, 0, 0)),
        ("A { B / @ } E", "A E", (2, 0, 0, 0)),      # @: the empty alternative
        ("A { B C / D } E", "A B E", (3, 0, 1, 0)),  # the nearest alternative: B C with C deleted
        ("TH- A", "THE A", (2, 0, 0, 0)),            # fragments (sclite -F)
        ("-ING A", "RING A", (2, 0, 0, 0)),
        ("TH- A", "A", (1, 0, 1, 0)),                # a fragment not in parentheses is a word
        ("A B", "A { X Y / B }", (2, 0, 0, 0)),      # a hypothesis alternation
        ("A B", "", (0, 0, 2, 0)),
        ("", "A", (0, 0, 0, 1)),
        ("a b", "A B", (2, 0, 0, 0)),                # (upper-cased by parse_items' callers)
    ]
    for ref, hyp, want in cases:
        c, _ = S.align(_items(ref), _items(hyp, ref=False))
        assert (c.corr, c.sub, c.dele, c.ins) == want, (ref, hyp, c)
    # sclite's weights prefer a deletion and an insertion (3 + 3) to two substitutions (4 + 4)
    c, path = S.align(_items("A B"), _items("B C", ref=False))
    assert (c.corr, c.sub, c.dele, c.ins) == (1, 0, 1, 1), path
    assert [op for op, _, _ in path] == ["D", "C", "I"]


def test_glm_rules(tmp_path):
    """rfilter1's rewriting: contexts, a rule without context inside a word, input-dependent
    sections, bracketed and alternation RHS, quotes, comments, case-insensitivity, csrfilt -dh."""
    (tmp_path / "g.glm").write_text(GLM)
    g = S.read_glm(str(tmp_path / "g.glm"))
    assert len(g.rules) == 8 and not g.case_sensitive and g.copy_no_hit
    assert g.apply_ref("uh I'm gonna (um) go 'cause william falkner said ok") == \
        "%HESITATION I'M GOING TO (%HESITATION) GO BECAUSE WILLIAM FAULKNER SAID O. K."
    assert g.apply_ref("falkner huh gonnas") == "FALKNER HUH GOING TOS"   # no WILLIAM; no context
    assert g.apply_ref("he's uh-huh twenty-five (th-) -ing") == "HE'S UH HUH TWENTY FIVE (TH-) -ING"
    assert g.apply_hyp_word("He's") == "{HE IS / HE HAS}"                 # the ctm-only section
    assert g.apply_hyp_word("uhm") == "UHM"
    assert _items("he's", g, ref=False) == [S.Alt(((S.Tok("HE"), S.Tok("IS")), (S.Tok("HE"), S.Tok("HAS"))))]
    assert _items("(uh) won", g) == [S.Tok(S.HESITATION, True),
                                      S.Alt(((S.Tok("WON"),), (S.Tok("ONE"),)))]
    # %HESITATION in the reference is optional even outside parentheses
    assert _items("uh", g) == [S.Tok(S.HESITATION, True)]
    # the first rule in file order wins at a position; contexts are read from the input
    (tmp_path / "o.glm").write_text("* format = 'NIST1'\nAB => X\nA => Y\nB => Z / [A] __\n")
    assert S.read_glm(str(tmp_path / "o.glm")).apply_ref("ab b") == "X B"   # B: its context A is not before it
    assert S.read_glm(str(tmp_path / "o.glm")).apply_ref("ac") == "YC"
    (tmp_path / "cs.glm").write_text("* case_sensitive = 'T'\n* copy_no_hit = 'F'\nA => b\n[ ] => [ ]\n")
    cs = S.read_glm(str(tmp_path / "cs.glm"))
    assert cs.case_sensitive and not cs.copy_no_hit
    assert cs.rewrite(" A a C ", "stm") == " b   "      # no hit, not copied: 'a' and 'C' dropped


@pytest.mark.parametrize("text,msg", [
    ("UH %HESITATION\n", "expected 'LHS => RHS"),
    ("=> X\n", "empty LHS"),
    ("A => B / [ ] [ ]\n", "'__'"),
    ("A => B / [ ] __ [ ] C\n", "after the right context"),
    ("A => [B\n", "unterminated ["),
    ("* format = 'NIST9'\n", "NIST9"),
    ("* copy_no_hit = 'maybe'\n", "copy_no_hit"),
    ("* format NIST1\n", "header line"),
])
def test_glm_errors(tmp_path, text, msg):
    (tmp_path / "bad.glm").write_text(";; c\n" + text)
    with pytest.raises(PynnetError, match=re.escape(msg)) as e:
        S.read_glm(str(tmp_path / "bad.glm"))
    assert str(e.value).startswith(f"{tmp_path / 'bad.glm'}:2: ")


STM = """;; comment
;; CATEGORY "0" "" ""
;; LABEL "O" "Overall" "Overall"
sw_1 A sw_1_A 0.00 2.00 <O,en,F,en-F> ONE TWO THREE
sw_1 A sw_1_A 2.00 4.00 <O,en,F,en-F> (UH) FOUR FIVE
sw_1 A sw_1_A 4.00 6.00 <O,en,F,en-F> IGNORE_TIME_SEGMENT_IN_SCORING
sw_1 A sw_1_A 8.00 9.00 <O,en,F,en-F> SIX
sw_1 B sw_1_B 0.50 3.00 <O,en,M,en-M> HE'S GONNA WIN
en_2 A en_2_A 1.00 2.00 <O,en,F,en-F> %HESITATION I KNOW
en_2 B en_2_B 1.00 2.00 <O,en,F,en-F> IT'S OK
"""
CTM = """sw_1 A 0.10 0.30 one
sw_1 A 0.50 0.30 too
sw_1 A 1.70 0.59 three
sw_1 A 1.90 0.20 extra
sw_1 A 2.10 0.30 uh
sw_1 A 2.60 0.30 four
sw_1 A 4.50 0.50 ignored
sw_1 A 5.80 0.30 ignored2
sw_1 A 6.40 0.20 late
sw_1 A 8.20 0.30 six 0.9
sw_1 B 0.60 0.30 he's
sw_1 B 1.00 0.30 going
sw_1 B 1.40 0.20 to
sw_1 B 1.80 0.30 win
en_2 A 1.20 0.30 i
en_2 A 1.60 0.30 know
en_2 B 1.20 0.30 it's
en_2 B 1.60 0.30 o.
en_2 B 1.90 0.10 k.
"""
# By segment (midpoints): sw_1_A 0-2: one too(S) three(1.995) ; extra (2.0: the shared edge goes
# to the earlier segment) I -> C2 S1 I1, 3 words.  sw_1_A 2-4: (%HESITATION)=uh C, four C, five D
# -> C2 D1, 3 words (the optional word matched counts).  4-6 IGNORE: 'ignored', 'ignored2' dropped.
# 'late' (6.5) is in no segment: an insertion of the nearest one, 4-6 being ignored: 2-4 is 2.5
# away, 8-9 1.5 -> segment 8-9: six C, late I -> C1 I1, 1 word.  sw_1_B: HE'S vs {HE IS / HE HAS}
# (the ctm-only rule): S1 + I1 (HE IS against HE'S: one sub, one ins), GONNA -> GOING TO on both
# sides: C2, WIN C -> C3 S1 I1, 4 words.  en_2_A: %HESITATION deleted, I KNOW C2, 2 words.
# en_2_B: IT'S C, OK -> O. K. on both sides: C2 -> C3, 3 words.
# Sum: 6 segments, 16 words, C 13 S 2 D 1 I 3: 6 / 16 = 37.50%; S.Err 4 of 6 (sw_1_A x3, sw_1_B).


def test_score_stm_by_hand(tmp_path):
    rep = _score(tmp_path, STM, CTM)
    assert _wer(rep) == "%WER 37.50 [ 6 / 16, 3 ins, 1 del, 2 sub ]"
    snt, wrd, pct = _sum(rep)
    assert (snt, wrd) == (6, 16)
    assert pct == [81.2, 12.5, 6.2, 18.8, 37.5, 66.7]  # 81.25 and 6.25 round to even, as printf
    rows = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in
            re.finditer(r"^\| (\S+) *\| *(\d+) +(\d+) \|", rep, re.M)}
    assert rows == {"en_2_A": (1, 2), "en_2_B": (1, 3), "sw_1_A": (3, 7), "sw_1_B": (1, 4), "Sum/Avg": (6, 16)}
    # utils/best_wer.sh reads both the sclite row and the %WER line
    sys_file = tmp_path / "hyp.ctm.filt.sys"
    r = subprocess.run(f"grep -H Sum {sys_file} | {ROOT}/utils/best_wer.sh", shell=True, capture_output=True,
                       text=True)
    assert r.stdout.split() == ["%WER", "37.5", "|", "6", "16", "|", "81.2", "12.5", "6.2", "18.8", "37.5",
                                "66.7", "|", str(sys_file)]
    r = subprocess.run(f"grep -H WER {sys_file} | {ROOT}/utils/best_wer.sh", shell=True, capture_output=True,
                       text=True)
    assert r.stdout.strip() == f"%WER 37.50 [ 6 / 16, 3 ins, 1 del, 2 sub ] {sys_file}"
    # the box: every line of the table has the same width, the title is the ctm's name (cut to
    # the box's width, as sclite does)
    box = [ln for ln in rep.splitlines() if ln and ln[0] in "|,`"]
    w = len(box[0]) - 2
    assert len({len(ln) for ln in box}) == 1 and box[1][1:-1] == str(tmp_path / "hyp.ctm")[:w].center(w)
    assert re.search(r"^\|\s+Mean\s+\|", rep, re.M) and re.search(r"^\|\s+Median\s+\|", rep, re.M)

    # without the GLM: sw_1_A as before (7 words: C5 S1 D1 I2; 'uh' matches (UH)); sw_1_B: HE'S
    # C, GONNA/going S, to I, WIN C (3 words: C2 S1 I1); en_2_A: %HESITATION still optional, C2;
    # en_2_B: IT'S C, OK/o. S, k. I (2 words) -> 14 words, S3 D1 I4
    rep = _score(tmp_path, STM, CTM, None)
    assert _wer(rep) == "%WER 57.14 [ 8 / 14, 4 ins, 1 del, 3 sub ]"


def test_score_stm_subsets_and_options(tmp_path):
    """--exclude-prefix as the SWBD / CallHome subsets; --optional-words ''; --filtered-ctm."""
    swbd = _score(tmp_path, STM, CTM, GLM, "--exclude-prefix", "en_")
    assert _wer(swbd) == "%WER 54.55 [ 6 / 11, 3 ins, 1 del, 2 sub ]"   # sw_1_A + sw_1_B
    callhm = _score(tmp_path, STM, CTM, GLM, "--exclude-prefix", "sw_")
    assert _wer(callhm) == "%WER 0.00 [ 0 / 5, 0 ins, 0 del, 0 sub ]"
    # the same as grepping the files (Kaldi's way)
    grep = lambda s, p: "".join(ln + "\n" for ln in s.splitlines() if not ln.startswith(p))  # noqa: E731
    assert _wer(_score(tmp_path, grep(STM, "en_"), grep(CTM, "en_"))) == _wer(swbd)
    # %HESITATION not optional: en_2_A's is deleted
    rep = _score(tmp_path, STM, CTM, GLM, "--optional-words", "", "--exclude-prefix", "sw_")
    assert _wer(rep) == "%WER 16.67 [ 1 / 6, 0 ins, 1 del, 0 sub ]"
    _score(tmp_path, STM, CTM, GLM, "--filtered-ctm", tmp_path / "f.ctm")
    lines = (tmp_path / "f.ctm").read_text().splitlines()
    assert lines[:2] == ["SW_1 A 0.100 0.300 ONE", "SW_1 A 0.500 0.300 TOO"]
    i = lines.index("SW_1 B * * <ALT_BEGIN>")
    assert lines[i:i + 7] == ["SW_1 B * * <ALT_BEGIN>", "SW_1 B 0.600 0.150 HE", "SW_1 B 0.750 0.150 IS",
                              "SW_1 B * * <ALT>", "SW_1 B 0.600 0.150 HE", "SW_1 B 0.750 0.150 HAS",
                              "SW_1 B * * <ALT_END>"]
    assert "SW_1 A 2.100 0.300 %HESITATION" in lines
    # to stdout
    r = _sh(["pynnet-score-stm", tmp_path / "ref.stm", tmp_path / "hyp.ctm", "-"])
    assert r.returncode == 0 and "Sum/Avg" in r.stdout and r.stderr.startswith("%WER")


def test_score_stm_several(tmp_path):
    """Several <stm> <ctm> <out.sys> triples in one run: each output as the triple's own run
    writes it (the alignment cache shared across hypotheses and references changes nothing),
    --filtered-suffix next to each ctm; bad usage and a bad reference: one line, exit 1, nothing
    written; a bad ctm: its error last, exit 1, no output of that triple."""
    grep = lambda s, p: "".join(ln + "\n" for ln in s.splitlines() if not ln.startswith(p))  # noqa: E731
    ref, hyp, glm = _write(tmp_path, STM, CTM)
    (tmp_path / "swbd.stm").write_text(grep(STM, "en_"))
    (tmp_path / "swbd.ctm").write_text(grep(CTM, "en_"))
    (tmp_path / "other.ctm").write_text(CTM.replace(" too", " two").replace(" extra", " three"))
    (tmp_path / "swbd.other.ctm").write_text(grep(CTM.replace(" too", " two"), "en_"))
    triples = [(ref, hyp), (tmp_path / "swbd.stm", tmp_path / "swbd.ctm"), (ref, tmp_path / "other.ctm"),
               (tmp_path / "swbd.stm", tmp_path / "swbd.other.ctm")]
    args = [x for i, (st, c) in enumerate(triples) for x in (st, c, tmp_path / f"many{i}.sys")]
    r = _sh(["pynnet-score-stm", "--glm", glm, "--filtered-suffix", ".filt", *args])
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.splitlines()) == 4 and r.stderr.splitlines()[1].endswith("many1.sys")
    wers = set()
    for i, (st, c) in enumerate(triples):
        filt = (tmp_path / (c.name + ".filt")).read_text()
        r = _sh(["pynnet-score-stm", "--glm", glm, "--filtered-ctm", tmp_path / "one.filt", st, c, tmp_path / "one.sys"])
        assert r.returncode == 0, r.stderr
        assert (tmp_path / f"many{i}.sys").read_text() == (tmp_path / "one.sys").read_text()
        assert filt == (tmp_path / "one.filt").read_text()
        wers.add(_wer((tmp_path / "one.sys").read_text()))
    assert len(wers) == 4 and "%WER 54.55 [ 6 / 11, 3 ins, 1 del, 2 sub ]" in wers
    # bad usage
    _one_error_line(_sh(["pynnet-score-stm", ref, hyp, tmp_path / "x.sys", ref]), "triples")
    _one_error_line(_sh(["pynnet-score-stm", "--filtered-ctm", tmp_path / "f", ref, hyp, tmp_path / "x.sys",
                         ref, hyp, tmp_path / "y.sys"]), "--filtered-suffix")
    _one_error_line(_sh(["pynnet-score-stm", ref, hyp, tmp_path / "x.sys", ref, tmp_path / "swbd.ctm",
                         tmp_path / "x.sys"]), "twice")
    _one_error_line(_sh(["pynnet-score-stm", ref, hyp, tmp_path / "x.sys", ref, tmp_path / "nope.ctm",
                         tmp_path / "y.sys"]), "nope.ctm", "no such file")
    # a bad reference is found before anything is written; a bad ctm line names its file and line
    (tmp_path / "bad.stm").write_text(STM + "sw_1 A sw_1_A 9.0 1.0 X\n")
    _one_error_line(_sh(["pynnet-score-stm", ref, hyp, tmp_path / "x.sys", tmp_path / "bad.stm", hyp,
                         tmp_path / "y.sys"]), "bad.stm:")
    assert not (tmp_path / "x.sys").exists()
    (tmp_path / "bad.ctm").write_text(CTM + "sw_1 A 1.0\n")
    r = _sh(["pynnet-score-stm", ref, hyp, tmp_path / "x.sys", ref, tmp_path / "bad.ctm", tmp_path / "y.sys"])
    assert r.returncode == 1 and r.stderr.splitlines()[-1].startswith("ERROR (pynnet-score-stm): ")
    assert f"{tmp_path / 'bad.ctm'}:20: " in r.stderr.splitlines()[-1] and r.stderr.count("ERROR") == 1
    # (the triples before it are done and written, each whole)
    assert (tmp_path / "x.sys").exists() and not (tmp_path / "y.sys").exists()
    assert not list(tmp_path.glob("*.tmp*"))


def test_time_assignment_edges():
    """Midpoint inside a segment (both ends inclusive, a shared edge to the earlier segment); a
    word between segments is an insertion of the nearest; inside an IGNORE segment it is dropped;
    channels and files are kept apart (case-insensitively)."""
    seg = lambda f, c, a, b, ign=False: S.Segment(f, c, "s", a, b, [], ign, 0)  # noqa: E731
    word = lambda f, c, a, d: S.Word(f, c, a, d, [S.Tok("W")], 0)  # noqa: E731
    segs = [seg("x", "A", 1.0, 2.0), seg("x", "A", 2.0, 3.0), seg("x", "A", 3.0, 4.0, True),
            seg("x", "A", 6.0, 7.0), seg("x", "B", 0.0, 10.0)]
    words = [word("x", "A", 0.9, 0.2),   # mid 1.0: first segment's start
             word("x", "A", 1.8, 0.4),   # mid 2.0: the shared edge -> the earlier one
             word("x", "A", 2.9, 0.2),   # mid 3.0: segment 2's end (also the IGNORE's start)
             word("x", "A", 3.2, 0.2),   # in the IGNORE segment: dropped
             word("x", "A", 4.4, 0.2),   # 4.5: nearest scored is 2-3 (1.5 away; 6-7 is 1.5: earlier)
             word("x", "A", 5.0, 0.2),   # 5.1: 6-7 (0.9) nearer than 2-3 (2.1)
             word("X", "a", 0.0, 0.1),   # case of file and channel does not matter
             word("x", "B", 9.9, 0.2)]   # 10.0 inclusive
    out = S.assign_words(segs, words)
    where = {id(w): i for i, ws in enumerate(out) for w in ws}
    assert [where.get(id(w)) for w in words] == [0, 0, 1, None, 1, 3, 0, 4]
    with pytest.raises(PynnetError, match="'y' channel 'A' is not in the reference"):
        S.assign_words(segs, [word("y", "A", 1.0, 0.1)], "h.ctm")


def test_time_assignment_overlapping_segments():
    """With overlapping, nested and zero-length segments (found by bisection): each word goes
    where the rule says, checked against a scan of all the segments."""
    import random
    rng = random.Random(7)

    def by_scan(segs, m):
        order = sorted(range(len(segs)), key=lambda i: (segs[i].start, segs[i].end, i))
        inside = [i for i in order if segs[i].start <= m <= segs[i].end]
        scored = [i for i in inside if not segs[i].ignore]
        if scored or inside:
            return scored[0] if scored else None
        cands = [i for i in order if not segs[i].ignore]
        return min(cands, key=lambda i: (max(segs[i].start - m, m - segs[i].end), segs[i].start)) if cands else None

    for trial in range(200):
        segs = []
        for i in range(rng.randint(1, 10)):
            a = rng.choice([0.0, 1.0, 2.0, 2.5, 3.0, 5.0])
            segs.append(S.Segment("f", "A", "s", a, a + rng.choice([0.0, 0.5, 1.0, 4.0]), [], rng.random() < 0.2, i))
        words = [S.Word("f", "A", rng.choice([0.0, 0.5, 1.0, 2.0, 2.75, 4.5, 8.0]), rng.choice([0.0, 0.5, 1.0]),
                        [S.Tok("W")], j) for j in range(12)]
        where = {id(w): i for i, ws in enumerate(S.assign_words(segs, words)) for w in ws}
        assert [where.get(id(w)) for w in words] == [by_scan(segs, w.mid) for w in words], trial


@pytest.mark.parametrize("which,text,msg", [
    ("stm", "sw_1 A spk 1.0\n", ":1: expected 'file channel speaker start end"),
    ("stm", "sw_1 A spk x 2.0 A\n", ":1: start time 'x' is not a number"),
    ("stm", ";; c\nsw_1 A spk 3.0 2.0 A\n", ":2: end time 2.0 is before start time 3.0"),
    ("stm", "sw_1 A spk 1.0 2.0 <O A\n", ":1: bad label field"),
    ("stm", "sw_1 A spk 1.0 2.0 { A / B\n", ":1: '{' without '}'"),
    ("stm", "sw_1 A spk 1.0 2.0 A }\n", ":1: '}' without '{'"),
    ("stm", "sw_1 A spk 1.0 2.0 IGNORE_TIME_SEGMENT_IN_SCORING\n", "no segments to score"),
    ("stm", b"sw_1 A spk 1.0 2.0 \xff\n", ":1: not valid UTF-8"),
    ("ctm", "sw_1 A 1.0 0.1\n", ":1: expected 'file channel start duration word"),
    ("ctm", "sw_1 A 1.0 -0.1 a\n", ":1: negative duration"),
    ("ctm", "sw_1 A 1.0 nan a\n", ":1: duration 'nan' is not a finite number"),
    ("ctm", "sw_1 A 1.0 0.1 a x\n", ":1: confidence 'x' is not a number"),
    ("ctm", "sw_1 A * * <ALT_BEGIN>\n", ":1: alternations in the hypothesis CTM"),
    ("ctm", "sw_1 A 1.0 0.1 a\nsw_2 A 1.0 0.1 b\n", ":2: file 'sw_2' channel 'A' is not in the reference"),
    ("glm", "* format = 'NIST1'\nA => B / [ ] _ [ ]\nC => D\n", ":2: the context needs"),
])
def test_bad_input(tmp_path, which, text, msg):
    """One line naming file:line, exit 1, no report written."""
    files = {"stm": "sw_1 A spk 0.0 5.0 <O> A B\n", "ctm": "sw_1 A 1.0 0.1 a\n", "glm": GLM}
    files[which] = text
    for k, v in files.items():
        (tmp_path / f"x.{k}").write_bytes(v if isinstance(v, bytes) else v.encode())
    out = tmp_path / "out.sys"
    r = _sh(["pynnet-score-stm", "--glm", tmp_path / "x.glm", "--filtered-ctm", tmp_path / "f.ctm",
             tmp_path / "x.stm", tmp_path / "x.ctm", out])
    line = _one_error_line(r, msg)
    assert line.startswith("ERROR (pynnet-score-stm): ") and str(tmp_path / f"x.{which}") in line
    assert not out.exists() and not (tmp_path / "f.ctm").exists()
    assert not list(tmp_path.glob(".*tmp"))
    r = _sh(["pynnet-score-stm", tmp_path / "none.stm", tmp_path / "x.ctm", out])
    _one_error_line(r, "none.stm", "no such file")


# ------------------------------------------------------------------ score_sclite.sh end to end

# The toy's decoded words (tests/test_ctm.py: what was planted) and, for this test, words.txt
# renames some: 3 -> uh (a hesitation: filtered), 4 -> [noise] (filtered), 6 -> i._b._m. (split
# into letters).  Recordings: spkA -> sw_1000 A, spkB -> en_2000 A, spkC -> sw_1000 B.
UTTS = {"spkA-u1": [1, 2, 3], "spkA-u2": [4, 5], "spkB-u3": [6, 1, 2, 2], "spkB-u4": [3],
        "spkC-u5": [5, 6]}
NAMES = {0: "<eps>", 1: "one", 2: "two", 3: "uh", 4: "[noise]", 5: "five", 6: "i._b._m."}
RECO = {"spkA": ("sw_1000", "A"), "spkB": ("en_2000", "A"), "spkC": ("sw_1000", "B")}
REF = {"spkA-u1": "ONE (UH) TWO",    # hyp one two (uh filtered): C2
       "spkA-u2": "FIVE SIX",        # hyp five ([noise] filtered): C1 D1
       "spkB-u3": "I B M WON TWO TOO",  # hyp i b m one two two: WON -> {WON / ONE}: C5 S1
       "spkB-u4": "THREE",           # hyp (uh filtered): D1
       "spkC-u5": "FIVE I B M"}      # hyp five i b m: C4
# whole: 5 segments, 15 words, S1 D2: 20.00; swbd (u1 u2 u5): 8 words, D1: 12.50; callhm (u3 u4):
# 7 words, S1 D1: 28.57
GRID = ["--min-lmwt", "5", "--max-lmwt", "6", "--word-ins-penalty", "0.0,0.5"]
POINTS = [(5, "0.0"), (6, "0.0"), (5, "0.5"), (6, "0.5")]


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sclite")
    exp, graph, data = _setup_exp(tmp, PdToy(), UTTS)
    (graph / "phones").mkdir()
    from test_ctm import WORD_BOUNDARY
    (graph / "phones" / "word_boundary.int").write_text("".join(f"{p} {k}\n" for p, k in WORD_BOUNDARY.items()))
    dec = exp / "decode_eval"
    r = _sh([f"{ROOT}/steps/decode.sh", "--nj", "2", "--acwt", "0.1", "--skip-scoring", "true", graph, data, dec])
    assert r.returncode == 0, r.stderr + r.stdout
    (graph / "words.txt").write_text("".join(f"{w} {i}\n" for i, w in NAMES.items()))
    begin, end = {}, {}
    for i, u in enumerate(sorted(UTTS)):
        begin[u] = 2.5 + 20 * i
        end[u] = begin[u] + sum(len(ph) * 3 * 2 for _, ph in PdToy.plan(UTTS[u])) * 0.01
    (data / "segments").write_text("".join(f"{u} {u.split('-')[0]} {begin[u]:.2f} {end[u]:.2f}\n"
                                           for u in sorted(UTTS)))
    (data / "reco2file_and_channel").write_text("".join(f"{s} {f} {c}\n" for s, (f, c) in sorted(RECO.items())))
    (data / "stm").write_text(";; the test's eval set\n;; LABEL \"O\" \"Overall\" \"Overall\"\n" + "".join(
        f"{RECO[u.split('-')[0]][0]} {RECO[u.split('-')[0]][1]} {'_'.join(RECO[u.split('-')[0]])} "
        f"{begin[u]:.2f} {end[u]:.2f} <O,en,F,en-F> {REF[u]}\n" for u in sorted(UTTS)))
    (data / "glm").write_text(GLM)
    return tmp


def _copy(decoded, tmp_path):
    shutil.copytree(decoded, tmp_path / "x")
    root = tmp_path / "x"
    return root / "exp" / "mono" / "graph", root / "data" / "test", root / "exp" / "mono" / "decode_eval"


def test_score_sclite_end_to_end(decoded, tmp_path):
    graph, data, dec = _copy(decoded, tmp_path)
    swbd = Path(ROOT) / "egs" / "swbd"
    r = _sh(["local/score.sh", *GRID, "--cmd", "run.pl", data, graph, dec], cwd=swbd)
    assert r.returncode == 0, r.stderr + r.stdout
    for lmwt, wip in POINTS:
        d = dec / f"score_{lmwt}_{wip}"
        # the filters and the acronym split
        ctm = (d / "test.ctm").read_text()
        raw = (d / "test.ctm.unfiltered").read_text()
        assert "uh" in raw.split() and "[noise]" in raw.split() and "i._b._m." in raw.split()
        assert not {"uh", "[noise]", "i._b._m."} & set(ctm.split())
        u3 = [ln for ln in raw.splitlines() if ln.startswith("en_2000") and ln.endswith("i._b._m.")][0].split()
        start, dur = float(u3[2]), float(u3[3])
        share = float(f"{dur / 3:.2f}")
        i = ctm.splitlines().index(f"en_2000 A {u3[2]} {share:.2f} i")
        assert ctm.splitlines()[i:i + 3] == [
            f"en_2000 A {start:.2f} {share:.2f} i", f"en_2000 A {start + share:.2f} {share:.2f} b",
            f"en_2000 A {start + 2 * share:.2f} {dur - 2 * share:.2f} m"]
        # times relative to the recordings
        first = ctm.splitlines()[0].split()
        assert first[:2] == ["sw_1000", "A"] and 2.5 < float(first[2]) < 3   # spkA-u1 starts at 2.5
        assert (d / "test.ctm.filt").read_text().splitlines()[0].startswith("SW_1000 A ")
        assert _wer((d / "test.ctm.filt.sys").read_text()) == "%WER 20.00 [ 3 / 15, 0 ins, 2 del, 1 sub ]"
        assert _sum((d / "test.ctm.filt.sys").read_text())[:2] == (5, 15)
        assert _wer((d / "test.ctm.swbd.filt.sys").read_text()) == "%WER 12.50 [ 1 / 8, 0 ins, 1 del, 0 sub ]"
        assert _wer((d / "test.ctm.callhm.filt.sys").read_text()) == "%WER 28.57 [ 2 / 7, 0 ins, 1 del, 1 sub ]"
        assert not (d / "test.ctm.swbd").read_text().count("en_2000")
        assert (dec / f"wer_{lmwt}_{wip}").read_text() == "%WER 20.00 [ 3 / 15, 0 ins, 2 del, 1 sub ]\n"
    sc = dec / "scoring_sclite"
    assert (sc / "best_wer").read_text() == \
        f"%WER 20.00 [ 3 / 15, 0 ins, 2 del, 1 sub ] {dec}/score_5_0.0/test.ctm.filt.sys\n"
    assert (sc / "best_wer_swbd").read_text() == \
        f"%WER 12.50 [ 1 / 8, 0 ins, 1 del, 0 sub ] {dec}/score_5_0.0/test.ctm.swbd.filt.sys\n"
    assert (sc / "best_wer_callhm").read_text().startswith("%WER 28.57 [ 2 / 7, 0 ins, 1 del, 1 sub ] ")
    assert (dec / "scoring_kaldi" / "best_wer").read_text() == \
        f"%WER 20.00 [ 3 / 15, 0 ins, 2 del, 1 sub ] {dec}/wer_5_0.0\n"
    assert (dec / "scoring_kaldi" / "wer_details" / "lmwt").read_text() == "5\n"
    assert (dec / "scoring_kaldi" / "wer_details" / "wip").read_text() == "0.0\n"
    # one pass over each job's lattices for the grid, one scoring run for all points and subsets
    assert sorted(p.name for p in (sc / "log").iterdir()) == ["get_ctm.1.log", "get_ctm.2.log", "score.log"]
    assert "--min-lmwt 5 --max-lmwt 6 --grid-word-ins-penalty 0.0,0.5 " in (sc / "log" / "get_ctm.2.log").read_text()
    assert not list(sc.glob("ctm.*"))
    assert "%WER 12.50" in r.stdout

    # --stage 2 rescoring after the stm changed: only the scores move
    (data / "stm").write_text((data / "stm").read_text().replace("FIVE SIX", "FIVE"))
    r = _sh(["local/score_sclite.sh", *GRID, "--stage", "2", data, graph, dec], cwd=swbd)
    assert r.returncode == 0, r.stderr + r.stdout
    assert (dec / "wer_6_0.5").read_text() == "%WER 14.29 [ 2 / 14, 0 ins, 1 del, 1 sub ]\n"


def test_score_sh_without_stm_is_score_kaldi(decoded, tmp_path):
    graph, data, dec = _copy(decoded, tmp_path)
    (data / "stm").unlink()
    r = _sh(["local/score.sh", "--min-lmwt", "5", "--max-lmwt", "5", "--word-ins-penalty", "0.0",
             "--cmd", "run.pl", data, graph, dec], cwd=Path(ROOT) / "egs" / "swbd")
    assert r.returncode == 0, r.stderr + r.stdout
    assert (dec / "scoring_kaldi" / "best_wer").read_text().startswith("%WER ")
    assert (dec / "scoring_kaldi" / "penalty_0.0" / "5.txt").exists() and not (dec / "scoring_sclite").exists()


def test_score_sclite_bad_input(decoded, tmp_path):
    graph, data, dec = _copy(decoded, tmp_path)
    swbd = Path(ROOT) / "egs" / "swbd"
    script = "local/score_sclite.sh"
    r = _sh([script, data, graph], cwd=swbd)
    assert r.returncode == 1 and r.stderr.startswith("Usage:")
    _one_error_line(_sh([script, "--word-ins-penalty", "0.0,x", data, graph, dec], cwd=swbd), "'x'")
    _one_error_line(_sh([script, "--min-lmwt", "9", "--max-lmwt", "8", data, graph, dec], cwd=swbd), "--min-lmwt")
    _one_error_line(_sh([script, *GRID, "--stage", "1", data, graph, dec], cwd=swbd), "test.ctm.unfiltered",
                    "stage 0")
    (data / "reco2file_and_channel").unlink()
    _one_error_line(_sh([script, data, graph, dec], cwd=swbd), "reco2file_and_channel")
    graph2, data2, dec2 = _copy(decoded, tmp_path / "b")
    # an stm line the scorer rejects: one line naming it (through the job's log), no best_wer
    (data2 / "stm").write_text((data2 / "stm").read_text() + "sw_1000 A sw_1000_A 9.0 1.0 X\n")
    r = _sh([script, *GRID, data2, graph2, dec2], cwd=swbd)
    _one_error_line(r, "stm:8: end time 1.0 is before start time 9.0")
    assert not (dec2 / "scoring_sclite" / "best_wer").exists() and not list(dec2.glob("wer_*"))
