#!/usr/bin/env bash
# scripts/oci-tools.sh: the OCI ecosystem's own tools, for package oci's tests
# (internal/ocitest): crane (whose `crane registry serve` is the tests'
# registry on 127.0.0.1), oras (pushes artifacts as people publish them) and
# cosign (signs them), built from the Go module proxy once.
#
# Usage:
#   scripts/oci-tools.sh               build them when needed; print the tools directory on the last line
#   scripts/oci-tools.sh --print-path  print the directory only (exit status 1 when it is not built yet)
#
# The printed directory holds bin/{crane,oras,cosign}; `make test` names it to
# the tests in MORPH_OCI_TOOLS. Its name carries a hash of the pins and of this
# recipe, so a new pin builds beside the old one. The pins are the newest that
# build under Go 1.26 (GOTOOLCHAIN=local); cosign v3.1.3 is also the version
# whose offline flags the harness uses (--use-signing-config=false with
# --tlog-upload=false, --new-bundle-format=false), deprecated upstream.
#
# Cold (empty module and build caches, 2 cores, loaded), cosign takes about
# 6.5 minutes (383 s measured) and nearly all of the ~2 GB of module cache;
# crane and oras then add 9 s and 15 s. Warm: nothing (the stamp). The stamp
# is written after each binary's `version` answers with its pin, so an
# interrupted build is redone by the next run. Progress goes to stderr.
set -euo pipefail

readonly PINS=(
	github.com/google/go-containerregistry/cmd/crane@v0.22.1
	oras.land/oras/cmd/oras@v1.3.6
	github.com/sigstore/cosign/v3/cmd/cosign@v3.1.3
)
readonly RECIPE=1

key=$(printf '%s\n' "${PINS[@]}" "recipe=$RECIPE" | sha256sum | cut -c1-12)
CACHE=${OCI_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/morph/oci-tools-$key}

log() { printf 'oci-tools.sh: %s\n' "$*" >&2; }
built() {
	for pin in "${PINS[@]}"; do
		[[ -x $CACHE/bin/$(tool "$pin") ]] || return 1
	done
	[[ $(cat "$CACHE/stamp" 2>/dev/null) == "$key" ]]
}
# tool is the program a pin installs: the package path's last element.
tool() { local pkg=${1%@*}; echo "${pkg##*/}"; }
# retry runs "$@" up to three times: a module proxy hiccup is common and
# transient; the last failure says so.
retry() {
	for i in 1 2 3; do
		"$@" && return 0
		((i < 3)) && { log "failed (attempt $i of 3), retrying in $((5 * i)) s: $*"; sleep $((5 * i)); }
	done
	log "failed three times: $* (above). A network error is transient: rerun 'make tools-oci'"
	return 1
}

if [[ ${1:-} == --print-path ]]; then
	built && { echo "$CACHE"; exit 0; }
	exit 1
fi
command -v go >/dev/null || { log "go is needed"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE.lock"
flock 9 # two builds at once (parallel make, two checkouts) would share one GOBIN
if ! built; then
	log "building crane, oras and cosign from the Go module proxy into $CACHE (cosign: about 6 minutes cold, once)"
	rm -f "$CACHE/stamp"
	export GOBIN=$CACHE/bin GOFLAGS=-mod=mod
	modcache=$(go env GOMODCACHE)
	for pin in "${PINS[@]}"; do
		name=$(tool "$pin")
		log "go install $pin"
		# From the module cache first (go install pkg@version asks the proxy which
		# module holds pkg even when the module is cached), from the proxy when that fails.
		GOPROXY=file://$modcache/cache/download go install -trimpath -ldflags='-s -w' "$pin" 2>/dev/null ||
			retry go install -trimpath -ldflags='-s -w' "$pin" >&2
		version=$("$GOBIN/$name" version 2>&1) || { log "$name version failed: $version"; exit 1; }
		[[ $version == *"${pin##*@v}"* ]] || { log "$name: expected version ${pin##*@}, got: $version"; exit 1; }
	done
	echo "$key" >"$CACHE/stamp"
fi
echo "$CACHE"
