#!/usr/bin/env bash
# Fails when the workspace resolves the Kubernetes libraries to another version
# than the one the local cluster is built from: a stray `go get` or tidy can
# silently move every module to a newer minor. Also fails when gen/ requires
# another vtprotobuf than the one its generator is built from.
set -euo pipefail
cd "$(dirname "$0")/.."
want=v0.36.3
for m in k8s.io/api k8s.io/apimachinery k8s.io/client-go; do
  got=$(go list -m -f '{{.Version}}' "$m")
  if [[ $got != "$want" ]]; then
    echo "error: $m resolves to $got in go.work, want $want" >&2
    exit 1
  fi
done

# The code vtprotobuf generates into gen/ calls its runtime at the version of
# the generator that wrote it (hack/tools).
tools=$(cd hack/tools && GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Version}}' github.com/planetscale/vtprotobuf)
runtime=$(go list -m -f '{{.Version}}' github.com/planetscale/vtprotobuf)
if [[ $tools != "$runtime" ]]; then
  echo "error: github.com/planetscale/vtprotobuf is $tools in hack/tools (the generator) but $runtime in go.work (gen/'s runtime)" >&2
  exit 1
fi
