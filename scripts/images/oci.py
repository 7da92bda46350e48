# Writes OCI images without a daemon: gzip layers into a content-addressed blob folder,
# the config and manifest, and an OCI image layout tar that `ctr images import` reads.
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile

LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
# Fixed times and owners: the same inputs give the same layer, byte for byte.
EPOCH = 0


class _Hashing(io.RawIOBase):
    """Passes writes on to `out` and hashes them."""

    def __init__(self, out):
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def writable(self):
        return True

    def tell(self):
        return self.size

    def write(self, b):
        self.sha.update(b)
        self.size += len(b)
        return self.out.write(b)


def write_layer(blobs, fill):
    """Calls fill(tarfile) to add the layer's members; stores the gzip layer under
    blobs/sha256/. Returns {digest, diff_id, size}."""
    os.makedirs(os.path.join(blobs, "sha256"), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=blobs, prefix=".layer-")
    try:
        with os.fdopen(fd, "wb") as raw:
            compressed = _Hashing(raw)
            with gzip.GzipFile(fileobj=compressed, mode="wb", compresslevel=1, mtime=EPOCH) as gz:
                plain = _Hashing(gz)
                with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    fill(tar)
        digest = "sha256:" + compressed.sha.hexdigest()
        os.replace(tmp, blob_path(blobs, digest))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return {"digest": digest, "diff_id": "sha256:" + plain.sha.hexdigest(), "size": compressed.size}


def blob_path(blobs, digest):
    return os.path.join(blobs, "sha256", digest.split(":", 1)[1])


def put_json(blobs, obj):
    data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(blobs, "sha256"), exist_ok=True)
    path = blob_path(blobs, digest)
    if not os.path.exists(path):
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    return {"digest": digest, "size": len(data)}


def _dir_member(name):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
    return info


def add_files(tar, entries):
    """entries: (source path or None, text or None, absolute path in the image, mode).
    Adds each file (a source that is a link is followed) and its parent folders, root-owned."""
    dirs = set()
    for source, text, to, mode in sorted(entries, key=lambda e: e[2]):
        name = to.lstrip("/")
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in dirs:
                dirs.add(d)
                tar.addfile(_dir_member(d))
        info = tarfile.TarInfo(name)
        info.mode, info.mtime = mode, EPOCH
        if text is not None:
            data = text.encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        else:
            with open(source, "rb") as f:
                info.size = os.fstat(f.fileno()).st_size
                tar.addfile(info, f)


# Left empty in an image: the runtime mounts them (and debootstrap makes device nodes there).
SKIP_CONTENTS = {"dev", "proc", "sys", "tmp", "run"}


def _walk(root):
    """Relative paths under root, parents first, sorted; contents of SKIP_CONTENTS left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel
        if rel in SKIP_CONTENTS:
            dirnames[:] = []
            continue
        dirnames.sort()
        for n in sorted(dirnames + filenames):
            out.append(os.path.join(rel, n) if rel else n)
    return sorted(out)


def _add(tar, root, rel):
    """One entry as it is on disk: owner, mode, link target; a hard link to an earlier one."""
    info = tar.gettarinfo(os.path.join(root, rel), arcname=rel)
    info.mtime = int(info.mtime)
    info.uname = info.gname = ""
    if info.isreg():
        with open(os.path.join(root, rel), "rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)


def add_tree(tar, root):
    """The whole tree under root."""
    for rel in _walk(root):
        _add(tar, root, rel)


def _unchanged(lower, upper, rel):
    """Same type, mode, owner, and for files size and time (dpkg keeps a package's times),
    for links the target."""
    try:
        a = os.lstat(os.path.join(lower, rel))
    except FileNotFoundError:
        return False
    b = os.lstat(os.path.join(upper, rel))
    if a.st_mode != b.st_mode or (a.st_uid, a.st_gid) != (b.st_uid, b.st_gid):
        return False
    if stat.S_ISDIR(a.st_mode):
        return True
    if stat.S_ISLNK(a.st_mode):
        return os.readlink(os.path.join(lower, rel)) == os.readlink(os.path.join(upper, rel))
    return a.st_size == b.st_size and int(a.st_mtime) == int(b.st_mtime)


def add_diff(tar, lower, upper):
    """What upper changed over lower: new and changed entries, and OCI whiteouts
    (.wh.<name>) for what it removed."""
    upper_set = set(_walk(upper))
    removed = [p for p in _walk(lower) if p not in upper_set]
    gone = set()
    for rel in removed:
        parent = os.path.dirname(rel)
        gone.add(rel)
        if parent in gone:  # its folder's whiteout hides it
            continue
        info = tarfile.TarInfo(os.path.join(parent, ".wh." + os.path.basename(rel)))
        info.mtime = EPOCH
        tar.addfile(info)
    for rel in sorted(upper_set):
        if not _unchanged(lower, upper, rel):
            _add(tar, upper, rel)


def write_image(blobs, layers, user, entrypoint, labels):
    """The config and manifest of an image of `layers` (write_layer's results, base first)."""
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Entrypoint": entrypoint,
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [l["diff_id"] for l in layers]},
    }
    if user:
        config["config"]["User"] = user
    cfg = put_json(blobs, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": cfg["digest"], "size": cfg["size"]},
        "layers": [{"mediaType": LAYER, "digest": l["digest"], "size": l["size"]} for l in layers],
    }
    return put_json(blobs, manifest) | {"config": cfg, "layers": layers}


def write_archive(path, blobs, manifest, ref):
    """An OCI image layout tar holding one image named ref. The full name goes into
    io.containerd.image.name (what `ctr images import` names the image) and the tag into
    org.opencontainers.image.ref.name, as containerd's own export writes them."""
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [{
            "mediaType": MANIFEST, "digest": manifest["digest"], "size": manifest["size"],
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
        }],
    }
    digests = [manifest["digest"], manifest["config"]["digest"]] + [l["digest"] for l in manifest["layers"]]
    tmp = path + ".partial"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", json.dumps(index, sort_keys=True).encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
            tar.addfile(info, io.BytesIO(data))
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(_dir_member(d))
        for digest in dict.fromkeys(digests):
            src = blob_path(blobs, digest)
            info = tarfile.TarInfo("blobs/sha256/" + digest.split(":", 1)[1])
            info.size, info.mode, info.mtime = os.path.getsize(src), 0o644, EPOCH
            with open(src, "rb") as f:
                tar.addfile(info, f)
    os.replace(tmp, path)
