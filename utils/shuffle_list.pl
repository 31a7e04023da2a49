#!/usr/bin/env python3
# Kaldi's utils/shuffle_list.pl in Python (named .pl so that Kaldi recipes keep working):
#   utils/shuffle_list.pl [--srand N] [input-file] > output
# Prints the lines of the file (or standard input) in the order Kaldi's perl prints them for the
# same seed (default 0): pynnet.io.datadir.perl_shuffle, perl's drand48 keys sorted as strings.
# A last line without a newline gets one (Kaldi's would run it into the next output line).
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from pynnet.io.datadir import perl_shuffle  # noqa: E402

PROG = "shuffle_list.pl"
USAGE = ("Usage: shuffle_list.pl [--srand N] [input file]  > output\n"
         "randomizes the order of lines of input (seed N, default 0: the order Kaldi's gives).\n")


def main(argv):
    args = list(argv)
    seed = 0
    if args[:1] in (["-h"], ["--help"]):
        sys.stderr.write(USAGE)
        return 0
    if args[:1] == ["--srand"]:
        if len(args) < 2 or not re.fullmatch(r"[0-9]+", args[1]):
            sys.stderr.write(f"{PROG}: bad argument to --srand option: \"{args[1] if len(args) > 1 else ''}\" "
                             f"(a non-negative integer)\n")
            return 1
        seed = int(args[1])
        del args[:2]
    if len(args) > 1 or (args and re.match(r"-.", args[0])):
        sys.stderr.write(USAGE)
        return 1
    if args and args[0] != "-":
        try:
            with open(args[0], "rb") as f:
                data = f.read()
        except OSError as e:
            sys.stderr.write(f"{PROG}: cannot open {args[0]}: {e.strerror}\n")
            return 1
    else:
        data = sys.stdin.buffer.read()
    lines = data.split(b"\n")  # lines end at \n only, as perl's
    last = lines.pop()
    lines = [ln + b"\n" for ln in lines]
    if last:
        lines.append(last + b"\n")
    sys.stdout.buffer.writelines(perl_shuffle(lines, seed))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
