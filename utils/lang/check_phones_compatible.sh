#!/usr/bin/env bash
# Kaldi's utils/lang/check_phones_compatible.sh: exit 1, with one line naming both files, when two
# phone symbol tables (e.g. <model-dir>/phones.txt and <lang-dir>/phones.txt) differ; the
# disambiguation symbols (#0, #1, ...) are left out of the comparison.  As in Kaldi, a missing
# table (a model dir written without phones.txt) is not an error, unless both are missing.
# Usage: utils/lang/check_phones_compatible.sh <phones-symbol-table1> <phones-symbol-table2>

if [ $# -ne 2 ]; then
  echo "Usage: $0 <phones-symbol-table1> <phones-symbol-table2>" >&2
  echo " e.g.: $0 exp/mono/phones.txt data/lang/phones.txt" >&2
  exit 1
fi
table_first=$1
table_second=$2

if [ ! -f "$table_first" ] && [ ! -f "$table_second" ]; then
  echo "$0: neither $table_first nor $table_second exists" >&2
  exit 1
fi
# One of them absent: a model dir from an older script; nothing to compare (as Kaldi).
[ -f "$table_first" ] && [ -f "$table_second" ] || exit 0

if ! cmp -s <(grep -v '^#' "$table_first") <(grep -v '^#' "$table_second"); then
  echo "$0: phone symbol tables $table_first and $table_second are not compatible (the model was trained with another lang dir)" >&2
  exit 1
fi
exit 0
