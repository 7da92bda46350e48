#!/usr/bin/env bash
# Configure and build vgpu into build/ (or $VGPU_BUILD_DIR) with Ninja. Extra arguments are
# build targets; none means everything. $VGPU_CMAKE_ARGS adds configure options, e.g.
# VGPU_CMAKE_ARGS="-DVGPU_WITHOUT_REALK8S=ON" (every switch: docs/development.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$root/build}
jobs=${VGPU_JOBS:-$(nproc)}
generator=()
# A build folder keeps the generator it was made with; only a new one gets Ninja.
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
# shellcheck disable=SC2086 # VGPU_CMAKE_ARGS is a list of options
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${VGPU_CMAKE_ARGS:-}
if [ "$#" -gt 0 ]; then
  cmake --build "$build" -j "$jobs" --target "$@"
else
  cmake --build "$build" -j "$jobs"
fi
