#!/bin/busybox sh
# vhpc guest init (runs from vhpc's initramfs; see vhpc/environments/guestimage.py).
# Loads the virtio/9p modules, mounts the host's root read-only over virtio-9p, gives the guest
# writable /tmp, /run, /var/tmp, /dev/shm, then switch_root's into the host root and runs the
# vhpc guest agent (/vhpc-agent, copied to the new root's /run tmpfs).
/bin/busybox mkdir -p /proc /sys /dev
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
# Shell builtins only where it is cheap to avoid a fork: under TCG every fork and exec of the
# boot path costs milliseconds (bench/bench_vm_cycle.py times the whole cycle).
read up _ < /proc/uptime
echo "vhpc-init: start $up"
for m in /modules/*.ko; do insmod "$m" || echo "vhpc-init: insmod $m failed"; done
read up _ < /proc/uptime
echo "vhpc-init: modules $up"
# the vhpc.* words of the kernel command line, parsed once into variables (no subshells)
read -r cmdline < /proc/cmdline
probe= ip_addr= host_name= hosts= prefetch=
share0= share1= share2= share3=
for w in $cmdline; do
    case "$w" in
        vhpc.probe=*) probe=${w#*=};;
        vhpc.ip=*) ip_addr=${w#*=};;
        vhpc.hostname=*) host_name=${w#*=};;
        vhpc.hosts=*) hosts=${w#*=};;
        vhpc.prefetch=*) prefetch=${w#*=};;
        vhpc.share[0-3]=*) k=${w%%=*}; eval "share${k#vhpc.share}=\${w#*=}";;
    esac
done
if [ "$probe" = 1 ]; then
    echo "VHPC-PROBE-OK"
    poweroff -f
fi
ifconfig lo 127.0.0.1 up
hostname "${host_name:-vhpc-guest}"
# vcluster: a fixed address on the campaign's private segment (vhpc.ip=A.B.C.D/P)
if [ -n "$ip_addr" ]; then
    ip addr add "$ip_addr" dev eth0 && ip link set eth0 up \
        || echo "vhpc-init: cannot configure eth0 with $ip_addr"
fi
mkdir -p /newroot
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /newroot; then
    echo "VHPC-INIT-FAILED: cannot mount the host root over virtio-9p"
    poweroff -f
fi
for d in tmp run var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "/newroot/$d"; done
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
# vhpc's own files when they live under a directory the guest gets privately (vhpc.shareN=PATH)
for i in 0 1 2 3; do
    eval "p=\$share$i"
    [ -n "$p" ] || continue
    mkdir -p "/newroot$p"
    mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose "share$i" "/newroot$p" \
        || echo "vhpc-init: cannot mount share$i at $p"
done
# vcluster: the peers' names (vhpc.hosts=ADDR:NAME,...) in a private /etc/hosts
if [ -n "$hosts" ]; then
    printf '127.0.0.1 localhost\n' > /newroot/run/vhpc-hosts
    IFS=, ; set -- $hosts; unset IFS
    for e in "$@"; do echo "${e%%:*} ${e#*:}" >> /newroot/run/vhpc-hosts; done
    mount --bind /newroot/run/vhpc-hosts /newroot/etc/hosts || echo "vhpc-init: cannot bind /etc/hosts"
fi
# the host's dynamic loader and libc (vhpc.prefetch=A:B), read once in large 9p requests so
# that the first command does not fault them in page by page
if [ -n "$prefetch" ]; then
    IFS=: ; set -- $prefetch; unset IFS
    for f in "$@"; do cat "/newroot$f" > /dev/null 2>&1; done
fi
read up _ < /proc/uptime
echo "VHPC-INIT-DONE uptime $up"
cp /vhpc-agent /newroot/run/vhpc-agent
ln -s vhpc-agent /newroot/run/vhpc-rsh
ln -s vhpc-agent /newroot/run/vhpc-rank
exec switch_root /newroot /run/vhpc-agent
