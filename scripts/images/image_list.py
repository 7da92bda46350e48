# Reads docker/images.toml, the one list of what goes into each image, checks it and
# expands it into concrete images (placeholders filled, variants and --k8s-binary unrolled).
import glob
import os
import re
import tomllib
from dataclasses import dataclass, field

KEYS = {"name", "ref", "variants", "per_k8s", "about", "base", "cmake_args", "targets",
        "packages", "packages_why", "files", "check", "user", "user_why", "entrypoint",
        "dockerfile"}
REQUIRED = {"name", "ref", "about", "base", "files", "check", "entrypoint"}


class ListError(Exception):
    """A wrong entry in the list or a wrong argument: the message says which."""


@dataclass
class File:
    to: str
    mode: int
    source: str | None = None  # a path in the build folder (or a glob), or an absolute path
    text: str | None = None


@dataclass
class Image:
    name: str
    ref: str
    entry: dict  # the list's entry as written (placeholders unfilled): Dockerfiles use it
    base: str
    packages: list[str]
    targets: list[str]
    files: list[File]
    check: list[str]
    user: str
    entrypoint: list[str]
    labels: dict = field(default_factory=dict)


def cache_dir():
    """Where the images, their Debian layers and the test's unpacked layers are kept."""
    return os.path.abspath(os.environ.get("VGPU_IMAGE_CACHE") or os.path.expanduser("~/.cache/vgpu-images"))


def app_version(root):
    """The chart's appVersion: the tag of vgpu's own images (charts/vgpu/templates/_helpers.tpl)."""
    path = os.path.join(root, "charts/vgpu/Chart.yaml")
    with open(path) as f:
        m = re.search(r'^appVersion:\s*"?([^"\s]+)"?\s*$', f.read(), re.M)
    if not m:
        raise ListError(f"{path}: no appVersion line")
    return m.group(1)


def load(path):
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ListError(f"{path}: {e}") from e
    entries = doc.get("image")
    if not isinstance(entries, list) or not entries:
        raise ListError(f"{path}: no [[image]] entries")
    for i, e in enumerate(entries):
        where = f"{path}: image {i + 1} ({e.get('name', '?')})"
        unknown = set(e) - KEYS
        if unknown:
            raise ListError(f"{where}: unknown keys {sorted(unknown)}")
        missing = REQUIRED - set(e)
        if missing:
            raise ListError(f"{where}: missing keys {sorted(missing)}")
        if e["base"] not in ("debian", "scratch"):
            raise ListError(f"{where}: base must be \"debian\" or \"scratch\", not {e['base']!r}")
        if e["base"] == "scratch" and e.get("packages"):
            raise ListError(f"{where}: a scratch image cannot install packages")
        for f in e["files"]:
            if ("from" in f) == ("text" in f) or "to" not in f or not re.fullmatch(r"0[0-7]{3}", f.get("mode", "")):
                raise ListError(f"{where}: a file needs from or text, to, and mode \"0NNN\": {f}")
            if not f["to"].startswith("/"):
                raise ListError(f"{where}: {f['to']!r} is not an absolute path in the image")
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise ListError(f"{path}: an image name is listed twice: {names}")
    return entries


def _fill(text, values):
    def one(m):
        if m.group(1) not in values:
            raise ListError(f"{{{m.group(1)}}} cannot be filled in {text!r}")
        return values[m.group(1)]
    return re.sub(r"\{([a-z0-9_]+)\}", one, text)


def _image(entry, values):
    files = []
    for f in entry["files"]:
        source = _fill(f["from"], values) if "from" in f else None
        files.append(File(to=f["to"], mode=int(f["mode"], 8), source=source, text=f.get("text")))
    name, ref = _fill(entry["name"], values), _fill(entry["ref"], values)
    return Image(name=name, ref=ref, entry=entry, base=entry["base"],
                 packages=sorted(entry.get("packages", [])), targets=entry.get("targets", []),
                 files=files, check=entry["check"], user=entry.get("user", ""),
                 entrypoint=entry["entrypoint"],
                 labels={"org.opencontainers.image.title": name,
                         "org.opencontainers.image.ref.name": ref,
                         "org.opencontainers.image.description": entry["about"].strip()})


def expand(entries, app_ver, k8s):
    """k8s: a list of (binary path, release X.Y, version vX.Y.Z). Returns Images."""
    images = []
    for e in entries:
        base = {"app_version": app_ver}
        if e.get("per_k8s"):
            for binary, release, version in k8s:
                images.append(_image(e, base | {"k8s_binary": binary, "k8s_release": release,
                                                "k8s_version": version}))
        elif e.get("variants"):
            for v in e["variants"]:
                images.append(_image(e, base | {"variant": v}))
        else:
            images.append(_image(e, base))
    return images


def resolve_sources(image, build):
    """(absolute source path or None, text or None, path in the image, mode) for each file,
    globs expanded; a missing file is an error naming it."""
    out = []
    for f in image.files:
        if f.text is not None:
            out.append((None, f.text, f.to, f.mode))
            continue
        pattern = f.source if os.path.isabs(f.source) else os.path.join(build, f.source)
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise ListError(f"{image.name}: {pattern} does not exist (targets: {' '.join(image.targets) or 'none'})")
        if any(c in f.source for c in "*?["):
            if not f.to.endswith("/"):
                raise ListError(f"{image.name}: the glob {f.source} needs a folder (ending in /) as to")
            out += [(m, None, f.to + os.path.basename(m), f.mode) for m in matches]
        else:
            out.append((matches[0], None, f.to, f.mode))
    return out
