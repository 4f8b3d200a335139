#!/usr/bin/env bash
# Fails when regenerating gen/ from proto/ would change anything: generated
# code is never edited by hand and never stale.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
cd "${root}"

PATH="$("${root}/hack/build-bins.sh" tools | tail -n 1):${PATH}"
fresh=$(mktemp -d)
trap 'rm -rf "${fresh}"' EXIT
buf generate --path proto/jobplane -o "${fresh}"
if ! diff -r "${fresh}/gen/jobplane" gen/jobplane; then
  die "gen/ is out of date with proto/: run make generate"
fi
