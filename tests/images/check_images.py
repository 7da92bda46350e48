#!/usr/bin/env python3
# Checks the archives scripts/build-images.sh wrote (ctest Images.Check): each a valid OCI
# image layout naming its ref, with its own config, the files docker/images.toml lists,
# and every listed binary's shared libraries found inside the image (chroot ldd).
import argparse
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/images"))
import image_list  # noqa: E402

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, flush=True)


def sha256(f):
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    return "sha256:" + h.hexdigest()


def read_layout(name, ref, archive):
    """The image's manifest and config; blobs checked against their digests and sizes."""
    with tarfile.open(archive) as tar:
        members = {m.name.removeprefix("./"): m for m in tar.getmembers()}

        def blob(digest):
            m = members.get("blobs/sha256/" + digest.split(":", 1)[1])
            if m is None:
                raise ValueError(f"blob {digest} is missing")
            return tar.extractfile(m)

        layout = json.load(tar.extractfile(members["oci-layout"]))
        if layout != {"imageLayoutVersion": "1.0.0"}:
            raise ValueError(f"oci-layout is {layout}")
        index = json.load(tar.extractfile(members["index.json"]))
        if index.get("schemaVersion") != 2 or len(index.get("manifests", [])) != 1:
            raise ValueError(f"index.json should name one manifest: {index}")
        desc = index["manifests"][0]
        notes = desc.get("annotations", {})
        if notes.get("io.containerd.image.name") != ref:
            raise ValueError(f"index.json names {notes.get('io.containerd.image.name')!r}, not {ref!r}")
        if notes.get("org.opencontainers.image.ref.name") != ref.rsplit(":", 1)[1]:
            raise ValueError(f"index.json's org.opencontainers.image.ref.name is not the tag of {ref}")
        descriptors = [desc]
        manifest = json.load(blob(desc["digest"]))
        descriptors += [manifest["config"]] + manifest["layers"]
        for d in descriptors:
            m = members["blobs/sha256/" + d["digest"].split(":", 1)[1]]
            if m.size != d["size"] or sha256(blob(d["digest"])) != d["digest"]:
                raise ValueError(f"blob {d['digest']} does not match its digest or size {d['size']}")
        config_bytes = blob(manifest["config"]["digest"]).read()
        config = json.loads(config_bytes)
    if len(config["rootfs"]["diff_ids"]) != len(manifest["layers"]):
        raise ValueError("the config's diff_ids do not match the manifest's layers")
    if config["config"]["Labels"].get("org.opencontainers.image.title") != name:
        raise ValueError("the config's title label is not the image's name")
    return manifest, config, manifest["config"]["digest"]


def unpack_layer(archive, layer, diff_id, cache):
    """The layer as an overlayfs lower folder (OCI whiteouts made overlay's), kept in the
    image cache by its digest with the diff_id it unpacked to, so a warm check unpacks
    nothing: the digest is checked anew each time, the diff_id was checked when unpacked."""
    hexdigest = layer["digest"].split(":", 1)[1]
    folder, stamp = os.path.join(cache, hexdigest), os.path.join(cache, hexdigest + ".diff_id")
    if os.path.isdir(folder) and os.path.exists(stamp):
        with open(stamp) as f:
            unpacked_to = f.read()
        if unpacked_to != diff_id:
            raise ValueError(f"layer {layer['digest']} unpacks to {unpacked_to}, not its diff_id {diff_id}")
        os.utime(stamp)  # used: kept
        return folder
    partial = tempfile.mkdtemp(dir=cache, prefix=hexdigest + ".partial.")
    tar = subprocess.Popen(["tar", "-x", "-p", "--numeric-owner", "-C", partial, "-f", "-"],
                           stdin=subprocess.PIPE)
    h = hashlib.sha256()
    with tarfile.open(archive) as outer, gzip.GzipFile(fileobj=outer.extractfile("blobs/sha256/" + hexdigest)) as gz:
        for chunk in iter(lambda: gz.read(1 << 20), b""):
            h.update(chunk)
            tar.stdin.write(chunk)
    tar.stdin.close()
    if tar.wait() != 0 or "sha256:" + h.hexdigest() != diff_id:
        shutil.rmtree(partial)
        raise ValueError(f"layer {layer['digest']} does not unpack (tar exit {tar.returncode}) to its diff_id {diff_id}")
    for dirpath, _, filenames in os.walk(partial):
        for n in filenames:
            if not n.startswith(".wh."):
                continue
            os.unlink(os.path.join(dirpath, n))
            if n == ".wh..wh..opq":
                os.setxattr(dirpath, "trusted.overlay.opaque", b"y")
            else:
                os.mknod(os.path.join(dirpath, n[4:]), 0o600 | 0o020000, os.makedev(0, 0))
    with open(stamp, "w") as f:
        f.write(diff_id)
    shutil.rmtree(folder, ignore_errors=True)
    os.rename(partial, folder)
    return folder


