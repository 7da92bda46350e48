#!/usr/bin/env bash
# Go for the real-cluster suite (tests/realk8s builds etcd, kube-apiserver, kube-scheduler and
# kubelet from their Go modules). Debian 12's golang-go (1.19) is too old for them. Uses the
# `go` on PATH or in /usr/local/go when it is new enough; otherwise installs the pinned
# release below from the Go module proxy (the same archive `GOTOOLCHAIN` switching fetches),
# checked against its SHA-256, into /usr/local/go, with /usr/local/bin/go pointing at it.
set -euo pipefail

version=1.26.8  # the newest the module pins need; bump with the sum below
sha256_amd64=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
# The newest `go` directive of the real-cluster suite's modules.
root=$(cd "$(dirname "$0")/.." && pwd)
minimum=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root"/tests/realk8s/*/go.mod 2>/dev/null | sort -V | tail -n 1)
minimum=${minimum:-1.21}

# True when go version $1 (e.g. 1.26.8) is at least $2 (e.g. 1.25).
at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

for go in "$(command -v go || true)" /usr/local/go/bin/go; do
  [ -n "$go" ] && [ -x "$go" ] || continue
  have=$("$go" env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ -n "$have" ] && at_least "$have" "$minimum"; then
    echo "install-go: using go$have at $go"
    exit 0
  fi
done

arch=$(uname -m)
if [ "$arch" != x86_64 ]; then
  echo "install-go: no Go >= $minimum found, and this script pins only the amd64 release;" \
       "install Go >= $minimum from https://go.dev/dl/ or configure with -DVGPU_WITHOUT_REALK8S=ON" >&2
  exit 1
fi
if [ -e /usr/local/go ]; then
  echo "install-go: /usr/local/go holds an older Go; remove it or put Go >= $minimum first on PATH" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
url=${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-go$version.linux-amd64.zip
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "install-go: fetching go$version from $url"
python3 - "$url" "$tmp/go.zip" "$sha256_amd64" "$tmp/root" <<'EOF'
import hashlib, os, sys, urllib.request, zipfile
url, path, want, root = sys.argv[1:]
with urllib.request.urlopen(url, timeout=300) as r, open(path, "wb") as f:
    f.write(r.read())
got = hashlib.sha256(open(path, "rb").read()).hexdigest()
if got != want:
    sys.exit(f"install-go: {url}: SHA-256 {got}, expected {want}")
with zipfile.ZipFile(path) as z:
    z.extractall(root)
EOF
src=$(echo "$tmp"/root/golang.org/toolchain@*)
# Module archives keep no file modes: the programs are made executable again.
chmod -R u+rwX,go+rX "$src"
chmod +x "$src"/bin/* "$src"/pkg/tool/*/*
$SUDO mv "$src" /usr/local/go
$SUDO ln -sf /usr/local/go/bin/go /usr/local/bin/go
echo "install-go: installed go$(/usr/local/go/bin/go env GOVERSION | sed 's/^go//') in /usr/local/go"
