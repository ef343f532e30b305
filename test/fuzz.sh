#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a short while (CI) or for
# as long as you like, starting from its committed seed corpus
# (testdata/fuzz/<Target>/ next to the test).
#
# Usage: test/fuzz.sh [FUZZTIME]     (default 50000x per target; e.g. 10m, 1000000x)
#
# The default is a count of executions, not a duration: with a duration, Go
# 1.26's fuzz coordinator can fail a target with "context deadline exceeded"
# at the end of -fuzztime on a loaded machine, with no failing input
# (golang/go#75804, fixed in Go 1.27). A count has no such deadline. -timeout
# still ends a target whose input hangs.
#
# A failure leaves the failing input under testdata/fuzz/<Target>/: commit it
# with the fix, and it stays a regression seed.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-50000x}"
status=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	echo "== $name ($pkg, $fuzztime)"
	if ! go test </dev/null -timeout 10m -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
		status=1
	fi
done < <(git ls-files '*_test.go' | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
exit $status
