#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a short while (CI) or for
# as long as you like, starting from its committed seed corpus
# (testdata/fuzz/<Target>/ next to the test).
#
# Usage: test/fuzz.sh [FUZZTIME]     (default 2000x per target; e.g. 10m, 1000000x)
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
fuzztime="${1:-2000x}"
# The default is CI's smoke run: every target mutates its seeds a little,
# in about 3 s each (most of a target's time is building its instrumented
# test binary). .ci/long runs 200,000 executions each.
#
# Targets whose every execution builds a state directory on disk run a tenth
# of the default count (about 2 ms an execution idle, 20 ms on a loaded
# machine), and so does FuzzReplyCacheChurn, whose every execution replays a
# whole sequence of changes and queries against a fresh build (about 30
# executions a second). An explicit FUZZTIME applies to them as to the others.
declare -A slow=([FuzzStateDir]=200x [FuzzEvents]=200x [FuzzReplyCacheChurn]=200x)
# FUZZ_EXCLUDE lists packages whose targets are skipped (space-separated,
# "./cmd/dnsconfigurer"): a -fuzz build instruments every package the test
# imports, and cold that costs cmd/dnsconfigurer's whole tree again (about
# 8 minutes on 2 cores). CI skips it; its seeds still run in go test ./...
status=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	if [[ " ${FUZZ_EXCLUDE:-} " == *" $pkg "* ]]; then
		echo "== $name ($pkg): skipped (FUZZ_EXCLUDE)"
		continue
	fi
	t="$fuzztime"
	if [[ $# -eq 0 && -n "${slow[$name]:-}" ]]; then
		t="${slow[$name]}"
	fi
	echo "== $name ($pkg, $t)"
	if ! go test </dev/null -timeout 10m -run '^$' -fuzz "^${name}\$" -fuzztime "$t" "$pkg"; then
		status=1
	fi
done < <(git ls-files '*_test.go' | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
exit $status
