#!/usr/bin/env bash
# docs/writing-a-backend.md's walk-through, followed step by step as a vendor would, with no
# source file read: the template, the SDK installed from its `sdk` component, the
# walk-through's three files (docs/examples/backend-walkthrough), the doc's node.conf and the
# template's commented full-profile test switched on; the full profile must pass.
#   walkthrough_follow_test.sh <source root> <vgpu build dir>
set -euo pipefail
root=$1 build=$2
doc=$root/docs/writing-a-backend.md
work=$(mktemp -d "${TMPDIR:-/tmp}/vgpu-walkthrough-XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=sdk_build.sh
source "$(dirname "$0")/sdk_build.sh"

# Step 0: the SDK (its build is the caller's), the template.
install_sdk "$build" "$work/sdk"
"$root/scripts/new-backend.sh" quokka "$work/quokka" >/dev/null
# Steps 1-8: the complete backend the doc's blocks come from.
cp "$root/docs/examples/backend-walkthrough/quokka_api.h" "$root/docs/examples/backend-walkthrough/quokka_backend.cpp" \
  "$work/quokka/"
cp "$root/docs/examples/backend-walkthrough/fake_quokka.c" "$work/quokka/fake/"
# Step 9: the doc's node.conf block, then the full-profile test in place of the skeleton one.
awk '/^<!-- node.conf -->$/ {on=1; next} on && /^```/ {if (seen) exit; seen=1; next} on && seen {print}' "$doc" \
  >"$work/quokka/fake/node.conf"
[[ -s $work/quokka/fake/node.conf ]] || { echo "no node.conf block in $doc" >&2; exit 1; }
cmake_file=$work/quokka/CMakeLists.txt
sed -i -e '/^  # Skeleton profile until/,/^  set_tests_properties(quokka.conformance/d' \
  -e '/^  # add_test(NAME quokka.conformance/,/^  #  *ENVIRONMENT/ s/^  # /  /' "$cmake_file"
grep -q '^  add_test(NAME quokka.conformance' "$cmake_file" || { echo "no full-profile test to switch on" >&2; exit 1; }

build_and_test "$work/quokka" "$work/build-quokka" "$work/sdk" "$work/ctest.log"
grep -q 'PASS *errors.device_vanishes' "$work/ctest.log"
grep -q 'PASS *discovery.discover' "$work/ctest.log"
grep -q 'PASS *limiter' "$work/ctest.log"
grep -q 'profile full: [0-9]* passed, 0 failed' "$work/ctest.log"
echo "walk-through OK"
