#!/usr/bin/env bash
# scripts/jaeger.sh: Jaeger (OTLP receiver, in-memory storage, query API), for
# the end-to-end trace test of package telemetry (cmd/morph/jaeger_test.go),
# built from the Go module proxy once.
#
# Usage:
#   scripts/jaeger.sh               build it when needed; print its path on the last line
#   scripts/jaeger.sh --print-path  print the path only (exit status 1 when it is not built yet)
#
# `go install github.com/jaegertracing/jaeger/cmd/...@v1.76.0` is refused:
# jaeger's go.mod has a replace directive (Shopify/sarama). So the build runs
# in a wrapper module that repeats that replace and requires jaeger alone
# (minimal version selection then picks exactly jaeger's own versions).
# It builds cmd/all-in-one, not cmd/jaeger (v2): 1,483 non-standard packages
# against 2,095, and a command line instead of a collector YAML; the test
# needs only OTLP in and /api/traces out, which both serve. A cold build
# takes 6.3 minutes of CPU, 2 GB of memory and 1 GB of build cache (see
# BENCHMARKS.md "Jaeger"); the 74 MB binary is kept in $JAEGER_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/morph/jaeger-1.76.0), and its stamp is
# written after `all-in-one version` answers, so an interrupted build is
# redone by the next run. Progress goes to stderr.
set -euo pipefail

readonly VERSION=1.76.0
readonly RECIPE=1
readonly STAMP_TEXT="jaeger-all-in-one=$VERSION recipe=$RECIPE"
CACHE=${JAEGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/morph/jaeger-$VERSION}
BIN=$CACHE/bin/jaeger-all-in-one

built() { [ -x "$BIN" ] && [ "$(cat "$CACHE/stamp" 2>/dev/null)" = "$STAMP_TEXT" ]; }

if [ "${1:-}" = --print-path ]; then
	built && { echo "$BIN"; exit 0; }
	exit 1
fi
mkdir -p "$CACHE"
exec 9>"$CACHE.lock"
flock 9 # two builds at once (parallel make, two checkouts) would share one output
if ! built; then
	echo "jaeger.sh: building Jaeger all-in-one v$VERSION from the Go module proxy (about 4 minutes on 2 idle cores, once)" >&2
	rm -f "$CACHE/stamp"
	rm -rf "$CACHE/src"
	mkdir -p "$CACHE/src" "$CACHE/bin"
	cd "$CACHE/src"
	printf 'module jaegerbuild\n\ngo 1.26\n\nreplace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0\n' >go.mod
	export GOFLAGS=-mod=mod
	go get "github.com/jaegertracing/jaeger@v$VERSION" >&2
	go build -trimpath -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/all-in-one >&2
	mv "$BIN.tmp" "$BIN"
	"$BIN" version >&2
	echo "$STAMP_TEXT" >"$CACHE/stamp"
fi
echo "$BIN"
