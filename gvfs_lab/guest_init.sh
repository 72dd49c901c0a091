#!/bin/busybox sh
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
#
# /init of the lab's test guest (busybox, from its initramfs): stands for
# an instance booting from a golden image.  It reads the boot set -- the
# 64 KiB blocks of /dev/vda listed in /etc/boot-set, in that order, with
# O_DIRECT and no read-ahead, so every byte is a read of the disk -- and
# hashes them; writes WRITE_BLOCKS blocks of random data at SCRATCH_BLOCK
# (past the file system) and flushes them; then prints one line on the
# serial port,
#
#     GVFS-GUEST-READY uptime=<s> io_start=<s> digest=<sha256 of the
#     reads> wrote=<sha256 of the writes>
#
# and idles, as a running instance does.  io_start is the uptime when the
# boot reads began (the kernel, its modules and the disk were up).  On
# failure it prints "GVFS-GUEST-FAILED <reason>" instead.  The serial
# port, not /dev/console: under Nova the kernel's last console= is hvc0,
# which this guest does not have.
# /etc/gvfs-guest.conf sets MODULES, DISK_BYTES, SCRATCH_BLOCK and
# WRITE_BLOCKS.

/bin/busybox mkdir -p /usr/bin /sbin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
[ -c /dev/ttyS0 ] && exec >/dev/ttyS0 2>&1 </dev/null

idle() {
    while true; do
        sleep 3600
    done
}

fail() {
    echo "GVFS-GUEST-FAILED $*"
    idle
}

# shellcheck source=/dev/null
. /etc/gvfs-guest.conf || fail "no /etc/gvfs-guest.conf"

for module in $MODULES; do
    insmod "/lib/modules/$module" || fail "insmod $module"
done

tries=0
while [ ! -b /dev/vda ]; do
    tries=$((tries + 1))
    [ "$tries" -gt 300 ] && fail "no /dev/vda after 30 s"
    usleep 100000
done
# A flavor may give the instance a larger disk than the golden image.
size=$(blockdev --getsize64 /dev/vda)
[ "$size" -ge "$DISK_BYTES" ] || fail "/dev/vda has $size bytes, < $DISK_BYTES"
echo 0 > /sys/block/vda/queue/read_ahead_kb
read -r io_start _ < /proc/uptime

# A failed read adds nothing to the stream: the digest shows it.
digest=$(while read -r block; do
    dd if=/dev/vda bs=65536 count=1 skip="$block" iflag=direct 2>/dev/null
done < /etc/boot-set | sha256sum)

dd if=/dev/urandom of=/tmp/scratch bs=65536 count="$WRITE_BLOCKS" \
    2>/dev/null || fail "no random data"
wrote=$(sha256sum < /tmp/scratch)
dd if=/tmp/scratch of=/dev/vda bs=65536 seek="$SCRATCH_BLOCK" \
    oflag=direct conv=notrunc,fsync 2>/dev/null || fail "write to /dev/vda"
rm -f /tmp/scratch

read -r uptime _ < /proc/uptime
echo "GVFS-GUEST-READY uptime=$uptime io_start=$io_start" \
    "digest=${digest%% *} wrote=${wrote%% *}"
idle
