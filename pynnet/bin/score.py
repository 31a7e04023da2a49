"""Scoring programs: pynnet-compute-wer, pynnet-align-text, pynnet-wer-details, pynnet-best-wer."""
from __future__ import annotations

import os
import sys

from pynnet.bin._cli import cli, prog_name
from pynnet.bin._opts import Parser, ascii_int, int_opt, kaldi_bool, parser
from pynnet.io.errors import fail


def _parser(description: str, usage: str) -> Parser:
    return parser(prog_name(), description, usage=usage)


def _check_ints(table: dict[str, list[str]], spec: str) -> None:
    for key, words in table.items():
        for w in words:
            if ascii_int(w) is None:
                fail(f"utterance '{key}': '{w}' is not an integer (use --text for word strings)", spec)


def _kaldi_bools(argv: list[str], flags: list[str]) -> list[str]:
    """Kaldi writes boolean options as --opt, --opt=true or --opt=false; map them to flags."""
    out = []
    for a in argv:
        name, eq, val = a.partition("=")
        if name in flags and eq:
            if val.lower() in ("true", "1"):
                out.append(name)
            elif val.lower() not in ("false", "0"):
                fail(f"option {name}: expected true or false, got '{val}'")
        else:
            out.append(a)
    return out


@cli
def compute_wer_main(argv: list[str] | None = None) -> int:
    """compute-wer [--text] [--mode present|all|strict] <ref-rspecifier> <hyp-rspecifier> [<stats-out>]"""
    p = _parser("Compute WER by comparing transcriptions (Kaldi's compute-wer).",
                "%(prog)s [--text] [--mode=present|all|strict] <ref-rspecifier> <hyp-rspecifier> [<stats-out>]\n"
                "  e.g. %(prog)s --text --mode=present ark:data/test/text ark:hyp.txt")
    p.add_argument("--text", action="store_true", help="expect word strings, not integers")
    p.add_argument("--mode", default="strict",
                   help='"present": score utterances with a hypothesis; "all": absent ones count as '
                        'empty; "strict": an absent hypothesis is an error (default)')
    p.add_argument("ref")
    p.add_argument("hyp")
    p.add_argument("stats_out", nargs="?")
    a = p.parse_args(_kaldi_bools(sys.argv[1:] if argv is None else argv, ["--text"]))
    from pynnet.score.wer import align_words, compute_wer, read_transcripts

    ref = read_transcripts(a.ref)
    hyp = read_transcripts(a.hyp)
    if not a.text:
        _check_ints(ref, a.ref)
        _check_ints(hyp, a.hyp)
    st = compute_wer(ref, hyp, a.mode)
    if a.stats_out:
        # compute-wer's optional per-word alignment statistics (feed to `sort | uniq -c`).  Kaldi
        # prints the gap symbol after "deletion" (a bug); we print the deleted reference word.
        out = []
        for key in st.per_utt:
            for r, h in align_words(ref[key], hyp.get(key, []), eps="\x00"):
                if r == "\x00":
                    out.append(f"insertion {h}")
                elif h == "\x00":
                    out.append(f"deletion {r}")
                elif r != h:
                    out.append(f"substitution {r} {h}")
                else:
                    out.append(f"correct {r}")
        text = "".join(x + "\n" for x in out)
        if a.stats_out == "-":
            sys.stdout.write(text)
        else:
            from pynnet.io.atomic import atomic_write
            with atomic_write(a.stats_out) as f:
                f.write(text)
    print("\n".join(st.lines()))
    return 0


