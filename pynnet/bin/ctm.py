"""Time-marked word output (CTM) from lattices (steps/get_ctm.sh's pipeline in one program).

  pynnet-lattice-to-ctm [opts] <word-boundary-file> <model> <lattice-rspecifier>... <ctm-wxfilename>
    (--min-lmwt/--max-lmwt [--grid-word-ins-penalty]: one ctm per LM weight [x penalty], one pass)
"""
from __future__ import annotations

import sys

from pynnet.bin._cli import cli, prog_name
from pynnet.bin._opts import float_opt, int_opt, kaldi_bool, log, parser
from pynnet.io.errors import fail


def _warn(msg: str) -> None:
    print(f"WARNING ({prog_name()}): {msg}", file=sys.stderr)


def _recording_tables(data_dir: str):
    """segments and reco2file_and_channel of a data dir, as utils/convert_ctm.pl reads them."""
    from pynnet.io.datadir import read_data_file
    from pynnet.io.tables import split_fields

    segs = {}
    for utt, rest in read_data_file(data_dir, "segments", prog=prog_name()).items():
        reco, start, end = split_fields(rest)
        segs[utt] = (reco, float(start), float(end))
    r2fc = {}
    for reco, rest in read_data_file(data_dir, "reco2file_and_channel", prog=prog_name()).items():
        name, channel = split_fields(rest)
        r2fc[reco] = (name, channel)
    return segs, r2fc


def _grid(a) -> tuple[list[float], list[float], list[str], list[str]]:
    """The grid points (LM scale, penalty), scale-major, a label for each (for warnings) and
    its output file: --lm-scale alone; each integer weight of --min-lmwt..--max-lmwt with LMWT
    in the output name replaced by it; and with --grid-word-ins-penalty, each weight x penalty
    with WIP replaced by the penalty as given."""
    if a.min_lmwt is None and a.max_lmwt is None:
        if a.grid_word_ins_penalty is not None:
            fail("--grid-word-ins-penalty needs --min-lmwt and --max-lmwt")
        s = 1.0 if a.lm_scale is None else a.lm_scale
        if s <= 0:
            fail(f"--lm-scale must be positive, got {s}")
        return [s], [0.0], [""], [a.ctm]
    if a.lm_scale is not None or a.min_lmwt is None or a.max_lmwt is None:
        fail("give either --lm-scale or both --min-lmwt and --max-lmwt")
    if a.min_lmwt <= 0 or a.max_lmwt < a.min_lmwt:
        fail(f"bad LM-weight range {a.min_lmwt}..{a.max_lmwt}")
    weights = range(a.min_lmwt, a.max_lmwt + 1)
    if a.grid_word_ins_penalty is None:
        if "LMWT" not in a.ctm or a.ctm == "-":
            fail(f"with --min-lmwt/--max-lmwt the output name must contain LMWT (one ctm per weight), got '{a.ctm}'")
        return ([float(w) for w in weights], [0.0] * len(weights), [f"LM scale {w}" for w in weights],
                [a.ctm.replace("LMWT", str(w)) for w in weights])
    from pynnet.bin.decode import _penalties   # (pynnet-lattice-best-path-grid's list)

    if a.word_ins_penalty != 0:
        fail("give either --word-ins-penalty (lattice-1best's) or --grid-word-ins-penalty")
    if "LMWT" not in a.ctm or "WIP" not in a.ctm:
        fail("with --grid-word-ins-penalty the output name must contain LMWT and WIP (one ctm per grid "
             f"point), got '{a.ctm}'")
    pens = _penalties(a.grid_word_ins_penalty)
    points = [(w, pn) for w in weights for pn in pens]
    return ([float(w) for w, _ in points], [float(pn) for _, pn in points],
            [f"LM weight {w}, penalty {pn}" for w, pn in points],
            [a.ctm.replace("LMWT", str(w)).replace("WIP", pn) for w, pn in points])


