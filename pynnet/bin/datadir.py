"""Data-directory programs behind utils/*data*.sh, split_scp.pl, filter_scp.pl, filter_scps.pl,
subset_scp.pl and the utt2spk/spk2utt converters (Kaldi argument conventions)."""
from __future__ import annotations

import os
import sys

from pynnet.bin._cli import cli
from pynnet.bin._opts import ascii_int, float_opt, int_opt, parser, usage_error
from pynnet.io import datadir as D
from pynnet.io.atomic import atomic_write
from pynnet.io.errors import fail
from pynnet.io.progress import progress_kwargs
from pynnet.io.tables import read_table_lines, read_text_lines, split_fields, split_key


def _say(prog: str, msgs: list[str], warn: bool = False) -> None:
    for m in msgs:
        print(f"{'WARNING' if warn else 'LOG'} ({prog}): {m}", file=sys.stderr)


@cli
def validate_main(argv: list[str] | None = None) -> int:
    p = parser("validate_data_dir.sh", "Check a Kaldi data dir (utils/validate_data_dir.sh).")
    p.add_argument("--no-feats", action="store_true", help="feats.scp need not exist (checked if it does)")
    p.add_argument("--no-text", action="store_true", help="text need not exist (checked if it does)")
    p.add_argument("--no-wav", action="store_true", help="wav.scp need not exist (checked if it does)")
    p.add_argument("--no-spk-sort", action="store_true",
                   help="do not require utt2spk to be sorted by speaker-id as well as by utterance-id")
    p.add_argument("--non-print", action="store_true", help="allow non-printable characters in text")
    p.add_argument("data")
    a = p.parse_args(argv)
    warnings = D.validate_data_dir(a.data, no_feats=a.no_feats, no_text=a.no_text, no_wav=a.no_wav,
                                   no_spk_sort=a.no_spk_sort, non_print=a.non_print)
    _say("validate_data_dir.sh", warnings, warn=True)
    print(f"validate_data_dir.sh: Successfully validated data-directory {a.data}", file=sys.stderr)
    return 0


@cli
def subset_tr_cv_main(argv: list[str] | None = None) -> int:
    p = parser("subset_data_tr_cv.sh", "Split a data dir by speaker into training and CV sets for "
               "nnet1-style training (Kaldi's utils/nnet/subset_data_tr_cv.sh).")
    p.add_argument("--cv-spk-percent", type=float_opt, default=10.0, help="speakers held out (default 10)")
    p.add_argument("--cv-spk-list", default="", help="the held-out speakers (instead of a random choice)")
    p.add_argument("--seed", type=int_opt, default=777, help="shuffle_list.pl's --srand (default 777)")
    p.add_argument("--cv-utt-percent", default="", help="ignored (Kaldi's compatibility option)")
    p.add_argument("src")
    p.add_argument("train")
    p.add_argument("cv")
    a = p.parse_args(argv)
    if not 0.0 < a.cv_spk_percent < 100.0:
        fail(f"--cv-spk-percent must be in (0, 100), not {a.cv_spk_percent:g}")
    for dest in (a.train, a.cv):
        if os.path.abspath(a.src) == os.path.abspath(dest):
            fail("source and destination are the same directory", dest)
    if os.path.abspath(a.train) == os.path.abspath(a.cv):
        fail("the training and CV destinations are the same directory", a.cv)
    dd = D.load_data_dir(a.src, strict=True, prog="subset_data_tr_cv.sh")
    trn, cv = D.split_tr_cv(dd, a.cv_spk_percent, a.seed, a.cv_spk_list or None)
    D.write_data_dir(trn, a.train)
    D.write_data_dir(cv, a.cv)
    print(f"Speakers, src={len(dd.spk2utt)}, trn={len(trn.spk2utt)}, cv={len(cv.spk2utt)}")
    return 0


@cli
def fix_main(argv: list[str] | None = None) -> int:
    p = parser("fix_data_dir.sh",
               "Keep the utterances common to all files, drop orphans, sort; backs up to <data>/.backup.")
    p.add_argument("--utt-extra-files", default="", help="more files keyed by utterance to filter (space-separated)")
    p.add_argument("--spk-extra-files", default="", help="more files keyed by speaker to filter (space-separated)")
    p.add_argument("data")
    a = p.parse_args(argv)
    _say("fix_data_dir.sh", D.fix_data_dir(a.data, a.utt_extra_files.split(), a.spk_extra_files.split()))
    return 0


