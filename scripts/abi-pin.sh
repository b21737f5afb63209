#!/usr/bin/env bash
# scripts/abi-pin.sh: pin every module's requirement on github.com/morphhost/morph/abi to the pseudo-version of
# the last commit that changed abi/, so that `go get github.com/morphhost/morph@<commit or latest>` resolves abi
# from the same repository with no replace and no tag (README, "Using morph from another module"). The replace
# directives stay: in the checkout each module still builds against ./abi.
#
# Usage:
#   scripts/abi-pin.sh          print the pseudo-version only
#   scripts/abi-pin.sh --write  also write it into every go.mod that requires abi (run after committing abi/)
#
# internal/doccheck's TestABIPinned fails when abi/ changed after the pinned commit.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git diff --quiet HEAD -- abi; then
	echo "abi-pin: abi/ has uncommitted changes: commit them first (the pin names a commit)" >&2
	exit 1
fi
# A pseudo-version is v0.0.0-<committer time, UTC>-<12 hex digits of the commit>.
rev=$(TZ=UTC git log -1 --format='%cd-%H' --date=format-local:%Y%m%d%H%M%S -- abi)
version="v0.0.0-${rev:0:27}"
if [[ "${1:-}" == "--write" ]]; then
	grep -l 'github.com/morphhost/morph/abi v' $(git ls-files '*go.mod') | while read -r mod; do
		(cd "$(dirname "$mod")" && go mod edit -require="github.com/morphhost/morph/abi@$version")
		echo "abi-pin: $mod requires abi $version" >&2
	done
fi
echo "$version"
