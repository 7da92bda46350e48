#!/usr/bin/env bash
# Configure and build vgpu into build/ (or $VGPU_BUILD_DIR). Extra arguments are build
# targets; none means everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$root/build}
jobs=${VGPU_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
if [ "$#" -gt 0 ]; then
  cmake --build "$build" -j "$jobs" --target "$@"
else
  cmake --build "$build" -j "$jobs"
fi
