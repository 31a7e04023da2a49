#!/usr/bin/env bash
# CTM (time-marked words) of a decode dir at one LM weight and word insertion penalty, one job per
# lattice file (Kaldi's steps/get_ctm_fast.sh): <ctm-out-dir>/ctm.JOB and their concatenation
# <ctm-out-dir>/ctm, lines "<utt> 1 <start> <dur> <word>" relative to the utterance (no segments
# conversion, as in Kaldi), logs <ctm-out-dir>/log/get_ctm.JOB.log.  The penalty is
# lattice-1best's: added to each word's LM cost after scaling by --lmwt (so --lmwt 10 --wip 1 is
# score_kaldi.sh's grid point LMWT 10, WIP 0.1).  The model is
# <decode-dir>/final.mdl if there is one, else <decode-dir>/../final.mdl.  As steps/get_ctm.sh,
# needs <lang>/phones/word_boundary.int.

# begin configuration section.
cmd=run.pl
stage=0
frame_shift=0.01
lmwt=10
wip=0.0
print_silence=false
# end configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir|graph-dir> <decode-dir> <ctm-out-dir>
 Options:
    --cmd (run.pl|queue.pl...)      # specify how to run the sub-processes.
    --stage (0|1|2)                 # start scoring script from part-way through.
    --frame-shift (default=0.01)    # specify this if your lattices have a frame-shift
                                    # not equal to 0.01 seconds
    --lmwt <float>                  # LM weight (default $lmwt)
    --wip <float>                   # word insertion penalty (default $wip)
    --print-silence (true|false)    # also print silences, as <eps> (default $print_silence)
e.g.:
$0 data/train data/lang exp/tri4a/decode/ exp/tri4a/decode/ctm
See also: steps/get_ctm.sh"

echo "$0 $*"  # Print the command line for logging

[ -f ./path.sh ] && . ./path.sh
. utils/parse_options.sh || exit 1
. steps/libs/ctm.sh

if [ $# -ne 4 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi

lang=$2 # Note: may be graph directory not lang directory, but has the necessary stuff copied.
decode_dir=$3
dir=$4

if [ -f "$decode_dir/final.mdl" ]; then
  model=$decode_dir/final.mdl
else
  model=$decode_dir/../final.mdl # assume model one level up from decoding dir.
fi

ctm_inputs "$lang" "$decode_dir" "$model"  # nj word_boundary

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
rm -f "$dir"/ctm "$dir"/ctm.*

jobs_report --what "CTM generation" \
  $cmd JOB=1:"$nj" "$dir/log/get_ctm.JOB.log" \
    pynnet-lattice-to-ctm --lm-scale "$lmwt" --word-ins-penalty "$wip" --frame-shift "$frame_shift" \
      --print-silence "$print_silence" --word-symbol-table "$lang/words.txt" \
      "$word_boundary" "$model" "$decode_dir/lat.JOB.gz" "$dir/ctm.JOB" || exit 1

for n in $(seq "$nj"); do
  cat "$dir/ctm.$n"
done > "$dir/ctm.tmp" && mv "$dir/ctm.tmp" "$dir/ctm" || exit 1
exit 0
