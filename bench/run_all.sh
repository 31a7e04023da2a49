#!/usr/bin/env bash
# Every benchmark, then docs/PERFORMANCE.md from their results (bench/report.py). See usage below.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/run_all.sh [--out DIR] [--quick] [--report FILE]

Runs, on this machine, one after the other: bench/train_throughput.py (GEMM-peak fraction, NG-SGD
overhead), bench/loader.py (the data loader's overhead), the parallel-efficiency model's
calibration (pynnet-parallel-model --calibrate), bench/parallel.py (K=1/K=2 speed-ups of every
sync mode, bytes per frame), the calibration again, the model's predictions from the two
calibrations' mean against the bench (--compare-bench), the
model for Seide et al.'s cases (--preset seide2014-k20x), bench/features.py, and
bench/decode_threads.py when egs/synth has a decoded tri2 system. Each bench's JSON line goes to
DIR/NAME.json, its command to DIR/NAME.cmd, its output to DIR/NAME.log; then bench/report.py
writes the report and its PNGs (beside it). About 15 minutes on the quiet 2-core VM (20-25 with
other jobs on it); run it on a quiet machine (it warns when the load average is >= 1.5).

  --out DIR      where the results go (default: a new temp dir; kept, its path printed)
  --quick        a smoke run of a few minutes (tiny settings: the figures mean nothing); the
                 report then goes to DIR/PERFORMANCE.md unless --report is given
  --report FILE  the report to write (default docs/PERFORMANCE.md; with --quick DIR/PERFORMANCE.md)
  -h, --help     this message
EOF
}

me=bench/run_all.sh
die() { echo "$me: $*" >&2; exit 1; }

out=; quick=false; report=
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --quick) quick=true; shift ;;
    --out|--report)
      [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"
      if [ "$1" = --out ]; then out=$2; else report=$2; fi
      shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --report=*) report=${1#--report=}; shift ;;
    *) die "unknown option or argument '$1' (see --help)" ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck disable=SC1091
. ./path.sh
command -v pynnet-parallel-model >/dev/null || die "pynnet-parallel-model not found (tools/install.sh installs it)"
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/pynnet-bench.XXXXXX")
fi
mkdir -p "$out" || die "cannot create --out dir '$out'"
out=$(cd "$out" && pwd)
if [ -z "$report" ]; then
  if $quick; then report=$out/PERFORMANCE.md; else report=$root/docs/PERFORMANCE.md; fi
fi

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$me: results in $out; load average $load" >&2
if awk -v l="${load%% *}" 'BEGIN { exit !(l >= 1.5) }'; then
  echo "$me: WARNING: load average ${load%% *} >= 1.5: other jobs are running, the figures will show it" >&2
fi
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l | tr -d ' ')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
started=$(date -u +"%Y-%m-%d %H:%M UTC")
printf '{"commit": "%s", "dirty": %d, "started": "%s", "loadavg": "%s"}\n' "$commit" "$dirty" "$started" "$load" \
  > "$out/meta.json"
: > "$out/timings.tsv"

t_all=$(date +%s)

# step NAME [--text TEXT] CMD...: run CMD (stdout to NAME.out, stderr to NAME.log), keep its last
# JSON line as NAME.json (NAME.json written by CMD itself if it prints none) and the command as
# NAME.cmd ($RESULTS standing for the --out dir); time it (timings.tsv: name, seconds, load at its start).
step() {
  local name=$1 text= t0 t1 rc=0 load0
  shift
  if [ "$1" = --text ]; then text=$2; shift 2; fi
  [ -n "$text" ] || text=$*
  text=${text//"$out"/\$RESULTS}
  printf '%s\n' "$text" > "$out/$name.cmd"
  echo "$me: $name: $text" >&2
  rm -f "$out/$name.json"
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  "$@" > "$out/$name.out" 2> "$out/$name.log" || rc=$?
  t1=$(date +%s)
  [ "$rc" = 0 ] || die "$name failed (exit $rc) after $((t1 - t0)) s: see $out/$name.log"
  if grep -q '^{' "$out/$name.out"; then
    grep '^{' "$out/$name.out" | tail -n 1 > "$out/$name.json"
  fi
  [ -s "$out/$name.json" ] || die "$name printed no JSON line: see $out/$name.out and $out/$name.log"
  printf '%s\t%d\t%s\n' "$name" "$((t1 - t0))" "$load0" >> "$out/timings.tsv"
  echo "$me: $name: $((t1 - t0)) s (load average at its start: $load0)" >&2
}

seide_model() {
  local n
  for n in 256 512 1024 2048 4096 8192; do   # Interspeech Table 1 (one GPU; fp32)
    pynnet-parallel-model --preset seide2014-k20x --minibatch "$n" --z 1 --json
  done
  for n in 1024 2048 2880 4096 8192 16384 32768 65536 92160; do   # Tables 4-5 (1 bit)
    pynnet-parallel-model --preset seide2014-k20x --minibatch "$n" --z 32 --json
  done
}

rm -f "$out/decode_threads.json" "$out/decode_threads.cmd"
if $quick; then
  cal_opts=(--quick); tp_opts=(--quick --steps 2); loader_opts=(--quick)
  par_opts=(--steps 10 --minibatch 16 --steps-1bit 2 --minibatch-1bit 64); feat_opts=(--seconds 10 --repeats 1)
else
  cal_opts=(); tp_opts=(); loader_opts=()
  par_opts=(--steps 50 --minibatch 128); feat_opts=(--repeats 3)
fi
step train_throughput python bench/train_throughput.py "${tp_opts[@]}"
step loader python bench/loader.py "${loader_opts[@]}"
# the calibration right before and right after bench/parallel.py, the predictions from their mean
# (a VM's speed drifts by 10-20% within minutes); each writes its file itself: that is its result
step calibration pynnet-parallel-model --calibrate --out "$out/calibration.json" "${cal_opts[@]}"
step parallel python bench/parallel.py "${par_opts[@]}"
step calibration_after pynnet-parallel-model --calibrate --out "$out/calibration_after.json" "${cal_opts[@]}"
cals="$out/calibration.json,$out/calibration_after.json"
step compare pynnet-parallel-model --hardware "$cals" --compare-bench "$out/parallel.json" --json
step machine_model pynnet-parallel-model --hardware "$cals" --json
# (one JSON line per case: kept whole as seide_model.jsonl)
step seide_model --text "for each N and Z of the papers' tables (bench/run_all.sh): pynnet-parallel-model --preset seide2014-k20x --minibatch N --z Z --json" \
  seide_model
cp "$out/seide_model.out" "$out/seide_model.jsonl"
step features python bench/features.py "${feat_opts[@]}"
if [ -f egs/synth/exp/tri2/final.mdl ] && [ -f egs/synth/exp/tri2/graph/HCLG.fst ] && [ -f egs/synth/data/test/feats.scp ]; then
  step decode_threads python bench/decode_threads.py
else
  echo "$me: decode_threads: skipped (no decoded egs/synth tri2 system: run egs/synth/run.sh first)" >&2
fi

t0=$(date +%s)
python bench/report.py "$out" --out "$report" || die "bench/report.py failed (the results are in $out)"
t1=$(date +%s)
echo "$me: report: $((t1 - t0)) s" >&2
echo "$me: per step (s):" >&2
awk -F'\t' '{ printf "  %-18s %5d\n", $1, $2 }' "$out/timings.tsv" >&2
echo "$me: total $(( (t1 - t_all) / 60 )) min $(( (t1 - t_all) % 60 )) s; report $report, results $out" >&2
