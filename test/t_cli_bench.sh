#!/bin/sh
# atomio bench: a tiny run of every mode; its JSON is complete (the schema of
# issue 5 and more) and its byte counts add up; the SVG is drawn.
. test/cli_lib.sh
for A in $BINS; do
	J="$T/b.json"
	$A bench -q -d 1.2 -n 2 -s 4M --log-size 8M --json "$J" --plot "$T/b.svg" "$T" >"$T/out" ||
		fail "$A bench failed: $(cat "$T/out")"
	grep -q '^unsafe ' "$T/out" || fail "no table: $(cat "$T/out")"
	[ -z "$(ls "$T" | grep atomio-bench)" ] || fail "$A bench left its directory behind"
	jqv '(.filesystem | type == "string") and .direct == true and (.runs | type == "array")' "$J"
	# every mode ran or was skipped with a reason
	jqv '([.runs[].mode] + [.skipped[].mode] | sort) == ["atomio","doublewrite","kernel","unsafe"]' "$J"
	jqv '[.skipped[] | .reason | type == "string" and length > 0] | all' "$J"
	# the issue's schema, every field a number
	jqv '[.runs[] | (.mode|type=="string") and ([.threads,.page_size,.ranges_per_group,.ops_per_sec,
	      .p50_us,.p99_us,.p999_us,.syncs_per_op] | map(type=="number") | all)] | all' "$J"
	jqv '[.runs[] | .device_bytes_per_user_byte | type=="number" or type=="null"] | all' "$J"
	# byte counts add up
	jqv '[.runs[] | .ops > 0 and .user_bytes == .ops * .page_size * .ranges_per_group
	      and (.rep_ops | add) == .ops and (.rep_ops | length) == 2
	      and .p50_us <= .p99_us and .p99_us <= .p999_us] | all' "$J"
	jqv '[.runs[] | select(.device_bytes != null) | .device_bytes >= .process_bytes] | all' "$J"
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
	# a page written twice between checkpoints reaches the device once
	jqv '.runs[] | select(.mode=="atomio") | .home_bytes == .user_bytes and .log_bytes > .user_bytes
	     and .checkpoints >= (.rep_ops | length) and .syncs >= .ops and .syncs <= .ops + .checkpoints
	     and .process_bytes >= .log_bytes
	     and .process_bytes <= 1.01 * (.log_bytes + .home_bytes + 4096 * .checkpoints)' "$J"
	head -c 5 "$T/b.svg" | grep -q '<?xml' || fail "not an SVG"
	tail -n 1 "$T/b.svg" | grep -q '</svg>' || fail "SVG not finished"
	for m in unsafe doublewrite atomio; do grep -q ">$m" "$T/b.svg" || fail "SVG lacks $m"; done
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
one_line_error 2 $A bench --page-size 1000 "$T"
one_line_error 2 $A bench --modes nosuch "$T"
one_line_error 3 $A bench "$T/nonexistent"
echo "bench ok"
