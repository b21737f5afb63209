#!/usr/bin/env bash
# scripts/tinygo.sh: a TinyGo 0.34.0 for building Go guests, built from source.
#
# Usage:
#   scripts/tinygo.sh               build it when needed; print the tinygo path on the last line
#   scripts/tinygo.sh --print-path  print the path only (exit status 1 when it is not built yet)
#
# The Makefile does `TINYGO=$$(scripts/tinygo.sh)`: stdout carries only the path,
# every progress message goes to stderr.
#
# TinyGo ships no release binaries we may download here, and `go install` of it
# fails (module proxy 403 on @latest), so it is built from the Go module proxy's
# zip of v0.34.0 (the first release with //go:wasmexport and -buildmode=c-shared)
# against Debian's LLVM 15. The zip lacks three git submodules, filled in from
# Debian: wasi-libc (the binary package's sysroot), compiler-rt's builtins (the
# llvm-toolchain-15 *source* package, fetched with a private apt state so the
# system's apt sources are never touched), and src/net (left empty; no guest
# of ours imports net).
#
# The result lives in $TINYGO_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/morph/tinygo-0.34.0) and is reused while its
# stamp file matches this recipe. The stamp is written last, after the build,
# `tinygo version` and a test build of a c-shared wasip1 module succeed, so an
# interrupted run is redone from the start by the next one.
#
# The printed path is a small wrapper that sets TINYGOROOT and
# GOTOOLCHAIN=go1.23.12 (TinyGo 0.34 accepts Go 1.19-1.23 only; the Go on
# PATH, 1.21 or newer, fetches that toolchain from the module proxy).
#
# Debian packages are installed only when missing (dpkg status), with
# `apt-get update` only when apt knows no candidate for one of them or the
# install fails on stale lists; as root in CI, through sudo otherwise.
set -euo pipefail

readonly TINYGO_VERSION=0.34.0
readonly GO_TOOLCHAIN=go1.23.12
readonly LLVM=15
# Bump RECIPE when the build below changes: existing caches are then rebuilt.
readonly RECIPE=1
readonly STAMP_TEXT="tinygo=$TINYGO_VERSION llvm=$LLVM go=$GO_TOOLCHAIN recipe=$RECIPE"
readonly PACKAGES=(llvm-$LLVM-dev libclang-$LLVM-dev liblld-$LLVM-dev clang-$LLVM lld-$LLVM
	wasi-libc binaryen xz-utils g++)

