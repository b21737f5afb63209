#!/usr/bin/env bash
# scripts/dot-corpus.sh: the published pipelines morph's tests run
# (pipeline/published_test.go): the DOT files of three projects that publish
# Attractor pipelines, as their Go modules on the module proxy, pinned here
# with the go.sum hashes. Nothing is copied: the tests read the module cache,
# which is read-only and verified against the checksum database by the go
# command (this script also compares the hash with the pin).
#
# Usage:
#   scripts/dot-corpus.sh               download when needed; print the modules' directories, colon-separated, on the last line
#   scripts/dot-corpus.sh --print-path  print them only if all are in the module cache (exit status 1 otherwise; no network)
#   scripts/dot-corpus.sh --dir DIR...  count: classify every distinct .dot under DIR (files, and the HEAD of git
#                                       repositories, e.g. /work/.mirror's) as `morph pipeline validate` would
#
# `make test` names the directories to the tests in MORPH_DOT_CORPUS. After the
# first run (a few hundred kilobytes from the proxy) it needs no network: the
# module cache holds the zips.
set -euo pipefail

readonly PINS=(
	"github.com/2389-research/mammoth v0.9.0 h1:CGGvPOBBrtXrHNw2cUSm+sh4JAT4YWH06mFXU4Gvdg4="
	"github.com/danshapiro/kilroy v0.1.0 h1:yCe5l7wQh0KtzLG7IaKf1O1bCVUIppz69bn14Wkta7Q="
	"github.com/2389-research/tracker v0.5.0 h1:jTxVUkJeZkr3no0rcyRHc8rD/NYWyA+GbmHJRsSx2n4="
)

log() { printf 'dot-corpus.sh: %s\n' "$*" >&2; }
command -v go >/dev/null || { log "go is needed"; exit 1; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [[ ${1:-} == --dir ]]; then
	shift
	(($# > 0)) || { log "--dir needs a directory"; exit 2; }
	# Git repositories are read at HEAD: their files are exported to a
	# temporary directory, one per repository, named after it.
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	roots=()
	for dir in "$@"; do
		[[ -d $dir ]] || { log "$dir is not a directory"; exit 2; }
		while IFS= read -r -d '' head; do
			repo=$(dirname "$head")
			git --git-dir="$repo" rev-parse --verify -q HEAD >/dev/null || continue
			name=$(basename "$repo")
			[[ $name == repo || $name == .git ]] && name=$(basename "$(dirname "$repo")")
			out=$tmp/$name
			mkdir -p "$out"
			while IFS= read -r -d '' path; do
				mkdir -p "$out/$(dirname "$path")"
				git --git-dir="$repo" cat-file blob "HEAD:$path" >"$out/$path"
			done < <(git --git-dir="$repo" ls-tree -r -z --name-only HEAD | grep -z '\.dot$' || true)
			roots+=("$out")
		done < <(find "$dir" -name HEAD -type f -print0)
		roots+=("$dir")
	done
	cd "$root" && exec go run ./internal/dotcorpus/dotcount "${roots[@]}"
fi

offline=false
[[ ${1:-} == --print-path ]] && offline=true

# download prints a module's directory, from the module cache (no network)
# or, unless offline, from the proxy, and checks its hash against the pin.
download() {
	local mod=$1 ver=$2 sum=$3 json dir got
	# Outside any module: go.mod is not consulted or changed.
	# From the cache alone: its hash, checked against the pin below, stands
	# for the checksum database, which was asked when it was downloaded.
	if ! json=$(cd / && GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off go mod download -json "$mod@$ver" 2>/dev/null); then
		$offline && return 1
		log "downloading $mod@$ver from the module proxy"
		json=$(cd / && GOFLAGS=-mod=mod go mod download -json "$mod@$ver") || { log "go mod download $mod@$ver failed: $json"; return 1; }
	fi
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
	got=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$json")
	[[ $got == "$sum" ]] || { log "$mod@$ver: hash $got, pinned $sum"; return 1; }
	[[ -d $dir ]] || { log "$mod@$ver: no directory ($json)"; return 1; }
	printf '%s' "$dir"
}

dirs=()
for pin in "${PINS[@]}"; do
	read -r mod ver sum <<<"$pin"
	dirs+=("$(download "$mod" "$ver" "$sum")") || exit 1
done
(IFS=:; echo "${dirs[*]}")
