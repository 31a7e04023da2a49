"""Programs that prepare a user's own corpus for egs/custom/run.sh.

pynnet-prepare-dict [--oov-word W] [--silence-phone P] <lexicon> <dict-dir>
  A Kaldi dict dir (lexicon.txt [lexiconp.txt], silence_phones.txt, nonsilence_phones.txt,
  optional_silence.txt, extra_questions.txt, oov.txt) from a plain lexicon.

pynnet-check-corpus [--lexicon FILE] [--oov-word W] [--max-pipes N] [--json FILE] <data-dir>...
  The common mistakes of a user's data dirs, one line each; on success a JSON summary on stdout.
"""
from __future__ import annotations

import json
import sys

from pynnet.bin._cli import cli, prog_name, run
from pynnet.bin._opts import int_opt, log, parser

_PREPARE_DICT_DOC = """\
Rules (pynnet/corpora/custom.py):
  lexicon      'word phone phone ...' lines, space or tab separated (blank lines skipped); if the
               second field of the first entry is a number, Kaldi's lexiconp form 'word prob phone ...'
               (every line then needs a probability in (0, 1]; lexiconp.txt is written too).
               Repeated entries are dropped; a word without phones, a reserved word (<eps> #0 <s> </s>),
               a phone '#...' or '<eps>' or ending in _B/_E/_I/_S, bytes that are not UTF-8: errors.
  non-speech   words in [..], <..> or !.. form, and the OOV word; the phones only they use are silence
               phones (one per line), with the optional silence.
  optional     the phone of the lexicon's one-phone !SIL/<sil>/[sil]/<silence> word, else --silence-phone,
  silence      else SIL (sil for lower-case phones), added as '!SIL SIL' when the lexicon has no !SIL.
  OOV word     --oov-word (added with SPN/spn if the lexicon lacks it), else the lexicon's own
               (<unk> <UNK> [unk] <oov> <unknown>, any case), else '<unk> SPN' added; written to
               oov.txt: utils/prepare_lang.sh <dict-dir> "$(cat <dict-dir>/oov.txt)" ...
  stress       nonsilence_phones.txt has one line per base phone with its digit-suffixed variants
               (AA AA0 AA1 AA2); extra_questions.txt the silence phones, then one line per stress
               class (no digit, 0, 1, 2 ...), as Kaldi's librispeech local/prepare_dict.sh.
The dict dir is validated (as utils/validate_dict_dir.pl) before it replaces <dict-dir> whole."""


@cli
def prepare_dict_main(argv: list[str] | None = None) -> int:
    from pynnet.corpora.custom import prepare_dict

    import argparse
    p = parser("pynnet-prepare-dict", "Write a Kaldi dict dir derived from a plain lexicon.",
               usage="pynnet-prepare-dict [--oov-word W] [--silence-phone P] <lexicon> <dict-dir>",
               epilog=_PREPARE_DICT_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oov-word", default=None, help="the word that stands for out-of-vocabulary words "
                   "[the lexicon's <unk>-like word, else <unk>]")
    p.add_argument("--silence-phone", default=None,
                   help="the optional silence phone [the lexicon's silence word's, else SIL or sil]")
    p.add_argument("lexicon")
    p.add_argument("dict_dir")
    a = p.parse_args(argv)
    plan = prepare_dict(a.lexicon, a.dict_dir, a.oov_word, a.silence_phone)
    nonsil = sum(len(line) for line in plan.nonsilence_lines)
    for note in plan.notes:
        log(f"{a.lexicon}: {note}")
    log(f"wrote {a.dict_dir}: {len(plan.entries)} entries, {nonsil} nonsilence phones on "
        f"{len(plan.nonsilence_lines)} lines, silence phones {' '.join(plan.silence_phones)} "
        f"(optional {plan.optional_silence}), {len(plan.extra_questions)} extra questions, OOV word {plan.oov_word}")
    return 0


