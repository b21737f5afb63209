#!/usr/bin/env bash
# scripts/temporal.sh: the Temporal CLI (with its dev server), for the tests
# and the demo of package temporal, built from the Go module proxy once.
#
# Usage:
#   scripts/temporal.sh               build it when needed; print its path on the last line
#   scripts/temporal.sh --print-path  print the path only (exit status 1 when it is not built yet)
#
# v1.5.1 (Temporal Server 1.29.1) is the newest that builds here: @latest
# (v1.9.1) has a replace directive `go install` refuses, v1.6-v1.8 are not
# served (../shared/notes/distributed.md). A cold build takes about 3 minutes
# on 2 cores and 1.9 GB of module cache; the 252 MB binary is kept in
# $TEMPORAL_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/morph/temporal-1.5.1),
# and its stamp is written after `temporal --version` answers, so an
# interrupted build is redone by the next run. Progress goes to stderr.
set -euo pipefail

readonly VERSION=1.5.1
readonly RECIPE=1
readonly STAMP_TEXT="temporal-cli=$VERSION recipe=$RECIPE"
CACHE=${TEMPORAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/morph/temporal-$VERSION}
BIN=$CACHE/bin/temporal

built() { [ -x "$BIN" ] && [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$STAMP_TEXT" ]; }

if [ "${1:-}" = --print-path ]; then
	built && { echo "$BIN"; exit 0; }
	exit 1
fi
mkdir -p "$CACHE"
exec 9>"$CACHE.lock"
flock 9 # two builds at once (parallel make, two checkouts) would share one GOBIN
if ! built; then
	echo "temporal.sh: building the Temporal CLI v$VERSION from the Go module proxy (about 3 minutes, once)" >&2
	rm -f "$CACHE/stamp"
	GOBIN=$CACHE/bin GOFLAGS=-mod=mod go install "github.com/temporalio/cli/cmd/temporal@v$VERSION" >&2
	"$BIN" --version >&2
	echo "$STAMP_TEXT" >"$CACHE/stamp"
fi
echo "$BIN"
