#!/usr/bin/env bash
# Build the Debian 12 systemd image the sandbox and Molecule run on, offline from any container
# registry: debootstrap from the Debian mirror, then `docker import`. Skips the build when the tag
# exists. Set SGLANG_DEPLOY_IMAGE to use any other systemd image instead (nothing is built then).
set -euo pipefail

IMAGE="${SGLANG_DEPLOY_IMAGE:-sglang-deploy/debian12-systemd:4}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What a bare Debian GPU host has, plus what Ansible needs on it (python3, python3-apt, python3-debian),
# plus g++ and python3-dev: role sglang_stack installs them on a real host; baked in here, so that no
# test host downloads a compiler from the Debian mirror (the probe drills remove Python.h on purpose).
PACKAGES=systemd,systemd-sysv,dbus,python3,python3-venv,python3-apt,python3-debian,iproute2,procps,ca-certificates,kmod,gnupg,curl,g++,python3-dev

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "image $IMAGE present"
  exit 0
fi
if [ -n "${SGLANG_DEPLOY_IMAGE:-}" ]; then
  echo "SGLANG_DEPLOY_IMAGE=$IMAGE is not present locally; pull or build it first" >&2
  exit 1
fi

command -v debootstrap >/dev/null || { echo "debootstrap missing (scripts/setup.sh installs it)" >&2; exit 1; }
root=$(mktemp -d /var/tmp/sglang-deploy-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap bookworm into $root (about a minute)"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" >"$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"

# A container has no consoles, udev or kernel file systems to mount: mask what would only fail.
for unit in getty@tty1.service console-getty.service systemd-udevd.service systemd-udevd-control.socket \
    systemd-udevd-kernel.socket systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount \
    systemd-modules-load.service systemd-firstboot.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
: >"$root/etc/machine-id"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
echo "deb $MIRROR bookworm main" >"$root/etc/apt/sources.list"

tar -C "$root" -c . | docker import \
  --change 'CMD ["/lib/systemd/systemd"]' \
  --change 'ENV container=docker' \
  - "$IMAGE" >/dev/null
echo "built $IMAGE"
