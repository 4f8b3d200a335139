#!/usr/bin/env bash
# Builds a group of pinned binaries from the Go modules in hack/ into a cache
# outside git, and prints the directory holding them on its last line of stdout.
#
#   hack/build-bins.sh cluster   etcd, kube-apiserver, kube-controller-manager,
#                                kube-scheduler, kubectl, kwok, kwokctl
#                                (hack/cluster/*; about 10 minutes the first time)
#   hack/build-bins.sh tools     buf, protoc-gen-go, protoc-gen-go-grpc,
#                                protoc-gen-go-vtproto-stable, grpcurl, staticcheck
#                                (hack/tools)
#
# The cache key is a hash of the group's go.mod/go.sum files, the build table
# below and the Go version: a group is built once, and again only when one of its
# pins changes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"

group=${1:-}
k8s_version=v1.36.3
# Kubernetes and kwok read their version from these variables: kwokctl picks the
# flags it passes to the components from it, and the apiserver reports it.
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=${k8s_version} \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
-X k8s.io/component-base/version.gitTreeState=clean"
kwok_ldflags="-X sigs.k8s.io/kwok/pkg/consts.Version=v0.7.0 \
-X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${k8s_version}"

# binary | module directory under hack/ | package | extra ldflags
case "$group" in
  cluster)
    modules=(cluster/kubernetes cluster/etcd cluster/kwok)
    table="etcd|cluster/etcd|go.etcd.io/etcd/server/v3|
kube-apiserver|cluster/kubernetes|k8s.io/kubernetes/cmd/kube-apiserver|${k8s_ldflags}
kube-controller-manager|cluster/kubernetes|k8s.io/kubernetes/cmd/kube-controller-manager|${k8s_ldflags}
kube-scheduler|cluster/kubernetes|k8s.io/kubernetes/cmd/kube-scheduler|${k8s_ldflags}
kubectl|cluster/kubernetes|k8s.io/kubernetes/cmd/kubectl|${k8s_ldflags}
kwok|cluster/kwok|sigs.k8s.io/kwok/cmd/kwok|${kwok_ldflags}
kwokctl|cluster/kwok|sigs.k8s.io/kwok/cmd/kwokctl|${kwok_ldflags}"
    ;;
  tools)
    modules=(tools)
    table="buf|tools|github.com/bufbuild/buf/cmd/buf|
protoc-gen-go|tools|google.golang.org/protobuf/cmd/protoc-gen-go|
protoc-gen-go-grpc|tools|google.golang.org/grpc/cmd/protoc-gen-go-grpc|
protoc-gen-go-vtproto-stable|tools|github.com/jobplane/jobplane/hack/tools/cmd/protoc-gen-go-vtproto-stable|
grpcurl|tools|github.com/fullstorydev/grpcurl/cmd/grpcurl|
staticcheck|tools|honnef.co/go/tools/cmd/staticcheck|"
    ;;
  *) die "usage: $0 cluster|tools" ;;
esac

pins=()
for m in "${modules[@]}"; do pins+=("${root}/hack/${m}/go.mod" "${root}/hack/${m}/go.sum"); done
key=$( (cat "${pins[@]}"; echo "$table"; go env GOVERSION) | sha256sum | cut -c1-16)
bin="${JOBPLANE_CACHE}/${group}/${key}/bin"

missing=()
while IFS='|' read -r name _; do
  [[ -x "${bin}/${name}" ]] || missing+=("$name")
done <<<"$table"
if ((${#missing[@]} == 0)); then
  echo "${bin}"
  exit 0
fi

mkdir -p "${bin}"
log "building ${missing[*]} into ${bin}"
[[ $group == cluster ]] && log "the first build of the cluster takes about 10 minutes on 2 cores; it is cached afterwards"
start=$SECONDS
n=0
while IFS='|' read -r name dir pkg ldflags; do
  [[ -x "${bin}/${name}" ]] && continue
  n=$((n + 1))
  buildlog="${bin}/../build-${name}.log"
  log "[${n}/${#missing[@]}] ${name} (${pkg})"
  # -v names every package as it is compiled: counting them is the progress shown.
  (cd "${root}/hack/${dir}" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go build -v -trimpath -ldflags "-s -w ${ldflags}" -o "${bin}/${name}.tmp" "${pkg}") >"${buildlog}" 2>&1 &
  pid=$!
  last=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS - last >= 10)) && kill -0 "$pid" 2>/dev/null; then
      last=$SECONDS
      log "    ${name}: $(wc -l <"${buildlog}") packages compiled, $((SECONDS - start))s elapsed"
    fi
  done
  if ! wait "$pid"; then
    tail -30 "${buildlog}" >&2
    die "building ${name} failed; full log in ${buildlog}"
  fi
  mv "${bin}/${name}.tmp" "${bin}/${name}"
done <<<"$table"
log "${group} binaries ready in $((SECONDS - start))s"
echo "${bin}"
