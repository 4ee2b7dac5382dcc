#!/bin/sh
# The command on XFS on a loop device (skipped where that cannot be set up):
# probe finds RWF_ATOMIC (emulated by XFS, not backed by the loop device);
# bench runs the kernel mode; verify --kernel and atomio groups pass their
# check; dump and recover work on a crashed store there.
. test/cli_lib.sh
[ "$(id -u)" -eq 0 ] || skip "needs root for losetup and mount"
for t in losetup mkfs.xfs mount umount; do
	command -v $t >/dev/null 2>&1 || skip "$t is not installed"
done
grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null || true
grep -qw xfs /proc/filesystems || skip "the kernel has no XFS"
IMG="$T/xfs.img"; MNT="$T/mnt"; LOOP=""
xfs_cleanup() {
	# the stores on the XFS image first: their state files name its inodes
	if mountpoint -q "$MNT" 2>/dev/null; then
		[ -n "${ATOMIO_KEEP:-}" ] || rm_store_state "$MNT"
		umount "$MNT"
	fi
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	cli_cleanup
}
trap xfs_cleanup EXIT
truncate -s 320M "$IMG"
LOOP=$(losetup -f --show "$IMG" 2>/dev/null) || skip "cannot attach a loop device"
mkfs.xfs -q -f "$LOOP" >/dev/null 2>&1 || skip "mkfs.xfs failed"
mkdir "$MNT"
mount "$LOOP" "$MNT" 2>/dev/null || skip "cannot mount XFS"
loopname=$(basename "$LOOP")

for A in $BINS; do
	$A probe --json --try-writes "$MNT" >"$T/p.json" || fail "probe: $(cat "$T/p.json")"
	jqv ".filesystem == \"xfs\" and .device.name == \"$loopname\" and
	     .device.loop_backing_file == \"$IMG\"" "$T/p.json"
	# Linux 6.11+ XFS accepts RWF_ATOMIC (6.16+ beyond one block, in software)
	if jq -e '.statx.write_atomic' "$T/p.json" >/dev/null; then
		jqv '[.atomio.sizes[] | select(.kernel_accepts) | .tried == "accepted"] | all' "$T/p.json"
		jqv '.atomio.sizes[0] | .kernel_accepts and .hardware_backed == false and .atomio_path == "log"' "$T/p.json"
		kernel=1
	else
		kernel=0
	fi
done

A=build/atomio
$A bench -q -d 1 -n 2 -s 4M --log-size 16M -m unsafe,atomio,kernel --json "$T/b.json" "$MNT" >"$T/out" ||
	fail "bench on XFS: $(cat "$T/out")"
jqv '.filesystem == "xfs"' "$T/b.json"
if [ $kernel -eq 1 ]; then
	jqv '[.runs[] | select(.mode == "kernel") | .ops > 0 and .syncs_per_op == 1 and
	      .user_bytes == .ops * .page_size] | length == 1 and all' "$T/b.json"
	$A verify write "$MNT" --state "$T/k.state" --kernel --ranges 4 --groups 200 -q ||
		fail "verify write --kernel"
	$A verify check "$MNT" --state "$T/k.state" >"$T/out" || fail "verify check --kernel: $(cat "$T/out")"
else
	jqv '.skipped[0].mode == "kernel"' "$T/b.json"
	one_line_error 4 $A verify write "$MNT" --state "$T/k.state" --kernel
fi
# atomio groups on XFS, killed mid-run: dump, recover, check
rm -f "$T/a.state"
$A verify write "$MNT" --state "$T/a.state" --blocks 2048 -q &
pid=$!
n=0
while [ "$(stat -c %s "$T/a.state" 2>/dev/null || echo 0)" -lt $((128 + 100 * 16)) ] && [ $n -lt 400 ]; do
	sleep 0.05; n=$((n + 1))
done
kill -9 $pid; wait $pid 2>/dev/null || true
$A dump --json "$MNT/atomio-verify.log" >"$T/d.json" || fail "dump on XFS"
groups=$(jq .recovery.groups "$T/d.json")
$A recover --json "$MNT/atomio-verify.log" >"$T/r.json" || fail "recover on XFS"
jqv ".recovered_groups == $groups" "$T/r.json"
$A verify check "$MNT" --state "$T/a.state" >"$T/out" || fail "verify check on XFS: $(cat "$T/out")"
echo "xfs ok (kernel RWF_ATOMIC: $kernel)"
