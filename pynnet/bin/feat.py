"""Feature programs with Kaldi's names, options and argument conventions:
pynnet-compute-mfcc-feats, pynnet-compute-fbank-feats, pynnet-compute-cmvn-stats,
pynnet-apply-cmvn, pynnet-add-deltas, pynnet-splice-feats, pynnet-copy-feats,
pynnet-feat-to-dim, pynnet-feat-to-len.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

from pynnet.bin._cli import cli, prog_name
from pynnet.feat.options import KaldiOptions
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs


def _log(msg: str) -> None:
    print(f"LOG ({prog_name()}): {msg}", file=sys.stderr)


def _warning(msg: str) -> None:
    print(f"WARNING ({prog_name()}): {msg}", file=sys.stderr)


def _kaldi_warnings() -> None:
    """Library warnings (audio, CMVN) become Kaldi-style ``WARNING (prog): ...`` lines."""
    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        _warning(str(message))
    from pynnet.feat.cmvn import CmvnWarning
    from pynnet.io.audio import AudioWarning

    warnings.showwarning = show
    warnings.simplefilter("ignore", ResourceWarning)   # kaldiio leaves readers to the GC
    warnings.simplefilter("always", AudioWarning)
    warnings.simplefilter("always", CmvnWarning)
    # Writing to a closed pipe (| head) ends the program quietly, as it does a Kaldi binary.
    import signal
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def _progress(total: int | None, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="utt", leave=False, **progress_kwargs())


def _wav_scp_path(rspecifier: str) -> str:
    head, colon, rest = rspecifier.partition(":")
    if colon and set(head.split(",")) <= {"scp", "p", "o", "s", "cs", "ns", "b", "t"} and "scp" in head:
        return rest
    if colon and "ark" in head.split(","):
        fail(f"reading waves from an archive ('{rspecifier}') is not supported: give scp:wav.scp "
             "(wav.scp entries may point into archives as x.ark:OFFSET)")
    return rspecifier


def _read_float_table(spec: str, what: str) -> dict[str, float]:
    from pynnet.feat.tables import read_rspecifier_table
    from pynnet.io.tables import ascii_float, read_table_lines

    path = read_rspecifier_table(spec)
    out: dict[str, float] = {}
    for n, key, rest in read_table_lines(path, min_fields=2, max_fields=2):
        x = ascii_float(rest)
        if x is None:
            fail(f"{what}: '{rest}' is not a number", path, n)
        out[key] = x
    return out


def _write_text_table(spec: str, items: list[tuple[str, str]]) -> None:
    from pynnet.feat.tables import table_path
    from pynnet.io.atomic import atomic_write

    path = table_path(spec)
    if path == "-":
        for k, v in items:
            print(f"{k} {v}")
        return
    with atomic_write(path) as f:
        for k, v in items:
            f.write(f"{k} {v}\n")


# ----------------------------------------------------------------------------------------------
def _compute_feats(kind: str, argv: list[str] | None) -> int:
    from pynnet.feat.compute import FeatureComputer, register_options
    from pynnet.feat.tables import MatrixWriter
    from pynnet.io.audio import iter_utterances, select_channel

    prog = f"compute-{kind}-feats"
    usage = (f"Create {'MFCC' if kind == 'mfcc' else 'Mel-filterbank'} feature files (Kaldi {prog}).\n"
             f"Usage:  pynnet-{prog} [options...] <wav-rspecifier> <feats-wspecifier>\n"
             f"e.g.:   pynnet-{prog} --config=conf/{kind}.conf scp:data/train/wav.scp "
             "ark,scp:mfcc/raw.1.ark,mfcc/raw.1.scp\n"
             "<wav-rspecifier> is scp:wav.scp (or a bare wav.scp path); entries are files (wav, flac, "
             "NIST SPHERE), 'command |' pipes producing WAV, or x.ark:OFFSET.")
    p = KaldiOptions(usage)
    register_options(p, kind)
    p.register("channel", int, -1, "Channel to extract (-1 -> expect mono, 0 -> left, 1 -> right)")
    p.register("min-duration", float, 0.0, "Minimum duration of segments to process (in seconds)")
    p.register("vtln-warp", float, 1.0, "Vtln warp factor (only applicable if vtln-map not specified)")
    p.register("vtln-map", str, "", "Map from utterance or speaker-id to vtln warp factor (rspecifier)")
    p.register("utt2spk", str, "", "Utterance to speaker-id map rspecifier (if doing VTLN and you "
               "have warps per speaker)")
    p.register("subtract-mean", bool, False, "Subtract mean of each feature file [CMS; not recommended "
               "to do it this way.]")
    p.register("output-format", str, "kaldi", "Format of the output files [kaldi]", ("kaldi",))
    p.register("write-utt2dur", str, "", "Wspecifier to write duration of each utterance in seconds, "
               "e.g. 'ark,t:utt2dur'")
    p.register("write-num-frames", str, "", "Wspecifier to write the number of frames of each "
               "utterance, e.g. 'ark,t:utt2num_frames' (pynnet; Kaldi uses copy-feats for this)")
    p.register("segments", str, "", "Segments file: compute features of each segment of the "
               "recordings (pynnet; Kaldi pipes extract-segments)")
    p.register("max-overshoot", float, 0.5, "With --segments: end times up to this many seconds past "
               "the end of the recording are clipped, later ones skip the segment")
    p.register("min-segment-length", float, 0.1, "With --segments: skip segments shorter than this (s)")
    p.register("compress", bool, False, "Write compressed matrices (Kaldi kSpeechFeature compression)")
    p.register("backend", str, "knf", "Feature code: knf (kaldi-native-fbank) or torchaudio "
               "(torchaudio.compliance.kaldi)", ("knf", "torchaudio"))
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        p.usage_error()
    wav_rspec, feats_wspec = args
    _kaldi_warnings()
    if v["channel"] < -1:
        fail(f"--channel={v['channel']}: expected -1 (mono), 0 (left), 1 (right), ...")
    computer = FeatureComputer(kind, v, backend=v["backend"])
    wav_scp = _wav_scp_path(wav_rspec)
    if not os.path.exists(wav_scp):
        fail("no such file", wav_scp)
    vtln_map: dict[str, float] = {}
    utt2spk: dict[str, str] = {}
    if v["vtln_map"]:
        vtln_map = _read_float_table(v["vtln_map"], "VTLN warp factor")
        if v["utt2spk"]:
            from pynnet.feat.tables import read_rspecifier_table
            from pynnet.io.tables import read_table
            utt2spk = read_table(read_rspecifier_table(v["utt2spk"]), min_fields=2, max_fields=2)
    elif v["utt2spk"]:
        _warning("--utt2spk is only used with --vtln-map")

    failures: list[str] = []
    num_frames: list[tuple[str, str]] = []
    durations: list[tuple[str, str]] = []
    audio_seconds = 0.0
    t0 = time.perf_counter()
    with MatrixWriter(feats_wspec, compress=v["compress"]) as writer, _progress(None, prog) as bar:
        for utt, data, rate, seg_channel in iter_utterances(
                wav_scp, v["segments"] or None, max_overshoot=v["max_overshoot"],
                min_segment_length=v["min_segment_length"], failures=failures,
                sample_rate=computer.sample_frequency):
            bar.update(1)
            channel = seg_channel if seg_channel != -1 else v["channel"]
            x = select_channel(data, channel, utt)
            if x is None:
                failures.append(utt)
                continue
            duration = x.shape[0] / rate
            if duration < v["min_duration"]:
                _warning(f"File: {utt} is too short ({duration} sec): producing no output.")
                failures.append(utt)
                continue
            warp = v["vtln_warp"]
            if v["vtln_map"]:
                key = utt2spk.get(utt, utt) if v["utt2spk"] else utt
                if key not in vtln_map:
                    _warning(f"No vtln-map entry for utterance-id (or speaker-id) {key}: "
                             f"producing no output for utterance {utt}")
                    failures.append(utt)
                    continue
                warp = vtln_map[key]
            feats = computer.compute(x, utt, warp)   # its errors are option errors: fatal
            if feats.shape[0] == 0:
                _warning(f"Utterance {utt} ({duration:.3f} s) is too short for one frame: no output.")
                failures.append(utt)
                continue
            if v["subtract_mean"]:
                feats = feats - feats.mean(axis=0, dtype=np.float64).astype(np.float32)
            writer.write(utt, feats)
            num_frames.append((utt, str(feats.shape[0])))
            durations.append((utt, f"{duration:g}"))
            audio_seconds += duration
        # Kaldi: each failed utterance is a warning (above) and the program succeeds if any
        # utterance did; steps/make_mfcc.sh judges the overall count. With none, fail inside
        # the block so that no (empty) output appears.
        elapsed = time.perf_counter() - t0
        done, failed = len(num_frames), len(set(failures))
        _log(f"Done {done} out of {done + failed} utterances ({audio_seconds:.1f} s of audio, "
             f"{audio_seconds / max(elapsed, 1e-9):.0f}x real time)"
             + (f"; {failed} failed: see the warnings above." if failed else "."))
        if done == 0:
            if failed:
                fail(f"no utterance produced features ({failed} failed: see the warnings above)")
            fail(f"no utterances in {v['segments'] or wav_scp}")
    if v["write_num_frames"]:
        _write_text_table(v["write_num_frames"], num_frames)
    if v["write_utt2dur"]:
        _write_text_table(v["write_utt2dur"], durations)
    return 0


@cli
def compute_mfcc_feats(argv: list[str] | None = None) -> int:
    return _compute_feats("mfcc", argv)


@cli
def compute_fbank_feats(argv: list[str] | None = None) -> int:
    return _compute_feats("fbank", argv)


# ----------------------------------------------------------------------------------------------
def _spk2utt(spec: str) -> dict[str, list[str]]:
    from pynnet.feat.tables import read_rspecifier_table
    from pynnet.io.tables import read_table_lines, split_fields

    path = read_rspecifier_table(spec)
    out: dict[str, list[str]] = {}
    for n, spk, rest in read_table_lines(path, min_fields=2):
        if spk in out:
            fail(f"duplicate speaker '{spk}'", path, n)
        out[spk] = split_fields(rest)
    return out


@cli
def compute_cmvn_stats(argv: list[str] | None = None) -> int:
    import kaldiio

    from pynnet.feat.cmvn import acc_cmvn_stats as acc_real
    from pynnet.feat.tables import KALDIIO_ERRORS, MatrixWriter, kaldiio_error, load_scp, read_matrices

    usage = ("Compute cepstral mean and variance normalization statistics (Kaldi compute-cmvn-stats):\n"
             "per utterance by default, or per speaker if --spk2utt is given.\n"
             "Usage: pynnet-compute-cmvn-stats [options] <feats-rspecifier> (<stats-wspecifier>|<stats-wxfilename>)\n"
             "e.g.:  pynnet-compute-cmvn-stats --spk2utt=ark:data/train/spk2utt scp:data/train/feats.scp "
             "ark,scp:mfcc/cmvn_train.ark,mfcc/cmvn_train.scp\n"
             "       pynnet-compute-cmvn-stats scp:data/train/feats.scp exp/dnn/global_cmvn.stats  (global)\n"
             "Stats: a 2 x (dim+1) double matrix: sums and the count; sums of squares and 0.")
    p = KaldiOptions(usage)
    p.register("spk2utt", str, "", "rspecifier for speaker to utterance-list map")
    p.register("binary", bool, True, "write in binary mode (applies only to global CMN/CVN)")
    p.register("fake-stats", bool, False, "Write stats that do no normalization: mean 0 and "
               "variance 1 with the real frame count (pynnet; Kaldi's compute_cmvn_stats.sh --fake)")
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        p.usage_error()
    feats_rspec, stats_wspec = args
    _kaldi_warnings()

    def acc_cmvn_stats(stats: np.ndarray, x: np.ndarray) -> None:
        if v["fake_stats"]:
            stats[1, :-1] += x.shape[0]
            stats[0, -1] += x.shape[0]
        else:
            acc_real(stats, x)

    num_done = num_err = 0
    from pynnet.feat.tables import _split_spec
    if not _split_spec(stats_wspec)[0]:
        # An rxfilename, not a table: global stats over all utterances (Kaldi does the same).
        if v["spk2utt"]:
            fail("--spk2utt needs a table wspecifier for the stats (ark:... or ark,scp:...)")
        stats = None
        for utt, x in read_matrices(feats_rspec):
            if stats is None:
                stats = np.zeros((2, x.shape[1] + 1))
            elif stats.shape[1] != x.shape[1] + 1:
                fail(f"utterance '{utt}' has dimension {x.shape[1]}, others {stats.shape[1] - 1}")
            acc_cmvn_stats(stats, x)
            num_done += 1
        if stats is None:
            fail("no features found", feats_rspec)
        from pynnet.io.atomic import atomic_path
        with atomic_path(stats_wspec) as tmp:
            if v["binary"]:
                kaldiio.save_mat(tmp, stats)
            else:
                with open(tmp, "wb") as f:
                    import kaldiio.matio as km
                    km.write_array_ascii(f, stats)
        _log(f"Wrote global CMVN stats of {num_done} utterances ({int(stats[0, -1])} frames) to {stats_wspec}")
        return 0
    with MatrixWriter(stats_wspec) as writer:
        if v["spk2utt"]:
            opts, rest = _split_spec(feats_rspec)
            if "scp" not in opts and not feats_rspec.endswith(".scp"):
                fail("--spk2utt needs the features as scp:feats.scp (random access)")
            try:
                feats = load_scp(rest)
            except KALDIIO_ERRORS as e:
                fail(f"cannot read: {kaldiio_error(e)}", rest)
            for spk, utts in _spk2utt(v["spk2utt"]).items():
                stats = None
                for utt in utts:
                    if utt not in feats:
                        _warning(f"Did not find features for utterance {utt}")
                        num_err += 1
                        continue
                    try:
                        x = np.asarray(feats[utt])
                    except KALDIIO_ERRORS as e:
                        fail(f"cannot read features of '{utt}': {kaldiio_error(e)}", rest)
                    if stats is None:
                        stats = np.zeros((2, x.shape[1] + 1))
                    elif stats.shape[1] != x.shape[1] + 1:
                        fail(f"utterance '{utt}' has dimension {x.shape[1]}, others {stats.shape[1] - 1}")
                    acc_cmvn_stats(stats, x)
                    num_done += 1
                if stats is None:
                    _warning(f"No features for speaker {spk}: no stats written")
                    continue
                writer.write(spk, stats)
        else:
            for utt, x in read_matrices(feats_rspec):
                stats = np.zeros((2, x.shape[1] + 1))
                acc_cmvn_stats(stats, x)
                writer.write(utt, stats)
                num_done += 1
    _log(f"Done accumulating CMVN stats for {num_done} utterances; {num_err} had errors.")
    if num_done == 0:
        fail("no features found")
    return 0


@cli
def apply_cmvn(argv: list[str] | None = None) -> int:
    import kaldiio

    from pynnet.feat.cmvn import apply_cmvn as apply
    from pynnet.feat.tables import KALDIIO_ERRORS, MatrixWriter, _split_spec, kaldiio_error, load_scp, read_matrices

    usage = ("Apply cepstral mean and (optionally) variance normalization (Kaldi apply-cmvn)\n"
             "Per-utterance by default, or per-speaker if --utt2spk is given; or global stats.\n"
             "Usage: pynnet-apply-cmvn [options] (<cmvn-stats-rspecifier>|<cmvn-stats-rxfilename>) "
             "<feats-rspecifier> <feats-wspecifier>")
    p = KaldiOptions(usage)
    p.register("utt2spk", str, "", "rspecifier for utterance to speaker map")
    p.register("norm-vars", bool, False, "If true, normalize variances.")
    p.register("norm-means", bool, True, "You can set this to false to turn off mean normalization.")
    p.register("compress", bool, False, "Write compressed matrices")
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        p.usage_error()
    stats_spec, feats_rspec, feats_wspec = args
    _kaldi_warnings()
    opts, rest = _split_spec(stats_spec)
    global_stats = None
    table = None
    try:
        if opts:
            table = load_scp(rest) if "scp" in opts else dict(kaldiio.load_ark(rest))
        else:
            global_stats = np.asarray(kaldiio.load_mat(stats_spec), dtype=np.float64)
    except KALDIIO_ERRORS as e:  # kaldiio's on corrupt input
        fail(f"cannot read CMVN stats: {kaldiio_error(e)}", rest)
    utt2spk: dict[str, str] = {}
    if v["utt2spk"]:
        from pynnet.feat.tables import read_rspecifier_table
        from pynnet.io.tables import read_table
        utt2spk = read_table(read_rspecifier_table(v["utt2spk"]), min_fields=2, max_fields=2)
    done = err = 0
    with MatrixWriter(feats_wspec, compress=v["compress"]) as writer:
        for utt, x in read_matrices(feats_rspec):
            if global_stats is not None:
                stats = global_stats
            else:
                key = utt2spk.get(utt) if v["utt2spk"] else utt
                if key is None or key not in table:
                    _warning(f"No normalization statistics available for key {key or utt}, "
                             "producing no output for this utterance")
                    err += 1
                    continue
                try:  # an scp table reads each matrix when it is looked up
                    stats = np.asarray(table[key], dtype=np.float64)
                except KALDIIO_ERRORS as e:
                    fail(f"cannot read the CMVN stats of {key}: {kaldiio_error(e)}", rest)
            writer.write(utt, apply(x, stats, v["norm_vars"], norm_means=v["norm_means"], name=utt))
            done += 1
    _log(f"Applied cepstral mean{' and variance' if v['norm_vars'] else ''} normalization to "
         f"{done} utterances, errors on {err}")
    return 0 if done else 1


def _filter_program(argv: list[str] | None, usage: str, register, transform) -> int:
    from pynnet.feat.tables import MatrixWriter, read_matrices

    _kaldi_warnings()
    p = KaldiOptions(usage)
    register(p)
    p.register("compress", bool, False, "Write compressed matrices")
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        p.usage_error()
    n = 0
    with MatrixWriter(args[1], compress=v["compress"]) as writer:
        for utt, x in read_matrices(args[0]):
            writer.write(utt, transform(v, np.asarray(x, dtype=np.float32)))
            n += 1
    _log(f"Processed {n} feature matrices.")
    return 0 if n else 1


@cli
def add_deltas(argv: list[str] | None = None) -> int:
    from pynnet.feat.transforms import add_deltas as deltas

    def reg(p: KaldiOptions) -> None:
        p.register("delta-order", int, 2, "Order of delta computation")
        p.register("delta-window", int, 2, "Parameter controlling window for delta computation "
                   "(actual window size for each delta order is 1 + 2*delta-window-size)")

    def tr(v, x):
        if v["delta_order"] < 0 or v["delta_window"] < 1:
            fail(f"bad --delta-order={v['delta_order']} / --delta-window={v['delta_window']}")
        return deltas(x, v["delta_order"], v["delta_window"])

    return _filter_program(argv, "Add deltas (typically to raw mfcc or plp features) (Kaldi add-deltas)\n"
                           "Usage: pynnet-add-deltas [options] <in-rspecifier> <out-wspecifier>", reg, tr)


@cli
def splice_feats(argv: list[str] | None = None) -> int:
    from pynnet.feat.transforms import splice_feats as splice

    def reg(p: KaldiOptions) -> None:
        p.register("left-context", int, 4, "Number of frames of left context")
        p.register("right-context", int, 4, "Number of frames of right context")

    def tr(v, x):
        if v["left_context"] < 0 or v["right_context"] < 0:
            fail("--left-context and --right-context must be >= 0")
        return splice(x, v["left_context"], v["right_context"])

    return _filter_program(argv, "Splice features with left and right context (Kaldi splice-feats)\n"
                           "Usage: pynnet-splice-feats [options] <feature-rspecifier> <feature-wspecifier>",
                           reg, tr)


@cli
def copy_feats(argv: list[str] | None = None) -> int:
    return _filter_program(argv, "Copy features, e.g. to compress them (Kaldi copy-feats)\n"
                           "Usage: pynnet-copy-feats [options] <feature-rspecifier> <feature-wspecifier>",
                           lambda p: None, lambda v, x: x)


@cli
def feat_to_dim(argv: list[str] | None = None) -> int:
    from pynnet.feat.tables import read_matrices

    p = KaldiOptions("Print the feature dimension (Kaldi feat-to-dim)\n"
                     "Usage: pynnet-feat-to-dim [options] <feat-rspecifier> [<dim-wxfilename>]")
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        p.usage_error()
    for _, x in read_matrices(args[0]):
        dim = np.asarray(x).shape[1]
        break
    else:
        fail("no features", args[0])
    if len(args) == 2 and args[1] != "-":
        from pynnet.io.atomic import atomic_write
        with atomic_write(args[1]) as f:
            f.write(f"{dim}\n")
    else:
        print(dim)
    return 0


@cli
def matrix_sum_rows(argv: list[str] | None = None) -> int:
    from pynnet.feat.tables import read_matrices
    from pynnet.io.atomic import atomic_write

    p = KaldiOptions("Sum the rows of every matrix of a table into one vector, written as a Kaldi text vector\n"
                     "(Kaldi's matrix-sum-rows | vector-sum; steps/nnet/make_priors.sh sums the DNN's posteriors)\n"
                     "Usage: pynnet-matrix-sum-rows [options] <matrix-rspecifier> <vector-wxfilename>\n"
                     "e.g.:  pynnet-nnet-forward final.nnet scp:feats.scp ark:- | pynnet-matrix-sum-rows ark:- prior_counts")
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        p.usage_error()
    total: np.ndarray | None = None
    n = 0
    for utt, x in read_matrices(args[0]):
        x = np.asarray(x, dtype=np.float64)
        if total is None:
            total = np.zeros(x.shape[1])
        elif x.shape[1] != total.size:
            fail(f"utterance '{utt}' has {x.shape[1]} columns, the ones before {total.size}", args[0])
        total += x.sum(0)
        n += 1
    if total is None:
        fail("no matrices", args[0])
    text = "[ " + " ".join(f"{c:.9g}" for c in total) + " ]\n"
    if args[1] == "-":
        sys.stdout.write(text)
    else:
        with atomic_write(args[1]) as f:
            f.write(text)
    _log(f"summed the rows of {n} matrices into a vector of dimension {total.size}")
    return 0


@cli
def feat_to_len(argv: list[str] | None = None) -> int:
    from pynnet.feat.tables import read_matrices

    p = KaldiOptions("Print the number of frames of each utterance, or the total (Kaldi feat-to-len)\n"
                     "Usage: pynnet-feat-to-len [options] <in-rspecifier> [<out-wspecifier>]\n"
                     "e.g.:  pynnet-feat-to-len scp:feats.scp ark,t:-   (one argument: print the total)")
    v, args = p.parse(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        p.usage_error()
    lens = [(utt, str(np.asarray(x).shape[0])) for utt, x in read_matrices(args[0])]
    if len(args) == 1:
        print(sum(int(n) for _, n in lens))
    else:
        _write_text_table(args[1], lens)
    return 0
