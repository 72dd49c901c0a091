#!/bin/busybox sh
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
#
# /init of the lab's Debian test guest (busybox, from its initramfs):
# boots as a Debian instance reads its root file system.  It mounts the
# ext4 root of /dev/vda read-only, with the disk's read-ahead as the
# kernel sets it, and starts READERS readers at once, as systemd starts
# services in parallel; reader N reads the files listed in
# /etc/boot-files.N (libraries, programs, systemd's and udev's files,
# kernel modules, configuration) whole, buffered, in that order, and
# hashes them.  The digest is that of the readers' sha256sum lines, in
# reader order.  Then it writes its scratch region past the file system
# and prints its marker (guest_lib.sh).

# shellcheck source=gvfs_lab/guest_lib.sh
. /lib/gvfs-guest.sh
start_guest
mkdir -p /root
mount -t ext4 -o ro /dev/vda /root || fail "mount the root file system"
read -r io_start _ < /proc/uptime

reader=0
while [ "$reader" -lt "$READERS" ]; do
    # A missing file adds nothing to the stream: the digest shows it.
    (while read -r path; do
        cat "/root/$path"
    done < "/etc/boot-files.$reader" | sha256sum > "/tmp/sum.$reader") &
    reader=$((reader + 1))
done
wait
digest=$(reader=0; while [ "$reader" -lt "$READERS" ]; do
    cat "/tmp/sum.$reader"
    reader=$((reader + 1))
done | sha256sum)
umount /root

finish_guest "$io_start" "$digest"
