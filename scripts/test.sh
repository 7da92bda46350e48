#!/usr/bin/env bash
# Set up, build everything and run every test (unit, fakes, fuzz, integration).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
start=$(date +%s)
"$root/scripts/build.sh"
built=$(date +%s)
build=${VGPU_BUILD_DIR:-$root/build}
status=0
ctest --test-dir "$build" -j "${VGPU_JOBS:-$(nproc)}" --output-on-failure --timeout 600 || status=$?
echo "vgpu: build $((built - start)) s, tests $(($(date +%s) - built)) s"
exit "$status"
