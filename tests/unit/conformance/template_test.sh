#!/usr/bin/env bash
# scripts/new-backend.sh makes a backend that builds as a standalone CMake project against
# vgpu's SDK and passes vgpu-backend-check's skeleton profile, out of the box.
#   template_test.sh <source root> <sdk include dir> <libvgpu_core.a> <vgpu-backend-check>
set -euo pipefail
root=$1 include=$2 core=$3 check=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-template-XXXXXX")
trap 'rm -rf "$work"' EXIT

"$root/scripts/new-backend.sh" acme "$work/acme"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$work/acme" -B "$work/build" "${generator[@]}" -DVGPU_SDK_INCLUDE_DIR="$include" \
  -DVGPU_CORE_LIBRARY="$core" -DVGPU_BACKEND_CHECK="$check" >/dev/null
cmake --build "$work/build"
ctest --test-dir "$work/build" --output-on-failure

# A name that is not one, and an existing folder, are refused with words.
if "$root/scripts/new-backend.sh" Bad-Name "$work/bad" 2>"$work/err"; then echo "Bad-Name accepted" >&2; exit 1; fi
grep -q "is not a backend name" "$work/err"
if "$root/scripts/new-backend.sh" acme "$work/acme" 2>"$work/err"; then echo "overwrote $work/acme" >&2; exit 1; fi
grep -q "exists and is not empty" "$work/err"
echo "template OK"
