#!/usr/bin/env python3
"""Checks that every code block a doc marks with `<!-- snippet: PATH -->` (on the line
before the fence) is the text of that file, verbatim and whole lines, so a guide's code
cannot drift from the code that CI compiles.

usage: doc_snippets_test.py DOC.md SOURCE_ROOT
"""
import pathlib
import re
import sys

MARK = re.compile(r"^<!-- snippet: (\S+) -->$")


def snippets(lines):
    """(line number, path, block text) for each marked code block."""
    out = []
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"line {i + 1}: a snippet mark must be followed by a code fence")
            end = i + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                raise SystemExit(f"line {i + 2}: the code fence is never closed")
            out.append((i + 1, m.group(1), "\n".join(lines[i + 2:end]) + "\n"))
            i = end
        i += 1
    return out


def main():
    doc, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    found = snippets(doc.read_text().splitlines())
    if not found:
        raise SystemExit(f"{doc}: no `<!-- snippet: PATH -->` blocks")
    errors = []
    for line, path, block in found:
        source = root / path
        if not source.is_file():
            errors.append(f"{doc}:{line}: {path} does not exist")
            continue
        text = source.read_text()
        # Whole lines only: the block must start at a line start in the file.
        if not ("\n" + text).count("\n" + block):
            errors.append(f"{doc}:{line}: the block differs from {path}; copy the file's lines again")
    for e in errors:
        print(e, file=sys.stderr)
    print(f"{len(found) - len(errors)} of {len(found)} snippets match their files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
