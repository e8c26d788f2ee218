#!/usr/bin/env bash
# Check the CRDs (and sample objects) with kube-apiserver's own code, not an emulation.
#
# Runs crdcheck (hack/crdcheck/main.go, built by hack/kube-bin.sh against
# k8s.io/apiextensions-apiserver, the library kube-apiserver uses to admit CRDs and custom resources):
#   * every CRD goes through ValidateCustomResourceDefinition: structural schema, defaults, CEL
#     compilation and cost limits, exactly as `kubectl apply` of the CRD would be judged;
#   * every object after `--` is pruned, null-pruned, defaulted and validated (OpenAPI + CEL) as
#     the apiserver does on create; it prints VALID/INVALID, the messages and the pruned fields.
#
#   hack/crdcheck.sh                                  # manifests/crds + manifests/default-queue.yaml
#   hack/crdcheck.sh crd.yaml... -- objects.yaml...
#
# Needs Go and the module proxy the first time (the build is shared with kube-apiserver's); the test
# suite (tests/manifests/test_crds.py) runs the same binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir="$(bash hack/kube-bin.sh | tail -n 1)"
if [ "$#" -eq 0 ]; then
  set -- manifests/crds/*.yaml -- manifests/default-queue.yaml
fi
exec "$bin_dir/crdcheck" "$@"
