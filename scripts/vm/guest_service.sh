#!/bin/bash
# Baked into the image (build_image.sh) as the boot service's command: mount the host's 9p shares (named in
# run.sh), run the checkout's scripts/vm/guest_boot.sh with its output to the console and the out share, then
# power off. Kept small so that the image rarely needs rebuilding: the checks themselves live in the checkout.
set -u
opts=trans=virtio,version=9p2000.L,msize=524288
mkdir -p /mnt/out /mnt/checkout
if ! mount -t 9p -o "$opts" out /mnt/out; then
  echo "cachecraft-vm: no 'out' share: nothing to do"; systemctl poweroff; exit 1
fi
. /mnt/out/config.env   # CHECKOUT, PYTHON_PREFIX: where the host's checkout and interpreter are
mount -t 9p -o "$opts,ro,cache=loose" checkout /mnt/checkout
mkdir -p "$PYTHON_PREFIX"
mount -t 9p -o "$opts,ro,cache=loose" python "$PYTHON_PREFIX"
bash /mnt/checkout/scripts/vm/guest_boot.sh 2>&1 | tee /mnt/out/guest.log
echo "${PIPESTATUS[0]}" >/mnt/out/guest.rc
sync
systemctl poweroff
