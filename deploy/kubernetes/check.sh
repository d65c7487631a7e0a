#!/usr/bin/env bash
# Decodes every manifest in deploy/kubernetes strictly into the Kubernetes API types (a
# misspelled, unknown or duplicate field fails) and checks that they fit together; see
# check/manifests_test.go. With kubectl installed, also decodes what `kubectl kustomize`
# renders (the generated plan ConfigMap included).
#
# Needs Go; modules come from the Go module proxy, pinned by check/go.sum. A Go older than
# check/go.mod's `go` line (Debian 12's golang-go is 1.19, which cannot switch toolchains
# itself) gets the Go toolchain below from the module proxy, checksum-verified, into the
# module cache. GOFLAGS, GOPROXY, GOMODCACHE and the like are respected.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/check"

toolchain=go1.22.12
gobin=go
need=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' go.mod)
have=$(go env GOVERSION | sed 's/^go//; s/[^0-9.].*//')
if [ "$(printf '%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  echo "check.sh: go $have is older than go.mod's $need: using $toolchain from the module proxy" >&2
  tmp=$(mktemp -d)
  dir=$(cd "$tmp" && GO111MODULE=on GOFLAGS= go mod download -json \
    "golang.org/toolchain@v0.0.1-$toolchain.$(go env GOOS)-$(go env GOARCH)" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rmdir "$tmp"
  [ -n "$dir" ] || { echo "check.sh: could not download $toolchain" >&2; exit 1; }
  # Module zips carry no file modes; the go command does the same for toolchains it fetches.
  chmod a+x "$dir"/bin/* "$dir"/pkg/tool/*/*
  gobin="$dir/bin/go"
  export GOTOOLCHAIN=local
fi

if command -v kubectl >/dev/null 2>&1; then
  rendered=$(mktemp)
  trap 'rm -f "$rendered"' EXIT
  kubectl kustomize "$here" >"$rendered"
  export LOADLAB_K8S_RENDERED="$rendered"
else
  echo "check.sh: no kubectl: the rendered kustomization is not checked (the manifests are)" >&2
fi

"$gobin" test -count=1 ./...
