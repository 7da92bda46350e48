#!/usr/bin/env bash
# scripts/new-backend.sh makes a backend that builds as a standalone CMake project against
# vgpu's SDK, installed as the guide says (cmake --install B --component sdk), and passes
# vgpu-backend-check's skeleton profile, out of the box.
#   template_test.sh <source root> <vgpu build dir>
set -euo pipefail
root=$1 build=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-template-XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=sdk_build.sh
source "$(dirname "$0")/sdk_build.sh"

# The SDK component alone: headers, libvgpu_core.a, vgpu-backend-check, nothing else.
install_sdk "$build" "$work/sdk"
for f in include/vgpu/sdk/backend_adapter.h lib/libvgpu_core.a bin/vgpu-backend-check; do
  [[ -e $work/sdk/$f ]] || { echo "the sdk component did not install $f" >&2; exit 1; }
done
if [[ -e $work/sdk/bin/vgpu-scheduler || -d $work/sdk/lib/vgpu ]]; then
  echo "the sdk component installed more than the SDK: $(cd "$work/sdk" && find . -type f | head)" >&2; exit 1
fi

"$root/scripts/new-backend.sh" acme "$work/acme"
# Upper-case macros and environment variables; the project's warnings.
grep -q '#define ACME_DEVICE_COUNT_SYMBOL' "$work/acme/acme_api.h"
grep -q 'getenv("VGPU_FAKE_ACME_CONFIG")' "$work/acme/fake/fake_acme.c"
grep -q -- '-Wall -Wextra -Wpedantic -Werror' "$work/acme/CMakeLists.txt"
grep -q '^  # add_test(NAME acme.conformance' "$work/acme/CMakeLists.txt"  # the commented full profile
build_and_test "$work/acme" "$work/build" "$work/sdk" "$work/ctest.log"
# The template refuses scaling until its discovery applies it, and the checker says so.
grep -q 'PASS *create.memory_scaling' "$work/ctest.log"
grep -q 'PASS *create.core_scaling' "$work/ctest.log"

# A name that is not one, and an existing folder, are refused with words.
if "$root/scripts/new-backend.sh" Bad-Name "$work/bad" 2>"$work/err"; then echo "Bad-Name accepted" >&2; exit 1; fi
grep -q "is not a backend name" "$work/err"
if "$root/scripts/new-backend.sh" acme "$work/acme" 2>"$work/err"; then echo "overwrote $work/acme" >&2; exit 1; fi
grep -q "exists and is not empty" "$work/err"
echo "template OK"
