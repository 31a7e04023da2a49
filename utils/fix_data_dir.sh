#!/usr/bin/env bash
# Kaldi's utils/fix_data_dir.sh: keeps the utterances present in utt2spk, text, feats.scp,
# segments/wav.scp (and speakers with cmvn.scp/spk2gender entries), drops orphan speakers and
# recordings, sorts every file and regenerates spk2utt.  Old files go to <data-dir>/.backup/.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
utt_extra_files=
spk_extra_files=
help_message="Usage: $0 [--utt-extra-files 'f1 f2'] [--spk-extra-files 'f3'] <data-dir>
 The extra files (keyed by utterance / speaker) are filtered like the standard ones; optional
 standard names (utt2uniq, utt2dur, utt2num_frames, utt2lang, vad.scp, cmvn.scp, spk2gender, ...)
 are accepted there too, as in Kaldi, and filtered as standard files.
e.g.: $0 data/train"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 1 ]; then echo "$help_message" >&2; exit 1; fi
[ -d "$1" ] || { echo "$0: no such directory $1" >&2; exit 1; }
exec pynnet-fix-data-dir --utt-extra-files="$utt_extra_files" --spk-extra-files="$spk_extra_files" "$1"
