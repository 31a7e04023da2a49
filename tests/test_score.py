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


# Kaldi's utils/best_wer.sh also ranks sclite rows (grep Sum .../score_*/*.sys); the expected
# outputs are what Kaldi's script prints for the same input (checked against it).
SYS = "exp/tri4/decode_eval2000/score_{}_0.0/eval2000.ctm.filt.sys"
BEST_WER_CASES = [
    # sclite Sum/Avg rows: ranked by Err; "|4459" squeezed against a bar is read as "| 4459"
    ([f"{SYS.format(15)}:| Sum/Avg| 4459  42989 | 77.6   15.5    6.9    3.2   25.6   63.4 |",
      f"{SYS.format(14)}:| Sum/Avg| 4459  42989 | 77.4   15.6    7.0    3.1   25.7   63.4 |",
      f"{SYS.format(16)}:| Sum/Avg|4459  42989|77.6   15.5    6.9    3.2   25.5   63.4 |",
      f"{SYS.format(17)}:| Sum/Avg| 4459  42989 | 77.6   15.5    6.9    3.2   25.5   63.4 |"],
     f"%WER 25.5 | 4459 42989 | 77.6 15.5 6.9 3.2 25.5 63.4 | {SYS.format(16)}"),
    # compute-wer and sclite lines mixed: one scale
    (["exp/x/wer_10_0.0:%WER 9.00 [ 9 / 100, 1 ins, 2 del, 6 sub ]",
      "exp/x/score_10/t.sys:| Sum/Avg | 4043 80101 | 89.9 7.8 2.3 1.8 8.9 71.0 |"],
     "%WER 8.9 | 4043 80101 | 89.9 7.8 2.3 1.8 8.9 71.0 | exp/x/score_10/t.sys"),
    # rows of a single .sys file (no file name): Kaldi leaves a bar and a space at the end
    (["| Sum/Avg | 4043 80101 | 89.9 7.8 2.3 1.8 11.9 71.0 |",
      "| Sum/Avg | 4043 80101 | 89.9 7.8 2.3 1.8 11.8 71.0 |"],
     "%WER 11.8 | 4043 80101 | 89.9 7.8 2.3 1.8 11.8 71.0 | | "),
    # a speaker or Mean row is ranked by its Err too, but Kaldi's script then prints its 9th field
    (["exp/a/score_10/x.sys:| sw_4390-A |   62    553 | 80.1   14.8    5.1    2.9   22.8   59.7 |",
      "exp/a/score_10/x.sys:| sw_4391-B |   60    500 | 80.1   14.8    5.1    2.9   20.8   59.7 |"],
     "%WER 5.1 exp/a/score_10/x.sys:| sw_4391-B | 60 500 | 80.1 14.8 5.1 2.9 20.8 59.7 |"),
    # best_wer.sh's own output lines (RESULTS files) again; a line without a file keeps a space
    (["%WER 25.6 | 4459 42989 | 77.6 15.5 6.9 3.2 25.6 63.4 | " + SYS.format(15),
      "%WER 20.1 [ 1 / 8, 0 ins, 0 del, 1 sub ]"],
     "%WER 20.1 [ 1 / 8, 0 ins, 0 del, 1 sub ] "),
    # %CER and %SER lines are not %WER lines (Kaldi's ignores %CER, garbles %SER); inf ranks last
    (["exp/d/cer_8_0.0:%CER 1.00 [ 1 / 100, 0 ins, 0 del, 1 sub ]",
      "exp/d/wer_8_0.0:%SER 1.00 [ 1 / 100 ]",
      "exp/d/wer_9_0.0:%WER inf [ 2 / 0, 2 ins, 0 del, 0 sub ]",
      "exp/d/wer_7_0.0:%WER 50.00 [ 1 / 2, 0 ins, 0 del, 1 sub ]\t extra  spaces\t"],
     "%WER 50.00 [ 1 / 2, 0 ins, 0 del, 1 sub ] extra spaces exp/d/wer_7_0.0"),
]


