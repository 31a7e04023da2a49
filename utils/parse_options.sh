# Kaldi-style option parsing; source it after setting defaults:
#   nj=4; stage=0; . utils/parse_options.sh
# --foo-bar v sets foo_bar=v (foo_bar must already be set); --config FILE sources FILE before
# any other option is applied, wherever it appears, so the command line wins (as in Kaldi);
# boolean variables (value true/false) only take true or false; --help / -h prints $help_message.
# Leaves the positional arguments in "$@".
for __arg in "$@"; do
  if [ "$__arg" = "--help" ] || [ "$__arg" = "-h" ]; then
    if [ -z "${help_message:-}" ]; then echo "No help found." 1>&2
    else printf "%s\n" "$help_message" 1>&2; fi
    exit 0
  fi
  [ "$__arg" = "--" ] && break
done

# Config files first: walk the '--name value' pairs as the loop below does and source each
# --config FILE, so that an option given before it still overrides what the file sets.
__opt=
for __arg in "$@"; do
  if [ -n "$__opt" ]; then
    if [ "$__opt" = "--config" ]; then
      [ -r "$__arg" ] || { echo "$0: cannot read config file $__arg" 1>&2; exit 1; }
      . "$__arg"
    fi
    __opt=; continue
  fi
  case "$__arg" in
    --|--*=*) break ;;
    --*) __opt=$__arg ;;
    *) break ;;
  esac
done

while true; do
  [ -z "${1:-}" ] && break
  case "$1" in
    --)
      shift; break ;;
    --*=*)
      echo "$0: options take the form '--name value', not '--name=value': $1" 1>&2; exit 1 ;;
    --*)
      __name=$(echo "$1" | sed 's/^--//; s/-/_/g')
      if [ -z "${2+x}" ]; then echo "$0: option $1 needs a value" 1>&2; exit 1; fi
      if [ "$__name" = "config" ]; then shift 2; continue; fi  # sourced above
      # The variable must already exist (be set by the script's defaults).
      if ! eval "[ -n \"\${$__name+x}\" ]"; then
        echo "$0: invalid option $1" 1>&2; exit 1
      fi
      eval "__old=\"\${$__name}\""
      if [ "$__old" = "true" ] || [ "$__old" = "false" ]; then
        if [ "$2" != "true" ] && [ "$2" != "false" ]; then
          echo "$0: expected \"true\" or \"false\" for $1, got \"$2\"" 1>&2; exit 1
        fi
      fi
      eval "$__name=\"\$2\""
      shift 2 ;;
    *) break ;;
  esac
done
unset __arg __opt __name __old
true  # so that "set -e" callers survive the last test above
