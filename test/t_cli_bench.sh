#!/bin/sh
# atomio bench: a tiny run of every mode; its JSON is complete (the schema of
# issue 5 and more) and its byte counts add up; the SVG is drawn; writer
# processes (--procs) report as threads do.
. test/cli_lib.sh
for A in $BINS; do
	J="$T/b.json"
	$A bench -q -d 1.5 -n 2 -s 4M --log-size 8M -m unsafe,doublewrite,atomio,kernel,atomio-excl \
		--json "$J" --plot "$T/b.svg" "$T" >"$T/out" ||
		fail "$A bench failed: $(cat "$T/out")"
	grep -q '^unsafe ' "$T/out" || fail "no table: $(cat "$T/out")"
	[ -z "$(ls "$T" | grep atomio-bench)" ] || fail "$A bench left its directory behind"
	jqv '(.filesystem | type == "string") and .direct == true and (.runs | type == "array")' "$J"
	# every mode ran or was skipped with a reason
	jqv '([.runs[].mode] + [.skipped[].mode] | sort) == ["atomio","atomio-excl","doublewrite","kernel","unsafe"]' "$J"
	jqv '[.skipped[] | .reason | type == "string" and length > 0] | all' "$J"
	# the issue's schema, every field a number
	jqv '[.runs[] | (.mode|type=="string") and ([.threads,.page_size,.ranges_per_group,.ops_per_sec,
	      .p50_us,.p99_us,.p999_us,.syncs_per_op] | map(type=="number") | all)] | all' "$J"
	jqv '[.runs[] | .device_bytes_per_user_byte | type=="number" or type=="null"] | all' "$J"
	# byte counts add up
	jqv '[.runs[] | .ops > 0 and .user_bytes == .ops * .page_size * .ranges_per_group
	      and (.rep_ops | add) == .ops and (.rep_ops | length) == 2
	      and .p50_us <= .p99_us and .p99_us <= .p999_us] | all' "$J"
	# (not atomio's shared store: see below)
	jqv '[.runs[] | select(.device_bytes != null and .mode != "atomio") | .device_bytes >= .process_bytes] | all' "$J"
	# (1% slack: the kernel may account a stray page of metadata to the process)
	jqv '.runs[] | select(.mode=="unsafe") | .process_bytes >= .user_bytes and
	     .process_bytes <= 1.01 * .user_bytes and .syncs_per_op == 1 and .ops_vs_unsafe == 1' "$J"
	jqv '.runs[] | select(.mode=="doublewrite") | .process_bytes >= 2 * .user_bytes and
	     .process_bytes <= 2.02 * .user_bytes and .syncs_per_op == 2 and .ops_vs_doublewrite == 1' "$J"
	# atomio (one thread, one data file): one log write per commit and at
	# most one data sync per checkpoint (at least one checkpoint per slice;
	# a checkpoint finds no file to sync when a background checkpoint's
	# sync already wrote the home writes of the records it frees); the process wrote
	# the log, the home pages and a 4 KiB superblock per checkpoint -- home
	# pages through the page cache (also for an O_DIRECT file, src/engine_pick.c), so
	# a page written twice between checkpoints reaches the device once.
	# The shared store (atomio) keeps its state in /dev/shm where that is a
	# tmpfs (memory, not charged as written bytes); elsewhere its state file
	# sits beside the log, mapped shared, and its pages count as the
	# process's writes: the bound only where /dev/shm is a tmpfs.
	SHM_TMPFS=""
	[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && SHM_TMPFS=1
	EXACT='.process_bytes <= 1.01 * (.log_bytes + .home_bytes + 4096 * .checkpoints)'
	jqv '[.runs[] | select(.mode=="atomio" or .mode=="atomio-excl") | .home_bytes == .user_bytes
	     and .log_bytes > .user_bytes and .checkpoints >= (.rep_ops | length) and .syncs >= .ops
	     and .syncs <= .ops + .checkpoints and .process_bytes >= .log_bytes] | length == 2 and all' "$J"
	jqv ".runs[] | select(.mode==\"atomio-excl\" or (\"$SHM_TMPFS\" != \"\" and .mode==\"atomio\")) | $EXACT" "$J"
	head -c 5 "$T/b.svg" | grep -q '<?xml' || fail "not an SVG"
	tail -n 1 "$T/b.svg" | grep -q '</svg>' || fail "SVG not finished"
	for m in unsafe doublewrite atomio atomio-excl; do grep -q ">$m" "$T/b.svg" || fail "SVG lacks $m"; done
	# writer processes (--procs): 3 processes of one writer per mode, each
	# with descriptors (atomio: a store handle) of its own, beside atomio
	# with 3 threads; their ops, latencies and bytes come back to the
	# parent, atomio's counters are the store's (every process's); atomio-excl
	# cannot run in processes: skipped with its reason
	P="$T/p.json"
	$A bench -q -d 1.2 -n 2 -s 4M --log-size 8M -t 3 --procs -m unsafe,doublewrite,atomio,atomio:threads,atomio-excl \
		--json "$P" "$T" >"$T/out" || fail "$A bench --procs failed: $(cat "$T/out")"
	grep -q '^atomio:procs ' "$T/out" || fail "no atomio:procs row: $(cat "$T/out")"
	grep -q '^atomio:procs: [0-9.]*x atomio with 3 threads' "$T/out" || fail "no procs/threads line: $(cat "$T/out")"
	[ -z "$(ls "$T" | grep atomio-bench)" ] || fail "$A bench --procs left its directory behind"
	jqv '.procs == true and ([.runs[] | "\(.mode)/\(.writers)"] | sort) ==
	     ["atomio/processes","atomio/threads","doublewrite/processes","unsafe/processes"]' "$P"
	jqv '[.runs[] | .ops > 0 and .user_bytes == .ops * .page_size * .ranges_per_group and .threads == 3
	      and (.rep_ops | add) == .ops and .p50_us <= .p99_us and .p99_us <= .p999_us
	      and (.cpu_us_per_op | type) == "number" and .cpu_us_per_op > 0] | all' "$P"
	jqv '.runs[] | select(.mode=="unsafe") | .process_bytes >= .user_bytes and
	     .process_bytes <= 1.01 * .user_bytes and .syncs_per_op == 1 and .ops_vs_unsafe == 1' "$P"
	jqv '.runs[] | select(.mode=="doublewrite") | .process_bytes >= 2 * .user_bytes and
	     .process_bytes <= 2.02 * .user_bytes and .syncs_per_op == 2 and .ops_vs_unsafe > 0' "$P"
	# the store's counters and the writer processes' bytes, as for threads
	jqv '[.runs[] | select(.mode=="atomio") | .home_bytes == .user_bytes and .log_bytes > .user_bytes
	     and .checkpoints >= (.rep_ops | length) and .log_syncs > 0 and .log_syncs <= .ops
	     and .batches > 0 and .groups_per_batch >= 1 and .process_bytes >= .log_bytes] | length == 2 and all' "$P"
	# every writer process's bytes counted, and no more than the store wrote
	[ -z "$SHM_TMPFS" ] || jqv "[.runs[] | select(.mode==\"atomio\") | $EXACT] | all" "$P"
	# the processes' counts reach the table: its ops/s is the JSON's (the
	# table rounds to a whole number, the JSON keeps 6 digits: 3585.4996 is
	# 3585 in one and 3585.5 in the other)
	r=$(awk '$1 == "atomio:procs" { print $2 }' "$T/out")
	jqv "[.runs[] | select(.mode==\"atomio\" and .writers==\"processes\") | .ops_per_sec - $r | fabs <= 0.5] == [true]" "$P"
	jqv '.runs[] | select(.mode=="atomio" and .writers=="processes") | .ops_vs_threads > 0
	     and .ops_vs_unsafe > 0' "$P"
	jqv '(.load_average_start | length) == 3 and (.load_average_end | length) == 3' "$P"
	# what tells machines apart: the device probe after each atomio slice
	# (durable writes of the slice's mean log write, whole 4 KiB blocks), the
	# checkpoints in the window (the background ones that ended before the
	# last writer stopped: all but each slice's final, which came after, and
	# a background one still running then, which the final one waits for),
	# CPU per op, the CPUs
	jqv '.cpus_online >= 1 and .device_probe_error == null' "$P"
	# (each condition by name, so that a failure says which; a checkpoint
	# shorter than the 2 ms sampling may go unseen in one run, not in both)
	jq '[.runs[] | select(.mode=="atomio") | {
	     probe_writes: (.device_probe_writes >= (.rep_ops | length)),
	     probe_size: (.device_probe_write_bytes >= 4096 and .device_probe_write_bytes > 0.5 * .log_write_bytes_mean
			  and .device_probe_write_bytes < 2 * .log_write_bytes_mean + 4096),
	     mean_write: ((.log_write_bytes_mean - .log_bytes / .batches | fabs) < 1),
	     probe_times: (.device_log_write_us > 0 and .device_log_write_p50_us <= .device_log_write_p99_us),
	     busy: (.device_log_busy_fraction > 0 and .log_writes_per_sec > 0),
	     ckpts_in_window: (.checkpoints_in_window >= .checkpoints - 2 * (.rep_ops | length)
			       and .checkpoints_in_window <= .checkpoints),
	     ckpt_time: (.checkpoint_seconds >= 0 and .checkpoint_seconds < .seconds
			 and (.checkpoint_time_fraction - .checkpoint_seconds / .seconds | fabs) < 0.001),
	     ckpt_secs: .checkpoint_seconds}]' "$P" >"$T/probe.json"
	jq -e 'length == 2 and ([.[] | del(.ckpt_secs) | to_entries[] | .value] | all)
	       and ([.[].ckpt_secs] | add > 0)' "$T/probe.json" >/dev/null ||
		fail "the device probe and checkpoint figures: $(jq -c . "$T/probe.json")"
	jqv '[.runs[] | select(.mode!="atomio") | has("device_log_write_us") or has("checkpoint_seconds")] | any | not' "$P"
	grep -q '^atomio:procs: [0-9]* log writes/s of [0-9.]* KiB (mean); the device alone (probe): [0-9]* us each' "$T/out" ||
		fail "no device probe line: $(cat "$T/out")"
	grep -q '^atomio: checkpoints: [0-9]* ended in [0-9.]* s of writes, one running [0-9]*% of the time' "$T/out" ||
		fail "no checkpoint line: $(cat "$T/out")"
	grep -q '^CPU per op (us of CPU time.*: unsafe:procs [0-9.]*, doublewrite:procs [0-9.]*, atomio:procs [0-9.]*, atomio [0-9.]*$' "$T/out" ||
		fail "no CPU line: $(cat "$T/out")"
	jqv '.skipped == [{"mode":"atomio-excl","writers":"processes","threads":3,"page_size":16384,"ranges_per_group":1,
	     "zipf_theta":0,"compressible_pct":0,"reason":"ATOMIO_EXCLUSIVE admits one process at a time (drop --procs)"}]' "$P"
