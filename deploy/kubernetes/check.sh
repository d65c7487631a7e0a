#!/usr/bin/env bash
# Decodes every manifest in deploy/kubernetes strictly into the Kubernetes API types (a
# misspelled, unknown or duplicate field fails) and checks that they fit together; see
# check/manifests_test.go; also decodes what the kustomization renders (the generated plan
# ConfigMap included), with kubectl or, without it, kustomize from the module proxy.
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

# What the kustomization renders (the generated plan ConfigMap included) is checked too:
# with kubectl if it is installed, else with kustomize itself, pinned, from the module proxy.
kustomize=sigs.k8s.io/kustomize/kustomize/v5@v5.4.3
rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
if command -v kubectl >/dev/null 2>&1; then
  kubectl kustomize "$here" >"$rendered"
else
  GOFLAGS= "$gobin" run "$kustomize" build "$here" >"$rendered"
fi
export LOADLAB_K8S_RENDERED="$rendered"

"$gobin" test -count=1 ./...
