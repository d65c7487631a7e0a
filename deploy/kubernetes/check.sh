#!/usr/bin/env bash
# Decodes every manifest in deploy/kubernetes strictly into the Kubernetes API types (a
# misspelled or unknown field fails) and checks that they fit together; see
# check/manifests_test.go. Needs Go (modules from the Go module proxy; go.sum pins them).
set -euo pipefail
cd "$(dirname "$0")/check"
go test -count=1 ./...
