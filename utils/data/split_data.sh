#!/usr/bin/env bash
# Kaldi's utils/data/split_data.sh (in Kaldi a link to utils/split_data.sh): runs utils/split_data.sh with the same arguments.
# Called as utils/data/split_data.sh it runs it as utils/split_data.sh (so its messages name that), else by its real path.
__real=$(readlink -f "$(dirname "$(readlink -f "$0")")/../split_data.sh")
__lex=$(dirname "$(dirname "$0")")/split_data.sh
[ "$__lex" -ef "$__real" ] || __lex=$__real
exec bash "$__lex" "$@"
