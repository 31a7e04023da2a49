"""WER scoring: Kaldi's compute-wer lines, modes and edge cases, wer_details, best_wer."""
from __future__ import annotations

import os
import subprocess

import pytest

from pynnet.bin.score import align_text_main, best_wer_main, compute_wer_main, wer_details_main
from pynnet.io.errors import PynnetError
from pynnet.score.wer import (best_wer, compute_wer, ops_lines, per_spk_lines, per_utt_lines,
                              read_transcripts)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return str(path)


def _run(main, argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_compute_wer_counts_and_line_format():
    ref = {"u1": "a b c d".split(), "u2": "e f".split(), "u3": "g".split()}
    hyp = {"u1": "a x c e f".split(), "u2": "e f".split(), "u3": []}
    st = compute_wer(ref, hyp, "strict")
    assert (st.num_ins, st.num_del, st.num_sub, st.word_errs, st.num_words) == (1, 1, 2, 4, 7)
    assert st.lines() == [
        "%WER 57.14 [ 4 / 7, 1 ins, 1 del, 2 sub ]",
        "%SER 66.67 [ 2 / 3 ]",
        "Scored 3 sentences, 0 not present in hyp.",
    ]


def test_modes_present_all_strict():
    ref = {"u1": "a b".split(), "u2": "c d e".split()}
    hyp = {"u1": "a b".split()}
    present = compute_wer(ref, hyp, "present")
    assert present.lines() == ["%WER 0.00 [ 0 / 2, 0 ins, 0 del, 0 sub ] [PARTIAL]",
                               "%SER 0.00 [ 0 / 1 ]",
                               "Scored 1 sentences, 1 not present in hyp."]
    every = compute_wer(ref, hyp, "all")
    assert every.lines() == ["%WER 60.00 [ 3 / 5, 0 ins, 3 del, 0 sub ] [PARTIAL]",
                             "%SER 50.00 [ 1 / 2 ]",
                             "Scored 2 sentences, 1 not present in hyp."]
    with pytest.raises(PynnetError, match="No hypothesis for key u2 and strict mode"):
        compute_wer(ref, hyp, "strict")
    with pytest.raises(PynnetError, match="--mode option invalid"):
        compute_wer(ref, hyp, "some")


def test_zero_reference_words_behave_like_kaldi():
    # compute-wer divides by the word count unguarded: 0/0 prints -nan, k/0 prints inf.
    assert compute_wer({"u1": []}, {"u1": []}).lines()[0] == "%WER -nan [ 0 / 0, 0 ins, 0 del, 0 sub ]"
    assert compute_wer({"u1": []}, {"u1": ["x", "y"]}).lines()[0] == "%WER inf [ 2 / 0, 2 ins, 0 del, 0 sub ]"
    st = compute_wer({"u1": ["a"]}, {}, "present")
    assert st.lines()[1] == "%SER -nan [ 0 / 0 ]"
    assert st.lines()[2] == "Scored 0 sentences, 1 not present in hyp."


def test_rounding_is_two_decimals_of_float():
    st = compute_wer({"u": list("abc")}, {"u": list("abx")})
    assert st.lines()[0] == "%WER 33.33 [ 1 / 3, 0 ins, 0 del, 1 sub ]"
    st = compute_wer({"u": list("abc")}, {"u": list("axy")})
    assert st.lines()[0] == "%WER 66.67 [ 2 / 3, 0 ins, 0 del, 2 sub ]"


def test_cli_compute_wer_text_and_empty_hyp_line(tmp_path, capsys):
    ref = _write(tmp_path / "ref", "u1 the cat sat\nu2 on the mat\n")
    hyp = _write(tmp_path / "hyp", "u1 the cat sat on\nu2\n")
    rc, out, _ = _run(compute_wer_main, ["--text", "--mode=present", f"ark:{ref}", f"ark,p:{hyp}"], capsys)
    assert rc == 0
    assert out.splitlines() == ["%WER 66.67 [ 4 / 6, 1 ins, 3 del, 0 sub ]", "%SER 100.00 [ 2 / 2 ]",
                                "Scored 2 sentences, 0 not present in hyp."]
    # Kaldi's --mode present is given as two words too
    rc, out2, _ = _run(compute_wer_main, ["--text", "--mode", "present", ref, hyp], capsys)
    assert out2 == out


def test_cli_errors_are_one_line(tmp_path, capsys):
    ref = _write(tmp_path / "ref", "u1 a b\nu1 c\n")
    hyp = _write(tmp_path / "hyp", "u1 a b\n")
    rc, _, err = _run(compute_wer_main, ["--text", ref, hyp], capsys)
    assert rc == 1 and err.count("\n") == 1 and f"{ref}:2: duplicate utterance id 'u1'" in err
    ref2 = _write(tmp_path / "ref2", "u1 a b\n")
    rc, _, err = _run(compute_wer_main, [ref2, hyp], capsys)  # words without --text
    assert rc == 1 and "is not an integer" in err
    rc, _, err = _run(compute_wer_main, ["--text", ref2, str(tmp_path / "missing")], capsys)
    assert rc == 1 and "no such file" in err
    bad = tmp_path / "bad"
    bad.write_bytes(b"u1 \xff\xfe\n")
    rc, _, err = _run(compute_wer_main, ["--text", ref2, str(bad)], capsys)
    assert rc == 1 and f"{bad}:1: not valid UTF-8" in err


def test_integer_transcripts(tmp_path, capsys):
    ref = _write(tmp_path / "ref", "u1 1 2 3\n")
    hyp = _write(tmp_path / "hyp", "u1 1 3\n")
    rc, out, _ = _run(compute_wer_main, [f"ark:{ref}", f"ark:{hyp}"], capsys)
    assert rc == 0 and out.splitlines()[0] == "%WER 33.33 [ 1 / 3, 0 ins, 1 del, 0 sub ]"


def test_per_utt_matches_kaldi_example():
    # The example in Kaldi's wer_per_utt_details.pl documentation.
    pairs = [("word-A", "word-A"), ("<eps>", "word-A"), ("word-B", "word-B"), ("word-C", "<eps>"),
             ("word-D", "word-D"), ("word-E", "word-X")]
    assert per_utt_lines("UTT-A", pairs, eps="<eps>") == [
        "UTT-A ref  word-A   <eps>  word-B  word-C  word-D  word-E",
        "UTT-A hyp  word-A  word-A  word-B   <eps>  word-D  word-X",
        "UTT-A op      C       I       C       D       C       S  ",
        "UTT-A #csid 3 1 1 1",
    ]


def test_per_spk_matches_kaldi_example():
    lines = per_spk_lines({"UTT-A": (3, 1, 1, 1)}, {"UTT-A": "A"})
    assert lines == [
        "SPEAKER         id       #SENT      #WORD       Corr        Sub        Ins        Del        Err      S.Err",
        "A               raw          1          5          3          1          1          1          3          1",
        "A               sys          1          5      60.00      20.00      20.00      20.00      60.00     100.00",
        "SUM             raw          1          5          3          1          1          1          3          1",
        "SUM             sys          1          5      60.00      20.00      20.00      20.00      60.00     100.00",
    ]


def test_ops_sorted_as_score_kaldi():
    pairs = {"u1": [("a", "a"), ("b", "c"), ("***", "d"), ("e", "***"), ("a", "a")],
             "u2": [("b", "c"), ("z", "z")]}
    assert ops_lines(pairs) == [
        "correct         a      a    2",
        "correct         z      z    1",
        "deletion        e    ***    1",
        "insertion     ***      d    1",
        "substitution    b      c    2",
    ]


def test_wer_details_files(tmp_path, capsys):
    ref = _write(tmp_path / "ref", "u1 a b c\nu2 d e\nu3 f\n")
    hyp = _write(tmp_path / "hyp", "u1 a c\nu2 d e g\n")
    u2s = _write(tmp_path / "utt2spk", "u1 s1\nu2 s2\nu3 s2\n")
    out = tmp_path / "wer_details"
    rc, _, _ = _run(wer_details_main, ["--utt2spk", u2s, ref, hyp, str(out)], capsys)
    assert rc == 0
    per_utt = (out / "per_utt").read_text().splitlines()
    assert per_utt[0] == "u1 ref  a   b   c" and per_utt[1] == "u1 hyp  a  ***  c"
    assert per_utt[3] == "u1 #csid 2 0 0 1" and per_utt[7] == "u2 #csid 2 0 1 0"
    assert len(per_utt) == 8  # u3 has no hypothesis (--mode present)
    spk = (out / "per_spk").read_text().splitlines()
    assert spk[-2].split() == ["SUM", "raw", "2", "5", "4", "0", "1", "1", "2", "2"]
    ops = (out / "ops").read_text().splitlines()
    assert [ln.split()[0] for ln in ops] == ["correct"] * 4 + ["deletion", "insertion"]


def test_align_text(tmp_path, capsys):
    ref = _write(tmp_path / "ref", "u1 a b c\n")
    hyp = _write(tmp_path / "hyp", "u1 a x c d\n")
    rc, out, _ = _run(align_text_main, ["--special-symbol", "***", f"ark:{ref}", f"ark:{hyp}", "ark,t:-"], capsys)
    assert rc == 0 and out == "u1 a a ; b x ; c c ; *** d\n"


WER_LINES = [
    "exp/d/wer_7_0.0:%WER 20.00 [ 2 / 10, 1 ins, 0 del, 1 sub ]",
    "exp/d/wer_8_0.0:%WER 10.00 [ 1 / 10, 0 ins, 0 del, 1 sub ]",
    "exp/d/wer_9_0.5:%WER 10.00 [ 1 / 10, 1 ins, 0 del, 0 sub ]",
    "exp/d/wer_10_1.0:%WER 15.00 [ 15 / 100, 5 ins, 5 del, 5 sub ]",
    "exp/e/wer_10_0.0:%WER -nan [ 0 / 0, 0 ins, 0 del, 0 sub ]",
]


def test_best_wer_picks_minimum_first_on_ties():
    assert best_wer(WER_LINES) == "%WER 10.00 [ 1 / 10, 0 ins, 0 del, 1 sub ] exp/d/wer_8_0.0"
    assert best_wer(WER_LINES[3:]) == "%WER 15.00 [ 15 / 100, 5 ins, 5 del, 5 sub ] exp/d/wer_10_1.0"
    assert best_wer(["nothing here"]) is None


def test_best_wer_sh_matches_python(tmp_path):
    r = subprocess.run([os.path.join(ROOT, "utils", "best_wer.sh")], input="\n".join(WER_LINES) + "\n",
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == best_wer(WER_LINES)
    # Kaldi's usage: grep over wer files
    for i, ln in enumerate(WER_LINES[:4]):
        fn, body = ln.split(":", 1)
        p = tmp_path / f"wer_{i}"
        p.write_text(body + "\n%SER 1.00 [ 1 / 100 ]\n")
    files = sorted(str(p) for p in tmp_path.glob("wer_*"))
    r = subprocess.run(f"grep WER {' '.join(files)} | {ROOT}/utils/best_wer.sh", shell=True,
                       capture_output=True, text=True)
    assert r.stdout.strip() == f"%WER 10.00 [ 1 / 10, 0 ins, 0 del, 1 sub ] {tmp_path}/wer_1"


def test_best_wer_cli(tmp_path, capsys, monkeypatch):
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(WER_LINES) + "\n"))
    rc, out, _ = _run(best_wer_main, [], capsys)
    assert rc == 0 and out.strip() == best_wer(WER_LINES)
    monkeypatch.setattr("sys.stdin", io.StringIO("no wer\n"))
    rc, _, err = _run(best_wer_main, [], capsys)
    assert rc == 1 and "no %WER lines" in err