def _positive_int(s: str, what: str) -> int:
    n = ascii_int(s)
    if n is None or n <= 0:
        fail(f"{what} must be a positive integer, got '{s}'")
    return n


SUBSET_USAGE = ("subset_data_dir.sh [--first|--last|--shortest|--random|--speakers|--per-spk] [--seed S] "
                "<srcdir> <num> <destdir>\n"
                "   or: subset_data_dir.sh --utt-list <list> <srcdir> <destdir>   (also: --utt-list <srcdir> <list> <destdir>)\n"
                "   or: subset_data_dir.sh --spk-list <list> <srcdir> <destdir>\n"
                "Without a mode flag, <num> utterances are taken evenly spaced through the data (as Kaldi does).")


@cli
def subset_main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    mode, seed, list_file = "evenly", 0, None
    flags = {"--first": "first", "--last": "last", "--shortest": "shortest", "--random": "random_n",
             "--speakers": "speakers", "--per-spk": "per_spk"}
    pos: list[str] = []
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print("usage: " + SUBSET_USAGE, file=sys.stderr)
            return 0
        if a in flags:
            mode = flags[a]
        elif a in ("--utt-list", "--spk-list"):
            if not args:
                usage_error(f"{a} needs a file", SUBSET_USAGE)
            mode = a[2:].replace("-", "_")
            list_file = args.pop(0)
        elif a == "--seed":
            seed = ascii_int(args.pop(0)) if args else None
            if seed is None:
                fail("--seed needs an integer")
        elif a.startswith("--"):
            usage_error(f"unknown option {a}", SUBSET_USAGE)
        else:
            pos.append(a)
    if mode in ("utt_list", "spk_list"):
        # Kaldi form: --utt-list LIST src dest.  The brief's form: --utt-list src LIST dest.
        if len(pos) == 2 and os.path.isdir(list_file) and not os.path.isdir(pos[0]):
            list_file, pos = pos[0], [list_file, pos[1]]
        if len(pos) != 2:
            usage_error(f"expected <srcdir> <destdir> after --{mode.replace('_', '-')} <list>", SUBSET_USAGE)
        src, dest = pos
        dd = D.load_data_dir(src, strict=True, prog="subset_data_dir.sh")
        out = D.subset(dd, **{mode: list_file})
    else:
        if len(pos) != 3:
            usage_error(f"expected <srcdir> <num> <destdir>, got {len(pos)} arguments", SUBSET_USAGE)
        src, num, dest = pos
        n = _positive_int(num, "<num>")
        dd = D.load_data_dir(src, strict=True, prog="subset_data_dir.sh")
        out = D.subset(dd, seed=seed, **{mode: n})
    if os.path.abspath(src) == os.path.abspath(dest):
        fail("source and destination are the same directory", dest)
    D.write_data_dir(out, dest)
    print(f"subset_data_dir.sh: created subset of {src} in {dest} ({len(out.utt2spk)} utterances, "
          f"{len(out.speakers)} speakers)", file=sys.stderr)
    return 0


@cli
def split_data_main(argv: list[str] | None = None) -> int:
    p = parser("split_data.sh", "Split a data dir by speaker into <data>/split<N>/<1..N>.")
    p.add_argument("--per-utt", action="store_true", help="split by utterance into <data>/split<N>utt/ "
                                                          "(a speaker may be in several parts)")
    p.add_argument("data")
    p.add_argument("num_to_split")
    a = p.parse_args(argv)
    D.split_data_dir(a.data, _positive_int(a.num_to_split, "<num-to-split>"), per_utt=a.per_utt)
    return 0


