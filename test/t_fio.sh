#!/bin/sh
# The fio ioengine (build/atomio_fio.so) under fio's own verification:
# verify=crc32c with verify_backlog for every way the engine commits (one
# write per group, committed in queue(); asynchronous groups at iodepth 16;
# groups of 8 pages across 2 files at iodepth 32; groups ended by fdatasync),
# then a verify-only pass that must catch a block changed behind atomio's
# back; its option table; its refusal of another fio version.
. test/fio_lib.sh

# The option table, as fio shows it (fio 3.33's --enghelp takes a path, not external:PATH).
fio --enghelp="$ENG" >"$T/help" 2>&1 || fail "fio --enghelp: $(cat "$T/help")"
for o in atomio_log atomio_log_size atomio_group_writes atomio_sync_ends_group atomio_engine \
	atomio_compress atomio_direct_home; do
	grep -q "^$o " "$T/help" || fail "--enghelp lacks $o: $(cat "$T/help")"
done

# Writes then reads back every block, checking crc32c headers; verify_backlog
# reads back while writing.  An error or a verify failure fails fio.
check_verified() { # NAME BYTES
	jqv ".jobs[0].error == 0 and .jobs[0].write.io_kbytes * 1024 == $2 and .jobs[0].read.io_kbytes * 1024 >= $2" "$T/$1.json"
	echo "ok    $1: $(jq -r '.jobs[0] | "\(.write.total_ios) writes, \(.read.total_ios) blocks verified"' "$T/$1.json")"
}
afio perwrite --filename="$T/p.dat" --size=4M --bs=16k --rw=randwrite --direct=1 \
	--verify=crc32c --verify_backlog=32
check_verified perwrite 4194304
afio async --filename="$T/a.dat" --size=4M --bs=16k --rw=randwrite --direct=1 --iodepth=16 \
	--verify=crc32c --verify_backlog=64
check_verified async 4194304
afio groups --directory="$T" --nrfiles=2 --size=8M --bs=4k --rw=randwrite --direct=1 \
	--iodepth=32 --atomio_group_writes=8 --atomio_log="$T/groups.log" --verify=crc32c \
	--verify_backlog=256
check_verified groups 8388608
afio syncs --filename="$T/s.dat" --size=4M --bs=4k --rw=randwrite --iodepth=8 --fdatasync=5 \
	--atomio_group_writes=1000 --atomio_compress=0 --verify=crc32c --verify_backlog=64
check_verified syncs 4194304
jqv '.jobs[0].sync.lat_ns.N > 0' "$T/syncs.json" # (fio 3.33 counts syncs there, not in total_ios)

# A verify-only pass over p.dat finds its blocks intact; after one block is
# changed behind atomio's back (atomio checkpointed at close, so the file is
# all there is), fio's verify must fail.
afio perwrite --filename="$T/p.dat" --size=4M --bs=16k --rw=randwrite --direct=1 \
	--verify=crc32c --verify_only=1
jqv '.jobs[0].error == 0 and .jobs[0].read.io_kbytes == 4096' "$T/perwrite.json"
printf 'torn' | dd of="$T/p.dat" bs=1 seek=$((16384 * 37 + 1000)) conv=notrunc status=none
if (cd "$T" && fio --name=perwrite --ioengine="external:$ENG" --filename="$T/p.dat" --size=4M \
	--bs=16k --rw=randwrite --direct=1 --verify=crc32c --verify_only=1) >"$T/bad.out" 2>&1; then
	fail "verify passed over a changed block: $(cat "$T/bad.out")"
fi
grep -q 'crc32c' "$T/bad.out" || fail "no crc32c verify failure reported: $(cat "$T/bad.out")"
echo "ok    a block changed behind atomio's back fails fio's verify"

# Another fio version: a copy of the engine built for one refuses to load.
if [ -f build/fio/atomio_fio_otherfio.so ]; then
	if fio --name=x --ioengine="external:$(pwd)/build/fio/atomio_fio_otherfio.so" \
		--filename="$T/x.dat" --size=1M >"$T/abi.out" 2>&1; then
		fail "an engine built for another fio loaded: $(cat "$T/abi.out")"
	fi
	grep -q 'atomio_fio.so: built for fio-0.0-other (ioengine ABI [0-9]*), refusing to load into fio-' \
		"$T/abi.out" || fail "no clear refusal: $(cat "$T/abi.out")"
	echo "ok    $(grep -m1 refusing "$T/abi.out")"
fi
echo "t_fio: passed"
