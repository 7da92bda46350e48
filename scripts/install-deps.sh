#!/usr/bin/env bash
# The one list of Debian 12 packages vgpu needs to build and test. Idempotent.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ccache
  libboost1.81-all-dev libboost-json1.81-dev libboost-url1.81-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libpugixml-dev libspdlog-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
  prometheus yamllint binutils python3 procps
  golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
