# Pieces shared by steps/get_ctm.sh and steps/get_ctm_fast.sh, sourced after their options are
# parsed (". steps/libs/ctm.sh").
. steps/libs/jobs.sh   # jobs_report

# ctm_inputs <lang-or-graph-dir> <decode-dir> <model>: checks what the CTM programs read (as
# Kaldi's scripts: words.txt, the model, lat.1.gz; and here every lat.JOB.gz of num_jobs, and a
# word-boundary file); sets nj and word_boundary.  Else one line and exit 1.
ctm_inputs() {
  local lang=$1 decode_dir=$2 model=$3 f n
  for f in "$lang/words.txt" "$model" "$decode_dir/lat.1.gz"; do
    [ -f "$f" ] || { echo "$0: expecting file $f to exist" >&2; exit 1; }
  done
  nj=$(cat "$decode_dir/num_jobs" 2>/dev/null)
  [[ $nj =~ ^[1-9][0-9]*$ ]] || { echo "$0: $decode_dir/num_jobs: expected the number of decoding jobs, got '$nj'" >&2; exit 1; }
  for n in $(seq "$nj"); do
    [ -f "$decode_dir/lat.$n.gz" ] || { echo "$0: no $decode_dir/lat.$n.gz (of num_jobs $nj): decoding incomplete?" >&2; exit 1; }
  done
  word_boundary=$lang/phones/word_boundary.int
  if [ ! -f "$word_boundary" ]; then
    if [ -f "$lang/phones/align_lexicon.int" ]; then
      echo "$0: no $word_boundary: word alignment by the lexicon ($lang/phones/align_lexicon.int, Kaldi's lattice-align-words-lexicon) is not supported; make the lang dir with position-dependent phones" >&2
    else
      echo "$0: neither $lang/phones/word_boundary.int nor $lang/phones/align_lexicon.int exists: cannot align." >&2
    fi
    exit 1
  fi
}