@cli
def combine_main(argv: list[str] | None = None) -> int:
    p = parser("combine_data.sh", "Combine data dirs into one (utils/combine_data.sh).")
    p.add_argument("--skip-fix", default="false", choices=["true", "false"],
                   help="do not run fix_data_dir on the result")
    p.add_argument("--extra-files", default="", help="more files keyed by utterance to combine (space-separated)")
    p.add_argument("dest")
    p.add_argument("src", nargs="+")
    a = p.parse_args(argv)
    for s in a.src:
        if os.path.abspath(s) == os.path.abspath(a.dest):
            fail("destination is also a source", a.dest)
    extra = {n: D.UTT for n in a.extra_files.split()}
    dirs = [D.load_data_dir(s, strict=True, prog="combine_data.sh", extra=extra) for s in a.src]
    out, notes = D.combine(dirs, a.dest)
    _say("combine_data.sh", notes, warn=True)
    if a.skip_fix == "false":
        out, fix_notes = D.fix(out)
        _say("combine_data.sh", fix_notes)
    D.write_data_dir(out, a.dest)
    print(f"combine_data.sh: combined {len(a.src)} data dirs into {a.dest} ({len(out.utt2spk)} utterances)",
          file=sys.stderr)
    return 0


@cli
def copy_main(argv: list[str] | None = None) -> int:
    p = parser("copy_data_dir.sh", "Copy a data dir, optionally renaming utterances/speakers.")
    for o in ("--utt-prefix", "--utt-suffix", "--spk-prefix", "--spk-suffix"):
        p.add_argument(o, default="")
    p.add_argument("--validate-opts", default="--no-feats --no-text")
    p.add_argument("src")
    p.add_argument("dest")
    a = p.parse_args(argv)
    if os.path.abspath(a.src) == os.path.abspath(a.dest):
        fail("source and destination are the same directory", a.dest)
    dd = D.load_data_dir(a.src, strict=True, prog="copy_data_dir.sh")
    out = D.copy_with_prefix(dd, a.dest, a.utt_prefix, a.utt_suffix, a.spk_prefix, a.spk_suffix)
    D.write_data_dir(out, a.dest)
    vopts = {o: True for o in ("no_feats", "no_text", "no_wav", "no_spk_sort", "non_print")
             if f"--{o.replace('_', '-')}" in a.validate_opts.split()}
    _say("copy_data_dir.sh", D.validate_data_dir(a.dest, **vopts), warn=True)
    print(f"copy_data_dir.sh: copied data from {a.src} to {a.dest}", file=sys.stderr)
    return 0


def _open_out(path: str | None):
    return atomic_write(path) if path and path != "-" else _Stdout()


class _Stdout:
    def __enter__(self):
        return sys.stdout

    def __exit__(self, *exc):
        sys.stdout.flush()
        return False


def _input_path(path: str | None) -> str:
    return "/dev/stdin" if path in (None, "-") else path


@cli
def utt2spk_to_spk2utt_main(argv: list[str] | None = None) -> int:
    p = parser("utt2spk_to_spk2utt.pl", "utt2spk (file or stdin) -> spk2utt on stdout.")
    p.add_argument("utt2spk", nargs="?")
    a = p.parse_args(argv)
    src = _input_path(a.utt2spk)
    pairs = [(k, v) for _, k, v in read_table_lines(src, min_fields=2, max_fields=2, allow_empty=True)]
    for spk, utts in D.utt2spk_to_spk2utt(pairs):
        sys.stdout.write(f"{spk} {' '.join(utts)}\n")
    return 0


@cli
def spk2utt_to_utt2spk_main(argv: list[str] | None = None) -> int:
    p = parser("spk2utt_to_utt2spk.pl", "spk2utt (file or stdin) -> utt2spk on stdout.")
    p.add_argument("spk2utt", nargs="?")
    a = p.parse_args(argv)
    src = _input_path(a.spk2utt)
    pairs = [(k, v) for _, k, v in read_table_lines(src, min_fields=2, allow_empty=True)]
    for utt, spk in D.spk2utt_to_utt2spk(pairs):
        sys.stdout.write(f"{utt} {spk}\n")
    return 0


def _raw_lines(path: str) -> list[tuple[int, str, str]]:
    """(line number, first field, raw line) of a file, blank lines being errors."""
    if not os.path.exists(path):
        fail("no such file", path)
    out = []
    for n, line in read_text_lines(path):
        key = split_key(line)[0]
        if not key:
            fail("empty line", path, n)
        out.append((n, key, line))
    return out


