# A filesystem of its own for a database benchmark (pg/bench.sh,
# mariadb/bench.sh; sourced by bash): an ext4 image on a loop device with
# direct I/O to the image, so that the device's counters
# (/sys/block/loopN/stat) are the server's writes and nothing else's.
# The caller sets IMG (the image) and FS (the mount point) and starts with
# LOOP="".

# loopfs_make SIZE: the image (sparse), its loop device in LOOP, ext4 on
# it, mounted at FS
loopfs_make() {
	truncate -s "$1" "$IMG"
	LOOP=$(losetup -f --show --direct-io=on "$IMG")
	mkfs.ext4 -q -F "$LOOP"
	mount "$LOOP" "$FS"
}

# loopfs_remove: unmounted and detached, whatever was made (for a trap)
loopfs_remove() {
	mountpoint -q "$FS" 2>/dev/null && umount "$FS"
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	LOOP=""
	true
}

# loopfs_written: the bytes the loop device has written since it was made
# (printf: mawk prints a large number as 1.1e+10)
loopfs_written() { awk '{ printf "%.0f\n", $7 * 512 }' "/sys/block/$(basename "$LOOP")/stat"; }
