#!/usr/bin/env bash
# Fails when the scheduler's folder (extender/) and the node agent's folder reach into each
# other: a CMake file naming the other's folder or linking one of its libraries, or a source
# including a header that exists only in the other's folder. What both need lives in core/.
# Also fails on an agent source over 800 lines or one that does not open with a comment on
# what it owns (issue 38: one concept per file).
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
agent=agent
scheduler=extender
status=0

# The libraries a folder defines (add_library names in its CMake files).
libraries() {
  grep -rhoE 'add_library\([A-Za-z0-9_]+' --include=CMakeLists.txt --include='*.cmake' "$root/$1" |
    sed 's/add_library(//' | sort -u
}
# Every header file name under a folder.
headers() { find "$root/$1" -name '*.h' -printf '%f\n' | sort -u; }

# check FROM TO: nothing in FROM names TO's folder, links TO's libraries or includes TO's headers.
check() {
  local from=$1 to=$2 lib name
  if grep -rnE "(PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}?/$to\b|\.\./$to/" \
       --include=CMakeLists.txt --include='*.cmake' --include='*.h' --include='*.cpp' "$root/$from"; then
    echo "layering: $from/ names $to/ (above)" >&2; status=1
  fi
  for lib in $(libraries "$to"); do
    if grep -rnwE "$lib" --include=CMakeLists.txt --include='*.cmake' "$root/$from"; then
      echo "layering: $from/ links $to/'s library $lib (above)" >&2; status=1
    fi
  done
  local own theirs
  own=$( (headers "$from"; find "$root/core" -name '*.h' -printf '%f\n') | sort -u)
  theirs=$(comm -23 <(headers "$to") <(echo "$own"))
  for name in $theirs; do
    if grep -rnE "#include [\"<]([^\">]*/)?$name[\">]" --include='*.h' --include='*.cpp' "$root/$from"; then
      echo "layering: $from/ includes $to/'s header $name (above)" >&2; status=1
    fi
  done
}

check "$scheduler" "$agent"
check "$agent" "$scheduler"

while IFS= read -r file; do
  lines=$(wc -l <"$file")
  if [ "$lines" -gt 800 ]; then
    echo "layering: ${file#"$root"/} has $lines lines (at most 800: split it by concern)" >&2; status=1
  fi
  first=$(awk '!/^#pragma once/ && NF { print; exit }' "$file")
  if [[ "$first" != //* ]]; then
    echo "layering: ${file#"$root"/} does not open with a comment on what it owns" >&2; status=1
  fi
done < <(find "$root/$agent" -name '*.cpp' -o -name '*.h' | sort)

[ "$status" = 0 ] && echo "layering: $scheduler/ and $agent/ do not reach into each other; $agent/'s files are under 800 lines"
exit "$status"