@cli
def align_text_main(argv: list[str] | None = None) -> int:
    """align-text [--special-symbol '***'] <ref> <hyp> <out|->"""
    p = _parser("Align reference and hypothesis word by word (Kaldi's align-text).",
                "%(prog)s [--special-symbol='***'] <ref-rspecifier> <hyp-rspecifier> <out-file|->")
    p.add_argument("--special-symbol", default="<eps>",
                   help="symbol for a gap (insertion/deletion), default <eps> as Kaldi's")
    p.add_argument("ref")
    p.add_argument("hyp")
    p.add_argument("out")
    a = p.parse_args(argv)
    from pynnet.score.wer import align_text_line, align_words, read_transcripts

    ref, hyp = read_transcripts(a.ref), read_transcripts(a.hyp)
    lines = [align_text_line(k, align_words(r, hyp[k], a.special_symbol))
             for k, r in ref.items() if k in hyp]
    text = "".join(x + "\n" for x in lines)
    out = a.out.split(":", 1)[1] if a.out.startswith(("ark:", "ark,t:")) else a.out
    if out == "-":
        sys.stdout.write(text)
    else:
        from pynnet.io.atomic import atomic_write
        with atomic_write(out) as f:
            f.write(text)
    return 0


@cli
def wer_details_main(argv: list[str] | None = None) -> int:
    """wer-details [--utt2spk f] <ref> <hyp> <out-dir>: per_utt, per_spk, ops as score_kaldi.sh."""
    p = _parser("Write Kaldi's wer_details (per_utt, per_spk, ops) for a hypothesis file.",
                "%(prog)s [--utt2spk data/test/utt2spk] [--special-symbol '***'] "
                "<ref-text> <hyp-text> <out-dir>")
    p.add_argument("--utt2spk", help="utt2spk of the data dir; without it no per_spk is written")
    p.add_argument("--special-symbol", default="***")
    p.add_argument("ref")
    p.add_argument("hyp")
    p.add_argument("out_dir")
    a = p.parse_args(argv)
    from pynnet.io.tables import read_table
    from pynnet.score.wer import read_transcripts, write_wer_details

    ref, hyp = read_transcripts(a.ref), read_transcripts(a.hyp)
    utt2spk = read_table(a.utt2spk, min_fields=2, max_fields=2) if a.utt2spk else None
    os.makedirs(a.out_dir, exist_ok=True)
    write_wer_details(a.out_dir, ref, hyp, utt2spk, a.special_symbol)
    return 0


@cli
def best_wer_main(argv: list[str] | None = None) -> int:
    """best-wer: read ``file:%WER ...`` lines (grep output) from stdin or files, print the best."""
    p = _parser("Print the lowest %WER line (Kaldi's utils/best_wer.sh).",
                "grep WER exp/x/decode/wer_* | %(prog)s   or   %(prog)s <file>...")
    p.add_argument("files", nargs="*")
    a = p.parse_args(argv)
    from pynnet.score.wer import best_wer

    lines: list[str] = []
    if a.files:
        for fn in a.files:
            with open(fn, encoding="utf-8", errors="replace") as f:
                lines += [f"{fn}:{ln}" for ln in f]
    else:
        lines = list(sys.stdin)
    best = best_wer(lines)
    if best is None:
        fail("no %WER lines in the input")
    print(best)
    return 0


