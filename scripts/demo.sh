#!/usr/bin/env bash
# Set up, build and run the demo: vgpu-sim places the example workload (examples/pods.yaml)
# on the example cluster (examples/cluster.yaml) with the scheduler's own engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" vgpu-sim
build=${VGPU_BUILD_DIR:-$root/build}
exec "$build/bin/vgpu-sim" --cluster "$root/examples/cluster.yaml" --pods "$root/examples/pods.yaml" \
  --config "$root/examples/device-config.yaml" "$@"
