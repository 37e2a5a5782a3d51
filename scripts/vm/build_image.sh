#!/usr/bin/env bash
# A small Debian 12 image with systemd, made from Debian's packages only, for testing the sandbox on a real
# cgroup v2 machine (docs/cgroup2_vm.md). Writes into $CACHECRAFT_VM_DIR (default /var/tmp/cachecraft-vm):
#   rootfs.img  an ext4 disk image (the root filesystem)   vmlinuz, initrd.img  Debian's kernel and initramfs
# The guest has an unprivileged user `organiser` (uid 1000) with lingering enabled (a systemd user manager
# from boot), and a service that at boot runs the checkout's scripts/vm/guest_boot.sh from a 9p share, so the
# image need not be rebuilt when the scripts or the code change (run.sh shares the checkout at each boot).
# Needs root, debootstrap and e2fsprogs (apt-get install -y debootstrap e2fsprogs). About 3-6 minutes.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "build_image.sh: run as root (debootstrap needs it)" >&2; exit 2; }
DIR=${CACHECRAFT_VM_DIR:-/var/tmp/cachecraft-vm}
MIRROR=${CACHECRAFT_VM_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
SIZE=${CACHECRAFT_VM_DISK:-3G}
ROOT=$DIR/root
# systemd and the user session; the sandbox's parts; Debian's kernel (with 9p) and an initramfs for virtio;
# the shared libraries the host's interpreter (a pyenv build, shared read-only) links against.
PACKAGES=(systemd systemd-sysv dbus dbus-user-session libpam-systemd udev kmod procps
          bubblewrap libseccomp2 initramfs-tools linux-image-amd64
          libssl3 libffi8 libsqlite3-0 libbz2-1.0 liblzma5 zlib1g libreadline8 libncursesw6 libuuid1 libnsl2
          libtirpc3 libexpat1 libcrypt1 libgomp1 ca-certificates
          libpython3.11)  # as on the project's machines: the sandboxed interpreter finds its libpython there
                          # (its RUNPATH names the host prefix, which the sandbox shows at /sandbox/python)
here=$(cd "$(dirname "$0")" && pwd)
for tool in debootstrap mkfs.ext4; do
  command -v "$tool" >/dev/null || { echo "build_image.sh: $tool missing (apt-get install -y debootstrap e2fsprogs)" >&2; exit 2; }
done
mkdir -p "$DIR"
start=$(date +%s)
if [ ! -e "$ROOT/.debootstrap-done" ]; then
  rm -rf "$ROOT"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" "$SUITE" "$ROOT" "$MIRROR"
  touch "$ROOT/.debootstrap-done"
fi
mount -t proc proc "$ROOT/proc"
trap 'umount "$ROOT/proc" 2>/dev/null || true' EXIT
# packages added to the list after a first build
chroot "$ROOT" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >/dev/null
echo "== debootstrap: $(( $(date +%s) - start )) s"

# What the guest needs at boot: modules in the initramfs, a console, the user, the boot service.
cat >"$ROOT/etc/initramfs-tools/modules" <<'EOF'
virtio_pci
virtio_blk
virtio_console
9p
9pnet_virtio
EOF
echo cachecraft-vm >"$ROOT/etc/hostname"
printf '/dev/vda / ext4 rw,relatime 0 1\n' >"$ROOT/etc/fstab"
chroot "$ROOT" /bin/sh -c 'id -u organiser >/dev/null 2>&1 || useradd --uid 1000 --create-home --shell /bin/bash organiser'
mkdir -p "$ROOT/var/lib/systemd/linger"
touch "$ROOT/var/lib/systemd/linger/organiser"   # what `loginctl enable-linger organiser` writes
chroot "$ROOT" passwd -d root >/dev/null          # a console login for debugging; the guest has no network
chmod 711 "$ROOT/root"                           # the interpreter is shared under /root/.pyenv (traversal only)
install -m 0755 "$here/guest_service.sh" "$ROOT/usr/local/sbin/cachecraft-vm-boot"
cat >"$ROOT/etc/systemd/system/cachecraft-vm.service" <<'EOF'
[Unit]
Description=CacheCraft sandbox checks (the checkout's scripts/vm/guest_boot.sh), then power off
After=multi-user.target systemd-logind.service systemd-user-sessions.service user@1000.service
Wants=user@1000.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/cachecraft-vm-boot
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
chroot "$ROOT" systemctl enable cachecraft-vm.service >/dev/null 2>&1 ||
  ln -sf /etc/systemd/system/cachecraft-vm.service "$ROOT/etc/systemd/system/multi-user.target.wants/"
# nothing the guest does needs these, and under TCG each costs seconds of boot
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer; do
  ln -sf /dev/null "$ROOT/etc/systemd/system/$unit"
done
chroot "$ROOT" update-initramfs -u -k all >/dev/null
umount "$ROOT/proc"; trap - EXIT
cp -L "$ROOT/vmlinuz" "$DIR/vmlinuz"
cp -L "$ROOT/initrd.img" "$DIR/initrd.img"
rm -f "$DIR/rootfs.img"
mkfs.ext4 -q -L cachecraft-root -d "$ROOT" "$DIR/rootfs.img" "$SIZE"
kernel=$(basename "$(readlink -f "$ROOT/vmlinuz")")
echo "== image: $DIR/rootfs.img ($SIZE, $kernel, systemd $(chroot "$ROOT" dpkg-query -W -f '${Version}' systemd)," \
     "bubblewrap $(chroot "$ROOT" dpkg-query -W -f '${Version}' bubblewrap)) in $(( $(date +%s) - start )) s"