SPLIT_SCP_USAGE = ("split_scp.pl [--utt2spk=<utt2spk>] <in.scp> <out1.scp> ... <outN.scp>\n"
                   "   or: split_scp.pl -j <num-jobs> <job-id> [--one-based] [--utt2spk=<utt2spk>] <in.scp> [<out.scp>]\n"
                   " (job-id counts from 0, or from 1 with --one-based; without <out.scp> the part goes to stdout)")


@cli
def split_scp_main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    num_jobs = job_id = None
    one_based = False
    utt2spk_file = None
    pos: list[str] = []
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print("usage: " + SPLIT_SCP_USAGE, file=sys.stderr)
            return 0
        if a == "-j":
            nums = [ascii_int(x) for x in args[:2]]
            if len(nums) < 2 or None in nums or min(nums) < 0:
                usage_error("-j needs <num-jobs> <job-id>", SPLIT_SCP_USAGE)
            num_jobs, job_id = nums
            del args[:2]
        elif a == "--one-based":
            one_based = True
        elif a.startswith("--utt2spk="):
            utt2spk_file = a.split("=", 1)[1]
        elif a == "--utt2spk":
            if not args:
                fail("--utt2spk needs a file")
            utt2spk_file = args.pop(0)
        elif a.startswith("-") and a != "-":
            usage_error(f"unknown option {a}", SPLIT_SCP_USAGE)
        else:
            pos.append(a)
    if not pos:
        usage_error("no input scp", SPLIT_SCP_USAGE)
    in_scp, outs = pos[0], pos[1:]
    if num_jobs is not None:
        if num_jobs <= 0:
            fail(f"-j: number of jobs must be positive, got {num_jobs}")
        k = job_id - 1 if one_based else job_id
        if not 0 <= k < num_jobs:
            fail(f"-j: job-id {job_id} out of range for {num_jobs} jobs{' (--one-based)' if one_based else ''}")
        if len(outs) > 1:
            usage_error("with -j give at most one output file", SPLIT_SCP_USAGE)
        n = num_jobs
    else:
        if not outs:
            usage_error("no output files", SPLIT_SCP_USAGE)
        n = len(outs)
    lines = _raw_lines(_input_path(in_scp))
    if not lines:
        fail("file is empty", in_scp)
    utt2spk = None
    if utt2spk_file:
        utt2spk = {k: v for _, k, v in read_table_lines(utt2spk_file, min_fields=2, max_fields=2)}
    parts = D.split_scp_lines([k for _, k, _ in lines], n, utt2spk,
                              where=lambda i: (in_scp, lines[i][0]))
    if num_jobs is not None:
        with _open_out(outs[0] if outs else None) as f:
            for i in parts[k]:
                f.write(lines[i][2] + "\n")
    else:
        for out, idx in zip(outs, parts):
            with _open_out(out) as f:
                for i in idx:
                    f.write(lines[i][2] + "\n")
    return 0


FILTER_USAGE = "filter_scp.pl [--exclude] [-f <field>] <id-list> [<in.scp>] > <out.scp>"


@cli
def filter_scp_main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    exclude = False
    field = 1
    pos: list[str] = []
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            print("usage: " + FILTER_USAGE + "\nPrints the lines of <in.scp> whose <field>-th field (default 1) "
                  "is (with --exclude: is not) the first field of a line of <id-list>.", file=sys.stderr)
            return 0
        if a == "--exclude":
            exclude = True
        elif a == "-f" or a.startswith("--field"):
            v = a.split("=", 1)[1] if "=" in a else (args.pop(0) if args else "")
            field = ascii_int(v) or 0
            if field == 0:
                fail(f"-f needs a field number (1-based, negative counts from the end), got '{v}'")
        elif a.startswith("-") and a != "-":
            usage_error(f"unknown option {a}", FILTER_USAGE)
        else:
            pos.append(a)
    if len(pos) not in (1, 2):
        usage_error("expected <id-list> [<in.scp>]", FILTER_USAGE)
    ids = {k for _, k, _ in _raw_lines(_input_path(pos[0]))}
    src = _input_path(pos[1] if len(pos) == 2 else None)
    if src == "/dev/stdin" and pos[0] in ("-",):
        fail("id-list and input cannot both be stdin")
    out = sys.stdout
    for n, _, line in _raw_lines(src):
        fields = split_fields(line)
        if abs(field) > len(fields) or (field > 0 and field > len(fields)):
            fail(f"line has {len(fields)} fields, cannot select field {field}", pos[1] if len(pos) == 2 else "<stdin>", n)
        key = fields[field - 1] if field > 0 else fields[field]
        if (key in ids) != exclude:
            out.write(line + "\n")
    return 0


