#!/bin/sh
# rust-toolchain.sh installs the Rust toolchain morph's Rust guests build with:
# Debian's rustc and cargo, the wasm32 standard library, and the serde crates
# Debian packages (the offline registry under /usr/share/cargo/registry, used
# through guests/rust/.cargo/config.toml and examples/rust-hooks/.cargo/config.toml).
#
# No crates.io and no rustup target: only Debian packages. Idempotent: it
# installs only the packages dpkg does not report installed, and runs
# `apt-get update` first only when there is something to install. Runs as
# root (CI) or through sudo.
#
# Build with /usr/bin/rustc, never the rustup rustc that may be first on PATH
# (it has no wasm32 standard library):
#   RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --target wasm32-unknown-unknown
set -eu

PACKAGES="rustc cargo libstd-rust-dev-wasm32 librust-serde-json-dev librust-serde-derive-dev"

missing=""
for pkg in $PACKAGES; do
	if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
		continue
	fi
	missing="$missing $pkg"
done

if [ -z "$missing" ]; then
	echo "rust-toolchain: all installed ($PACKAGES)"
else
	if [ "$(id -u)" = 0 ]; then
		SUDO=""
	elif command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "rust-toolchain: missing:$missing; need root or sudo to install them" >&2
		exit 1
	fi
	echo "rust-toolchain: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	echo "rust-toolchain: apt-get update"
	$SUDO apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	$SUDO apt-get install -y -qq $missing
	echo "rust-toolchain: installed:$missing"
fi

for f in /usr/bin/rustc /usr/bin/cargo /usr/share/cargo/registry; do
	if [ ! -e "$f" ]; then
		echo "rust-toolchain: $f is missing after the install" >&2
		exit 1
	fi
done
if ! ls -d /usr/lib/rustlib/wasm32-unknown-unknown >/dev/null 2>&1; then
	echo "rust-toolchain: the wasm32-unknown-unknown standard library is missing (libstd-rust-dev-wasm32)" >&2
	exit 1
fi
echo "rust-toolchain: $(/usr/bin/rustc --version), $(/usr/bin/cargo --version)"