def _utt_lines(utt: str, al, names, a, segs, r2fc) -> list[str]:
    """One utterance's ctm lines (relative to the recording with --segments-of)."""
    from pynnet.decode.ctm import convert_to_recording, ctm_lines
    from pynnet.io.errors import PynnetError

    try:
        utt_lines = ctm_lines(utt, al, names, a.frame_shift, a.precision, a.print_silence)
    except PynnetError as e:
        fail(str(e), a.word_symbol_table)
    if segs is None:
        return utt_lines
    out = []
    for ln in utt_lines:
        try:
            x, past_end = convert_to_recording(ln, segs, r2fc)
        except PynnetError as e:
            fail(str(e), a.segments_of)
        if past_end:
            _warn(f"word appears to be past end of recording; line is {x}")
        out.append(x)
    return out


@cli
def lattice_to_ctm_main(argv: list[str] | None = None) -> int:
    p = parser(
        prog_name(),
        usage="%(prog)s [--lm-scale 1.0 | --min-lmwt N --max-lmwt M] [--acoustic-scale 1.0] "
              "[--word-ins-penalty 0.0 | --grid-word-ins-penalty 0.0,0.5,1.0] [--frame-shift 0.01] [--precision 2] [--print-silence false] "
              "[--reorder true] [--word-symbol-table words.txt] [--segments-of <data-dir>] "
              "<word-boundary-file> <model> <lattice-rspecifier>... <ctm-wxfilename>\n"
              "  e.g. %(prog)s --lm-scale 12 --word-symbol-table data/lang/words.txt "
              "data/lang/phones/word_boundary.int exp/tri1/final.mdl exp/tri1/decode/lat.*.gz 12.ctm\n"
              "       %(prog)s --min-lmwt 5 --max-lmwt 20 ... exp/tri1/decode/score_LMWT/test.ctm\n"
              "       %(prog)s --min-lmwt 5 --max-lmwt 17 --grid-word-ins-penalty 0.0,0.5 ... "
              "exp/tri1/decode/score_LMWT_WIP/test.ctm",
        desc="Best path of each lattice at an LM scale (Kaldi's lattice-1best), aligned with word "
             "boundaries (lattice-align-words), as CTM lines '<utt> 1 <start> <dur> <word>' in seconds "
             "(nbest-to-ctm; int2sym.pl with --word-symbol-table; utils/convert_ctm.pl with "
             "--segments-of).  With --min-lmwt/--max-lmwt, one ctm per integer LM weight from one pass "
             "over the lattices; with --grid-word-ins-penalty too, one per LM weight x penalty of "
             "steps/score_kaldi.sh's grid, still one pass.  Outputs are written when all lattices are done ('-': stdout).")
    p.add_argument("--lm-scale", type=float_opt, default=None, help="scale on graph (LM) costs (default 1.0)")
    p.add_argument("--min-lmwt", type=int_opt, default=None, help="first LM weight (with --max-lmwt)")
    p.add_argument("--max-lmwt", type=int_opt, default=None, help="last LM weight (with --min-lmwt)")
    p.add_argument("--acoustic-scale", type=float_opt, default=1.0, help="scale on acoustic costs (default 1.0)")
    p.add_argument("--word-ins-penalty", type=float_opt, default=0.0,
                   help="added to the LM cost of each word after scaling, when positive (default 0.0)")
    p.add_argument("--grid-word-ins-penalty", default=None,
                   help="with --min-lmwt/--max-lmwt: comma-separated penalties per word as "
                        "steps/score_kaldi.sh's (graph + acoustic/LMWT + WIP*words, i.e. lattice-1best "
                        "--lm-scale LMWT --word-ins-penalty LMWT*WIP); the output name's LMWT and WIP "
                        "are replaced by each grid point's")
    p.add_argument("--frame-shift", type=float_opt, default=0.01, help="seconds per frame (default 0.01)")
    p.add_argument("--precision", type=int_opt, default=2,
                   help="decimals of times (more when --frame-shift needs them; default 2)")
    p.add_argument("--print-silence", type=kaldi_bool, default=False,
                   help="also print silence (and partial words) as word 0, <eps> (default false)")
    p.add_argument("--reorder", type=kaldi_bool, default=True,
                   help="graphs were made with reordered self-loops (default true, as mkgraph)")
    p.add_argument("--word-symbol-table", default="", help="words.txt: print words, not ids")
    p.add_argument("--segments-of", default="",
                   help="a data dir: times relative to its recordings, with its segments and "
                        "reco2file_and_channel (utils/convert_ctm.pl)")
    p.add_argument("word_boundary")
    p.add_argument("model")
    p.add_argument("lattices", nargs="+")
    p.add_argument("ctm")
    a = p.parse_args(argv)
    scales, pens, labels, outputs = _grid(a)
    weights = list(dict.fromkeys(scales))   # (the grid's, scale-major)
    if a.frame_shift <= 0:
        fail(f"--frame-shift must be positive, got {a.frame_shift}")
    if a.acoustic_scale <= 0:
        fail(f"--acoustic-scale must be positive, got {a.acoustic_scale}")

    from pynnet.decode.ctm import align_lattice_words, align_lattice_words_grid, read_word_boundary
    from pynnet.decode.lattice import read_lattice_ark
    from pynnet.hmm.ali_io import TransitionTables
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.io.atomic import atomic_write
    from pynnet.io.errors import PynnetError

    kinds = read_word_boundary(a.word_boundary)
    tables = TransitionTables.from_model(read_transition_model(a.model))
    if kinds.size > tables.first_state_emitting.size:
        fail(f"phone {kinds.size - 1} is not in the model {a.model} (word-boundary file of another lang?)",
             a.word_boundary)
    names = None
    if a.word_symbol_table:
        from pynnet.hmm.lang import read_symbol_table
        names = read_symbol_table(a.word_symbol_table)[1]
    segs = r2fc = None
    if a.segments_of:
        segs, r2fc = _recording_tables(a.segments_of)

    many = len(scales) > 1
    lines: list[list[str]] = [[] for _ in scales]
    n_done, n_err = [0] * len(scales), [0] * len(scales)
    seen: set[str] = set()
    n_nopath = 0
    for spec in a.lattices:
        for utt, lat in read_lattice_ark(spec):
            if utt in seen:
                fail(f"utterance '{utt}' appears twice in the lattices", spec)
            seen.add(utt)
            try:
                if a.grid_word_ins_penalty is None:
                    als = align_lattice_words(lat, tables, kinds, scales, a.acoustic_scale,
                                              a.word_ins_penalty, a.reorder)
                else:
                    als = align_lattice_words_grid(lat, tables, kinds, weights, pens[:len(pens) // len(weights)],
                                                   a.acoustic_scale, a.reorder)
            except PynnetError as e:
                fail(f"utterance '{utt}': {e}", spec)
            if als[0] is None:
                _warn(f"possibly empty lattice for utterance-id {utt} (no output)")
                n_nopath += 1
                continue
            utt_out: dict[int, list[str]] = {}   # grid points share alignments: lines once each
            for k, al in enumerate(als):
                at = f"{utt} ({labels[k]})" if many else utt
                for w in al.warnings:
                    _warn(f"{at}: {w}")
                if al.error is not None:
                    _warn(f"{at}: {al.error}; outputting the partial alignment")
                    n_err[k] += 1
                else:
                    n_done[k] += 1
                if id(al) not in utt_out:
                    utt_out[id(al)] = _utt_lines(utt, al, names, a, segs, r2fc)
                lines[k] += utt_out[id(al)]
    if not seen:
        fail("no lattices read", " ".join(a.lattices))
    for k, s in enumerate(scales):
        # lattice-align-words fails when at least as many lattices had errors as aligned
        # cleanly (and nbest-to-ctm when it converted none)
        if n_done[k] <= n_err[k]:
            fail(f"{n_err[k]} of {len(seen)} lattices did not word-align at {labels[k] or f'LM scale {s:g}'} (partial "
                 "lattices, or a word-boundary file / model that does not match the lattices?)")
    for out_path, out_lines in zip(outputs, lines):
        text = "".join(ln + "\n" for ln in out_lines)
        if out_path == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            with atomic_write(out_path) as f:
                f.write(text)
    what = "grid point(s)" if a.grid_word_ins_penalty is not None else "LM scale(s)"
    log(f"converted {len(seen) - n_nopath} lattices to ctm format at {len(scales)} {what} "
        f"({sum(map(len, lines))} lines); {max(n_err)} aligned with errors, {n_nopath} had no complete path")
    return 0
