#!/usr/bin/env bash
# Synthesise the egs/synth corpus (espeak-ng voices and accents through a simulated telephone
# channel) and write Kaldi data dirs, the dict dir and LM text.
#
# Writes <db-dir>/wav/{train,dev,test}/<spk>/<utt>.wav (8 kHz 16-bit), <db-dir>/meta/,
#        <data-dir>/{train,dev,test}/{wav.scp,text,utt2spk,spk2utt,utt2dur,spk2gender},
#        <data-dir>/local/dict/{lexicon.txt,nonsilence_phones.txt,silence_phones.txt,
#                               optional_silence.txt,extra_questions.txt},
#        <data-dir>/local/lm/train.txt
# Re-running with the same options (and --synth-config contents) and an intact <db-dir> does
# nothing (delete <db-dir>/.done to force it).

# sizes; empty = the program's default (or the --tiny preset's)
train_hours=        # hours of training audio [1.0]
dev_minutes=        # minutes of dev audio [8]
test_minutes=       # minutes of test audio [10]
seed=1
nj=2                # parallel synthesis processes
tiny=false          # test preset: a few dozen short utterances
# difficulty and LM size; empty = the program's default (pynnet-synth-corpus --help)
snr_db=             # additive noise SNR range (dB), MIN:MAX [10:30]
reverb_prob=        # share of utterances with room reverberation [0.2]
rate_wpm=           # speaker base speaking rates (words per minute), MIN:MAX [140:230]
lm_sentences=       # sentences of LM training text [50000; 2000 with --tiny]
test_extra_accents= # comma-separated accents for test on top of the training ones [none];
                    # en-gb-scotland,en-029,en-gb-x-gbcwmd = accents never heard in training
synth_config=       # optional JSON of SynthConfig fields (see pynnet-synth-corpus --help)

help_message="Usage: $0 [options] <db-dir> <data-dir>
 e.g.: $0 --train-hours 1 --nj 2 db data
Options:
  --train-hours <h>     hours of training audio [1.0]
  --dev-minutes <m>     minutes of dev audio [8]
  --test-minutes <m>    minutes of test audio [10]
  --seed <n>            random seed [$seed]
  --nj <n>              parallel synthesis processes [$nj]
  --tiny <true|false>   tiny test preset [$tiny]
  --snr-db <min:max>    noise SNR range in dB [10:30]
  --reverb-prob <p>     share of reverberant utterances [0.2]
  --rate-wpm <min:max>  speaker speaking rates, words/minute [140:230]
  --lm-sentences <n>    LM training sentences [50000]
  --test-extra-accents <a,b>  extra test accents, e.g. en-gb-scotland,en-029 [none]
  --synth-config <f>    JSON file of further corpus settings (pynnet-synth-corpus --config)"

. ./path.sh || exit 1
. utils/parse_options.sh || exit 1

if [ $# -ne 2 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
db=$1
data=$2

opts=(--seed "$seed")
[ -n "$snr_db" ] && opts+=(--snr-db "$snr_db")
[ -n "$reverb_prob" ] && opts+=(--reverb-prob "$reverb_prob")
[ -n "$rate_wpm" ] && opts+=(--rate-wpm "$rate_wpm")
[ -n "$lm_sentences" ] && opts+=(--lm-sentences "$lm_sentences")
[ -n "$test_extra_accents" ] && opts+=(--test-extra-accents "$test_extra_accents")
[ "$tiny" = true ] && opts+=(--tiny)
[ -n "$train_hours" ] && opts+=(--train-hours "$train_hours")
[ -n "$dev_minutes" ] && opts+=(--dev-minutes "$dev_minutes")
[ -n "$test_minutes" ] && opts+=(--test-minutes "$test_minutes")
# The stamp names what defines the corpus (not --nj): the options and, as the file's path says
# nothing about what is in it, the config's contents. Without a config the stamp is as before, so
# existing corpora stay up to date.
stamp_extra=
if [ -n "$synth_config" ]; then
  [ -f "$synth_config" ] || { echo "$0: no such file $synth_config (--synth-config)" >&2; exit 1; }
  config_sha1=$(sha1sum < "$synth_config" | cut -d' ' -f1) && [ -n "$config_sha1" ] || {
    echo "$0: cannot read $synth_config" >&2; exit 1; }
  opts+=(--config "$synth_config")
  stamp_extra=" config-sha1=$config_sha1"
fi

stamp="${opts[*]}$stamp_extra"
opts+=(--nj "$nj")
if [ -f "$db/.done" ] && [ "$(cat "$db/.done")" = "$stamp" ] &&
   [ -f "$data/train/wav.scp" ] && [ -f "$data/test/wav.scp" ] && [ -f "$data/dev/wav.scp" ] &&
   [ -f "$data/local/dict/lexicon.txt" ] && [ -f "$data/local/lm/train.txt" ]; then
  echo "$0: $db and $data are up to date (options: $stamp); nothing to do"
  exit 0
fi

mkdir -p "$db" "$data" || exit 1
rm -f "$db/.done"
echo "$0: synthesising into $db (options: $stamp)"
start=$(date +%s)
pynnet-synth-corpus "${opts[@]}" "$db" "$data" > "$db/summary.json" || {
  echo "$0: pynnet-synth-corpus failed" >&2; exit 1; }
echo "$stamp" > "$db/.done"
for x in train dev test; do
  if command -v validate_data_dir.sh >/dev/null 2>&1; then
    validate_data_dir.sh --no-feats "$data/$x" >/dev/null || {
      echo "$0: $data/$x does not validate" >&2; exit 1; }
  fi
  echo "$0: $data/$x: $(wc -l < "$data/$x/utt2spk") utterances, $(wc -l < "$data/$x/spk2utt") speakers"
done
echo "$0: done in $(( $(date +%s) - start )) s; summary in $db/summary.json"
