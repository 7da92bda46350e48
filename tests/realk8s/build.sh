#!/usr/bin/env bash
# Builds the multi-call binary of one Kubernetes release for the real-cluster tests:
#
#   tests/realk8s/build.sh RELEASE OUTDIR      (RELEASE: 1.34 or 1.37, a k8s-RELEASE/ folder)
#
# writes OUTDIR/k8s (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kube-proxy,
# kubelet; see cmd/main.go) and
# OUTDIR/k8s.stamp. The stamp is a hash of everything the binary is made from (go.mod,
# go.sum, main.go, this script's flags, the Go version); while it matches, nothing runs.
# Linked binaries are also kept in a cache outside the build tree, one per release and
# stamp ($VGPU_REALK8S_CACHE, default ~/.cache/vgpu-realk8s), so a fresh build tree on a
# machine that built them before copies instead of relinking. Packages come from Go's own
# caches (GOCACHE, GOMODCACHE), which persist between runs.
#
# Environment: GO (the go program, default: go on PATH), VGPU_REALK8S_CACHE.
set -euo pipefail

skip_hint="to skip it pass -DVGPU_WITHOUT_REALK8S=ON to cmake"
die() {
  echo "realk8s: $*" >&2
  exit 1
}

[[ $# -eq 2 ]] || die "usage: $0 RELEASE OUTDIR"
release=$1
mkdir -p "$2"
out=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
module=$here/k8s-$release
[[ -f $module/go.mod ]] || die "no module for release '$release' ($module/go.mod)"

go=${GO:-go}
command -v "$go" > /dev/null ||
  die "the real-cluster suite needs Go and the Go module proxy, and '$go' is not installed; $skip_hint"

# The newest Go any module asks for (its go directive): an older one would try to fetch a
# toolchain (GOTOOLCHAIN=local forbids that) or fail on new syntax.
need=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$module/go.mod")
have=$("$go" env GOVERSION) || die "'$go env GOVERSION' failed; $skip_hint"
have=${have#go}
have=${have%%[!0-9.]*}
if [[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1) != "$need" ]]; then
  die "the real-cluster suite needs Go >= $need and the Go module proxy; '$go' is Go $have; $skip_hint"
fi

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
# The version the components report (/version, --version), as Kubernetes' own build sets it.
k8s_version=$(sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$module/go.mod")
[[ -n $k8s_version ]] || die "$module/go.mod does not require k8s.io/kubernetes"
major=${k8s_version#v}
minor=${major#*.}
minor=${minor%%.*}
major=${major%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags+=" -X $pkg.gitTreeState=clean"
# -s -w: no symbol table or DWARF (a third of the link time; stack traces keep names).
# -trimpath: packages compiled the same wherever the module cache or worktree is, so the
# build cache serves every worktree. -buildvcs=false: no `git status` of the checkout
# (which fails on a checkout owned by another user, and would stamp every commit).
build_flags=(-trimpath -buildvcs=false "-ldflags=$ldflags")

stamp=$( (
  cd "$module"
  cat go.mod go.sum main.go
  echo "${build_flags[*]} CGO_ENABLED=$CGO_ENABLED"
  "$go" version
) | sha256sum | cut -c1-16)

mkdir -p "$out"
if [[ -x $out/k8s && $(cat "$out/k8s.stamp" 2> /dev/null) == "$stamp" ]]; then
  echo "realk8s $release: up to date ($out/k8s)"
  exit 0
fi

cache=${VGPU_REALK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vgpu-realk8s}
cached=$cache/$release-$stamp/k8s
if [[ -x $cached ]]; then
  ln -f "$cached" "$out/k8s.tmp" 2> /dev/null || cp "$cached" "$out/k8s.tmp"
  mv -f "$out/k8s.tmp" "$out/k8s"
  echo "$stamp" > "$out/k8s.stamp"
  echo "realk8s $release: $k8s_version from $cached"
  exit 0
fi

cd "$module"
start=$(date +%s)
echo "realk8s $release: downloading the modules of Kubernetes $k8s_version (module cache: $("$go" env GOMODCACHE))"
if ! "$go" mod download 2>&1; then
  die "downloading the modules of Kubernetes $k8s_version failed (above). The real-cluster suite needs" \
    "Go >= $need and the Go module proxy ($("$go" env GOPROXY)); $skip_hint"
fi
downloaded=$(date +%s)
echo "realk8s $release: building Kubernetes $k8s_version (build cache: $("$go" env GOCACHE))"
"$go" build "${build_flags[@]}" -o "$out/k8s.tmp" . || die "building Kubernetes $k8s_version failed (above)"
built=$(date +%s)
mv -f "$out/k8s.tmp" "$out/k8s"
echo "$stamp" > "$out/k8s.stamp"

# Keep this one linked binary per release in the cache; drop older ones.
mkdir -p "$cache"
rm -rf "$cache/$release-"*
mkdir -p "$(dirname "$cached")"
ln -f "$out/k8s" "$cached" 2> /dev/null || cp "$out/k8s" "$cached"
echo "realk8s $release: $k8s_version built in $((built - start)) s" \
  "(modules $((downloaded - start)) s, compile and link $((built - downloaded)) s): $out/k8s"
