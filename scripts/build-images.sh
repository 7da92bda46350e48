#!/usr/bin/env bash
# Builds vgpu's container images as OCI archives without a daemon or registry (docs/images.md):
#   scripts/build-images.sh --build-dir BUILD --out DIR [--k8s-binary PATH --k8s-release X.Y]... [--image NAME]...
# What goes into each image: docker/images.toml. Cache: ${VGPU_IMAGE_CACHE:-~/.cache/vgpu-images}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Debian's python3 (3.11: tomllib); debootstrap and chroot live in /usr/sbin.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
exec /usr/bin/python3 "$root/scripts/images/build_images.py" "$@"