SUBSET_USAGE = ("subset_scp.pl [--quiet] [--first|--last] <N> <in.scp> > <out.scp>\n"
                " picks N lines spread evenly through the file (Kaldi's choice), or the first/last N;\n"
                " --quiet: asking for more lines than there are gives them all instead of an error")


@cli
def subset_scp_main(argv: list[str] | None = None) -> int:
    """Kaldi's utils/subset_scp.pl: the same lines in the same order."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print("usage: " + SUBSET_USAGE, file=sys.stderr)
        return 0
    quiet = first = last = False
    # (Kaldi's takes its options in this order only)
    for flag in ("--quiet", "--first", "--last"):
        if args[:1] == [flag]:
            args.pop(0)
            quiet, first, last = quiet or flag == "--quiet", first or flag == "--first", last or flag == "--last"
    if len(args) != 2 or (args[0].startswith("-") and ascii_int(args[0]) is None):
        usage_error("expected <N> <in.scp>" if len(args) != 2 else f"unknown option {args[0]}", SUBSET_USAGE)
    n = ascii_int(args[0])
    if n is None or n <= 0:
        fail(f"<N> must be a positive integer, got '{args[0]}'")
    path = _input_path(args[1])
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        fail("no such file", args[1])
    last_line = lines.pop()     # lines end at \n only, as perl's
    lines = [ln + b"\n" for ln in lines] + ([last_line] if last_line else [])
    if n > len(lines):
        if not quiet:
            fail(f"you requested more lines than there are: {n} > {len(lines)} (--quiet gives them all)", args[1])
        n = len(lines)
    picked = lines[:n] if first else lines[len(lines) - n:] if last else D.evenly_spaced(lines, n)
    sys.stdout.buffer.writelines(picked)
    sys.stdout.buffer.flush()
    return 0


FILTER_SCPS_USAGE = ("filter_scps.pl [-f <field>] [--no-warn] JOB=<a>:<b> <id-list-pattern> <in.scp> <out-pattern>\n"
                     " e.g. filter_scps.pl JOB=1:10 data/train/split10/JOB/spk2utt data/train/feats.scp "
                     "data/train/split10/JOB/feats.scp\n"
                     " writes, for each job, the lines of <in.scp> whose <field>-th field (default 1) is the first "
                     "field of a line of that job's id list")


@cli
def filter_scps_main(argv: list[str] | None = None) -> int:
    """Kaldi's utils/filter_scps.pl: filter_scp.pl over a range of jobs, reading <in.scp> once."""
    import re

    args = list(sys.argv[1:] if argv is None else argv)
    field, warn = 1, True
    while args and args[0] in ("-f", "--no-warn", "-h", "--help"):
        a = args.pop(0)
        if a in ("-h", "--help"):
            print("usage: " + FILTER_SCPS_USAGE, file=sys.stderr)
            return 0
        if a == "--no-warn":
            warn = False
        else:
            v = args.pop(0) if args else ""
            field = ascii_int(v) or 0
            if field <= 0:
                fail(f"-f needs a field number (1-based), got '{v}'")
    if len(args) != 4:
        usage_error("expected 4 arguments", FILTER_SCPS_USAGE)
    spec, id_pattern, in_scp, out_pattern = args
    m = re.fullmatch(r"([A-Za-z_]\w*)=(\d+):(\d+)", spec, re.ASCII)
    if not m:
        fail(f"bad job-range specifier '{spec}': expected e.g. JOB=1:10")
    name, start, end = m.group(1), int(m.group(2)), int(m.group(3))
    if start > end:
        fail(f"invalid job range {spec}")
    for what, pat in (("filter files", id_pattern), ("output files", out_pattern)):
        if name not in pat and end > start:
            fail(f"{end - start + 1} jobs but one of the {what}: '{pat}' does not contain {name}")
    id2jobs: dict[str, list[int]] = {}
    for job in range(start, end + 1):
        for _, key, _ in _raw_lines(id_pattern.replace(name, str(job))):
            id2jobs.setdefault(key, []).append(job)
    outputs: dict[int, list[str]] = {job: [] for job in range(start, end + 1)}
    uncovered = multiply = False
    src = _input_path(in_scp)
    for n, key, line in _raw_lines(src):
        if field != 1:
            fields = split_fields(line)
            if field > len(fields):
                fail(f"line has {len(fields)} fields, cannot select field {field}", in_scp, n)
            key = fields[field - 1]
        jobs = id2jobs.get(key)
        if jobs is None:
            uncovered = True
            continue
        multiply |= len(jobs) > 1
        for job in jobs:
            outputs[job].append(line + "\n")
    for job, lines in outputs.items():
        out = out_pattern.replace(name, str(job))
        with _open_out(out) as f:
            f.writelines(lines)
        if not lines and warn:
            print(f"filter_scps.pl: warning: output to {out} is empty", file=sys.stderr)
    if uncovered and warn:
        print("filter_scps.pl: warning: some input lines did not get output", file=sys.stderr)
    if multiply and warn:
        print("filter_scps.pl: warning: some input lines were output to multiple files "
              "[OK if splitting per utt]", file=sys.stderr)
    return 0


