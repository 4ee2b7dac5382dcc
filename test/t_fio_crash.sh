#!/bin/sh
# fio's own crash verification through the atomio engine: a fio writer saves
# its verify state while writing (--trigger-file: verify_save_state, the list
# of writes fio has seen complete), is killed with SIGKILL (its --trigger
# command), then a second fio with verify_state_load=1 verify_only=1 opens the
# store (recovery replays the committed groups the writer left in the log)
# and checks every block the writer saw acknowledged.  The kills cycle through
# the engine's ways of committing: one 16 KiB write per group committed in
# queue(); 4 KiB writes in groups of 8 across 2 files, asynchronous at
# iodepth 32; 8 KiB writes at iodepth 16 in groups ended by fdatasync=4,
# buffered.  FIO_CRASH_KILLS kills (default 3; make check-fio-crash: 20).
. test/fio_lib.sh
kills=${FIO_CRASH_KILLS:-3}
echo "t_fio_crash: $kills kills (FIO_CRASH_KILLS)"
total_v=0 total_rec=0 with_rec=0
i=0
while [ "$i" -lt "$kills" ]; do
	d="$T/k$i"
	mkdir -p "$d"
	case $((i % 3)) in
	0) cfg="--filename=$d/a.dat --bs=16k --direct=1 --iodepth=1"
	   files="$d/a.dat" ;;
	1) cfg="--directory=$d --nrfiles=2 --bs=4k --direct=1 --iodepth=32 --atomio_group_writes=8 --atomio_log=$d/g.log"
	   files="$d/crash.0.0 $d/crash.0.1" ;;
	2) cfg="--filename=$d/a.dat --bs=8k --direct=0 --iodepth=16 --fdatasync=4 --atomio_group_writes=64"
	   files="$d/a.dat" ;;
	esac
	# Data files at their full size beforehand (sparse): fio lays nothing
	# out, so writing starts as soon as the store is open.
	for f in $files; do truncate -s 256M "$f"; done
	# thread=1: the job is a thread of the process the trigger kills.
	# shellcheck disable=SC2086
	(cd "$d" && exec sh -c 'exec fio --name=crash --ioengine="external:$0" '"$cfg"' --size=256M \
		--rw=randwrite --verify=crc32c --verify_state_save=1 --thread=1 \
		--trigger-file="$1/trigger" --trigger="kill -9 $$"' "$ENG" "$d") >"$d/w.out" 2>&1 &
	pid=$!
	# Kill points: 0.3 to 1 s after the store's log appears ...
	n=0
	while [ -z "$(ls "$d" | grep -e '\.atomio-log$' -e '^g\.log$')" ]; do
		n=$((n + 1))
		[ "$n" -lt 500 ] || fail "kill $i: the writer never opened its store: $(cat "$d/w.out")"
		sleep 0.02
	done
	# ... and once a write has reached a data file (blocks allocated in
	# the sparse files): a kill after a fixed delay alone found nothing
	# to verify when the machine was loaded (kill 1, groups of 8 at 0.1 s)
	n=0
	while [ "$(stat -c %b $files | awk '{ s += $1 } END { print s + 0 }')" -eq 0 ]; do
		n=$((n + 1))
		[ "$n" -lt 1500 ] || fail "kill $i: no write reached the data files: $(cat "$d/w.out")"
		sleep 0.02
	done
	sleep "$(awk -v i="$i" 'BEGIN { printf "%.1f", 0.3 + ((i * 7) % 8) / 10 }')"
	touch "$d/trigger"
	set +e
	wait "$pid"
	rc=$?
	set -e
	[ "$rc" -eq 137 ] || fail "kill $i: the writer was not killed (exit $rc): $(cat "$d/w.out")"
	[ -s "$d/local-crash-0-verify.state" ] || fail "kill $i: no verify state saved: $(ls "$d")"
	# shellcheck disable=SC2086
	(cd "$d" && fio --name=crash --ioengine="external:$ENG" $cfg --size=256M --rw=randwrite \
		--verify=crc32c --verify_state_load=1 --verify_only=1 --thread=1 \
		--output-format=json --output="$d/v.json") >"$d/v.out" 2>&1 ||
		fail "kill $i: fio's verify after recovery failed: $(cat "$d/v.out"; jq -c '.jobs[0].error' "$d/v.json")"
	jqv '.jobs[0].error == 0' "$d/v.json"
	v=$(jq '.jobs[0].read.total_ios' "$d/v.json")
	rec=$(sed -n 's/.*: recovered \([0-9]*\) committed groups.*/\1/p' "$d/v.out" "$d/v.json" | head -n 1)
	rec=${rec:-0}
	[ "$v" -gt 0 ] || fail "kill $i: nothing to verify (the writer was killed before its first write completed)"
	shown=$(echo "$cfg" | sed "s|$d/||g; s|$d|.|g")
	echo "ok    kill $i ($shown): $v blocks verified, recovery replayed $rec groups"
	total_v=$((total_v + v))
	total_rec=$((total_rec + rec))
	[ "$rec" -gt 0 ] && with_rec=$((with_rec + 1))
	rm_stores "$d"
	i=$((i + 1))
done
echo "t_fio_crash: passed: $kills runs killed with SIGKILL, $total_v blocks verified, $with_rec kills left groups for recovery ($total_rec groups replayed)"
