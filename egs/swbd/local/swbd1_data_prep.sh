#!/usr/bin/env bash
# Switchboard-1 training data (Kaldi's egs/swbd/s5c local/swbd1_data_prep.sh; run from egs/swbd,
# after local/swbd1_prepare_dict.sh, whose acronyms.map it needs):
#   data/local/train/ and data/train/{wav.scp, segments, text, utt2spk, spk2utt, reco2file_and_channel}
# Every *.sph under <LDC97S62-dir> (any layout) is a conversation; wav.scp has one line per side,
#   sw02001-A sph2pipe -f wav -p -c 1 /abs/path/sw02001.sph |   (side B: -c 2)
# (pynnet reads such lines itself when sph2pipe is not installed). Utterance ids from the ms98
# times in centiseconds (sw02001-A_000098-001156), speaker = conversation side, text normalised
# as Kaldi does ([silence] and asides removed, word mapping, acronyms, lowercase).
# A full release has 2435 or 2438 sph files: another count is a warning.

transcripts=    # the swb_ms98_transcriptions dir [<LDC97S62-dir>/transcriptions/swb_ms98_transcriptions]
sph2pipe=       # the sph2pipe written into wav.scp [the one on PATH, else plain 'sph2pipe']
help_message="Usage: $0 [--transcripts DIR] <LDC97S62-dir>
 e.g.: $0 /export/corpora3/LDC/LDC97S62
Options:
  --transcripts <dir>   the swb_ms98_transcriptions dir (openslr.org resource 5)
  --sph2pipe <prog>     sph2pipe program for wav.scp [\$(command -v sph2pipe) or sph2pipe]"

. ./path.sh || exit 1
. utils/parse_options.sh || exit 1

if [ $# -ne 1 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
swbd_dir=$1
dir=data/local/train
[ -z "$sph2pipe" ] && sph2pipe=$(command -v sph2pipe || echo sph2pipe)

mkdir -p $dir/log || exit 1
pynnet-swbd-data-prep --transcripts "$transcripts" --sph2pipe "$sph2pipe" \
  "$swbd_dir" data/local/dict_nosp $dir data/train 2> $dir/log/data_prep.log
rc=$?; cat $dir/log/data_prep.log >&2; [ $rc -eq 0 ] || exit 1
echo "$0: Switchboard-1 data preparation succeeded"
utils/fix_data_dir.sh data/train || exit 1
