#!/usr/bin/env python3
# Writes docker/*.Dockerfile (and their .dockerignore) from docker/images.toml, so that the
# docker way and scripts/build-images.sh install the same things. --check: exit 1 with a
# diff when a Dockerfile on disk is not what the list gives (ctest ImagesDockerfilesMatchTheList).
import argparse
import difflib
import json
import os
import sys

import image_list

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DOCKERIGNORE = """\
# BuildKit reads this beside {name}: keep build trees and git history out of the context.
.git
build
build-*
**/CMakeCache.txt
"""


def _comment(text):
    return [("# " + line).rstrip() for line in text.strip("\n").splitlines()]


def _wrapped(first, words, width=92):
    """first + words over as many lines as width allows, continued lines indented 6."""
    lines, line = [], first
    for w in words:
        if len(line) + 1 + len(w) > width and line.strip():
            lines.append(line + " \\")
            line = "     "
        line += " " + w
    return lines + [line]


def _steps(lines):
    """RUN a \\\n && b ...: one RUN of several commands, in the Dockerfiles' style."""
    return ["RUN " + lines[0]] + [" && " + l for l in lines[1:]]


def dockerfile(entry, app_version):
    img = image_list.expand([entry], app_version, [])[0]
    path = entry["dockerfile"]
    tag = img.ref.removeprefix("docker.io/")
    out = _comment(entry["about"]) + [
        "#", f"#   docker build -f {path} -t {tag} .", "#",
        "# Run from the repository root. Generated from docker/images.toml by",
        "# scripts/images/dockerfiles.py: change the list, not this file.", "",
        "FROM debian:12 AS build", "WORKDIR /src", "COPY . ."]
    if entry.get("cmake_args"):
        out.append(f"ENV VGPU_CMAKE_ARGS={entry['cmake_args']}")
    run = ["scripts/install-deps.sh \\"]
    built = _wrapped("VGPU_BUILD_DIR=/build scripts/build.sh", img.targets)
    run += [built[0]] + ["\b" + l for l in built[1:]]
    run[-1] += " \\"
    for f in img.files:
        if f.text is not None or "{" in f.source or os.path.isabs(f.source):
            raise image_list.ListError(f"{img.name}: {f.to} does not come from the build folder: no Dockerfile can make it")
        if any(c in f.source for c in "*?["):
            run.append(f"mkdir -p /out{f.to.rstrip('/')} \\")
            run.append(f"install -m {f.mode:04o} /build/{f.source} /out{f.to} \\")
        else:
            run.append(f"install -D -m {f.mode:04o} /build/{f.source} /out{f.to} \\")
    run[-1] = run[-1].removesuffix(" \\")
    out += [l.replace(" && \b", "") for l in _steps(run)] + [""]
    if img.base == "scratch":
        out.append("FROM scratch")
    else:
        out.append("FROM debian:12-slim")
        if img.packages:
            if entry.get("packages_why"):
                out += _comment(entry["packages_why"])
            out += ["RUN apt-get update \\",
                    " && apt-get install -y --no-install-recommends \\",
                    *_wrapped("     ", entry["packages"]),
                    " && rm -rf /var/lib/apt/lists/*"]
            out[-2] += " \\"
    out.append("COPY --from=build /out/ /")
    if img.check:
        out += ["# Fail the build, not the node, when a runtime library is missing.",
                "RUN ! ldd " + " ".join(img.check) + ' | grep "not found"']
    if entry.get("user_why"):
        out += _comment(entry["user_why"])
    if img.user:
        out.append(f"USER {img.user}")
    out.append("ENTRYPOINT " + json.dumps(img.entrypoint))
    return "\n".join(out) + "\n"


def wanted(list_path):
    """{path: contents} of every Dockerfile and .dockerignore the list gives."""
    app_version = image_list.app_version(REPO)
    files = {}
    for entry in image_list.load(list_path):
        if "dockerfile" in entry:
            path = entry["dockerfile"]
            files[path] = dockerfile(entry, app_version)
            files[path + ".dockerignore"] = DOCKERIGNORE.format(name=os.path.basename(path))
    return files


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    p.add_argument("--list", default=os.path.join(REPO, "docker/images.toml"))
    p.add_argument("--root", default=REPO, help="the repository whose docker/ is written or checked")
    args = p.parse_args(argv)
    try:
        files = wanted(args.list)
    except image_list.ListError as e:
        print(f"dockerfiles: {e}", file=sys.stderr)
        return 1
    differ = False
    for rel, text in sorted(files.items()):
        path = os.path.join(args.root, rel)
        try:
            with open(path) as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current == text:
            continue
        if args.check:
            differ = True
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                       rel + " (on disk)", rel + " (from docker/images.toml)"))
        else:
            with open(path, "w") as f:
                f.write(text)
            print(f"dockerfiles: wrote {rel}")
    if differ:
        print("dockerfiles: the Dockerfiles above differ from docker/images.toml; "
              "run scripts/images/dockerfiles.py to write them from it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
