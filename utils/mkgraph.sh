#!/usr/bin/env bash
# Builds the decoding graph HCLG.fst as Kaldi's utils/mkgraph.sh does:
# LG = min(det(L_disambig o G)); CLG = C o LG (context width/central position from the tree);
# HCLGa = min(rmeps(rmsymbols(det(Ha o CLG)))); HCLG = add-self-loops(HCLGa).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C

tscale=1.0
loopscale=0.1
self_loop_scale=
transition_scale=
remove_oov=false
help_message="Usage: $0 [options] <lang-dir> <model-dir> <graphdir>
e.g.: $0 data/lang_test exp/tri1/ exp/tri1/graph
 Options:
  --self-loop-scale <scale>    # default 0.1 (Kaldi's default; use 1.0 for chain models)
  --transition-scale <scale>   # default 1.0
  --remove-oov (true|false)    # default false; if true, remove the OOV word (oov.int) from G
<lang-dir> must contain G.fst (utils/format_lm.sh); <model-dir> final.mdl and tree.
 Kaldi's forms are taken too: a bare --remove-oov, and --mono / --left-biphone / --quinphone
 (deprecated in Kaldi: ignored)."
# Kaldi's mkgraph.sh reads these first, before parse_options.sh (which needs a value for each option)
while true; do
  case "${1:-}" in
    --mono|--left-biphone|--quinphone)
      echo "$0: WARNING: the --mono, --left-biphone and --quinphone options are deprecated and ignored." >&2
      shift ;;
    --remove-oov)
      case "${2:-}" in true|false) break ;; esac   # --remove-oov true|false: parse_options.sh's
      remove_oov=true; shift ;;
    --transition-scale|--self-loop-scale)
      [ $# -ge 2 ] || break
      if [ "$1" = --transition-scale ]; then transition_scale=$2; else self_loop_scale=$2; fi
      shift 2 ;;
    *) break ;;
  esac
done
. "$__top/utils/parse_options.sh" || exit 1
[ -n "$self_loop_scale" ] && loopscale=$self_loop_scale
[ -n "$transition_scale" ] && tscale=$transition_scale
if [ $# -ne 3 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
lang=$1; model=$2/final.mdl; tree=$2/tree; dir=$3
for f in "$lang/L_disambig.fst" "$lang/G.fst" "$lang/phones.txt" "$lang/words.txt" \
         "$lang/phones/disambig.int" "$model" "$tree"; do
  [ -f "$f" ] || { echo "$0: expected $f to exist" >&2; exit 1; }
done
mkdir -p "$dir"
if [ -f "$dir/HCLG.fst" ] && [ "$dir/HCLG.fst" -nt "$model" ] && [ "$dir/HCLG.fst" -nt "$lang/G.fst" ] \
   && [ "$dir/HCLG.fst" -nt "$lang/L_disambig.fst" ] && [ "$dir/HCLG.fst" -nt "$tree" ]; then
  echo "$0: $dir/HCLG.fst is up to date."; exit 0
fi
pynnet-mkgraph --self-loop-scale "$loopscale" --transition-scale "$tscale" --remove-oov "$remove_oov" \
  "$lang" "$2" "$dir" || exit 1
