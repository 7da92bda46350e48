#!/usr/bin/env python3
# Writes a one-layer OCI image archive (an OCI layout in a tar, what
# `ctr -n k8s.io images import` reads) from files of this machine: the real node's own small
# images (a busybox and a sandbox image) until scripts/build-images.sh provides them.
#
#   oci_image.py --ref docker.io/vgpu/busybox:realnode --out FILE.oci.tar
#                [--file HOSTPATH:IMAGEPATH]... [--link TARGET:IMAGEPATH]... [--entrypoint ARG]...
import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile


def add_dirs(tar, seen, path):
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d not in seen:
            seen.add(d)
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)


def layer(files, links):
    raw = io.BytesIO()
    seen = set()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for host, inside in files:
            add_dirs(tar, seen, inside)
            info = tar.gettarinfo(host, inside.strip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            with open(host, "rb") as f:
                tar.addfile(info, f)
        for target, inside in links:
            add_dirs(tar, seen, inside)
            info = tarfile.TarInfo(inside.strip("/"))
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    tar_bytes = raw.getvalue()
    gz = gzip.compress(tar_bytes, mtime=0)
    return tar_bytes, gz


def blob(out, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest)
    info.size = len(data)
    out.addfile(info, io.BytesIO(data))
    return "sha256:" + digest, len(data)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ref", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--link", action="append", default=[])
    p.add_argument("--entrypoint", action="append", default=[])
    a = p.parse_args()
    files = [tuple(f.split(":", 1)) for f in a.file]
    links = [tuple(l.split(":", 1)) for l in a.link]
    for host, _ in files:
        if not os.path.isfile(host):
            sys.exit(f"oci_image.py: {host} is not a file")
    tar_bytes, gz = layer(files, links)
    # The image's own name in its config: two images whose configs are byte-identical
    # confuse containerd's CRI image store.
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": a.entrypoint, "Env": ["PATH=/bin"], "Labels": {"vgpu.io/image": a.ref}},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar_bytes).hexdigest()]},
    }
    tmp = a.out + ".tmp"
    with tarfile.open(tmp, "w") as out:
        cdigest, csize = blob(out, json.dumps(config, sort_keys=True).encode())
        ldigest, lsize = blob(out, gz)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdigest, "size": csize},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ldigest, "size": lsize}],
        }
        mdigest, msize = blob(out, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdigest, "size": msize,
                "annotations": {"io.containerd.image.name": a.ref,
                                "org.opencontainers.image.ref.name": a.ref.rsplit(":", 1)[-1]},
            }],
        }
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", json.dumps(index, sort_keys=True).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
