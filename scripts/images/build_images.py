# scripts/build-images.sh: builds the images of docker/images.toml as OCI archives from a
# build folder, without a daemon or registry, and writes images.txt; caches each image by a
# hash of all its inputs so that a run with nothing changed rebuilds nothing.
import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import debian_root
import image_list
import oci

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KEEP_PER_IMAGE = 3  # archives kept per image name in the cache (the newest)


class NotRoot(Exception):
    pass


def say(msg):
    print(f"build-images: {msg}", flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="scripts/build-images.sh",
        description="Build vgpu's images (docker/images.toml) as OCI archives, without a daemon or registry.")
    p.add_argument("--build-dir", required=True, help="a CMake build folder of this repository")
    p.add_argument("--out", required=True, help="where <name>.oci.tar and images.txt go")
    p.add_argument("--k8s-binary", action="append", default=[],
                   help="tests/realk8s's multi-call binary; one kube-scheduler image per binary")
    p.add_argument("--k8s-release", action="append", default=[], help="X.Y of the --k8s-binary at the same place")
    p.add_argument("--image", action="append", default=[], help="build only this image (repeatable)")
    p.add_argument("--list", default=os.path.join(REPO, "docker/images.toml"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if len(args.k8s_binary) != len(args.k8s_release):
        p.error("give one --k8s-release X.Y for each --k8s-binary")
    if not os.path.isfile(os.path.join(args.build_dir, "CMakeCache.txt")):
        p.error(f"--build-dir {args.build_dir} is not a CMake build folder (no CMakeCache.txt)")
    return args


def k8s_versions(binaries, releases):
    """(binary, X.Y, vX.Y.Z) for each binary, the version being what `k8s version` says."""
    out = []
    for binary, release in zip(binaries, releases):
        if not re.fullmatch(r"\d+\.\d+", release):
            raise image_list.ListError(f"--k8s-release {release!r} is not X.Y")
        if not os.access(binary, os.X_OK):
            raise image_list.ListError(f"--k8s-binary {binary} is not an executable file")
        r = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=60)
        m = re.search(r"kubernetes (v(\d+\.\d+)\.\d+)", r.stdout)
        if r.returncode != 0 or not m:
            raise image_list.ListError(f"`{binary} version` said {r.stdout.strip()!r} {r.stderr.strip()!r}, "
                                       "not \"kubernetes vX.Y.Z ...\" (tests/realk8s/cmd/main.go)")
        if m.group(2) != release:
            raise image_list.ListError(f"--k8s-binary {binary} is Kubernetes {m.group(1)}, not --k8s-release {release}")
        out.append((os.path.abspath(binary), release, m.group(1)))
    return out


def build_targets(build, images):
    """Builds the images' targets (ninja/make do nothing when they are up to date)."""
    targets = sorted({t for img in images for t in img.targets})
    if not targets:
        return
    jobs = os.environ.get("VGPU_JOBS", str(os.cpu_count() or 1))
    r = subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", *targets],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:])
        raise image_list.ListError(f"cmake --build {build} --target {' '.join(targets)} failed (a build "
                                   "configured without tests lacks the test-workload and pause targets: --image picks)")


def file_hash(path, memo={}):
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in memo:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        memo[key] = h.hexdigest()
    return memo[key]


def builder_hash():
    h = hashlib.sha256()
    for n in sorted(os.listdir(HERE)):
        if n.endswith(".py"):
            h.update(n.encode() + b"\0" + open(os.path.join(HERE, n), "rb").read())
    return h.hexdigest()


def image_key(img, entries, base_digests):
    """Everything the archive is made of: the entry, the files' contents, the Debian
    layers' digests, and this builder's own code."""
    inputs = {
        "name": img.name, "ref": img.ref, "user": img.user, "entrypoint": img.entrypoint,
        "labels": img.labels, "base": base_digests,
        "files": [[to, mode, text if text is not None else file_hash(src)] for src, text, to, mode in entries],
        "builder": builder_hash(),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]


def place(src, dst):
    """Puts the cached archive at dst: a hard link where it can, a copy elsewhere."""
    if os.path.lexists(dst):
        os.unlink(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def prune(folder):
    archives = sorted((os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".oci.tar")),
                      key=os.path.getmtime, reverse=True)
    for old in archives[KEEP_PER_IMAGE:]:
        os.unlink(old)


def build(args):
    start = time.monotonic()
    build_dir, out = os.path.abspath(args.build_dir), os.path.abspath(args.out)
    cache = image_list.cache_dir()
    mirror = os.environ.get("VGPU_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    entries = image_list.load(args.list)
    images = image_list.expand(entries, image_list.app_version(REPO),
                               k8s_versions(args.k8s_binary, args.k8s_release))
    if args.image:
        unknown = set(args.image) - {i.name for i in images}
        if unknown:
            raise image_list.ListError(f"--image {sorted(unknown)}: not among {[i.name for i in images]}")
        images = [i for i in images if i.name in args.image]
    os.makedirs(cache, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    blobs = os.path.join(cache, "blobs")
    # One run at a time per cache: a second one waits, then finds the first one's work.
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build_targets(build_dir, images)
        base_root = base_layer = None
        lines, built = [], 0
        for img in images:
            entries = image_list.resolve_sources(img, build_dir)
            layers = []
            if img.base == "debian":
                if base_layer is None:
                    if os.geteuid() != 0:
                        raise NotRoot("SKIPPED: making the Debian root needs root (debootstrap, chroot)")
                    base_root, base_layer = debian_root.base(cache, blobs, mirror, say)
                layers.append(base_layer)
                if img.packages:
                    layers.append(debian_root.packages(cache, blobs, base_root, base_layer, img.packages, say))
            key = image_key(img, entries, [l["digest"] for l in layers])
            folder = os.path.join(cache, "images", img.name)
            archive = os.path.join(folder, key + ".oci.tar")
            if not os.path.exists(archive):
                os.makedirs(folder, exist_ok=True)
                layers.append(oci.write_layer(blobs, lambda tar: oci.add_files(tar, entries)))
                manifest = oci.write_image(blobs, layers, img.user, img.entrypoint, img.labels)
                oci.write_archive(archive, blobs, manifest, img.ref)
                # The archive holds them; only the Debian layers are shared and kept as blobs.
                for digest in (manifest["digest"], manifest["config"]["digest"], manifest["layers"][-1]["digest"]):
                    os.unlink(oci.blob_path(blobs, digest))
                say(f"built {img.name} ({img.ref})")
                built += 1
                prune(folder)
            else:
                os.utime(archive)  # the newest is kept longest
            dst = os.path.join(out, img.name + ".oci.tar")
            place(archive, dst)
            lines.append(f"{img.name} {img.ref} {dst}\n")
    with open(os.path.join(out, "images.txt.tmp"), "w") as f:
        f.writelines(lines)
    os.replace(os.path.join(out, "images.txt.tmp"), os.path.join(out, "images.txt"))
    say(f"{len(images)} images in {out} ({built} built, {len(images) - built} from {cache}) "
        f"in {time.monotonic() - start:.1f} s; list: {os.path.join(out, 'images.txt')}")


def main(argv):
    args = parse_args(argv)
    try:
        build(args)
    except (image_list.ListError, debian_root.RootError) as e:
        print(f"build-images: {e}", file=sys.stderr)
        return 1
    except NotRoot as e:
        print(f"build-images: {e}", file=sys.stderr)
        return 77  # ctest: skipped
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
