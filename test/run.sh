#!/bin/bash
# Run each test program with a timeout; print one line per test as it ends
# and, last, "N passed, N failed" (skips are counted apart).  Exit 1 if any
# failed.  Before the summary, it names the stores' state files
# (/dev/shm/atomio-*) that the run left behind, if any.
# Environment: TEST_JOBS (tests run at once, default 2: the suite is mostly
# one CPU-bound process per test, and the machines it runs on have two
# cores), TEST_TIMEOUT (seconds, default 300; a "timeout: N" comment line at
# the top of a test's script or source raises it for that test),
# TEST_LOGDIR (default build/test-logs), ATOMIO_SEED (the seed of every
# randomized test; each one's default is 1): printed first and next to last,
# so that a run's output says which cases it ran.
# Tests that ask for more time start first, longest first, so that the
# longest do not end the run alone; the rest keep their order.  Every test
# makes its own temporary directory, so two may run side by side (the
# tests' time bounds are liveness bounds of many seconds, not speed goals).
set -u
timeout_s=${TEST_TIMEOUT:-300}
jobs=${TEST_JOBS:-2}
logdir=${TEST_LOGDIR:-build/test-logs}
mkdir -p "$logdir"
if [ -n "${ATOMIO_SEED:-}" ]; then
	seed="seed $ATOMIO_SEED (ATOMIO_SEED; each randomized test prints it)"
else
	seed="seed 1 (the default; ATOMIO_SEED=N for another; each randomized test prints it)"
fi
echo "$seed"

# A test may ask for more time with a "timeout: N" comment line in the
# first lines of its script or C source (test/t_x.c, test/sqlite/t_x.c,
# test/procs/t_x.c for build/.../t_x): one that does a fixed amount of work,
# which a loaded machine does slowly.
test_timeout() {
	local t=$1 t_s=$timeout_s srcs f n b
	case $t in
	*.sh) srcs=$t ;;
	*) b=$(basename "$t"); srcs="test/$b.c test/sqlite/$b.c test/procs/$b.c" ;;
	esac
	for f in $srcs; do
		[ -f "$f" ] || continue
		n=$(head -n 30 "$f" | sed -n 's/^[#/ *]*timeout: \([0-9][0-9]*\)\( \*\/\)\{0,1\}$/\1/p' | head -n 1)
		[ -n "$n" ] && [ "$n" -gt "$t_s" ] && t_s=$n
	done
	echo "$t_s"
}

# One test: its report (a line, and the log's tail if it failed) printed in
# one write, its verdict left in $res/N for the summary.
res=$(mktemp -d "${TMPDIR:-/tmp}/atomio-run.XXXXXX")
trap 'rm -rf "$res"' EXIT
touch "$res/.start"
run_one() {
	local i=$1 t=$2 t_s=$3 name log start rc secs out verdict
	name=$(echo "$t" | sed 's|^build/||; s|/|-|g')
	log="$logdir/$name.log"
	start=$(date +%s.%N)
	timeout -k 10 "$t_s" "$t" >"$log" 2>&1
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0) verdict=pass; out=$(printf 'PASS %-40s %6ss' "$t" "$secs") ;;
	77) verdict=skip; out=$(printf 'SKIP %-40s %6ss  %s' "$t" "$secs" "$(grep -m1 SKIP "$log")") ;;
	124|137) verdict=fail; out=$(printf 'FAIL %-40s %6ss  (timeout after %ss)\n%s' "$t" "$secs" "$t_s" \
		"$(tail -n 20 "$log" | sed 's/^/    /')") ;;
	*) verdict=fail; out=$(printf 'FAIL %-40s %6ss  (exit %s)\n%s' "$t" "$secs" "$rc" \
		"$(tail -n 20 "$log" | sed 's/^/    /')") ;;
	esac
	printf '%s\n' "$out"
	printf '%s %s\n' "$verdict" "$t" >"$res/$i"
}

# The order: tests with a timeout above the default first, longest first
# (the rest, all at the default, in their order).
i=0
list=$(for t in "$@"; do
	i=$((i + 1))
	printf '%s %s %s\n' "$(test_timeout "$t")" "$i" "$t"
done | sort -k1,1nr -k2,2n)

running=0
while read -r t_s i t; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_one "$i" "$t" "$t_s" </dev/null &
	running=$((running + 1))
done <<EOF
$list
EOF
wait

# The stores' state files the run left behind (issue 39): this user's
# /dev/shm/atomio-STOREID-INODE (src/shm.c, shm_where_of) made or written
# since the run began that no process maps -- the state of a store whose
# last process died and whose log a test then deleted or replaced without
# removing it (test/t.h, t_unlink_log and t_cleanup; test/store_lib.sh,
# rm_stores).  Named, not failed: other programs of this user on the
# machine may have left them.
left=$(find /dev/shm -maxdepth 1 -type f -uid "$(id -u)" -newer "$res/.start" \
	-regex '.*/atomio-[0-9a-f]*-[0-9a-f]*' 2>/dev/null | sort)
if [ -n "$left" ]; then
	mapped=$(cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/dev/shm/atomio-[0-9a-f]*-[0-9a-f]*' | sort -u)
	left=$(printf '%s\n' "$left" | comm -23 - <(printf '%s\n' "$mapped"))
	[ -n "$left" ] && printf 'state files left in /dev/shm since the run began (no process maps them):\n%s\n' \
		"$(printf '%s\n' "$left" | sed 's/^/    /')"
fi

pass=0; fail=0; skip=0; failed=""
for f in "$res"/*; do
	[ -f "$f" ] || continue
	read -r verdict t <"$f"
	case $verdict in
	pass) pass=$((pass + 1)) ;;
	skip) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)); failed="$failed $t" ;;
	esac
done
[ $((pass + skip + fail)) -eq $# ] || { fail=$((fail + $# - pass - skip - fail)); failed="$failed (tests that left no verdict)"; }
[ -n "$failed" ] && echo "failed:$failed"
[ "$skip" -gt 0 ] && echo "$skip skipped"
echo "$seed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
