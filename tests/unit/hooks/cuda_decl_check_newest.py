#!/usr/bin/env python3
"""Compiles cuda_decl_check.cpp against the cuda.h of the newest CUDA 13 runtime wheel on PyPI
(the one cuda_coverage.py fetches and caches), so vgpu's declarations are compared with the
newest header on every run, not only where a toolkit happens to be installed. Every check is
a static_assert: a difference is a compile error that names it.

Usage: cuda_decl_check_newest.py --cache DIR --cxx CXX --source-dir <repo root>
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_coverage import fail, fetch_header  # noqa: E402  (one download, one cache)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()

    header = fetch_header(args.cache)
    text = open(header, encoding="utf-8", errors="replace").read()
    print(f"header={header}")
    with tempfile.TemporaryDirectory() as tmp:
        # The per-thread pairs cuda.h names through its renaming macros (as CMake reads them
        # for an installed header: tests/unit/hooks/CMakeLists.txt).
        twins = re.findall(r"^[ \t]*#define[ \t]+[A-Za-z0-9_]+[ \t]+__CUDA_API_PT(SZ|DS)\(([A-Za-z0-9_]+)\)", text, re.M)
        with open(os.path.join(tmp, "real_per_thread_twins.inc"), "w") as f:
            for kind, function in twins:
                f.write(f"VGPU_REAL_TWIN({function}, {function}_pt{kind.lower()})\n")
        src = args.source_dir
        cmd = [args.cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
               "-Wnon-virtual-dtor", "-Wno-restrict", "-I", tmp,
               "-isystem", os.path.dirname(header), "-I", os.path.join(src, "hooks/cuda/include"),
               "-I", os.path.join(src, "tests/unit/hooks"), os.path.join(src, "tests/unit/hooks/cuda_decl_check.cpp")]
        run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        errors = [line for line in run.stderr.splitlines() if "error" in line]
        fail(f"vgpu's CUDA declarations differ from {header}:\n  " + "\n  ".join(errors[:40]) +
             f"\n(command: {' '.join(cmd)})")
    print("vgpu's CUDA declarations agree with it")


if __name__ == "__main__":
    main()