done
# several configurations in one run, buffered, two files
A=build/atomio
$A bench -q -d 1 -n 1 -s 2M -f 2 -t 1,2 -r 1,3 --buffered -m unsafe,atomio --log-size 8M --json "$T/c.json" "$T" >"$T/out" ||
	fail "multi-config bench failed: $(cat "$T/out")"
jqv '.direct == false and (.runs | length) == 8' "$T/c.json"
jqv '[.runs[] | .user_bytes == .ops * .page_size * .ranges_per_group] | all' "$T/c.json"
jqv '[.runs[] | select(.mode=="atomio" and .threads==2 and .ranges_per_group==3)] | length == 1' "$T/c.json"
# provenance: version, the command line, the seed, when; bytes_per_sec in bytes
jqv '(.atomio_version | test("^[0-9]+\\.[0-9]+\\.[0-9]+$")) and .argv[0] == "bench" and (.argv | index("--buffered")) != null
     and .seed == 1 and (.timestamp | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"))
     and ([.runs[] | (.bytes_per_sec - .ops_per_sec * .page_size * .ranges_per_group) as $d
           | ($d * $d) <= (0.001 * .bytes_per_sec) * (0.001 * .bytes_per_sec)] | all)' "$T/c.json"
# --json -: standard output is the JSON alone (the table on standard error),
# valid also for a directory whose name is not UTF-8
D=$(printf '%s/d\377\376x' "$T")
mkdir "$D" || fail "mkdir"
$A bench -q -d 0.3 -n 1 -s 1M -m unsafe --seed 7 --json - "$D" >"$T/stdout.json" 2>"$T/stderr" ||
	fail "bench --json -: $(cat "$T/stderr")"
jq -e . "$T/stdout.json" >/dev/null || fail "bench --json - stdout is not JSON: $(head -c 300 "$T/stdout.json")"
jqv '.seed == 7 and (.dir | endswith("/d\\xff\\xfex"))' "$T/stdout.json"
python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8", errors="strict"))' "$T/stdout.json" 2>/dev/null ||
	! command -v python3 >/dev/null || fail "bench --json - is not strict UTF-8 JSON"
grep -q '^unsafe ' "$T/stderr" || fail "bench --json -: no table on stderr: $(cat "$T/stderr")"
[ "$(grep -cE '^atomio +[0-9]' "$T/out")" -eq 4 ] || fail "expected 4 tables: $(cat "$T/out")"
# asynchronous commits (named only): every group queued is reaped and counted
$A bench -q -d 0.6 -n 1 -s 2M -m atomio-async --log-size 8M --json "$T/a.json" "$T" >"$T/out" ||
	fail "atomio-async bench failed: $(cat "$T/out")"
jqv '.runs[] | select(.mode=="atomio-async") | .ops > 0 and .home_bytes == .user_bytes
     and .log_syncs_per_op > 0 and .log_syncs_per_op <= 1' "$T/a.json"
# lazy groups with a sync every 16 (256) groups, and their baseline, pwrite
# with an fdatasync of the files written every 16 (256) groups (named only):
# threads and processes; every group ends up home, and the baseline waits
# once per 16 (256) groups of a writer (plus the slice's last sync)
$A bench -q -d 0.4 -n 1 -s 2M --log-size 8M -t 2 \
	-m atomio-lazy16,atomio-lazy256,unsafe-sync16,unsafe-sync256,atomio-lazy16:procs,unsafe-sync16:procs \
	--json "$T/l.json" "$T" >"$T/out" || fail "lazy bench failed: $(cat "$T/out")"
jqv '[.runs[] | .ops > 0] | length == 6 and all' "$T/l.json"
jqv '[.runs[] | select(.mode | startswith("atomio-lazy")) | .home_bytes == .user_bytes] | length == 3 and all' "$T/l.json"
jqv '[.runs[] | select(.mode=="unsafe-sync16") | .syncs_per_op <= 1/16 + 2/.ops] | length == 2 and all' "$T/l.json"
jqv '.runs[] | select(.mode=="unsafe-sync256") | .syncs_per_op <= 1/256 + 2/.ops' "$T/l.json"
# a new store per slice (named only): each slice runs until its log is written once over
$A bench -q -d 0.2 -n 2 -s 2M -m atomio-new --log-size 1M --json "$T/n.json" "$T" >"$T/out" ||
	fail "atomio-new bench failed: $(cat "$T/out")"
jqv '.runs[] | select(.mode=="atomio-new") | .ops > 0 and .log_bytes >= 2 * 1048576' "$T/n.json"
one_line_error 2 $A bench --page-size 1000 "$T"
one_line_error 2 $A bench --modes nosuch "$T"
one_line_error 2 $A bench --modes atomio:nosuch "$T"
one_line_error 2 $A bench --procs --modes atomio,atomio:procs "$T"
one_line_error 3 $A bench "$T/nonexistent"
echo "bench ok"