@pytest.mark.parametrize("lines,expected", BEST_WER_CASES)
def test_best_wer_sclite_rows_as_kaldi(lines, expected):
    assert best_wer(lines) == expected
    r = subprocess.run([os.path.join(ROOT, "utils", "best_wer.sh")], input="\n".join(lines) + "\n",
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == expected + "\n", r.stderr


def test_best_wer_sh_grep_sum_over_sys_files(tmp_path):
    """Kaldi's usage: grep Sum exp/*/decode*/score_*/*.sys | utils/best_wer.sh"""
    rows = {10: "| Sum/Avg |   10     200 | 80.0   15.0    5.0    2.5   22.5   60.0 |",
            11: "| Sum/Avg |   10     200 | 81.0   14.0    5.0    2.0   21.0   60.0 |",
            12: "| Sum/Avg |   10     200 | 81.0   14.0    5.0    3.0   22.0   60.0 |"}
    for lmwt, row in rows.items():
        d = tmp_path / f"score_{lmwt}"
        d.mkdir()
        (d / "test.ctm.filt.sys").write_text(
            "|  SPKR   | # Snt # Wrd | Corr    Sub    Del    Ins    Err  S.Err |\n"
            "| spk1    |    5    100 | 70.0   20.0   10.0    1.0   31.0   80.0 |\n"
            f"{row}\n|  Mean   |  5.0  100.0 | 80.0   15.0    5.0    2.5   22.5   60.0 |\n")
    r = subprocess.run(f"grep Sum {tmp_path}/score_*/*.sys | {ROOT}/utils/best_wer.sh", shell=True,
                       capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout == f"%WER 21.0 | 10 200 | 81.0 14.0 5.0 2.0 21.0 60.0 | {tmp_path}/score_11/test.ctm.filt.sys\n"


def test_best_wer_sh_no_usable_line_fails():
    r = subprocess.run([os.path.join(ROOT, "utils", "best_wer.sh")], input="%WER -nan [ 0 / 0 ]\nhello\n",
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == ""


def test_char_tokens_as_kaldis_cer_scoring():
    from pynnet.score.chars import char_tokens, chars_name
    assert char_tokens(["你好", "世界"]) == ["你", "好", "世", "界"]
    assert char_tokens(["hello", "ok"]) == list("hellook")
    # markup stays whole; Unicode spaces (ideographic, no-break) separate words and are dropped
    assert char_tokens(["[noise]", "<unk>", "!SIL", "a[x]b", "北京\u3000上海", "a\u00a0b"]) == \
        ["[noise]", "<unk>", "!SIL", "a[x]b", "北", "京", "上", "海", "a", "b"]
    assert char_tokens(["e\u0301"]) == ["e", "\u0301"]  # code points, as perl's split //
    assert char_tokens([]) == []
    assert chars_name("d/penalty_0.0/10.txt") == "d/penalty_0.0/10.chars.txt"
    assert chars_name("d/ref") == "d/ref.chars.txt"


def test_score_grid_chars(tmp_path, capsys):
    from pynnet.bin.score import score_grid_main
    ref = _write(tmp_path / "test_filt.txt", "u1 北京市 上海\nu2 ok\n")
    for pen in ("0.0", "0.5"):
        (tmp_path / f"penalty_{pen}").mkdir()
        for lmwt in (1, 2):
            _write(tmp_path / f"penalty_{pen}" / f"{lmwt}.txt",
                   "u1 北京 上海\nu2 ok\n" if lmwt == 1 else "u1 北京市上海\nu2\n")
    argv = ["--min-lmwt", "1", "--max-lmwt", "2", "--word-ins-penalty", "0.0,0.5"]
    rc, _, _ = _run(score_grid_main, argv + ["--chars", "true", "--out-prefix", "cer", ref, str(tmp_path),
                                            str(tmp_path)], capsys)
    assert rc == 0
    assert (tmp_path / "test_filt.chars.txt").read_text() == "u1 北 京 市 上 海\nu2 o k\n"
    assert (tmp_path / "penalty_0.5" / "2.chars.txt").read_text() == "u1 北 京 市 上 海\nu2\n"
    cer1 = (tmp_path / "cer_1_0.0").read_text().splitlines()
    assert cer1[0] == (f"compute-wer --text --mode=present ark:{tmp_path}/test_filt.chars.txt "
                       f"ark,p:{tmp_path}/penalty_0.0/1.chars.txt")
    assert cer1[1] == "%WER 14.29 [ 1 / 7, 0 ins, 1 del, 0 sub ]"
    assert (tmp_path / "cer_2_0.5").read_text().splitlines()[1] == "%WER 28.57 [ 2 / 7, 0 ins, 2 del, 0 sub ]"
    assert not list(tmp_path.glob("wer_*"))
    # a tokenizer command instead of the built-in split (Kaldi's local/character_tokenizer)
    rc, _, _ = _run(score_grid_main, argv + ["--chars", "true", "--char-tokenizer", "sed 's/北京市/X/'",
                                            "--out-prefix", "cer", ref, str(tmp_path), str(tmp_path)], capsys)
    assert rc == 0 and (tmp_path / "test_filt.chars.txt").read_text() == "u1 X 上海\nu2 ok\n"
    assert (tmp_path / "cer_1_0.0").read_text().splitlines()[1] == "%WER 33.33 [ 1 / 3, 0 ins, 0 del, 1 sub ]"
    rc, _, err = _run(score_grid_main, argv + ["--chars", "true", "--char-tokenizer", "exit 3",
                                              ref, str(tmp_path), str(tmp_path)], capsys)
    assert rc == 1 and "failed with status 3" in err and ref in err
    # a missing hypothesis file: one line naming it, nothing written
    (tmp_path / "penalty_0.5" / "2.txt").unlink()
    for f in tmp_path.glob("cer_*"):
        f.unlink()
    (tmp_path / "test_filt.chars.txt").unlink()
    rc, _, err = _run(score_grid_main, argv + ["--chars", "true", "--out-prefix", "cer", ref, str(tmp_path),
                                              str(tmp_path)], capsys)
    assert rc == 1 and f"{tmp_path}/penalty_0.5/2.txt" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("cer_*")) and not (tmp_path / "test_filt.chars.txt").exists()


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
