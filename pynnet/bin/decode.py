"""Decoding programs (Kaldi's latgen family) and the lattice grid scorer.

  pynnet-gmm-latgen-faster      [opts] <model> <HCLG.fst> <data-dir|feats-rspecifier> <lattice-wspecifier> [<words-wspecifier> [<alignments-wspecifier>]]
  pynnet-decode-faster-mapped   [opts] <model> <HCLG.fst> <loglikes-rspecifier> <lattice-wspecifier> [<words-wspecifier> [<alignments-wspecifier>]]
  pynnet-lattice-best-path-grid [opts] <lattice-rspecifier>... <scoring-dir>
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import numpy as np

from pynnet.bin._cli import cli, prog_name
from pynnet.bin._opts import add_transform_opts, feat_transforms_of, float_opt, int_opt, parser
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs
from pynnet.io.tables import ascii_int, split_fields


def _bool(v: str) -> bool:
    if v.lower() in ("true", "1"):
        return True
    if v.lower() in ("false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got '{v}'")


def _decode_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--acoustic-scale", type=float_opt, default=0.1, help="scale on acoustic log-likelihoods (default 0.1)")
    p.add_argument("--beam", type=float_opt, default=16.0, help="decoding beam (default 16.0)")
    p.add_argument("--lattice-beam", type=float_opt, default=10.0, help="lattice generation beam (default 10.0)")
    p.add_argument("--max-active", type=int_opt, default=2147483647,
                   help="max active states of a first best-path search; the lattice search then uses "
                        "the smallest beam (from lattice-beam+2 up) that matches its best path "
                        "(default: no limit, one lattice search with --beam)")
    p.add_argument("--min-active", type=int_opt, default=200, help="min active states of that search (default 200)")
    p.add_argument("--prune-interval", type=int_opt, default=25, help="frames between lattice pruning (default 25)")
    p.add_argument("--allow-partial", type=_bool, default=True,
                   help="output the best partial path when no final state is reached (default true)")
    p.add_argument("--word-symbol-table", default="", help="words.txt, to log the words of each utterance")
    p.add_argument("--num-threads", type=int_opt, default=1,
                   help="utterances decoded at once, by as many processes (Kaldi's latgen-faster-parallel; "
                        "default 1)")


def _read_symbols(path: str) -> dict[int, str]:
    from pynnet.io.tables import ascii_int, read_table_lines
    out = {}
    for n, sym, rest in read_table_lines(path, min_fields=2, max_fields=2):
        i = ascii_int(rest)
        if i is None:
            fail(f"expected 'symbol integer', got '{sym} {rest}'", path, n)
        out[i] = sym
    return out


class _Outputs:
    """The lattice / words / alignment writers of a latgen program."""

    def __init__(self, lat_wspec: str, words_wspec: str | None, ali_wspec: str | None):
        from pynnet.decode.io import TextArkWriter
        self.lat = TextArkWriter(lat_wspec)
        self.words = TextArkWriter(words_wspec) if words_wspec else None
        self.ali_wspec = ali_wspec
        head = ali_wspec.split(":", 1)[0] if ali_wspec and ":" in ali_wspec else ""
        target = ali_wspec.split(":", 1)[1] if head.startswith("ark") else ali_wspec
        # Kaldi's ali.*.gz are binary: write those with the GMM engineer's writer, others as text.
        self.ali_binary_path = (target if ali_wspec and ",t" not in head and target
                                and not target.strip().startswith("|") and target != "-" else None)
        self.ali_text = TextArkWriter(ali_wspec) if ali_wspec and not self.ali_binary_path else None
        self.alis: dict[str, np.ndarray] = {}

    def __enter__(self):
        self.lat.__enter__()
        for w in (self.words, self.ali_text):
            if w is not None:
                w.__enter__()
        return self

    def add(self, utt: str, res) -> None:
        if res.lattice_text:
            self.lat.write(res.kaldi_lattice_entry(utt))
        if self.words is not None:
            self.words.write(" ".join([utt] + [str(w) for w in res.words]) + "\n")
        if self.ali_text is not None:
            self.ali_text.write(" ".join([utt] + [str(t) for t in res.alignment]) + "\n")
        if self.ali_binary_path:
            self.alis[utt] = np.asarray(res.alignment, np.int32)

    def __exit__(self, *exc):
        for w in (self.ali_text, self.words, self.lat):
            if w is not None:
                w.__exit__(*exc)
        if exc[0] is None and self.ali_binary_path:
            from pynnet.hmm.ali_io import write_alignments
            write_alignments(self.ali_binary_path, self.alis)
        return False


def _run_decoder(a, utterances, model_path: str, decode_one) -> int:
    """Shared latgen loop: decode each (utt, input), write outputs, log as Kaldi does."""
    from tqdm import tqdm

    from pynnet.decode.decoder import decode_utterances

    syms = _read_symbols(a.word_symbol_table) if a.word_symbol_table else None
    n_ok = n_fail = n_partial = 0
    tot_like, tot_frames = 0.0, 0
    t0, c0 = time.time(), time.process_time()
    worker_cpu: list[float] = []     # (--num-threads > 1: the decodes' CPU, in other processes)
    # (closing: when the loop stops early, the decoding processes are stopped at once)
    with _Outputs(a.lattice_wspecifier, a.words_wspecifier, a.alignments_wspecifier) as out, \
            contextlib.closing(decode_utterances(utterances, decode_one, a.num_threads, worker_cpu)) as results:
        for utt, res in tqdm(results, desc=prog_name(), unit="utt", **progress_kwargs()):
            if not res.ok:
                n_fail += 1
                if res.num_frames == 0:     # (Kaldi's latgen programs: warn, go on)
                    print(f"WARNING ({prog_name()}): Zero-length utterance: {utt}", file=sys.stderr)
                    continue
                print(f"WARNING ({prog_name()}): did not successfully decode utterance {utt}"
                      f"{', no final state reached and --allow-partial=false' if res.partial else ''}"
                      f" ({res.num_frames} frames)", file=sys.stderr)
                continue
            n_ok += 1
            n_partial += int(res.partial)
            if res.partial:
                print(f"WARNING ({prog_name()}): outputting partial output for utterance {utt} "
                      "since no final-state reached", file=sys.stderr)
            words = " ".join(syms.get(w, str(w)) for w in res.words) if syms else " ".join(map(str, res.words))
            print(f"{utt} {words}", file=sys.stderr)
            print(f"LOG ({prog_name()}): Log-like per frame for utterance {utt} is "
                  f"{res.likelihood / max(res.num_frames, 1):.6g} over {res.num_frames} frames.",
                  file=sys.stderr)
            tot_like += res.likelihood
            tot_frames += res.num_frames
            out.add(utt, res)
    elapsed, cpu = time.time() - t0, time.process_time() - c0 + sum(worker_cpu)
    rtf = elapsed / (tot_frames / 100.0) if tot_frames else 0.0
    print(f"LOG ({prog_name()}): Time taken {elapsed:.3f}s: real-time factor assuming 100 frames/sec "
          f"is {rtf:.4f}", file=sys.stderr)
    # Wall-clock RTF depends on the machine's load; the CPU time does not (much).
    print(f"LOG ({prog_name()}): CPU time taken {cpu:.3f}s: CPU real-time factor is "
          f"{cpu / (tot_frames / 100.0) if tot_frames else 0.0:.4f}"
          f"{f' ({sum(worker_cpu):.3f}s of it in {a.num_threads} decoding processes)' if a.num_threads > 1 else ''}",
          file=sys.stderr)
    print(f"LOG ({prog_name()}): Done {n_ok} utterances, failed for {n_fail}", file=sys.stderr)
    if tot_frames:
        print(f"LOG ({prog_name()}): Overall log-likelihood per frame is {tot_like / tot_frames:.6g} "
              f"over {tot_frames} frames.", file=sys.stderr)
    return 0 if n_ok > 0 else 1


def _latgen_parser(usage: str, description: str) -> argparse.ArgumentParser:
    p = parser(prog_name(), description, usage=usage)
    _decode_opts(p)
    return p


def _config(a):
    from pynnet.decode.decoder import DecodeConfig
    if a.beam <= 0 or a.lattice_beam <= 0 or a.acoustic_scale <= 0:
        fail("--beam, --lattice-beam and --acoustic-scale must be positive")
    if a.num_threads < 1:
        fail(f"--num-threads must be at least 1, not {a.num_threads}")
    return DecodeConfig(beam=a.beam, lattice_beam=a.lattice_beam, max_active=a.max_active,
                        min_active=a.min_active, prune_interval=a.prune_interval,
                        allow_partial=a.allow_partial)


def _check_graph_matches(fst_path: str, tm, model_path: str) -> None:
    """mkgraph.sh writes <graph-dir>/num_pdfs; a graph built for another model would index
    transition-ids the model does not have."""
    f = os.path.join(os.path.dirname(os.path.abspath(fst_path)), "num_pdfs")
    if not os.path.isfile(f):
        return
    with open(f, encoding="utf-8", errors="replace") as fh:
        first = split_fields(fh.readline().rstrip("\r\n"))
    n = ascii_int(first[0]) if first else None
    if n is None:
        fail("expected one integer", f, 1)
    if n != tm.num_pdfs:
        fail(f"graph was built for a model with {n} pdfs but {model_path} has {tm.num_pdfs} "
             "(graph/model mismatch: re-run utils/mkgraph.sh for this model)", f)


def _zero_length(x: np.ndarray) -> bool:
    """An utterance with no frames (a 0 x 0 matrix, as Kaldi writes an empty one, or 0 x N; kaldiio
    reads Kaldi's empty text matrix as 0 x 1 or (0,)): the latgen programs warn "Zero-length
    utterance" and go on to the next, as Kaldi's do (the output has nothing for it)."""
    return x.ndim in (1, 2) and x.shape[0] == 0


def _matrices(rspec: str):
    """(key, matrix) from an ark/scp rspecifier (kaldiio: files, pipes, scp)."""
    import kaldiio
    try:
        with kaldiio.ReadHelper(rspec) as reader:
            for key, mat in reader:
                yield key, np.asarray(mat)
    except (OSError, ValueError, EOFError) as e:
        fail(f"cannot read matrices: {e}", rspec)


@cli
def gmm_latgen_faster_main(argv: list[str] | None = None) -> int:
    p = _latgen_parser(
        "%(prog)s [options] <model> <HCLG.fst> <data-dir|feature-rspecifier> <lattice-wspecifier> "
        "[<words-wspecifier> [<alignments-wspecifier>]]\n"
        "  e.g. %(prog)s --acoustic-scale=0.083333 --beam=13 --lattice-beam=6 --cmvn-opts '' --delta-order 2 \\\n"
        "       exp/tri1/final.mdl exp/tri1/graph/HCLG.fst data/test/split4/1 'ark:|gzip -c > exp/tri1/decode/lat.1.gz'",
        "Decode features with a GMM model over HCLG, writing lattices (Kaldi's gmm-latgen-faster). "
        "A data dir is read with the experiment's --cmvn-opts/--delta-order; an rspecifier "
        "(ark:/scp:) is used as it is.")
    p.add_argument("--cmvn-opts", default="", help="apply-cmvn options from the exp dir's cmvn_opts")
    p.add_argument("--delta-order", type=int_opt, default=2, help="from the exp dir's delta_opts (default 2)")
    add_transform_opts(p)
    p.add_argument("model")
    p.add_argument("fst")
    p.add_argument("features")
    p.add_argument("lattice_wspecifier")
    p.add_argument("words_wspecifier", nargs="?")
    p.add_argument("alignments_wspecifier", nargs="?")
    a = p.parse_args(argv)
    from pynnet.decode.decoder import DecodeResult, GmmScorer, decode_loglikes, read_hclg, tid2pdf

    cfg = _config(a)
    from pynnet.hmm.model_io import read_model
    tm, am = read_model(a.model)
    _check_graph_matches(a.fst, tm, a.model)
    hclg = read_hclg(a.fst)
    scorer, m = GmmScorer(am), tid2pdf(tm)
    if os.path.isdir(a.features):
        from pynnet.hmm.train import gmm_features
        feats = gmm_features(a.features, a.cmvn_opts, a.delta_order,
                             transforms=feat_transforms_of(a, a.features))
        where = a.features
    else:
        feats = _matrices(a.features)
        where = a.features

    def decode_one(utt, x):
        if _zero_length(x):
            return DecodeResult(False, False)
        if x.ndim != 2 or x.shape[1] != scorer.dim:
            fail(f"feature dimension {x.shape[-1]} of utterance '{utt}' does not match the model's "
                 f"{scorer.dim} ({a.model}); check --cmvn-opts/--delta-order/--splice-opts/--transform "
                 f"(exp dir's cmvn_opts, delta_opts, splice_opts, final.mat)", where)
        return decode_loglikes(hclg, tm, scorer.loglikes(x), a.acoustic_scale, cfg, utt=utt, tid2pdf_map=m)

    return _run_decoder(a, feats, a.model, decode_one)


@cli
def decode_faster_mapped_main(argv: list[str] | None = None) -> int:
    p = _latgen_parser(
        "%(prog)s [options] <model> <HCLG.fst> <loglikes-rspecifier> <lattice-wspecifier> "
        "[<words-wspecifier> [<alignments-wspecifier>]]\n"
        "  e.g. %(prog)s --acoustic-scale=0.1 --beam=13 --lattice-beam=6 exp/dnn/final.mdl exp/tri2/graph/HCLG.fst \\\n"
        "       ark:exp/dnn/decode/loglikes.1.ark 'ark:|gzip -c > exp/dnn/decode/lat.1.gz'",
        "Decode matrices of log-likelihoods over pdf ids (DNN: log posterior - log prior) over HCLG, "
        "writing lattices (Kaldi's latgen-faster-mapped). Only the transition model of <model> is used.")
    p.add_argument("model")
    p.add_argument("fst")
    p.add_argument("loglikes_rspecifier")
    p.add_argument("lattice_wspecifier")
    p.add_argument("words_wspecifier", nargs="?")
    p.add_argument("alignments_wspecifier", nargs="?")
    a = p.parse_args(argv)
    from pynnet.decode.decoder import DecodeResult, decode_loglikes, read_hclg, tid2pdf

    cfg = _config(a)
    from pynnet.hmm.model_io import read_transition_model
    tm = read_transition_model(a.model)   # a GMM's or an nnet's final.mdl
    _check_graph_matches(a.fst, tm, a.model)
    hclg = read_hclg(a.fst)
    m = tid2pdf(tm)

    def decode_one(utt, x):
        if _zero_length(x):     # (before the columns: Kaldi's empty matrix has none)
            return DecodeResult(False, False)
        if x.ndim != 2 or x.shape[1] != tm.num_pdfs:
            fail(f"log-likelihoods of utterance '{utt}' have {x.shape[-1]} columns but the model "
                 f"{a.model} has {tm.num_pdfs} pdfs", a.loglikes_rspecifier)
        return decode_loglikes(hclg, tm, x, a.acoustic_scale, cfg, utt=utt, tid2pdf_map=m)

    return _run_decoder(a, _matrices(a.loglikes_rspecifier), a.model, decode_one)


def _penalties(s: str) -> list[str]:
    out = []
    from pynnet.io.tables import ascii_float, split_fields
    for x in split_fields(s.replace(",", " ")):
        if ascii_float(x) is None:
            fail(f"--word-ins-penalty: '{x}' is not a number")
        out.append(x)
    if not out:
        fail("--word-ins-penalty: empty list")
    return out


@cli
def lattice_best_path_grid_main(argv: list[str] | None = None) -> int:
    p = parser(
        prog_name(),
        usage="%(prog)s [--min-lmwt 7] [--max-lmwt 17] [--word-ins-penalty 0.0,0.5,1.0] "
              "[--word-symbol-table words.txt] <lattice-rspecifier>... <scoring-dir>\n"
              "  e.g. %(prog)s --word-symbol-table exp/tri1/graph/words.txt exp/tri1/decode/lat.*.gz "
              "exp/tri1/decode/scoring_kaldi",
        desc="Best paths of lattices for every LM weight x word insertion penalty: writes "
                    "<scoring-dir>/penalty_<P>/<LMWT>.txt (as score_kaldi.sh's lattice-scale | "
                    "lattice-add-penalty | lattice-best-path | int2sym.pl, all grid points in one pass). "
                    "A lattice with no complete path (empty) gets no line, with a warning, as "
                    "lattice-best-path's 'Best-path failed' (compute-wer --mode=present leaves it out); "
                    "exit 1 if no lattice has one.")
    p.add_argument("--min-lmwt", type=int_opt, default=7)
    p.add_argument("--max-lmwt", type=int_opt, default=17)
    p.add_argument("--word-ins-penalty", default="0.0,0.5,1.0")
    p.add_argument("--word-symbol-table", default="")
    p.add_argument("lattices", nargs="+")
    p.add_argument("scoring_dir")
    a = p.parse_args(argv)
    from tqdm import tqdm

    from pynnet.decode.lattice import best_paths, read_lattice_ark
    from pynnet.io.atomic import atomic_write

    if a.min_lmwt <= 0 or a.max_lmwt < a.min_lmwt:
        fail(f"bad LM-weight range {a.min_lmwt}..{a.max_lmwt}")
    lmwts = list(range(a.min_lmwt, a.max_lmwt + 1))
    pens = _penalties(a.word_ins_penalty)
    syms = _read_symbols(a.word_symbol_table) if a.word_symbol_table else None
    hyps: dict[tuple[int, str], list[str]] = {(l, pn): [] for l in lmwts for pn in pens}
    seen: set[str] = set()
    t0, n, n_fail = time.time(), 0, 0
    for spec in a.lattices:
        for utt, lat in tqdm(read_lattice_ark(spec), desc=os.path.basename(spec), unit="utt",
                             **progress_kwargs()):
            if utt in seen:
                fail(f"utterance '{utt}' appears twice in the lattices", spec)
            seen.add(utt)
            n += 1
            bp = best_paths(lat, lmwts, [float(x) for x in pens], none_if_no_path=True)
            if any(words is None for words in bp.values()):
                # As lattice-best-path: no hypothesis at all (compute-wer --mode=present then
                # leaves the utterance out), not an empty one (all its words deleted).
                n_fail += 1
                print(f"WARNING ({prog_name()}): Best-path failed for key {utt} (the lattice has no "
                      "complete path)", file=sys.stderr)
            for l in lmwts:
                for pn in pens:
                    words = bp[(float(l), float(pn))]
                    if words is None:
                        continue
                    if syms is not None:
                        try:
                            ws = [syms[w] for w in words]
                        except KeyError as e:
                            fail(f"word id {e.args[0]} of utterance '{utt}' is not in the symbol table",
                                 a.word_symbol_table)
                    else:
                        ws = [str(w) for w in words]
                    hyps[(l, pn)].append(" ".join([utt] + ws))
    if n == 0:
        fail("no lattices read", " ".join(a.lattices))
    if not all(hyps.values()):
        # lattice-best-path's exit status: 1 when it output no path
        fail(f"best path failed for all {n} lattices (none has a complete path)", " ".join(a.lattices))
    for (l, pn), lines in hyps.items():
        with atomic_write(os.path.join(a.scoring_dir, f"penalty_{pn}", f"{l}.txt")) as f:
            f.write("".join(x + "\n" for x in lines))
    print(f"LOG ({prog_name()}): best paths of {n} lattices for {len(lmwts)} LM weights x "
          f"{len(pens)} penalties in {time.time() - t0:.2f}s", file=sys.stderr)
    print(f"LOG ({prog_name()}): Done {n - n_fail} lattices, failed for {n_fail}", file=sys.stderr)
    return 0