@cli
def score_grid_main(argv: list[str] | None = None) -> int:
    """score-grid: compute-wer --text --mode=present for every penalty_P/LMWT.txt, one process."""
    p = _parser("Write <decode-dir>/wer_<LMWT>_<P> (compute-wer --text --mode=present output) for "
                "every hypothesis file <scoring-dir>/penalty_<P>/<LMWT>.txt, in one process.  With "
                "--chars true the reference and the hypotheses are first split into characters, "
                "written beside them as <name>.chars.txt, and those are scored (Kaldi's CER scoring).",
                "%(prog)s [--min-lmwt 7] [--max-lmwt 17] [--word-ins-penalty 0.0,0.5,1.0] "
                "[--out-prefix wer] [--chars false] <ref-text> <scoring-dir> <decode-dir>")
    p.add_argument("--min-lmwt", type=int_opt, default=7)
    p.add_argument("--max-lmwt", type=int_opt, default=17)
    p.add_argument("--word-ins-penalty", default="0.0,0.5,1.0")
    p.add_argument("--mode", default="present")
    p.add_argument("--out-prefix", default="wer",
                   help="write <decode-dir>/<prefix>_<LMWT>_<P> (default wer; cer for character scoring)")
    p.add_argument("--chars", type=kaldi_bool, default=False,
                   help="score characters: <ref-text> and each hypothesis file x.txt are split into "
                        "characters as x.chars.txt (Kaldi's score_kaldi_cer.sh), then scored")
    p.add_argument("--char-tokenizer",
                   help="with --chars: a shell command (stdin to stdout) that splits the transcripts "
                        "instead of the built-in split, e.g. local/character_tokenizer")
    p.add_argument("ref")
    p.add_argument("scoring_dir")
    p.add_argument("decode_dir")
    a = p.parse_args(argv)
    from pynnet.io.atomic import atomic_write
    from pynnet.score.wer import compute_wer, read_transcripts

    pens = [x for x in a.word_ins_penalty.replace(",", " ").split()]
    if a.min_lmwt > a.max_lmwt or not pens:
        fail("empty grid (check --min-lmwt/--max-lmwt/--word-ins-penalty)")
    compute_wer({}, {}, a.mode)  # a bad --mode fails here, before anything is written
    if not a.out_prefix or "/" in a.out_prefix:
        fail(f"--out-prefix must be a file name prefix, got '{a.out_prefix}'")
    if a.char_tokenizer and not a.chars:
        fail("--char-tokenizer needs --chars true")
    grid = [(pen, lmwt, os.path.join(a.scoring_dir, f"penalty_{pen}", f"{lmwt}.txt"))
            for pen in pens for lmwt in range(a.min_lmwt, a.max_lmwt + 1)]
    # every input is there before anything is written
    for path in ([a.ref] if a.chars else []) + [g[2] for g in grid]:
        if not os.path.isfile(path):
            fail("no such file" if not os.path.exists(path) else "not a file", path)
    ref_file = a.ref
    if a.chars:
        from pynnet.score.chars import chars_name, tokenize_file

        ref_file = chars_name(a.ref)
        tokenize_file(a.ref, ref_file, a.char_tokenizer)
        for i, (pen, lmwt, hyp) in enumerate(grid):
            grid[i] = (pen, lmwt, chars_name(hyp))
            tokenize_file(hyp, grid[i][2], a.char_tokenizer)
    ref = read_transcripts(ref_file)
    for pen, lmwt, hyp_file in grid:
        st = compute_wer(ref, read_transcripts(hyp_file), a.mode)
        with atomic_write(os.path.join(a.decode_dir, f"{a.out_prefix}_{lmwt}_{pen}")) as f:
            # Kaldi's wer files start with the command line compute-wer logged to stderr.
            f.write(f"compute-wer --text --mode={a.mode} ark:{ref_file} ark,p:{hyp_file}\n")
            f.write("\n".join(st.lines()) + "\n")
    return 0


