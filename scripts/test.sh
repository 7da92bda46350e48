#!/usr/bin/env bash
# Set up, build everything and run every test (unit, fakes, fuzz, end-to-end, real cluster),
# then print how many tests ran per area. A test is skipped only by an explicit switch
# (docs/development.md); anything else that is missing fails the build with its reason.
# The scale benchmark and the chaos soaks (labels scale and soak, many minutes) are left out:
# `ctest -L scale` and `ctest -L soak` run them (docs/reliability.md, "In CI").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${VGPU_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
start=$(date +%s)
"$root/scripts/build.sh"
built=$(date +%s)
status=0
# The labels scale (the scale benchmark) and soak (the chaos soaks) stay out of the default run.
ctest --test-dir "$build" -j "${VGPU_JOBS:-$(nproc)}" --output-on-failure --timeout 600 -LE '^(scale|soak)$' \
  --output-junit "$build/ctest-results.xml" || status=$?
python3 "$root/scripts/test_summary.py" "$build" "$build/ctest-results.xml" || status=1
echo "vgpu: build $((built - start)) s, tests $(($(date +%s) - built)) s"
exit "$status"
