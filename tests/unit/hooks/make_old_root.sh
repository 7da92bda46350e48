#!/bin/sh
# Makes, once, the Debian root that the limiter's old-userland tests run in (ctest fixture
# LimiterOldRoot.Create): debootstrap --variant=minbase <suite> into <dir>, about 250 MB and
# a few minutes. A complete root (marked by .vgpu-root-complete) is reused as it is, by
# every build folder of the machine.
# Usage: make_old_root.sh <dir> [suite] [mirror]. Exit 77 (ctest: skipped) when not root.
set -eu
# debootstrap and the chroot it runs live in /usr/sbin, which a non-login PATH may lack.
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
dir=$1
suite=${2:-bullseye}
mirror=${3:-http://deb.debian.org/debian}
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: making and entering a Debian root needs root (debootstrap, chroot, mount namespaces)"
  exit 77
fi
if [ -f "$dir/.vgpu-root-complete" ]; then
  echo "reusing $dir"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "debootstrap is not installed; scripts/install-deps.sh installs it (apt-get install debootstrap)" >&2
  exit 1
fi
mkdir -p "$(dirname "$dir")"
# Several build folders may share the root (it lives in ~/.cache): each makes its own
# partial copy, and the first complete one is renamed into place.
partial=$(mktemp -d "$dir.partial.XXXXXX")
echo "debootstrap --variant=minbase $suite $dir ($mirror); log in $partial.log"
if ! debootstrap --variant=minbase "$suite" "$partial" "$mirror" >"$partial.log" 2>&1; then
  tail -n 20 "$partial.log" >&2
  rm -rf "$partial"
  echo "debootstrap failed: is $mirror reachable? (cmake -DVGPU_DEBIAN_MIRROR=... names another)" >&2
  exit 1
fi
rm -f "$partial.log"
: >"$partial/etc/ld.so.preload"  # the tests bind-mount their own listing over it
touch "$partial/.vgpu-root-complete"
if [ -f "$dir/.vgpu-root-complete" ]; then
  rm -rf "$partial"
  echo "reusing $dir (made meanwhile)"
  exit 0
fi
rm -rf "$dir"
mv -T "$partial" "$dir"
echo "made $dir"
