#!/usr/bin/env python3
# Kaldi's utils/apply_map.pl in Python (named .pl so that Kaldi recipes keep working):
#   utils/apply_map.pl [-f <field-range>] [--permissive] <map> < input > output
# Each line of <map> maps its first field to the rest of the line (any number of fields, even
# none; a key listed twice maps as its last line says).  Every whitespace-separated field of the
# input in <field-range> (3, 2-4, 2-, -3 or 2:4; default all) is replaced by what it maps to, and
# the fields are printed joined by single spaces, as Kaldi's perl does.  A field not in the map is
# an error, or with --permissive is left as it is (with a warning per field, as Kaldi's).
# On an error nothing is printed.  Standard library only (bytes in, bytes out).
import os
import re
import sys

PROG = "apply_map.pl"
USAGE = """Usage: apply_map.pl [options] map <input >output
 options: [-f <field-range> ] [--permissive]
   Applies the map <map> to the fields of the input in <field-range> (e.g. 4-5, 4-, -5, 1;
   default all): each line of <map> maps its first field to the sequence of its other fields.
   --permissive: fields not in the map are left as they were (else they are an error).
 e.g.: echo A B | apply_map.pl a.txt     where a.txt is "A a1 a2" and "B b": prints "a1 a2 b"
"""


class UserError(Exception):
    pass


def parse_range(spec):
    """0-based (begin, end) of a field range, either end None for open; Kaldi's forms 3, 2-4,
    2-, -3 and 2:4."""
    m = re.fullmatch(r"(\d+)", spec) or re.fullmatch(r"(\d*)[-:](\d*)", spec)
    if m is None or not any(m.groups()) or any(g and int(g) == 0 for g in m.groups()):
        raise UserError(f"bad argument to -f option: '{spec}' (fields count from 1: e.g. 3, 2-4, 2-, -3)")
    groups = m.groups() * 2 if len(m.groups()) == 1 else m.groups()
    begin, end = (int(g) - 1 if g else None for g in groups)
    return begin, end


def read_map(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UserError(f"cannot open map file {path}: {e.strerror}")
    table = {}
    lines = data.split(b"\n")  # lines end at \n only, as perl's
    if lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            raise UserError(f"{path}:{n}: empty line")
        table[fields[0]] = b" ".join(fields[1:])
    return table


def main(argv):
    args = list(argv)
    begin = end = None
    permissive = False
    for _ in range(3):  # as Kaldi's: -f and --permissive in either order
        if args and args[0] == "-f":
            args.pop(0)
            if not args:
                raise UserError("-f needs a field range")
            begin, end = parse_range(args.pop(0))
        if args and args[0] == "--permissive":
            args.pop(0)
            permissive = True
    if args and args[0] in ("-h", "--help"):
        sys.stderr.write(USAGE)
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("Invalid usage: " + " ".join(args) + "\n" + USAGE)
        return 1
    map_file = args[0]
    table = read_map(map_file)
    out = []
    warnings = []
    for n, line in enumerate(sys.stdin.buffer, 1):
        fields = line.split()
        for i, key in enumerate(fields):
            if (begin is None or i >= begin) and (end is None or i <= end):
                value = table.get(key)
                if value is not None:
                    fields[i] = value
                elif permissive:
                    warnings.append(f"{PROG}: warning! missing key {key.decode(errors='replace')} in {map_file}\n")
                else:
                    raise UserError(f"undefined key {key.decode(errors='replace')} in {map_file} "
                                    f"(standard input, line {n})")
        out.append(b" ".join(fields) + b"\n")
    sys.stderr.writelines(warnings)
    sys.stdout.buffer.writelines(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as e:
        sys.stderr.write(f"{PROG}: {e}\n")
        sys.exit(1)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
