#!/usr/bin/env bash
# demo-temporal.sh runs `make demo`'s first and third jobs durably: a
# Temporal dev server on 127.0.0.1 (the CLI scripts/temporal.sh builds and
# caches), two `morph worker`s on the repository's morph.toml and `morph run
# --temporal` on the offline scripted model, then two workers of the
# pipeline example's config and `morph pipeline run --temporal`: the
# scripted model answers each of a workflow's model calls by its number in
# the workflow, whichever worker makes it. Everything it starts is stopped on exit;
# the logs are kept in a temporary directory it names. Run it through
# `make demo-temporal`, which builds bin/ first.
set -euo pipefail
cd "$(dirname "$0")/.."

temporal=$(scripts/temporal.sh)
work=$(mktemp -d "${TMPDIR:-/tmp}/morph-demo-temporal.XXXXXX")
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "(logs: $work)"
}
trap cleanup EXIT

# free_port prints the first port from $1 up that nothing on 127.0.0.1
# answers on.
free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}
port=$(free_port 7233)
http=$(free_port $((port + 1000)))
metrics=$(free_port $((port + 2000)))
export TEMPORAL_ADDRESS=127.0.0.1:$port

echo "== a Temporal dev server on $TEMPORAL_ADDRESS (eager activity execution on) =="
"$temporal" server start-dev --ip 127.0.0.1 --headless --port "$port" --http-port "$http" --metrics-port "$metrics" \
	--log-level error --dynamic-config-value system.enableActivityEagerExecution=true >"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	"$temporal" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 && break
	sleep 0.2
done
"$temporal" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null || { cat "$work/server.log"; exit 1; }

echo "== two workers: morph worker --config morph.toml (TEMPORAL_ADDRESS gives the server) =="
for i in 1 2; do
	bin/morph worker --config morph.toml >"$work/worker-$i.log" 2>&1 &
	pids+=($!)
done

echo "== morph run --temporal: the turn's model calls, tool call and hooks are activities on the workers =="
bin/morph run --temporal --config morph.toml "What is 17.5% of 2,340 plus the square root of 1,764?"
echo "== a pipeline: two workers of its own config (the same task queue: first stop the others) =="
kill "${pids[1]}" "${pids[2]}"
wait "${pids[1]}" "${pids[2]}" 2>/dev/null || true
for i in 1 2; do
	bin/morph worker --config examples/pipelines/plan-implement-verify.toml >"$work/worker-pipeline-$i.log" 2>&1 &
	pids+=($!)
done
bin/morph pipeline run --temporal --config examples/pipelines/plan-implement-verify.toml \
	examples/pipelines/plan-implement-verify.dot

echo "== the workflows as Temporal recorded them: temporal workflow list =="
"$temporal" workflow list --address "$TEMPORAL_ADDRESS"
