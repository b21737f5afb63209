#!/usr/bin/env bash
# Runs the benchmarks BENCHMARKS.md quotes and prints benchstat's tables:
# the median of $COUNT (10) runs of each, with the 95% confidence interval
# around it, and the comparisons BENCHMARKS.md makes. Raw results stay in
# $OUT (bench/out), for comparisons: benchstat old.txt new.txt.
#
#   scripts/bench.sh            every group but peer (about ten minutes on 2 cores)
#   scripts/bench.sh call cold  the named groups only
#   scripts/bench.sh peer       morph's pipeline runner against tracker (bench/peer);
#                               only when named, as its first build fetches tracker
#                               from the network
#
# The runs of a group alternate: round after round, each benchmark of the
# group once, so that the machine's drift (a shared 2-core machine's speed
# moves by a third within minutes) falls on every benchmark alike and a
# comparison between them is fair. Compare rows of one run, never runs.
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

# group: package, -bench pattern, benchtime, and any further flags of the test binary. One line each.
groups() {
  cat <<'G'
call      ./host                        ^(BenchmarkCall|BenchmarkBareWazero|BenchmarkBareWazeroCloseOnDone|BenchmarkNativeHook)$   0.2s
cold      ./host                        ^BenchmarkColdStart$                         0.5s
process   ./cmd/morph                   ^BenchmarkColdStartProcess$                  5x
deadline  ./host/internal/interrupt     ^(BenchmarkLoop|BenchmarkInstrument)$        0.5s
gap       ./host/internal/interrupt     ^BenchmarkCheckGap$                          20x
check     ./host/internal/wasmbin       ^BenchmarkCheck$                             0.5s
isolation ./host                        ^BenchmarkIsolation$                         0.5s
sessions  ./host                        ^BenchmarkSessions$                          0.3s
sessionload ./host                      ^BenchmarkSessionLoad$                       1x
sessionown ./host                       ^BenchmarkSessionsOwnTheirInstances$         1x
instance  ./host                        ^BenchmarkNewInstance$                       0.3s
parallel  ./host                        ^BenchmarkCallParallel$                      0.3s  -test.cpu=1,2
history   ./host                        ^BenchmarkMiddlewareHistory$                 0.5s
mwturn    ./host                        ^BenchmarkMiddlewareTurn$                    0.3s
extism    ./host                        ^BenchmarkExtismCall$                        0.3s
schema    ./engine/internal/schemacost  ^(BenchmarkAllOfChain|BenchmarkRegexFormat)$ 0.5s
pipeline  ./pipeline                    ^(BenchmarkRunnerPerNode|BenchmarkChain|BenchmarkCheckpointSave|BenchmarkValidate1000|BenchmarkParse1000)$ 10x
stage     ./host                        ^BenchmarkStage$                             0.3s
mcp       ./cmd/morph                   ^BenchmarkMCPCall$                           300x
reload    ./host                        ^BenchmarkReloadPause$                       300x
temporal  ./temporal                    ^BenchmarkTurn$                              5x
load      ./temporal                    ^BenchmarkLoad$                              1x
G
}

# The call group's comparisons, each within the one run: morph's call path
# against the bare wazero floor, the floor against wazero's close-on-done,
# and the Go example's hook in wasm (standard Go and TinyGo builds, and the
# Rust example doing the same work) against the native Go hook.
compare_call() {
  local f=$OUT/call.txt
  pick() { sed -n "s#^Benchmark$1/\\([^ ]*\\)#BenchmarkHook/\\1#p" "$f" > "$OUT/call-$2.txt"; }
  pick Call morph
  pick BareWazero bare
  pick BareWazeroCloseOnDone close-on-done
  pick NativeHook/go-hooks native
  for lang in go-hooks go-hooks-tinygo rust-hooks; do
    sed -n "s#^BenchmarkHook/$lang/\\([^ ]*\\)#BenchmarkHook/\\1#p" "$OUT/call-morph.txt" > "$OUT/call-$lang.txt"
  done
  echo "## call: morph's call path against the bare wazero floor (same guest, same payload)"
  "$BENCHSTAT" -filter '.unit:sec/op' bare="$OUT/call-bare.txt" morph="$OUT/call-morph.txt"
  echo
  echo "## call: the instrumented floor against wazero's close-on-done"
  "$BENCHSTAT" -filter '.unit:sec/op' close-on-done="$OUT/call-close-on-done.txt" instrumented="$OUT/call-bare.txt"
  echo
  echo "## call: the Go example's build_prompt, native Go against each guest through morph"
  "$BENCHSTAT" -filter '.unit:sec/op' native="$OUT/call-native.txt" go="$OUT/call-go-hooks.txt" \
    tinygo="$OUT/call-go-hooks-tinygo.txt" rust="$OUT/call-rust-hooks.txt"
  echo
}

