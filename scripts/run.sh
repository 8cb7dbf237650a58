#!/usr/bin/env bash
# Builds kelp and starts the cluster with the embedded defaults: state in
# /var/lib/kelp, the API on :6443, the admin kubeconfig in /etc/kelp/kelp.yaml.
# Extra arguments go to `kelp server`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./bin/kelp server "$@"
