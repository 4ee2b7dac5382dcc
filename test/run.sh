#!/bin/sh
# Run each test program with a timeout; print one line per test and, last,
# "N passed, N failed" (skips are counted apart).  Exit 1 if any failed.
# Environment: TEST_TIMEOUT (seconds, default 300; a "timeout: N" comment
# line at the top of a test's script or source raises it for that test),
# TEST_LOGDIR (default build/test-logs), ATOMIO_SEED (the seed of every
# randomized test; each one's default is 1): printed first and next to last,
# so that a run's output says which cases it ran.
timeout_s=${TEST_TIMEOUT:-300}
logdir=${TEST_LOGDIR:-build/test-logs}
mkdir -p "$logdir"
if [ -n "${ATOMIO_SEED:-}" ]; then
	seed="seed $ATOMIO_SEED (ATOMIO_SEED; each randomized test prints it)"
else
	seed="seed 1 (the default; ATOMIO_SEED=N for another; each randomized test prints it)"
fi
echo "$seed"
pass=0; fail=0; skip=0; failed=""
for t in "$@"; do
	name=$(echo "$t" | sed 's|^build/||; s|/|-|g')
	log="$logdir/$name.log"
	# A test may ask for more time with a "timeout: N" comment line in the
	# first lines of its script or C source (test/t_x.c, test/sqlite/t_x.c
	# for build/.../t_x): one that does a fixed amount of work, which a
	# loaded machine does slowly.
	t_s=$timeout_s
	case $t in
	*.sh) srcs=$t ;;
	*) b=$(basename "$t"); srcs="test/$b.c test/sqlite/$b.c" ;;
	esac
	for f in $srcs; do
		[ -f "$f" ] || continue
		n=$(head -n 30 "$f" | sed -n 's/^[#/ *]*timeout: \([0-9][0-9]*\)$/\1/p' | head -n 1)
		[ -n "$n" ] && [ "$n" -gt "$t_s" ] && t_s=$n
	done
	start=$(date +%s.%N)
	timeout -k 10 "$t_s" "$t" >"$log" 2>&1
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0) pass=$((pass + 1)); printf 'PASS %-40s %6ss\n' "$t" "$secs" ;;
	77) skip=$((skip + 1)); printf 'SKIP %-40s %6ss  %s\n' "$t" "$secs" "$(grep -m1 SKIP "$log")" ;;
	124|137) fail=$((fail + 1)); failed="$failed $t"; printf 'FAIL %-40s %6ss  (timeout after %ss)\n' "$t" "$secs" "$t_s"; tail -n 20 "$log" | sed 's/^/    /' ;;
	*) fail=$((fail + 1)); failed="$failed $t"; printf 'FAIL %-40s %6ss  (exit %s)\n' "$t" "$secs" "$rc"; tail -n 20 "$log" | sed 's/^/    /' ;;
	esac
done
[ -n "$failed" ] && echo "failed:$failed"
[ "$skip" -gt 0 ] && echo "$skip skipped"
echo "$seed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
