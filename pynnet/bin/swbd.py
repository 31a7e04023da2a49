"""Switchboard-1 and Hub5 eval2000 data preparation (egs/swbd/local/*.sh call these).

pynnet-swbd-prepare-dict [--transcripts DIR] <LDC97S62-dir> <dict-dir>
pynnet-swbd-data-prep [--transcripts DIR] [--sph2pipe PROG] <LDC97S62-dir> <dict-dir> <local-dir> <data-dir>
pynnet-eval2000-data-prep [--sph2pipe PROG] <LDC2002S09/hub5e_00> <LDC2002T43> <local-dir> <data-dir>
python -m pynnet.bin.swbd fisher-map-words < fisher-text > mapped-text
"""
from __future__ import annotations

import sys
import warnings

from pynnet.bin._cli import cli, prog_name, run
from pynnet.bin._opts import log, parser


def _warnings_as_lines() -> None:
    """Warnings (counts that differ from the full release, overlapping segments) as Kaldi's
    ``WARNING (prog): ...`` lines."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"WARNING ({prog_name()}): {message}", file=sys.stderr)
    warnings.showwarning = show


_TRANSCRIPTS_HELP = ("the swb_ms98_transcriptions dir (default: <LDC97S62-dir>/transcriptions/"
                     "swb_ms98_transcriptions; else from openslr.org resource 5, "
                     "switchboard_word_alignments.tar.gz)")
_SPH2PIPE_HELP = ("the sph2pipe program written into wav.scp [sph2pipe]; when it is not "
                  "installed, pynnet reads these lines itself")


@cli
def prepare_dict_main(argv: list[str] | None = None) -> int:
    from pynnet.corpora import swbd

    p = parser("pynnet-swbd-prepare-dict",
               "Switchboard dictionary (Kaldi's local/swbd1_prepare_dict.sh): sw-ms98-dict.text -> "
               "<dict-dir>/{lexicon.txt,silence_phones.txt,nonsilence_phones.txt,optional_silence.txt,"
               "extra_questions.txt,acronyms.map}.",
               usage="pynnet-swbd-prepare-dict [--transcripts DIR] <LDC97S62-dir> <dict-dir>")
    p.add_argument("swbd_dir")
    p.add_argument("dict_dir")
    p.add_argument("--transcripts", default="", help=_TRANSCRIPTS_HELP)
    a = p.parse_args(argv)
    _warnings_as_lines()
    res = swbd.prepare_dict(a.swbd_dir, a.dict_dir, a.transcripts or None)
    log(f"{a.dict_dir}: {len(res.lexicon)} lexicon entries, {len(res.nonsilence)} non-silence "
        f"phones, {len(res.acronyms)} acronym mappings")
    return 0


@cli
def data_prep_main(argv: list[str] | None = None) -> int:
    from pynnet.corpora import swbd

    p = parser("pynnet-swbd-data-prep",
               "Switchboard-1 training data (Kaldi's local/swbd1_data_prep.sh): the *.sph files and "
               "ms98 transcripts -> {wav.scp,segments,text,utt2spk,spk2utt,reco2file_and_channel} "
               "in <local-dir> and <data-dir>. Needs <dict-dir>/acronyms.map.",
               usage="pynnet-swbd-data-prep [--transcripts DIR] [--sph2pipe PROG] <LDC97S62-dir> "
                     "<dict-dir> <local-dir> <data-dir>")
    p.add_argument("swbd_dir")
    p.add_argument("dict_dir")
    p.add_argument("local_dir")
    p.add_argument("data_dir")
    p.add_argument("--transcripts", default="", help=_TRANSCRIPTS_HELP)
    p.add_argument("--sph2pipe", default="sph2pipe", help=_SPH2PIPE_HELP)
    a = p.parse_args(argv)
    _warnings_as_lines()
    res = swbd.data_prep(a.swbd_dir, a.dict_dir, a.local_dir, a.data_dir, a.transcripts or None,
                         a.sph2pipe)
    log(f"{a.data_dir}: {res.sph_count} sph files, {len(res.wav_scp)} conversation sides, "
        f"{len(res.text)} utterances")
    return 0


@cli
def eval2000_data_prep_main(argv: list[str] | None = None) -> int:
    from pynnet.corpora import swbd

    p = parser("pynnet-eval2000-data-prep",
               "Hub5 eval2000 (Kaldi's local/eval2000_data_prep.sh): LDC2002S09's sph files and pem, "
               "LDC2002T43's stm and glm -> {wav.scp,segments,text,utt2spk,spk2utt,"
               "reco2file_and_channel,stm,glm} in <local-dir> and <data-dir>.",
               usage="pynnet-eval2000-data-prep [--sph2pipe PROG] <LDC2002S09/hub5e_00> <LDC2002T43> "
                     "<local-dir> <data-dir>")
    p.add_argument("speech_dir")
    p.add_argument("text_dir")
    p.add_argument("local_dir")
    p.add_argument("data_dir")
    p.add_argument("--sph2pipe", default="sph2pipe", help=_SPH2PIPE_HELP)
    a = p.parse_args(argv)
    _warnings_as_lines()
    res = swbd.eval2000_prep(a.speech_dir, a.text_dir, a.local_dir, a.data_dir, a.sph2pipe)
    log(f"{a.data_dir}: {len(res.wav_scp)} conversation sides, {len(res.segments)} segments, "
        f"{len(res.text)} scored")
    return 0


@cli
def fisher_map_words_main(argv: list[str] | None = None) -> int:
    from pynnet.corpora import swbd

    p = parser("fisher-map-words", "Fisher transcript lines (stdin) in Switchboard's conventions "
               "(stdout), as Kaldi's local/fisher_map_words.pl.")
    p.parse_args(argv)
    for line in sys.stdin:
        out = swbd.fisher_map_words(line.rstrip("\n"))
        if out is not None:
            sys.stdout.write(out + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "fisher-map-words":
        run(lambda _argv: fisher_map_words_main(sys.argv[2:]))
    sys.exit("usage: python -m pynnet.bin.swbd fisher-map-words < in > out")
