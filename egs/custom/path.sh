# Recipe-local path.sh: the toolkit's path.sh, plus anything this recipe needs.
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/path.sh"
