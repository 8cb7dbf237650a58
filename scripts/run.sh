#!/usr/bin/env bash
# Installs containerd and runc if missing, builds kelp and its demo images,
# and starts a one-node cluster with the embedded defaults: state in
# /var/lib/kelp, the API on :6443, the admin kubeconfig in
# /etc/kelp/kelp.yaml. The images (busybox, kelp/demo) go into the agent's
# air-gap directory, so the seed app runs without a registry. Extra
# arguments go to `kelp server`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_pkgs ca-certificates $NODE_PKGS
bash scripts/build.sh
data_dir="${KELP_DATA_DIR:-/var/lib/kelp}"
bash scripts/images.sh "$data_dir/agent/images" >/dev/null
exec ./bin/kelp server "$@"
