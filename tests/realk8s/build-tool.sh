#!/usr/bin/env bash
# Builds the real node's Go-built components from their own modules, pinned, into a cache
# keyed by what they are made from, and links them into the build tree:
#
#   tests/realk8s/build-tool.sh TOOL OUTDIR
#
#   containerd-2   github.com/containerd/containerd/v2 v2.4.2: containerd, ctr and
#                  containerd-shim-runc-v2 (Kubernetes 1.36 and newer need containerd 2;
#                  Debian 12 has 1.6)
#   helm           helm.sh/helm/v4 v4.3.2: helm
#
# `go install PKG@VERSION` builds a main package with exactly the go.mod and go.sum of that
# release (checked against the Go checksum database), CGO_ENABLED=0 as the notes in
# README.md say. OUTDIR/<TOOL>/ gets the binaries and a stamp; while the stamp matches,
# nothing runs. Cache: $VGPU_REALK8S_CACHE (default ~/.cache/vgpu-realk8s)/tools/.
set -euo pipefail

die() {
  echo "realk8s: $*" >&2
  exit 1
}
[[ $# -eq 2 ]] || die "usage: $0 containerd-2|helm OUTDIR"
tool=$1
out=$2/$tool

case $tool in
  containerd-2)
    version=v2.4.2
    packages=(github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
      github.com/containerd/containerd/v2/cmd/ctr)
    # No snapshotters that need cgo or kernel modules; overlayfs and native stay.
    tags="no_btrfs no_devmapper no_zfs no_aufs"
    ;;
  helm)
    version=v4.3.2
    packages=(helm.sh/helm/v4/cmd/helm)
    tags=""
    ;;
  *) die "unknown tool '$tool' (containerd-2, helm)" ;;
esac

go=${GO:-go}
command -v "$go" > /dev/null || die "building $tool needs Go and the Go module proxy; '$go' is not installed"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=
build_flags=(-trimpath -buildvcs=false -ldflags=-s\ -w)
[[ -z $tags ]] || build_flags+=(-tags "$tags")
stamp=$(printf '%s\n' "$tool" "$version" "${packages[@]}" "${build_flags[@]}" "$("$go" version)" | sha256sum | cut -c1-16)

if [[ $(cat "$out/stamp" 2> /dev/null) == "$stamp" ]]; then
  echo "realk8s: $tool $version up to date ($out)"
  exit 0
fi
cache=${VGPU_REALK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-realk8s}/tools
cached=$cache/$tool-$stamp
if [[ ! -f $cached/stamp ]]; then
  start=$(date +%s)
  echo "realk8s: building $tool $version from its module (CGO_ENABLED=0; minutes when cold)"
  rm -rf "$cache/$tool-"* # older builds of this tool, or one cut short
  mkdir -p "$cached.tmp"
  for p in "${packages[@]}"; do
    GOBIN=$cached.tmp "$go" install "${build_flags[@]}" "$p@$version" ||
      die "building $p@$version failed (above); it needs Go and the Go module proxy ($("$go" env GOPROXY))"
  done
  echo "$stamp" > "$cached.tmp/stamp"
  mv "$cached.tmp" "$cached"
  echo "realk8s: $tool $version built in $(($(date +%s) - start)) s"
fi
rm -rf "$out"
mkdir -p "$out"
for f in "$cached"/*; do
  ln -f "$f" "$out/" 2> /dev/null || cp "$f" "$out/"
done
echo "realk8s: $tool $version from $cached"
