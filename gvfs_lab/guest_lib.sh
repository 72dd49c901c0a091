# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
#
# What both lab guests' /init do besides their boot reads (sourced from
# /lib/gvfs-guest.sh of their initramfs): the early mounts, the modules,
# waiting for the disk, the writes to the scratch region past the file
# system, and the one marker line on the serial port,
#
#     GVFS-GUEST-READY uptime=<s> io_start=<s> digest=<sha256 of the
#     reads> wrote=<sha256 of the writes>
#
# or "GVFS-GUEST-FAILED <reason>".  The serial port, not /dev/console:
# under Nova the kernel's last console= is hvc0, which the guests lack.
# /etc/gvfs-guest.conf sets MODULES, DISK_BYTES, SCRATCH_BLOCK and
# WRITE_BLOCKS.

idle() {
    while true; do
        sleep 3600
    done
}

fail() {
    echo "GVFS-GUEST-FAILED $*"
    idle
}

start_guest() {
    /bin/busybox mkdir -p /usr/bin /sbin /usr/sbin
    /bin/busybox --install -s
    mount -t proc proc /proc
    mount -t sysfs sysfs /sys
    mount -t devtmpfs devtmpfs /dev
    mount -t tmpfs tmpfs /tmp
    [ -c /dev/ttyS0 ] && exec >/dev/ttyS0 2>&1 </dev/null
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
    [ "$size" -ge "$DISK_BYTES" ] ||
        fail "/dev/vda has $size bytes, < $DISK_BYTES"
}

# finish_guest IO_START DIGEST: write the scratch region, print the marker.
finish_guest() {
    dd if=/dev/urandom of=/tmp/scratch bs=65536 count="$WRITE_BLOCKS" \
        2>/dev/null || fail "no random data"
    wrote=$(sha256sum < /tmp/scratch)
    dd if=/tmp/scratch of=/dev/vda bs=65536 seek="$SCRATCH_BLOCK" \
        oflag=direct conv=notrunc,fsync 2>/dev/null || fail "write to /dev/vda"
    rm -f /tmp/scratch
    read -r uptime _ < /proc/uptime
    echo "GVFS-GUEST-READY uptime=$uptime io_start=$1" \
        "digest=${2%% *} wrote=${wrote%% *}"
    idle
}