@cli
def score_stm_main(argv: list[str] | None = None) -> int:
    """score-stm [--glm f] [--exclude-prefix p]... <stm> <ctm> <out.sys> [<stm> <ctm> <out.sys>]...:
    hubscr/sclite-style scoring."""
    p = _parser("Score a CTM hypothesis against an STM reference as hubscr.pl -h hub5 -l english "
                "(csrfilt with the GLM on both sides, sclite -F -D): hypothesis words go to the "
                "reference segment holding their midpoint (those in no segment are insertions of "
                "the nearest one, or ignored in IGNORE_TIME_SEGMENT_IN_SCORING segments), each "
                "segment is aligned with sclite's weights over optional words and alternations, and "
                "<out.sys> gets sclite's per-speaker summary (the '| Sum/Avg |' row) and a Kaldi "
                "'%%WER x.xx [ E / N, I ins, D del, S sub ]' line (both read by utils/best_wer.sh). "
                "More <stm> <ctm> <out.sys> triples: each scored as if alone, in one run (each stm "
                "and the GLM read once, a segment's alignment with a hypothesis seen before reused), "
                "as a decode dir's LM-weight x penalty grid is.  Details: pynnet/score/stm.py.",
                "%(prog)s [--glm data/eval2000/glm] [--exclude-prefix en_]... "
                "[--filtered-ctm out.ctm.filt | --filtered-suffix .filt] "
                "<stm> <ctm> <out.sys|-> [<stm> <ctm> <out.sys|->]...\n"
                "  e.g. %(prog)s --glm data/eval2000/glm data/eval2000/stm score_10_0.0/eval2000.ctm "
                "score_10_0.0/eval2000.ctm.filt.sys")
    p.add_argument("--glm", default="", help="NIST1 global mapping rules applied to both sides (default none)")
    p.add_argument("--exclude-prefix", action="append", default=[],
                   help="leave out STM and CTM lines whose file name starts with this (repeatable): "
                        "--exclude-prefix en_ scores the Switchboard part of eval2000")
    p.add_argument("--optional-words", default="%HESITATION",
                   help="comma-separated reference words (after the GLM) that may be deleted at no cost "
                        "(default %%HESITATION; '' for none)")
    p.add_argument("--filtered-ctm", default="",
                   help="also write the hypothesis after the GLM here, as csrfilt does (<ctm>.filt; "
                        "one triple only)")
    p.add_argument("--filtered-suffix", default="",
                   help="also write each hypothesis after the GLM to <ctm><suffix> (e.g. .filt)")
    p.add_argument("--title", default="", help="the report's title (default: the CTM's name)")
    p.add_argument("triples", nargs="+", metavar="<stm> <ctm> <out.sys|->")
    a = p.parse_args(argv)
    from pynnet.io.atomic import atomic_write
    from pynnet.score import stm as S

    if len(a.triples) % 3:
        p.error(f"expected <stm> <ctm> <out.sys> triples, got {len(a.triples)} arguments")
    jobs = [tuple(a.triples[i:i + 3]) for i in range(0, len(a.triples), 3)]
    if a.filtered_ctm and (len(jobs) > 1 or a.filtered_suffix):
        fail("--filtered-ctm is for one <stm> <ctm> <out.sys>; use --filtered-suffix for several")
    outs = [o for _, _, o in jobs if o != "-"]
    if len(set(outs)) < len(outs):
        fail("an output file is given twice")
    for f in [x for job in jobs for x in job[:2]] + ([a.glm] if a.glm else []):
        if not os.path.isfile(f):
            fail("no such file" if not os.path.exists(f) else "not a file", f)
    glm = S.read_glm(a.glm) if a.glm else None
    optional = frozenset(w.strip().upper() for w in a.optional_words.split(",") if w.strip())
    refs: dict[str, list] = {}
    for stm, _, _ in jobs:   # every reference checked before anything is written
        if stm not in refs:
            refs[stm] = S.read_stm(stm, glm, a.exclude_prefix, optional)
            if not any(not s.ignore for s in refs[stm]):
                fail("no segments to score" + (" (all excluded?)" if a.exclude_prefix else ""), stm)
    cache: dict = {}
    for stm, ctm, out in jobs:
        words = S.read_ctm(ctm, glm, a.exclude_prefix)
        stats = S.score(refs[stm], words, ctm, cache)
        report = S.sys_report(stats, a.title or ctm)
        filtered = a.filtered_ctm or (ctm + a.filtered_suffix if a.filtered_suffix else "")
        if filtered:
            with atomic_write(filtered) as f:
                f.write("".join(x + "\n" for x in S.filtered_ctm_lines(words)))
        if out == "-":
            sys.stdout.write(report)
        else:
            with atomic_write(out) as f:
                f.write(report)
        wer = S.kaldi_wer_line(S.total(stats))
        print(wer if len(jobs) == 1 else f"{wer} {out}", file=sys.stderr)
    return 0