CACHE=${TINYGO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/morph/tinygo-$TINYGO_VERSION}
[[ $CACHE == /* ]] || CACHE=$PWD/$CACHE # absolute: the build changes directories
WRAPPER=$CACHE/bin/tinygo
STAMP=$CACHE/.stamp

log() { printf 'tinygo.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

built() { [[ -x $WRAPPER && -f $STAMP && "$(cat "$STAMP")" == "$STAMP_TEXT" ]]; }

case "${1:-}" in
--print-path)
	echo "$WRAPPER"
	built || { log "not built yet: run scripts/tinygo.sh"; exit 1; }
	exit 0
	;;
-h | --help)
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
"") ;;
*) die "unknown argument $1 (see --help)" ;;
esac

# --- Debian packages ---------------------------------------------------------

as_root() {
	if [[ $(id -u) == 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "not root and no sudo: install ${missing[*]} (apt-get install -y ${missing[*]})"
	fi
}

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }

ensure_packages() {
	command -v dpkg-query >/dev/null || die "needs a Debian-like system (dpkg, apt-get) for LLVM $LLVM"
	missing=()
	local p
	for p in "${PACKAGES[@]}"; do
		installed "$p" || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	log "installing Debian packages: ${missing[*]}"
	local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300)
	local need_update=0
	for p in "${missing[@]}"; do
		apt-cache show --no-all-versions "$p" >/dev/null 2>&1 || need_update=1
	done
	if ((need_update)); then
		as_root env DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2
	fi
	if ! as_root env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "${missing[@]}" >&2; then
		((need_update)) && die "apt-get install ${missing[*]} failed"
		log "install failed; retrying after apt-get update (the package lists may be stale)"
		as_root env DEBIAN_FRONTEND=noninteractive "${apt[@]}" update >&2
		as_root env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install --no-install-recommends "${missing[@]}" >&2
	fi
}

# --- compiler-rt builtins from Debian's llvm-toolchain-15 source package -------

# debian_source prints "URI SIGNED-BY" of the machine's own apt source for
# Debian's main component of this release (SIGNED-BY is "-" when it is not a
# key file). Both apt formats are read: deb822 *.sources and one-line *.list.
debian_source() {
	local codename
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[[ -n $codename ]] || die "no VERSION_CODENAME in /etc/os-release"
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		awk -v suite="$codename" '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && (" " comps " ") ~ / main /) {
					split(uris, u, " "); print u[1], (signed ~ /^\// ? signed : "-"); found = 1; exit
				}
				types = suites = comps = uris = signed = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^[ \t]*#/ { next }
			/^[A-Za-z-]+:/ {
				key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, ""); val = $0
				if (key == "types") types = val; else if (key == "suites") suites = val
				else if (key == "components") comps = val; else if (key == "uris") uris = val
				else if (key == "signed-by") signed = val
			}
			END { if (!found) flush() }' "$f"
	done | head -n1 | grep . && return 0
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		awk -v suite="$codename" '
			$1 == "deb" {
				signed = "-"; i = 2
				if ($2 ~ /^\[/) {
					for (; i <= NF; i++) {
						if ($i ~ /^\[?signed-by=/) { s = $i; sub(/^\[?signed-by=/, "", s); sub(/\]$/, "", s); signed = s }
						if ($i ~ /\]$/) { i++; break }
					}
				}
				if ($(i+1) != suite) next
				for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i, signed; exit }
			}' "$f"
	done | head -n1 | grep . && return 0
	return 1
}

# fetch_builtins DEST: compiler-rt/lib/builtins of llvm-toolchain-$LLVM into DEST.
fetch_builtins() {
	local dest=$1 src uri signed codename tmp
	src=$(debian_source) || die "found no Debian apt source for main in /etc/apt"
	read -r uri signed <<<"$src"
	codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/morph-tinygo-apt.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" RETURN
	mkdir -p "$tmp/state/lists/partial" "$tmp/cache/archives/partial" "$tmp/sources.list.d" "$tmp/download"
	local opts=""
	[[ $signed != - ]] && opts="[signed-by=$signed] "
	echo "deb-src ${opts}$uri $codename main" >"$tmp/sources.list"
	log "fetching llvm-toolchain-$LLVM source from $uri ($codename main) with a private apt state in $tmp"
	# Only this private state, cache and source list: the system's apt
	# configuration, lists and caches stay as they are.
	local apt=(apt-get -q
		-o Dir::State="$tmp/state" -o Dir::Cache="$tmp/cache"
		-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts="$tmp/sources.list.d"
		-o APT::Get::List-Cleanup=false)
	if [[ $(id -u) == 0 ]] && id _apt >/dev/null 2>&1; then
		# Let apt's download sandbox user write where apt writes.
		chmod 755 "$tmp"
		chown _apt "$tmp/state/lists/partial" "$tmp/cache/archives/partial" "$tmp/download"
	fi
	"${apt[@]}" update >&2
	(cd "$tmp/download" && "${apt[@]}" source --download-only "llvm-toolchain-$LLVM" >&2)
	local orig
	orig=$(find "$tmp/download" -maxdepth 1 -name "llvm-toolchain-${LLVM}_*.orig.tar.*" | head -n1)
	[[ -n $orig ]] || die "apt-get source gave no orig tarball of llvm-toolchain-$LLVM"
	mkdir -p "$dest"
	tar -xf "$orig" -C "$dest" --strip-components=4 --wildcards '*/compiler-rt/lib/builtins/*'
	[[ -f $dest/udivmoddi4.c ]] || die "no compiler-rt builtins in $orig"
}

# --- the build -----------------------------------------------------------------

build() {
	command -v go >/dev/null || die "no go on PATH (Go 1.21 or newer, to fetch $GO_TOOLCHAIN)"
	local start=$SECONDS
	rm -rf "$CACHE"
	mkdir -p "$CACHE/bin"
	# Every go command below runs in a module of its own, no workspace, Go 1.23.
	export GOTOOLCHAIN=$GO_TOOLCHAIN GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false"
	log "Go toolchain: $(go version)"
	# A module of its own to fetch in, whatever module the cache sits in.
	mkdir -p "$CACHE/fetch"
	printf 'module fetch\n\ngo 1.23\n' >"$CACHE/fetch/go.mod"
	local moddir
	moddir=$(cd "$CACHE/fetch" && go mod download -json "github.com/tinygo-org/tinygo@v$TINYGO_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	rm -rf "$CACHE/fetch"
	[[ -n $moddir && -d $moddir ]] || die "go mod download of tinygo v$TINYGO_VERSION gave no directory"
	local root=$CACHE/root
	cp -R "$moddir" "$root"
	chmod -R u+w "$root"

	# The three submodules the module zip lacks.
	mkdir -p "$root/lib/wasi-libc/sysroot/lib" "$root/src/net"
	ln -s /usr/lib/wasm32-wasi "$root/lib/wasi-libc/sysroot/lib/wasm32-wasi"
	ln -s /usr/include/wasm32-wasi "$root/lib/wasi-libc/sysroot/include"
	[[ -f /usr/lib/wasm32-wasi/libc.a ]] || die "no /usr/lib/wasm32-wasi/libc.a (Debian package wasi-libc)"
	fetch_builtins "$root/lib/compiler-rt-builtins"

	log "building tinygo (go build -tags llvm$LLVM)"
	(cd "$root" && CGO_ENABLED=1 go build -tags "llvm$LLVM" -o build/tinygo .) >&2

	# The wrapper finds the root next to itself, so the cache may move.
	cat >"$WRAPPER" <<EOF
#!/bin/sh
# TinyGo $TINYGO_VERSION built by scripts/tinygo.sh ($STAMP_TEXT).
root=\$(CDPATH= cd -- "\$(dirname -- "\$0")/../root" && pwd) || exit 1
TINYGOROOT=\$root GOTOOLCHAIN=$GO_TOOLCHAIN exec "\$root/build/tinygo" "\$@"
EOF
	chmod 755 "$WRAPPER"

	log "smoke test: tinygo version, and a c-shared wasip1 module"
	"$WRAPPER" version >&2
	local smoke=$CACHE/smoke
	mkdir -p "$smoke"
	printf 'module smoke\n\ngo 1.23\n' >"$smoke/go.mod"
	cat >"$smoke/main.go" <<'EOF'
package main

//go:wasmexport add
func add(a, b uint32) uint32 { return a + b }

func main() {}
EOF
	(cd "$smoke" && "$WRAPPER" build -target wasip1 -buildmode=c-shared -no-debug -scheduler=none -o smoke.wasm .) >&2
	[[ -s $smoke/smoke.wasm ]] || die "the smoke build wrote no module"
	rm -rf "$smoke"

	echo "$STAMP_TEXT" >"$STAMP"
	log "built TinyGo $TINYGO_VERSION in $((SECONDS - start)) s: $WRAPPER"
}

mkdir -p "$(dirname "$CACHE")"
# One run at a time per cache: concurrent makes wait for the first build.
exec 9>"$CACHE.lock"
flock 9
ensure_packages
if ! built; then
	log "building TinyGo $TINYGO_VERSION into $CACHE (1-2 minutes, once)"
	(build)
fi
echo "$WRAPPER"