_CHECK_DOC = """\
Checks, each problem one line naming the file (and line); any problem: exit 1, nothing written:
  utterance-ids that do not begin with their speaker-id; what utils/validate_data_dir.sh --no-feats
  refuses (spk2utt is not needed: it is derived from utt2spk, files may be unsorted, as
  utils/fix_data_dir.sh leaves the recipe's copy); empty transcripts; words of text missing from
  --lexicon (counts, most frequent first); audio files that do not exist or do not read;
  multi-channel audio with no channel chosen (use 'sox f.wav -t wav - remix 1 |' or
  'sph2pipe -f wav -p -c 1 f.sph |'); different sample rates (across all the dirs).
Plain files are checked from their headers. Pipes ('cmd |') are run: the first --max-pipes of each
dir (-1: all); the duration of the others comes from utt2dur, or is the mean of those read
(hours_estimated: true).
--oov-word W maps the words missing from the lexicon to W instead: <dir>/text is rewritten
(atomically, after all checks passed) and the original kept as <dir>/text.orig; run it on a copy
of the user's data dir (utils/copy_data_dir.sh).
On success the JSON summary on stdout (and in --json FILE):
  {"sample_rate": 8000,
   "dirs": {"<dir as given>": {"utterances", "speakers", "hours", "seconds", "hours_estimated",
                               "words", "oov_tokens", "oov_types", "pipes", "pipes_read"}, ...},
   "total": {"utterances", "speakers", "hours", "seconds"}}"""


@cli
def check_corpus_main(argv: list[str] | None = None) -> int:
    import argparse

    from pynnet.corpora.custom import DEFAULT_MAX_PIPES, check_corpus, write_mapped_text
    from pynnet.io.atomic import atomic_write

    p = parser("pynnet-check-corpus", "Check a user's Kaldi data dirs for the common mistakes before any work.",
               usage="pynnet-check-corpus [--lexicon FILE] [--oov-word W] [--max-pipes N] [--json FILE] "
                     "<data-dir> [<data-dir> ...]",
               epilog=_CHECK_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lexicon", default=None, help="lexicon (word [prob] phones...) the text must be covered by")
    p.add_argument("--oov-word", default=None, help="map words missing from --lexicon to this word "
                   "(rewrites <dir>/text, keeping text.orig)")
    p.add_argument("--max-pipes", type=int_opt, default=DEFAULT_MAX_PIPES,
                   help=f"pipes run per dir to read their rate and channels; -1: all [{DEFAULT_MAX_PIPES}]")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the JSON summary here")
    p.add_argument("data_dirs", nargs="+")
    a = p.parse_args(argv)
    if a.oov_word is not None and a.lexicon is None:
        from pynnet.io.errors import fail
        fail("--oov-word needs --lexicon (the words it maps are those missing from it)")
    res = check_corpus(a.data_dirs, a.lexicon, a.oov_word, a.max_pipes)
    for w in res.warnings:
        print(f"WARNING ({prog_name()}): {w}", file=sys.stderr)
    if res.problems:
        for msg in res.problems:
            print(f"ERROR ({prog_name()}): {msg}", file=sys.stderr)
        return 1
    for d in res.dirs:
        if d.pipes > d.pipes_read:
            log(f"{d.path}: read {d.pipes_read} of {d.pipes} pipes (--max-pipes {a.max_pipes})"
                + ("; the other durations estimated" if d.hours_estimated else ""))
    for path, rows in res.mapped_text.items():
        write_mapped_text(path, rows)
        d = next(x for x in res.dirs if x.path == path)
        log(f"{path}/text: mapped {d.oov_tokens} token(s) of {d.oov_types} word(s) missing from {a.lexicon} "
            f"to {a.oov_word} (the original in {path}/text.orig)")
    summary = res.summary()
    for d in res.dirs:
        log(f"{d.path}: {d.utterances} utterances, {d.speakers} speakers, {d.seconds / 3600:.2f} h")
    log(f"sample rate {res.sample_rate} Hz; {summary['total']['utterances']} utterances, "
        f"{summary['total']['speakers']} speakers, {summary['total']['hours']:.2f} h in all")
    text = json.dumps(summary, indent=1)
    if a.json:
        with atomic_write(a.json) as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    run(check_corpus_main)