def in_root(lowers, script):
    """Runs script (sh) with $R the image's root: the layers overlaid in a mount namespace
    of its own, so nothing stays mounted."""
    if len(lowers) == 1:
        mount = 'R="$1"'
    else:
        mount = ('R=$(mktemp -d) && mount -t overlay overlay -o ro,lowerdir="$1" "$R" '
                 '&& mount -t proc proc "$R/proc" && mount --rbind /dev "$R/dev" && mount -t tmpfs tmpfs "$R/tmp"')
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-ec", mount + "\n" + script, "sh",
           ":".join(reversed(lowers))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def check_image(img, archive, build, cache, used, configs):
    try:
        manifest, config, config_digest = read_layout(img.name, img.ref, archive)
    except (ValueError, KeyError, OSError, tarfile.TarError, json.JSONDecodeError) as e:
        fail(f"{img.name}: {archive}: {e}")
        return
    if config_digest in configs:
        fail(f"{img.name}: same config as {configs[config_digest]} (the CRI image store confuses them)")
    configs[config_digest] = img.name
    c = config["config"]
    if c.get("Entrypoint") != img.entrypoint or c.get("User", "") != img.user:
        fail(f"{img.name}: entrypoint {c.get('Entrypoint')} user {c.get('User')!r}, the list says "
             f"{img.entrypoint} {img.user!r}")
    lowers = []
    for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"]):
        try:
            lowers.append(unpack_layer(archive, layer, diff_id, cache))
        except (ValueError, OSError, tarfile.TarError) as e:
            fail(f"{img.name}: {e}")
            return
        used.add(os.path.basename(lowers[-1]))
    # Each listed file, with its mode; the same bytes as in the build folder.
    script = []
    for source, text, to, mode in image_list.resolve_sources(img, build):
        want = text.encode() if text is not None else None
        script.append(f'test -f "$R{to}" && test "$(stat -c %a "$R{to}")" = {mode:o} '
                      f'|| echo "missing or mode not {mode:o}: {to}"')
        if want is None:
            script.append(f'cmp -s "$R{to}" "{source}" || echo "differs from {source}: {to}"')
    for pattern in img.check:
        script.append(f'for f in "$R"{pattern}; do chroot "$R" ldd "${{f#"$R"}}" 2>&1 | '
                      f'sed -n "s|^|${{f#"$R"}}: |; /not found/p"; done')
    if img.base == "debian":
        script.append('test -x "$R/bin/sh" || echo "no /bin/sh"')
    # What runs: the entrypoint exists; the image-specific checks below.
    script.append(f'test -x "$R{img.entrypoint[0]}" || echo "entrypoint {img.entrypoint[0]} is not executable"')
    r = in_root(lowers, "\n".join(script + extra_checks(img)))
    problems = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    if r.returncode != 0 or problems:
        fail(f"{img.name}: (exit {r.returncode})\n  " + "\n  ".join(problems))
    else:
        print(f"ok: {img.name} ({img.ref}): {len(manifest['layers'])} layers, files and libraries checked")


