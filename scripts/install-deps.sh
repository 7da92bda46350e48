#!/usr/bin/env bash
# The one list of what vgpu needs to build and test on Debian 12: apt packages, and Go for
# the real-cluster suite (tests/realk8s). Idempotent and quiet: apt's own output goes to a
# log file ($VGPU_DEPS_LOG, default /tmp/vgpu-install-deps.log), shown only on failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libboost1.81-all-dev libboost-json1.81-dev libboost-url1.81-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler zlib1g-dev
  libyaml-cpp-dev libpugixml-dev libspdlog-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev            # the fuzz targets (libFuzzer)
  prometheus                          # promtool, which checks our metrics text
  prometheus-cpp-dev                  # both daemons' /metrics (prometheus-cpp core: families, text serializer)
  yamllint python3 python3-yaml       # the chart tests
  binutils                            # nm, readelf: the limiter's export and glibc checks
  openssl                             # tests make TLS certificates with the openssl program
  procps                              # ps, pgrep, used by scripts and tests
  debootstrap                         # the limiter's tests in a Debian 11 root (glibc 2.31); the images' Debian 12 root (scripts/build-images.sh)
  ca-certificates                     # Go fetches the real-cluster suite's modules over HTTPS
  golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev  # Chart.Render
  containerd runc                     # the real node of tests/realk8s (1.34's runtime; runc for both)
  busybox-static                      # ... the programs of its test images (tests/realk8s/node)
  containernetworking-plugins iptables iproute2  # ... its pod network: CNI bridge, kube-proxy
)

log=${VGPU_DEPS_LOG:-/tmp/vgpu-install-deps.log}
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

fail() {
  echo "install-deps: $1" >&2
  if [ -s "$log" ]; then
    echo "install-deps: the last lines of $log:" >&2
    tail -n 30 "$log" >&2
  fi
  exit 1
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# Packages whose services apt would start and enable (a Prometheus server, with promtool;
# containerd, which the real-node tests start themselves with their own root and socket).
services=(prometheus containerd)

# Keeps invoke-rc.d from starting services while apt installs, then disables the services
# of packages this run installed, so that no server is left running or enabled at boot.
install_quietly() {
  local policy=/usr/sbin/policy-rc.d added_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# vgpu install-deps: no service starts while it installs.\nexit 101\n' |
      $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    added_policy=yes
  fi
  local status=0
  {
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "$@"
  } >>"$log" 2>&1 || status=$?
  [ -z "$added_policy" ] || $SUDO rm -f "$policy"
  [ "$status" -eq 0 ] || fail "apt-get could not install: $* (exit $status)"
  local p s
  for p in "$@"; do
    for s in "${services[@]}"; do
      [ "$p" = "$s" ] || continue
      if command -v deb-systemd-helper >/dev/null; then
        $SUDO deb-systemd-helper disable "$s.service" >>"$log" 2>&1 || true
      fi
      if [ -e "/etc/init.d/$s" ] && command -v update-rc.d >/dev/null; then
        $SUDO update-rc.d "$s" disable >>"$log" 2>&1 || true
      fi
      if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        $SUDO systemctl stop "$s.service" >>"$log" 2>&1 || true
      fi
    done
  done
}

: >"$log"
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages present"
else
  echo "install-deps: installing ${#missing[@]} Debian packages (log: $log): ${missing[*]}"
  install_quietly "${missing[@]}"
fi

# Go for the real-cluster suite, unless it is left out (VGPU_CMAKE_ARGS, scripts/build.sh).
case " ${VGPU_CMAKE_ARGS:-} " in
  *VGPU_WITHOUT_REALK8S=ON* | *VGPU_BUILD_TESTS=OFF*) ;;
  *)
    "$root/scripts/install-go.sh" >>"$log" 2>&1 || fail "could not provide Go for tests/realk8s"
    grep '^install-go:' "$log" | tail -n 1
    ;;
esac
