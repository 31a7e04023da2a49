#!/usr/bin/env bash
# Hub5 eval2000 data (Kaldi's egs/swbd/s5c local/eval2000_data_prep.sh; run from egs/swbd):
#   <speech-dir> = LDC2002S09's hub5e_00 (english/{en_*,sw_*}.sph, english/hub5e_00.pem)
#   <transcription-dir> = LDC2002T43 (2000_hub5_eng_eval_tr/reference/{hub5e00.english.000405.stm,
#                         en20000405_hub5.glm}; the 2000_hub5_eng_eval_tr level may be given too)
# -> data/local/eval2000/ and data/eval2000/{wav.scp, segments (from the pem, each end padded by
#    0.1 s, at most half the gap to the neighbour), text (from the stm, IGNORE_TIME_SEGMENT_*
#    dropped), utt2spk, spk2utt, reco2file_and_channel, stm (the '((' fix, asides removed), glm}.
# The pem and stm segments must agree. 40 conversations (80 sides) in the full set: another
# count is a warning.

sph2pipe=       # the sph2pipe written into wav.scp [the one on PATH, else plain 'sph2pipe']
help_message="Usage: $0 [--sph2pipe PROG] <speech-dir> <transcription-dir>
 e.g.: $0 /export/corpora2/LDC/LDC2002S09/hub5e_00 /export/corpora2/LDC/LDC2002T43"

. ./path.sh || exit 1
. utils/parse_options.sh || exit 1

if [ $# -ne 2 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
sdir=$1
tdir=$2
dir=data/local/eval2000
dest=data/eval2000
[ -z "$sph2pipe" ] && sph2pipe=$(command -v sph2pipe || echo sph2pipe)

mkdir -p $dir/log || exit 1
pynnet-eval2000-data-prep --sph2pipe "$sph2pipe" "$sdir" "$tdir" $dir $dest 2> $dir/log/data_prep.log
rc=$?; cat $dir/log/data_prep.log >&2; [ $rc -eq 0 ] || exit 1
echo "$0: data preparation for eval2000 succeeded (but not MFCC extraction)"
utils/fix_data_dir.sh $dest || exit 1