def extra_checks(img):
    """Shell lines that print a problem: what the image is for, run inside it."""
    if img.name.startswith("kube-scheduler-"):
        version = img.ref.rsplit(":", 1)[1]
        # The chart's command is `kube-scheduler ...`, looked up on the image's PATH.
        return [f'chroot "$R" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin kube-scheduler --version 2>&1 '
                f'| grep -q "Kubernetes {version}$" || echo "kube-scheduler --version is not {version}"']
    if img.base == "scratch":
        return [f'chroot "$R" {img.entrypoint[0]} -v >/dev/null || echo "{img.entrypoint[0]} -v failed"']
    if img.name == "vgpu-test-workload":
        return [
            # The fake driver is found by soname, as an application's dlopen finds the real one.
            'out=$(chroot "$R" /usr/local/bin/vgpu_e2e_cuda_app 1048576 </dev/null 2>&1) '
            '&& echo "$out" | grep -q "^alloc=0$" || echo "vgpu_e2e_cuda_app did not run on the fake driver: $out"',
            # libvgpu.so reaches a workload from the device plugin, never from its image.
            'if find "$R" -xdev -name "libvgpu*.so*" | grep -q .; then echo "libvgpu.so is in the image"; fi',
            'if [ -s "$R/etc/ld.so.preload" ]; then echo "/etc/ld.so.preload is not empty"; fi',
        ]
    return [f'chroot "$R" {img.entrypoint[0]} --help >/dev/null 2>&1 || echo "{img.entrypoint[0]} --help failed"']


def prune(cache, used):
    """Unpacked layers unused for two days go (other build folders may use the rest)."""
    for n in os.listdir(cache):
        path, stamp = os.path.join(cache, n), os.path.join(cache, n.split(".")[0] + ".diff_id")
        if n.split(".")[0] in used:
            continue
        if not os.path.exists(stamp) or time.time() - os.path.getmtime(stamp) > 2 * 86400:
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)


def main(argv):
    p = argparse.ArgumentParser(description="Check the archives of scripts/build-images.sh.")
    p.add_argument("--images-txt", required=True)
    p.add_argument("--build-dir", required=True)
    p.add_argument("--list", default=os.path.join(os.path.dirname(__file__), "../../docker/images.toml"))
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("SKIPPED: entering the images' roots needs root (mount namespaces, overlayfs, chroot)")
        return 77
    listed = {}
    with open(args.images_txt) as f:
        for line in f:
            name, ref, archive = line.split()
            listed[name] = (ref, archive)
    k8s = []
    for name, (ref, _) in listed.items():
        m = re.fullmatch(r"kube-scheduler-(\d+\.\d+)", name)
        if m:
            k8s.append(("{k8s_binary}", m.group(1), ref.rsplit(":", 1)[1]))
    images = image_list.expand(image_list.load(args.list), image_list.app_version(
        os.path.join(os.path.dirname(os.path.abspath(args.list)), "..")), k8s)
    want = {i.name for i in images}
    if set(listed) != want:
        fail(f"images.txt lists {sorted(listed)}; the list gives {sorted(want)}")
    cache = os.path.join(image_list.cache_dir(), "unpacked")
    os.makedirs(cache, exist_ok=True)
    # Build folders share the cache: one check (or build-images run) at a time.
    with open(os.path.join(image_list.cache_dir(), ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        used, configs = set(), {}
        for img in images:
            if img.name not in listed:
                continue
            ref, archive = listed[img.name]
            if ref != img.ref:
                fail(f"{img.name}: images.txt says {ref}, the list {img.ref}")
                continue
            if img.name.startswith("kube-scheduler-"):
                img.files = [f for f in img.files if f.source != "{k8s_binary}"]  # not known here
            check_image(img, archive, os.path.abspath(args.build_dir), cache, used, configs)
        prune(cache, used)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        return 1
    print(f"all {len(listed)} images pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
