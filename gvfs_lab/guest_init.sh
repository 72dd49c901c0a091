#!/bin/busybox sh
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
#
# /init of the lab's worst-case test guest (busybox, from its
# initramfs): stands for an instance booting from a golden image.  It
# reads the boot set -- the 64 KiB blocks of /dev/vda listed in
# /etc/boot-set, in that order, with O_DIRECT and no read-ahead, so every
# byte is a read of the disk, one at a time -- and hashes them; then
# writes its scratch region and prints its marker (guest_lib.sh).
# io_start is the uptime when the boot reads began (the kernel, its
# modules and the disk were up).

# shellcheck source=gvfs_lab/guest_lib.sh
. /lib/gvfs-guest.sh
start_guest
echo 0 > /sys/block/vda/queue/read_ahead_kb
read -r io_start _ < /proc/uptime

# A failed read adds nothing to the stream: the digest shows it.
digest=$(while read -r block; do
    dd if=/dev/vda bs=65536 count=1 skip="$block" iflag=direct 2>/dev/null
done < /etc/boot-set | sha256sum)

finish_guest "$io_start" "$digest"
