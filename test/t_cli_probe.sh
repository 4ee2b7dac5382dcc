#!/bin/sh
# atomio probe on the test filesystem (ext4 here): the filesystem and device
# it names agree with df and sysfs; every write size gets a path and a reason.
. test/cli_lib.sh
fstype=$(df --output=fstype "$T" | tail -n 1 | tr -d ' ')
# In a chroot /proc/self/mountinfo (and so df) does not list the root
# filesystem; probe then names it from statfs's magic, as stat -f does.
if [ "$fstype" = "-" ] || [ -z "$fstype" ]; then
	case $(stat -f -c %t "$T") in
	ef53) fstype=ext4 ;;
	*) fstype=$(stat -f -c %T "$T") ;;
	esac
fi
for A in $BINS; do
	$A probe --json "$T" >"$T/p.json" || fail "probe --json: $(cat "$T/p.json")"
	jqv ".filesystem == \"$fstype\" and .kind == \"directory\"" "$T/p.json"
	jqv '(.atomio.sizes | length) == 6 and ([.atomio.sizes[] | (.atomio_path | type == "string") and
	     (.why | length > 0)] | all)' "$T/p.json"
	jqv '(.statx | has("atomic_write_unit_min") and has("atomic_write_unit_max_opt") and
	     has("atomic_write_segments_max") and has("dio_offset_align"))' "$T/p.json"
	# no hardware atomic writes -> every size goes through the log
	jqv 'if (.device == null or .device.queue.atomic_write_unit_max_bytes <= 0)
	     then [.atomio.sizes[] | .hardware_backed == false and (.atomio_path == "log" or
	           (.atomio_path | startswith("refused")))] | all else true end' "$T/p.json"
	dev=$(jq -r '.device.name // empty' "$T/p.json")
	if [ -n "$dev" ]; then
		[ -e "/sys/class/block/$dev" ] || fail "probe named device $dev, not in /sys/class/block"
		pbs=$(cat "/sys/class/block/$(jq -r .device.disk "$T/p.json")/queue/physical_block_size")
		jqv ".device.queue.physical_block_size == $pbs" "$T/p.json"
	fi
	$A probe "$T" >"$T/p.txt" || fail "probe"
	for k in "filesystem " "RWF_ATOMIC " "direct I/O " "write size"; do
		grep -q "^$k" "$T/p.txt" || fail "probe text lacks '$k': $(cat "$T/p.txt")"
	done
	: >"$T/file"
	$A probe --json --sizes 4k,8k "$T/file" >"$T/f.json" || fail "probe of a file"
	jqv '.kind == "file" and (.atomio.sizes | length) == 2 and .atomio.sizes[1].size == 8192' "$T/f.json"
	one_line_error 3 $A probe "$T/nonexistent"
	one_line_error 2 $A probe --sizes 4q "$T"
done
echo "probe ok"
