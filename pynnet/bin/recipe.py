"""Programs the recipes use to size their systems and to report them.

pynnet-recipe-sizes [--max-jobs N] [--num-phones N] --hours H --speakers N
  Model sizes scaled to the training data (pynnet/corpora/sizes.py), as ``name=value`` lines for
  a recipe to eval: mono_gauss tri1_leaves tri1_gauss tri2_leaves tri2_gauss tri3_leaves tri3_gauss
  tri4_leaves tri4_gauss dnn_depth dnn_hid_dim rbm_iter nj.

pynnet-results [--dev NAME] [--data DIR] [--header FILE] --test NAME --system NAME=EXP[:PARENT] ...
  exp/RESULTS on stdout: systems in the order given (training order), <test> scored at <dev>'s
  best LM weight and penalty beside both sets' own best, per-speaker %WER (with --data, the test
  data dir), and a WARNING (also on stderr) for each system worse than its parent.
"""
from __future__ import annotations

import sys

from pynnet.bin._cli import cli
from pynnet.bin._opts import float_opt, int_opt, parser
from pynnet.corpora.sizes import recipe_sizes
from pynnet.io.errors import fail
from pynnet.score.results import parse_system, results_text


@cli
def recipe_sizes_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-recipe-sizes", "Model sizes for a recipe, scaled to the hours of training data.")
    p.add_argument("--hours", type=float_opt, required=True, help="hours of training audio")
    p.add_argument("--speakers", type=int_opt, required=True, help="training speakers")
    p.add_argument("--max-jobs", type=int_opt, default=8, help="most parallel jobs [8]")
    p.add_argument("--num-phones", type=int_opt, default=40, help="non-silence phones [40]")
    a = p.parse_args(argv)
    sys.stdout.write(recipe_sizes(a.hours, a.speakers, a.max_jobs, a.num_phones).shell())
    return 0


@cli
def results_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-results", "A recipe's RESULTS: systems in training order, test at dev's choice.")
    p.add_argument("--test", required=True, help="test set name (decode dirs <exp>/decode_<test>)")
    p.add_argument("--dev", default="", help="dev set name: choose LM weight and penalty on it")
    p.add_argument("--data", default="", help="the test data dir (its utt2spk: per-speaker %%WER)")
    p.add_argument("--header", default="", help="a file whose text heads the output")
    p.add_argument("--system", action="append", default=[], metavar="NAME=EXP[:PARENT]",
                   help="a system, in training order; PARENT = the system it was built from")
    a = p.parse_args(argv)
    if not a.system:
        fail("no --system given")
    header = ""
    if a.header:
        with open(a.header, encoding="utf-8") as f:
            header = f.read()
    text, warnings = results_text([parse_system(s) for s in a.system], a.test, a.dev or None,
                                  a.data or None, header)
    sys.stdout.write(text)
    for w in warnings:
        print(f"WARNING (pynnet-results) {w}", file=sys.stderr)
    return 0
