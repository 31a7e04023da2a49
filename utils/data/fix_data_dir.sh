#!/usr/bin/env bash
# Kaldi's utils/data/fix_data_dir.sh (in Kaldi a link to utils/fix_data_dir.sh): runs utils/fix_data_dir.sh with the same arguments.
# Called as utils/data/fix_data_dir.sh it runs it as utils/fix_data_dir.sh (so its messages name that), else by its real path.
__real=$(readlink -f "$(dirname "$(readlink -f "$0")")/../fix_data_dir.sh")
__lex=$(dirname "$(dirname "$0")")/fix_data_dir.sh
[ "$__lex" -ef "$__real" ] || __lex=$__real
exec bash "$__lex" "$@"
