#!/usr/bin/env python3
"""Checks that libvgpu.so covers every CUDA driver entry point that can take device memory.

Reads the cuda.h of the newest CUDA 13 runtime wheel on PyPI (nvidia-cuda-runtime, which
carries nvidia/cu13/include/cuda.h), lists every exported entry point (each ABI variant under
its own name, as the header declares them for the driver itself) whose name says it can
allocate, map, import or free device memory, and requires each to be either exported by
libvgpu.so (a hook) or listed in docs/limiter.md's "Coverage of the CUDA driver API" table
with why it needs none. A new entry point in a new CUDA release fails this test, naming it.

The wheel is downloaded once into --cache (the build folder) and reused: a warm run needs no
network. No network and no cached wheel is a failure that says so, never a skip.

Usage: cuda_coverage.py --cache DIR --cc CC --nm NM --lib libvgpu.so --doc docs/limiter.md
       [--header cuda.h]   (a given header instead of the download; for trying one out)
Prints the path of the header it used as `header=...` (the declaration check reuses it).
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import zipfile

PACKAGE = "nvidia-cuda-runtime"  # CUDA 13 onwards: one package, the version is CUDA's
HEADER_IN_WHEEL = "nvidia/cu13/include/cuda.h"
SECTION = "Coverage of the CUDA driver API"

# What makes an entry point's name one that can take, map, import or free device memory.
SELECT = re.compile(
    r"Alloc|Free|Import|Export"
    r"|^cuMem(Create|Release|Map|Unmap|RetainAllocationHandle|HostRegister|HostUnregister)"
    r"|^cuMemPool|^cuDeviceGraphMem|^cuGraph(Add|Exec)?Mem(Alloc|Free)|^cuGraphAddNode|^cuGraphInstantiate|^cuGraphUpload"
    r"|^cu(Array|Array3D|MipmappedArray)(Create|Destroy)"
    r"|^cu(Ctx|GreenCtx)(Create|Destroy)|^cuDevicePrimaryCtx(Retain|Release|Reset)$|^cuCtxFromGreenCtx"
    r"|^cu(Module|Library)(Load|Unload)|^cuFuncLoad"
    r"|ExternalMemory|^cuMulticast|^cuLogicalEndpoint|^cuIpc(Open|Close)MemHandle"
    r"|^cuGraphics(Map|Unmap|UnregisterResource)"
)
# Queries and settings in those families: they take nothing. (cuExternalMemoryGetMapped* map
# memory and stay selected.)
IGNORE = re.compile(r"Get(?!Mapped)|Query|Enumerate|Set(Access|Attribute|Flags|Params)|IsLoaded|Callback|Semaphore"
                    r"|^cuTensorMap")
TWIN = re.compile(r"_(ptds|ptsz)$")  # the per-thread-default-stream twin of the same function


def fail(message):
    print(f"cuda_coverage: {message}", file=sys.stderr)
    sys.exit(1)


def cached_wheel(cache):
    def version(path):
        v = os.path.basename(path).split("-")[1]
        return [int(p) if p.isdigit() else 0 for p in v.split(".")]

    wheels = sorted(glob.glob(os.path.join(cache, "nvidia_cuda_runtime-13.*.whl")), key=version)
    return wheels[-1] if wheels else None


def fetch_header(cache):
    """The cuda.h of the newest CUDA 13 runtime wheel, downloaded into `cache` once."""
    os.makedirs(cache, exist_ok=True)
    wheel = cached_wheel(cache)
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--timeout", "30",
               "--retries", "2", "--dest", cache, f"{PACKAGE}>=13,<14"]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            fail(f"cannot run pip ({e}): install python3-pip")
        wheel = cached_wheel(cache)
        if run.returncode != 0 or wheel is None:
            fail(f"could not download {PACKAGE} (CUDA 13) from PyPI into {cache} to read its cuda.h: this test "
                 f"needs PyPI once per build folder (later runs use the cached wheel).\n"
                 f"  command: {' '.join(cmd)}\n  pip said: {(run.stderr or run.stdout).strip()[-2000:]}")
    header = os.path.join(cache, "include", os.path.basename(wheel)[: -len(".whl")], "cuda.h")
    if not os.path.exists(header):
        try:
            with zipfile.ZipFile(wheel) as z:
                data = z.read(HEADER_IN_WHEEL)
        except (zipfile.BadZipFile, KeyError) as e:
            fail(f"{wheel} has no {HEADER_IN_WHEEL} ({e}); delete it to download again")
        os.makedirs(os.path.dirname(header), exist_ok=True)
        with open(header + ".tmp", "wb") as f:
            f.write(data)
        os.replace(header + ".tmp", header)
    return header


def exported_entry_points(cc, header):
    """Every driver function cuda.h declares, under its exported ABI name.

    Preprocessed twice: as an application sees it (cuMemAlloc becomes cuMemAlloc_v2), and as
    the driver is built (__CUDA_API_VERSION_INTERNAL: the old ABIs under their own names and
    the per-thread-stream twins, _ptds/_ptsz)."""
    names = set()
    for defines in ([], ["-D__CUDA_API_VERSION_INTERNAL"]):
        run = subprocess.run([cc, "-E", "-P", "-x", "c", *defines, header], capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"{cc} could not preprocess {header}:\n{run.stderr[-2000:]}")
        names.update(re.findall(r"\bCUresult\s+(cu[A-Za-z0-9_]+)\s*\(", run.stdout))
    if len(names) < 400:
        fail(f"only {len(names)} entry points found in {header}: not a driver API header?")
    version = re.search(r"^#define CUDA_VERSION (\d+)", open(header, encoding="utf-8", errors="replace").read(), re.M)
    return names, version.group(1) if version else "?"


def hooked(nm, lib):
    run = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{nm} -D {lib} failed:\n{run.stderr}")
    return {line.split()[-1].split("@")[0] for line in run.stdout.splitlines() if line.strip()}


def documented(doc):
    """Entry points named in the first column of the coverage section's table whose header
    says "Why no hook" (the section's other tables describe hooks)."""
    text = open(doc, encoding="utf-8").read()
    start = text.find(SECTION)
    if start < 0:
        fail(f'{doc} has no section "{SECTION}"')
    end = text.find("\n## ", start)
    names = set()
    in_table = False
    for line in text[start : end if end > 0 else len(text)].splitlines():
        if not line.startswith("|"):
            in_table = False
        elif "Why no hook" in line:
            in_table = True
        elif in_table:
            names.update(re.findall(r"`(cu[A-Za-z0-9_]+)`", line.split("|")[1]))
    if not names:
        fail(f'the section "{SECTION}" of {doc} has no "| Entry points | Why no hook |" table naming entry points')
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--cc", required=True)
    ap.add_argument("--nm", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--header")
    args = ap.parse_args()

    header = args.header or fetch_header(args.cache)
    print(f"header={header}")
    names, version = exported_entry_points(args.cc, header)
    selected = sorted(n for n in names if SELECT.search(n) and not IGNORE.search(n))
    hooks = hooked(args.nm, args.lib)
    listed = documented(args.doc)
    # Exact names: a new ABI variant (_v2, _v3...) is a new decision, listed or hooked. A listed
    # name covers its per-thread twin, the same function on another default stream.
    missing = [n for n in selected if n not in hooks and n not in listed and TWIN.sub("", n) not in listed]
    print(f"cuda.h CUDA_VERSION {version}: {len(names)} entry points, {len(selected)} can take or give back "
          f"device memory: {sum(n in hooks for n in selected)} hooked, "
          f"{len(selected) - len(missing) - sum(n in hooks for n in selected)} documented as needing no hook")
    stale = sorted(n for n in listed if n in hooks)
    if stale:
        print(f"note: listed as needing no hook but hooked: {', '.join(stale)}")
    if missing:
        fail(f"{len(missing)} entry point(s) of CUDA {version} that can take device memory are neither hooked by "
             f"{args.lib} nor listed in {args.doc} (\"{SECTION}\"):\n  " + "\n  ".join(missing) +
             "\nHook each (hooks/cuda/hook_list.h) or add it to that table with why it needs no hook.")
    print("every one is covered")


if __name__ == "__main__":
    main()
