#!/usr/bin/env bash
# CTM files (time-marked words) from a decode dir's lattices, for a range of LM weights (Kaldi's
# steps/get_ctm.sh): <decode-dir>/score_<LMWT>/<data-name>.ctm, lines
#   <utt> 1 <start> <dur> <word>          (seconds; relative to the utterance)
#   <file> <channel> <start> <dur> <word> (with --use-segments true and <data-dir>/segments:
#                                          relative to the recording, as utils/convert_ctm.pl)
# from the best path at each LM weight (lattice-1best --lm-scale=LMWT), word-aligned with
# <lang>/phones/word_boundary.int (lattice-align-words) and the model <decode-dir>/../final.mdl,
# by pynnet-lattice-to-ctm, one job per lat.JOB.gz for all the LM weights (logs
# <decode-dir>/scoring/log/get_ctm.JOB.log; Kaldi has one job per LM weight, get_ctm.LMWT.log).
# Each ctm is written whole or not at all; the ctms of the LM weights asked for are removed first.
# Not supported (one line, exit 1): lang dirs without position-dependent phones (Kaldi aligns
# those with align_lexicon.int), --decode-mbr true (no MBR in pynnet; not an option of Kaldi's
# get_ctm.sh either).  See also steps/get_ctm_fast.sh.

# begin configuration section.
cmd=run.pl
stage=0
frame_shift=0.01
min_lmwt=5
max_lmwt=20
use_segments=true # if we have a segments file, use it to convert the times to be relative to
                  # the recordings (with reco2file_and_channel).
print_silence=false
decode_mbr=false  # (refused when true)
# end configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir|graph-dir> <decode-dir>
 Options:
    --cmd (run.pl|queue.pl...)      # specify how to run the sub-processes.
    --stage (0|1|2)                 # start scoring script from part-way through.
    --use-segments (true|false)     # use segments and reco2file_and_channel files
                                    # to produce a ctm relative to the original audio
                                    # files, with channel information (typically needed
                                    # for NIST scoring).
    --frame-shift (default=0.01)    # specify this if your lattices have a frame-shift
                                    # not equal to 0.01 seconds
    --min-lmwt <int>                # minimum LM weight (default $min_lmwt)
    --max-lmwt <int>                # maximum LM weight (default $max_lmwt)
    --print-silence (true|false)    # also print silences, as <eps> (default $print_silence)
e.g.:
$0 data/train data/lang exp/tri4a/decode/
See also: steps/get_ctm_fast.sh"

echo "$0 $*"  # Print the command line for logging

[ -f ./path.sh ] && . ./path.sh
. utils/parse_options.sh || exit 1
. steps/libs/ctm.sh

if [ $# -ne 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi

data=$1
lang=$2 # Note: may be graph directory not lang directory, but has the necessary stuff copied.
dir=$3

model=$dir/../final.mdl # assume model one level up from decoding dir.

if $decode_mbr; then
  echo "$0: --decode-mbr true is not supported (no MBR decoding in pynnet)" >&2; exit 1
fi
[[ $min_lmwt =~ ^[1-9][0-9]*$ && $max_lmwt =~ ^[1-9][0-9]*$ ]] || \
  { echo "$0: --min-lmwt/--max-lmwt must be positive integers, got '$min_lmwt'/'$max_lmwt'" >&2; exit 1; }
[ "$min_lmwt" -le "$max_lmwt" ] || { echo "$0: --min-lmwt $min_lmwt > --max-lmwt $max_lmwt" >&2; exit 1; }

ctm_inputs "$lang" "$dir" "$model"  # nj word_boundary

name=$(basename "$data") # e.g. eval2000

segment_opts=()
if [ -f "$data/segments" ] && $use_segments; then
  f=$data/reco2file_and_channel
  [ ! -f "$f" ] && echo "$0: expecting file $f to exist" >&2 && exit 1
  segment_opts=(--segments-of "$data")
fi

mkdir -p "$dir/scoring/log"

if [ "$stage" -le 0 ]; then
  # One job per lat.JOB.gz, each writing the ctms of all the LM weights from one pass over its
  # lattices (Kaldi runs one lattice-1best | ... pipeline per LM weight over all lattices); the
  # jobs' ctms are then joined in job order, as Kaldi's single pipeline orders the lines.
  for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
    rm -f "$dir/score_$lmwt/$name.ctm"
  done
  rm -rf "$dir"/scoring/ctm.*
  jobs_report --what "CTM generation" \
    $cmd JOB=1:"$nj" "$dir/scoring/log/get_ctm.JOB.log" \
      pynnet-lattice-to-ctm --min-lmwt "$min_lmwt" --max-lmwt "$max_lmwt" --frame-shift "$frame_shift" \
        --print-silence "$print_silence" --word-symbol-table "$lang/words.txt" "${segment_opts[@]}" \
        "$word_boundary" "$model" "$dir/lat.JOB.gz" "$dir/scoring/ctm.JOB/LMWT.ctm" || exit 1
  for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
    mkdir -p "$dir/score_$lmwt"
    for n in $(seq "$nj"); do
      cat "$dir/scoring/ctm.$n/$lmwt.ctm" || exit 1
    done > "$dir/score_$lmwt/$name.ctm.tmp" || exit 1
    mv "$dir/score_$lmwt/$name.ctm.tmp" "$dir/score_$lmwt/$name.ctm" || exit 1
  done
  rm -rf "$dir"/scoring/ctm.*
fi
exit 0
