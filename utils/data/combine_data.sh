#!/usr/bin/env bash
# Kaldi's utils/data/combine_data.sh (in Kaldi a link to utils/combine_data.sh): runs utils/combine_data.sh with the same arguments.
# Called as utils/data/combine_data.sh it runs it as utils/combine_data.sh (so its messages name that), else by its real path.
__real=$(readlink -f "$(dirname "$(readlink -f "$0")")/../combine_data.sh")
__lex=$(dirname "$(dirname "$0")")/combine_data.sh
[ "$__lex" -ef "$__real" ] || __lex=$__real
exec bash "$__lex" "$@"