def _strip_spec(spec: str, prefixes: tuple[str, ...]) -> str:
    """'scp:foo.scp' / 'ark,t:foo' -> 'foo' (Kaldi r/wspecifiers; bare paths pass through)."""
    head, colon, tail = spec.partition(":")
    if colon and (head in prefixes or set(head.split(",")) <= {"ark", "scp", "t", "p", "o", "s", "cs", "f", "nf"}):
        return tail
    return spec


@cli
def wav_to_duration_main(argv: list[str] | None = None) -> int:
    p = parser("wav-to-duration",
               "Duration in seconds of each recording of a wav.scp (files, 'cmd |' pipes, ark:offset).")
    p.add_argument("--read-entire-file", default="true", choices=["true", "false"],
                   help="accepted for Kaldi compatibility: the audio is always read entirely")
    p.add_argument("wav_rspecifier", help="scp:wav.scp (or a wav.scp path)")
    p.add_argument("duration_wspecifier", help="ark,t:utt2dur (or a path, '-' for stdout)")
    a = p.parse_args(argv)
    from tqdm import tqdm

    from pynnet.io.audio import read_rxfilename
    scp = _strip_spec(a.wav_rspecifier, ("scp",))
    out = _strip_spec(a.duration_wspecifier, ("ark,t", "ark"))
    entries = list(read_table_lines(_input_path(scp), min_fields=2))
    lines = []
    for n, key, rx in tqdm(entries, desc="wav-to-duration", unit="rec", **progress_kwargs()):
        samples, rate = read_rxfilename(rx, f"{scp}:{n}")
        lines.append(f"{key} {samples.shape[0] / rate:.6g}\n")
    with _open_out(out) as f:
        f.writelines(lines)
    print(f"LOG (wav-to-duration): printed duration for {len(lines)} audio files.", file=sys.stderr)
    return 0


@cli
def remove_dup_utts_main(argv: list[str] | None = None) -> int:
    p = parser("remove_dup_utts.sh",
               "Copy a data dir keeping at most <max-count> utterances per distinct transcript.")
    p.add_argument("max_count")
    p.add_argument("src")
    p.add_argument("dest")
    a = p.parse_args(argv)
    n = _positive_int(a.max_count, "<max-count>")
    if os.path.abspath(a.src) == os.path.abspath(a.dest):
        fail("source and destination are the same directory", a.dest)
    dd = D.load_data_dir(a.src, strict=True, prog="remove_dup_utts.sh")
    out = D.remove_dup_utts(dd, n)
    D.write_data_dir(out, a.dest)
    print(f"remove_dup_utts.sh: reduced number of utterances from {len(dd.utt2spk)} to {len(out.utt2spk)}",
          file=sys.stderr)
    return 0