# The extism group's comparison, within the one run: an Extism plugin's
# call through go-sdk as its README makes it (no timeout, and with
# Manifest.Timeout), through morph's Extism loader, and the same logic on
# morph's native ABI (the go-hooks example), each against go-sdk's bare call.
compare_extism() {
  local f=$OUT/extism.txt c
  for c in gosdk-bare gosdk-timeout morph-extism native; do
    sed -n "s#^BenchmarkExtismCall/$c/\\([^ ]*\\)#BenchmarkExtismCall/\\1#p" "$f" > "$OUT/extism-$c.txt"
  done
  echo "## extism: go-sdk's warm call against morph's, same guest logic, same payload"
  "$BENCHSTAT" -filter '.unit:(sec/op OR allocs/op)' gosdk-bare="$OUT/extism-gosdk-bare.txt" \
    gosdk-timeout="$OUT/extism-gosdk-timeout.txt" morph-extism="$OUT/extism-morph-extism.txt" native="$OUT/extism-native.txt"
  echo
}

# The peer group: morph's pipeline runner against tracker v0.5.0's
# (bench/peer, its own module), the same chains in the same places,
# alternating round by round; then benchstat puts the two side by side.
run_peer() {
  local morph peer round
  morph=$(mktemp) peer=$(mktemp)
  $GO test -c -o "$morph" ./pipeline
  (cd bench/peer && $GO test -c -o "$peer" .)
  echo "== peer: $COUNT rounds of ./pipeline and ./bench/peer (tracker v0.5.0), alternating" >&2
  : > "$OUT/peer-morph.txt"
  : > "$OUT/peer-tracker.txt"
  for round in $(seq "$COUNT"); do
    echo "   round $round" >&2
    (cd pipeline && "$morph" -test.run '^$' -test.bench "$PEER_PATTERN" -test.benchmem -test.benchtime 0.5s) >> "$OUT/peer-morph.txt"
    (cd bench/peer && "$peer" -test.run '^$' -test.bench "$PEER_PATTERN" -test.benchmem -test.benchtime 0.5s) >> "$OUT/peer-tracker.txt"
  done
  rm -f "$morph" "$peer"
  echo "## peer: morph against tracker v0.5.0 per node (chains of no-op stages; tmpfs unless disk)"
  "$BENCHSTAT" -ignore pkg -filter '.unit:(ns/node OR allocs/op)' morph="$OUT/peer-morph.txt" tracker="$OUT/peer-tracker.txt"
  echo
}
PEER_PATTERN='^(BenchmarkChain|BenchmarkRunnerPerNode)$'

want=" $* "
mkdir -p "$OUT"
ran=0
if [[ "$want" == *" peer "* ]]; then # opt-in: see the top
  ran=1
  run_peer
fi
while read -r name pkg pattern benchtime flags; do
  [ -z "$name" ] && continue
  if [ $# -gt 0 ] && [[ "$want" != *" $name "* ]]; then continue; fi
  ran=1
  bin=$(mktemp)
  (cd "$pkg" && $GO test -c -o "$bin" .) # a nested module's (temporal) is built in its own directory
  echo "== $name: $COUNT rounds of ($pkg) -test.bench '$pattern' -test.benchtime $benchtime" >&2
  : > "$OUT/$name.txt"
  for round in $(seq "$COUNT"); do
    echo "   round $round" >&2
    (cd "$pkg" && "$bin" -test.run '^$' -test.bench "$pattern" -test.benchmem -test.benchtime "$benchtime" $flags) >> "$OUT/$name.txt"
  done
  rm -f "$bin"
  echo "## $name"
  "$BENCHSTAT" "$OUT/$name.txt"
  echo
  if [ "$name" = call ]; then compare_call; fi
  if [ "$name" = extism ]; then compare_extism; fi
done < <(groups)
if [ "$ran" = 0 ]; then
  echo "no group named: $*; the groups are: $(groups | awk '{print $1}' | xargs) peer" >&2
  exit 2
fi
