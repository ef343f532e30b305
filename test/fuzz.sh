#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a short while (CI) or for
# as long as you like, starting from its committed seed corpus
# (testdata/fuzz/<Target>/ next to the test).
#
# Usage: test/fuzz.sh [FUZZTIME]     (default 20s per target; e.g. 10m)
#
# A failure leaves the failing input under testdata/fuzz/<Target>/: commit it
# with the fix, and it stays a regression seed.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-20s}"
status=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	echo "== $name ($pkg, $fuzztime)"
	if ! go test </dev/null -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
		status=1
	fi
done < <(git ls-files '*_test.go' | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
exit $status