def test_read_transcripts_rejects_blank_lines(tmp_path):
    p = _write(tmp_path / "t", "u1 a\n\nu2 b\n")
    with pytest.raises(PynnetError, match=":2: empty line"):
        read_transcripts(f"ark:{p}")


def test_non_breaking_space_is_part_of_a_word(tmp_path, capsys):
    # Kaldi splits transcripts on spaces and tabs only: 'caf\u00a0e' is one word, 'caf e' two.
    ref = _write(tmp_path / "ref", "u\u00a01 caf\u00a0e au\u00a0lait\nu2 a\tb  c\n")
    hyp = _write(tmp_path / "hyp", "u\u00a01 caf e au\u00a0lait\r\nu2 a b c\n")
    r, h = read_transcripts(ref), read_transcripts(f"ark:{hyp}")
    assert r == {"u\u00a01": ["caf\u00a0e", "au\u00a0lait"], "u2": ["a", "b", "c"]}
    assert h == {"u\u00a01": ["caf", "e", "au\u00a0lait"], "u2": ["a", "b", "c"]}
    assert compute_wer(r, h).lines()[0] == "%WER 40.00 [ 2 / 5, 1 ins, 0 del, 1 sub ]"
    out = tmp_path / "details"
    rc, _, _ = _run(wer_details_main, [ref, hyp, str(out)], capsys)
    assert rc == 0
    assert "u\u00a01 #csid 1 1 1 0" in (out / "per_utt").read_text(encoding="utf-8").splitlines()


def test_int2sym_sym2int_roundtrip(tmp_path):
    words = _write(tmp_path / "words.txt", "<eps> 0\nhello 1\nworld 2\n<unk> 3\n")
    r = subprocess.run(f"echo 'u1 hello world zzz' | {ROOT}/utils/sym2int.pl --map-oov '<unk>' -f 2- {words}"
                       f" | {ROOT}/utils/int2sym.pl -f 2- {words}", shell=True, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "u1 hello world <unk>\n"
    r = subprocess.run(f"echo 'u1 hello zzz' | {ROOT}/utils/sym2int.pl -f 2- {words}", shell=True,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "symbol 'zzz' is not in" in r.stderr
    # a numeric --map-oov is the id itself, as Kaldi's steps pass it ($(cat $lang/oov.int))
    r = subprocess.run(f"echo 'u1 hello zzz' | {ROOT}/utils/sym2int.pl --map-oov 3 -f 2- {words}", shell=True,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "u1 1 3\n", r.stderr
