#!/usr/bin/env bash
# Runs the benchmarks BENCHMARKS.md quotes, each -count $COUNT (10), and
# prints benchstat's table of each group: the median of the runs and the
# 95% confidence interval around it. Raw results stay in $OUT (bench/out)
# for comparisons: benchstat old.txt new.txt.
#
#   scripts/bench.sh            every group (about 15 minutes on 2 cores)
#   scripts/bench.sh call cold  the named groups only
#
# Ratios (morph / bare, wasm / native) are only meaningful within one run:
# compare rows of the same table, never tables of different runs.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-10}
OUT=${OUT:-bench/out}
GO=${GO:-go}
BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
BIN=${XDG_CACHE_HOME:-$HOME/.cache}/morph/bin
BENCHSTAT=$BIN/benchstat-$BENCHSTAT_VERSION
if [ ! -x "$BENCHSTAT" ]; then
  echo "installing benchstat $BENCHSTAT_VERSION (golang.org/x/perf) into $BIN" >&2
  mkdir -p "$BIN"
  tmp=$(mktemp -d)
  GOBIN=$tmp $GO install golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION
  mv "$tmp/benchstat" "$BENCHSTAT"
  rmdir "$tmp"
fi

# group: package, -bench pattern, extra flags. One line each.
groups() {
  cat <<'G'
call      ./host                        ^(BenchmarkCall|BenchmarkBareWazero|BenchmarkBareWazeroCloseOnDone|BenchmarkNativeHook)$   -benchtime=0.2s
cold      ./host                        ^BenchmarkColdStart$                         -benchtime=0.5s
process   ./cmd/morph                   ^BenchmarkColdStartProcess$                  -benchtime=5x
deadline  ./host/internal/interrupt     ^(BenchmarkLoop|BenchmarkInstrument)$        -benchtime=0.5s
gap       ./host/internal/interrupt     ^BenchmarkCheckGap$                          -benchtime=20x
check     ./host/internal/wasmbin       ^BenchmarkCheck$                             -benchtime=0.5s
isolation ./host                        ^BenchmarkIsolation$                         -benchtime=0.5s
history   ./host                        ^BenchmarkMiddlewareHistory$                 -benchtime=0.5s
extism    ./host                        ^BenchmarkExtismCall$                        -benchtime=0.3s
schema    ./engine                      ^(BenchmarkAllOfChain|BenchmarkRegexFormat)$ -benchtime=0.5s
G
}

want=" $* "
mkdir -p "$OUT"
ran=0
while read -r name pkg pattern flags; do
  [ -z "$name" ] && continue
  if [ $# -gt 0 ] && [[ "$want" != *" $name "* ]]; then continue; fi
  ran=1
  echo "== $name: $GO test -run '^\$' -bench '$pattern' -count $COUNT $flags $pkg" >&2
  # shellcheck disable=SC2086 # flags is a word list
  $GO test -run '^$' -bench "$pattern" -benchmem -count "$COUNT" $flags "$pkg" > "$OUT/$name.txt"
  echo "## $name"
  "$BENCHSTAT" "$OUT/$name.txt"
  echo
done < <(groups)
if [ "$ran" = 0 ]; then
  echo "no group named: $*; the groups are: $(groups | awk '{print $1}' | xargs)" >&2
  exit 2
fi
