# The Debian 12 layers of the images: a debootstrap'd minbase root (one layer shared by
# every Debian image) and, per package set, a layer of what `apt-get install` adds to it.
# Both are kept in the image cache, keyed by what makes them, and made again only when
# that changes.
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import oci

SUITE = "bookworm"
# Trimmed as Debian's own slim images are: no documentation but the licences, no manuals,
# no translations, in the base and in whatever apt installs later.
SLIM = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
"""
# version: raise it when _clean changes what the root holds.
RECIPE = {"suite": SUITE, "variant": "minbase", "slim": SLIM, "version": 1}
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", "HOME": "/root"}


class RootError(Exception):
    pass


def _key(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def _run(cmd, log, what):
    with open(log, "ab") as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV)
    if r.returncode != 0:
        with open(log, errors="replace") as f:
            tail = "".join(f.readlines()[-20:])
        raise RootError(f"{what} failed (exit {r.returncode}); the end of {log}:\n{tail}")


def _clean(root):
    """What a build leaves that an image should not carry: apt's lists and caches, logs,
    the host's resolver and hostname, and the manuals SLIM keeps out."""
    for d in ("var/lib/apt/lists", "var/cache/apt", "var/log", "usr/share/man", "usr/share/locale",
              "usr/share/info", "usr/share/groff", "usr/share/lintian"):
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            continue
        for n in os.listdir(path):
            p = os.path.join(path, n)
            if d == "var/lib/apt/lists" and n in ("partial", "lock"):
                continue
            if os.path.isdir(p) and not os.path.islink(p):
                if d in ("var/log", "var/cache/apt"):
                    _clean_files(p)
                else:
                    shutil.rmtree(p)
            else:
                os.unlink(p)
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "usr/share/doc")):
        for n in filenames:
            if n != "copyright":
                os.unlink(os.path.join(dirpath, n))
    for f in ("etc/resolv.conf", "etc/hostname"):
        path = os.path.join(root, f)
        if os.path.lexists(path):
            os.unlink(path)
        open(path, "w").close()
    policy = os.path.join(root, "usr/sbin/policy-rc.d")
    if os.path.exists(policy):
        os.unlink(policy)


def _clean_files(path):
    for dirpath, _, filenames in os.walk(path):
        for n in filenames:
            os.unlink(os.path.join(dirpath, n))


def _finish(partial, final):
    """Renames a finished folder into place; another run may have made it meanwhile."""
    if os.path.exists(os.path.join(final, "layer.json")):
        shutil.rmtree(partial)
    else:
        shutil.rmtree(final, ignore_errors=True)
        os.rename(partial, final)


def base(cache, blobs, mirror, say):
    """The minbase root: returns (its folder, its layer). The root is kept apart from its
    layer, so a failure after debootstrap does not cost another debootstrap."""
    final = os.path.join(cache, "debian", f"{SUITE}-minbase-{_key(RECIPE)}")
    root, layer_json = os.path.join(final, "root"), os.path.join(final, "layer.json")
    if os.path.exists(layer_json):
        with open(layer_json) as f:
            return root, json.load(f)
    if not os.path.exists(os.path.join(final, "packages.txt")):
        _debootstrap(final, mirror, say)
    layer = oci.write_layer(blobs, lambda tar: oci.add_tree(tar, root))
    with open(layer_json + ".tmp", "w") as f:
        json.dump(layer, f)
    os.replace(layer_json + ".tmp", layer_json)
    return root, layer


def _debootstrap(final, mirror, say):
    if shutil.which("debootstrap", path=ENV["PATH"]) is None:
        raise RootError("debootstrap is not installed: scripts/install-deps.sh installs it (apt-get install debootstrap)")
    os.makedirs(os.path.dirname(final), exist_ok=True)
    partial = tempfile.mkdtemp(dir=os.path.dirname(final), prefix=os.path.basename(final) + ".partial.")
    root, log = os.path.join(partial, "root"), os.path.join(partial, "build.log")
    say(f"debootstrap --variant=minbase {SUITE} from {mirror} (a few minutes, once; log {log})")
    try:
        _run(["debootstrap", "--variant=minbase", SUITE, root, mirror], log,
             f"debootstrap from {mirror} (is it reachable? VGPU_DEBIAN_MIRROR names another)")
        os.makedirs(os.path.join(root, "etc/dpkg/dpkg.cfg.d"), exist_ok=True)
        with open(os.path.join(root, "etc/dpkg/dpkg.cfg.d/vgpu-slim"), "w") as f:
            f.write(SLIM)
        _clean(root)
        # The root is complete once its package list is written.
        with open(os.path.join(partial, "packages.txt"), "w") as f:
            subprocess.run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W"], stdout=f, check=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if os.path.exists(os.path.join(final, "packages.txt")):
        shutil.rmtree(partial)  # another run made it meanwhile
    else:
        shutil.rmtree(final, ignore_errors=True)
        os.rename(partial, final)


def packages(cache, blobs, base_root, base_layer, names, say):
    """The layer that installing `names` on the base adds."""
    final = os.path.join(cache, "debian", "packages-" + _key([base_layer["digest"], sorted(names)]))
    if os.path.exists(os.path.join(final, "layer.json")):
        with open(os.path.join(final, "layer.json")) as f:
            return json.load(f)
    partial = tempfile.mkdtemp(dir=os.path.dirname(final), prefix=os.path.basename(final) + ".partial.")
    root, log = os.path.join(partial, "root"), os.path.join(partial, "build.log")
    say(f"apt-get install {' '.join(names)} (log {log})")
    try:
        subprocess.run(["cp", "-a", base_root, root], check=True)
        shutil.copyfile("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
        with open(os.path.join(root, "usr/sbin/policy-rc.d"), "w") as f:
            f.write("#!/bin/sh\nexit 101\n")  # no service starts inside
        os.chmod(os.path.join(root, "usr/sbin/policy-rc.d"), 0o755)
        _run(["chroot", root, "apt-get", "update", "-q"], log, "apt-get update in the image root")
        _run(["chroot", root, "apt-get", "install", "-y", "-q", "--no-install-recommends", *names], log,
             f"apt-get install {' '.join(names)} in the image root")
        _clean(root)
        layer = oci.write_layer(blobs, lambda tar: oci.add_diff(tar, base_root, root))
        shutil.rmtree(root)
        with open(os.path.join(partial, "layer.json"), "w") as f:
            json.dump(layer, f)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _finish(partial, final)
    return layer
