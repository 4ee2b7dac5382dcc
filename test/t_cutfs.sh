#!/bin/bash
# cutfs (cutfs/cutfs.c), the power-cut filesystem: unsynced data is seen
# before a cut and lost at it (drop), or torn at 512-byte sectors (tear);
# fsync, fdatasync and O_DSYNC writes survive; after a cut everything fails
# with EIO.  Then an atomio store on cutfs survives CUTFS_ROUNDS (default 30)
# cuts in tear mode, each after a seeded number of acknowledged groups, with
# every acknowledged group present and none torn (cutfs-log check).
#   CUTFS_SEED=N to reproduce (default $ATOMIO_SEED, else 1), CUTFS_ROUNDS=N.
set -eu
. test/store_lib.sh
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
for b in build/cutfs build/cutfs-log; do [ -x $b ] || fail "$b is not built"; done
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 is not installed (fuse3)"
SEED=${CUTFS_SEED:-${ATOMIO_SEED:-1}}
ROUNDS=${CUTFS_ROUNDS:-30}
echo "seed $SEED (CUTFS_SEED=$SEED or ATOMIO_SEED=$SEED to repeat), rounds $ROUNDS"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-cutfs-XXXXXX")
B=$T/backing; M=$T/mnt
mkdir -p "$B" "$M"
writer=""
cleanup() {
	[ -n "$writer" ] && kill -9 "$writer" 2>/dev/null
	mountpoint -q "$M" 2>/dev/null && fusermount3 -u "$M"
	[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$T"
}
trap cleanup EXIT
mnt() { # MODE SEED
	build/cutfs --mode "$1" --seed "$2" "$B" "$M" 2>>"$T/cutfs.err"
}
umnt() { fusermount3 -u "$M"; }
mnt drop "$SEED" || skip "cannot mount a FUSE filesystem: $(tail -n 1 "$T/cutfs.err")"
count() { tr -cd "$1" < "$2" | wc -c; }

# 64 KiB of 'a' synced, then 64 KiB of 'b' over it, unsynced
fill() { head -c 65536 /dev/zero | tr '\0' "$1"; }
fill a > "$T/A"; fill b > "$T/B"
dd if="$T/A" of="$M/f" bs=65536 conv=fsync status=none
dd if="$T/B" of="$M/f" bs=65536 conv=notrunc status=none
cmp -s "$T/B" "$M/f" || fail "an unsynced write is not read back"
dd if="$T/A" of="$M/dsync" bs=4096 oflag=dsync status=none
dd if="$T/A" of="$M/fdatasync" bs=4096 conv=fdatasync status=none
fill c | head -c 3000 > "$M/new"
[ "$(stat -c %s "$M/new")" = 3000 ] || fail "the size seen is not the unsynced size"
echo cut > "$M/.cutfs"
cat "$M/f" >/dev/null 2>&1 && fail "a read after the cut did not fail"
grep -q '^cuts 1$' "$M/.cutfs" || fail "the control file does not count the cut"
umnt
cmp -s "$T/A" "$B/f" || fail "drop: unsynced sectors reached the medium"
cmp -s "$T/A" "$B/dsync" || fail "drop: an O_DSYNC write was lost"
cmp -s "$T/A" "$B/fdatasync" || fail "drop: an fdatasync'ed write was lost"
[ -f "$B/new" ] && [ "$(stat -c %s "$B/new")" = 0 ] || fail "drop: the new file is not there, empty"
echo "ok: drop mode"

# tear: the unsynced sectors reach the medium or not, one by one
mnt tear "$SEED"
dd if="$T/B" of="$M/f" bs=65536 conv=notrunc status=none
echo cut > "$M/.cutfs"
umnt
na=$(count a "$B/f"); nb=$(count b "$B/f")
[ $((na + nb)) = 65536 ] || fail "tear: the file holds other bytes"
[ $((na % 512)) = 0 ] || fail "tear: a sector is torn inside ($na bytes of the old data)"
[ "$na" -gt 0 ] && [ "$nb" -gt 0 ] || fail "tear: $na old bytes and $nb new: not torn"
echo "ok: tear mode: $((nb / 512)) of 128 sectors reached the medium"

# an atomio store on cutfs, cut round after round
mnt tear "$SEED"; mkdir "$M/store"; umnt
total=0; torn=0; kept=0
for r in $(seq 1 "$ROUNDS"); do
	s=$((SEED * 1000 + r))
	# acknowledged groups before the cut (s reduced first: a large
	# ATOMIO_SEED would overflow the shell's 64-bit product)
	want=$(( ((s % 1000003) * 2654435761) % 400 + 1 ))
	mnt tear "$s"
	build/cutfs-log write "$M/store" 1000000 > "$T/acks" 2>"$T/writer.err" &
	writer=$!
	i=0
	while [ "$(wc -l < "$T/acks")" -lt "$want" ]; do
		kill -0 "$writer" 2>/dev/null || fail "round $r: the writer died: $(cat "$T/writer.err")"
		i=$((i + 1)); [ $i -lt 6000 ] || fail "round $r: $want groups not acknowledged in time"
		sleep 0.01
	done
	echo cut > "$M/.cutfs"
	torn=$((torn + $(sed -n 's/^dropped //p' "$M/.cutfs")))
	kept=$((kept + $(sed -n 's/^kept //p' "$M/.cutfs")))
	kill -9 "$writer" 2>/dev/null || true
	wait "$writer" 2>/dev/null || true
	writer=""
	# its state file names the log's inode on this mount, not the next one's
	rm_store_state "$M/store"
	acked=$(tail -n 1 "$T/acks")
	umnt
	mnt tear "$s"
	out=$(build/cutfs-log check "$M/store" "$acked" 2>&1) || fail "round $r (seed $s): $out"
	umnt
	total=$((total + acked))
	echo "round $r: cut after $acked acknowledged groups: $out"
	# the next round writes the same groups again from 1 over what is there:
	# start from an empty store instead
	rm -rf "$B/store"; mkdir "$B/store"
done
# the cuts must have caught writes in flight, or they proved nothing
[ "$torn" -gt 0 ] && [ "$kept" -gt 0 ] || fail "the cuts dropped $torn and kept $kept unsynced sectors"
echo "ok: $ROUNDS cuts of an atomio store, $total acknowledged groups checked; $kept unsynced sectors kept, $torn dropped at the cuts"
