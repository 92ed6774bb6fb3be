#!/bin/sh
# Linux programs that load memory, run by StarryOS at boot (its init runs
# /usr/bin/starry-run-case-tests when the root file system has one): fork and exec in a
# loop, many processes at once, a large sort, gzip and gunzip with the checksum compared,
# dd with large blocks, then as many 2 MiB pages as the kernel hands out (hugepages.c). Each step prints a line the test stage checks, and `mark` the guest
# clock (with QEMU's -icount shift=0, a nanosecond per guest instruction) and the free
# memory at the step's peak; the last line is "load: done".
cd /root 2>/dev/null || cd /
mark() {
    echo "load: mark $(cut -d ' ' -f 1 /proc/uptime) s $(grep MemFree /proc/meminfo | tr -s ' ' | cut -d ' ' -f 2) kB"
}
echo "load: begin"
mark
i=0
while [ $i -lt 100 ]; do /bin/true; i=$((i + 1)); done
echo "load: fork-exec $i"
mark
for j in $(seq 1 24); do
    (dd if=/dev/zero bs=4096 count=64 2>/dev/null | wc -c > /tmp/proc.$j) &
done
mark
wait
echo "load: processes $(cat /tmp/proc.* | sort -u | tr '\n' ' ')$(ls /tmp/proc.* | wc -l)"
rm -f /tmp/proc.*
seq 1 200000 > /tmp/numbers
sort -r -n /tmp/numbers > /tmp/sorted
mark
echo "load: sort $(head -n 1 /tmp/sorted) $(tail -n 1 /tmp/sorted) $(wc -l < /tmp/sorted)"
rm -f /tmp/numbers /tmp/sorted
dd if=/dev/urandom of=/tmp/data bs=65536 count=64 2>/dev/null
md5sum /tmp/data > /tmp/data.md5
gzip -9 /tmp/data
mark
gunzip /tmp/data.gz
if md5sum -c /tmp/data.md5 >/dev/null 2>&1; then echo "load: gzip ok"; else echo "load: gzip MISMATCH"; fi
rm -f /tmp/data /tmp/data.md5
dd if=/dev/zero of=/tmp/big bs=1048576 count=32 2>/dev/null
mark
echo "load: dd $(wc -c < /tmp/big)"
rm -f /tmp/big
mark
/usr/bin/hugepages
echo "load: done"
poweroff -f
