#!/usr/bin/env bash
# Regenerates docs/reference.md from the binary's own help texts.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/dnsconfigurer
go build -o "$bin" ./cmd/dnsconfigurer
# The sections' order; every subcommand `help` lists must be in it.
order=(demo render validate explain hostresolv convert serve shim nri webhook version completion)
for c in $("$bin" help 2>&1 | sed -n 's/^  \([a-z][a-z0-9-]*\)  .*/\1/p'); do
	if [[ " ${order[*]} " != *" $c "* ]]; then
		echo "gen-reference.sh: subcommand $c is not in the order list" >&2
		exit 1
	fi
done
{
	echo "# Command reference"
	echo
	echo "Generated from \`dnsconfigurer <subcommand> -h\` (regenerate with \`docs/gen-reference.sh\`). The versioned config files are in [api/v1alpha1](../api/v1alpha1): \`ShimConfiguration\` (shim), \`NRIConfiguration\` (nri), \`WebhookConfiguration\` (webhook) and \`ServerConfiguration\` (serve), \`apiVersion: dnsconfigurer.io/v1alpha1\`; flags given on the command line override the file, and the file overrides the defaults, which api/v1alpha1 holds. \`--cluster-domain \"\"\` is no cluster domain everywhere but serve, which refuses it."
	echo
	"$bin" help 2>&1 | sed 's/^/    /'
	for c in "${order[@]}"; do
		echo
		echo "## $c"
		echo
		echo '```'
		"$bin" "$c" -h 2>&1 || true
		echo '```'
	done
} >docs/reference.md
