#!/bin/sh
# atomio verify: the selftest (a killed writer shows nothing; a lying device
# and hand-made damage are caught exactly), then the same from the command
# line: kill -9 a writer and check (exit 0), tear a block and check (exit 1).
. test/cli_lib.sh
for A in $BINS; do
	$A verify selftest --dir "$T" >"$T/self" || fail "$A verify selftest: $(cat "$T/self")"
	grep -q "10 of 10 scenarios as expected" "$T/self" || fail "selftest: $(cat "$T/self")"
done
A=build/atomio
D="$T/d"; S="$T/state"
mkdir "$D"
# a writer of atomio groups, killed once 200 groups are acknowledged
$A verify write "$D" --state "$S" --blocks 2048 -q &
pid=$!
n=0
while [ "$(stat -c %s "$S" 2>/dev/null || echo 0)" -lt $((128 + 200 * 16)) ] && [ $n -lt 400 ]; do
	sleep 0.05; n=$((n + 1))
done
kill -9 $pid; wait $pid 2>/dev/null || true
$A verify check "$D" --state "$S" --json >"$T/c.json" || fail "check after kill -9: $(cat "$T/c.json")"
jqv '.pass and .acknowledged_groups >= 200 and .torn == 0 and .lost == 0 and .half_applied_groups == 0' "$T/c.json"
# plain writes, then one block torn by hand: half of it zeroed
rm -f "$S"
$A verify write "$D" --state "$S" --raw --buffered --blocks 256 --groups 50 -q || fail "raw write run"
$A verify check "$D" --state "$S" >/dev/null || fail "clean raw run must pass"
dd if=/dev/zero of="$D/atomio-verify.dat" bs=2048 seek=21 count=1 conv=notrunc status=none
set +e
$A verify check "$D" --state "$S" --json >"$T/c.json"; rc=$?
set -e
[ $rc -eq 1 ] || fail "check of a torn block exited $rc, expected 1"
jqv '.pass == false and .torn == 1 and .lost == 0 and (.examples[0].problem | startswith("torn"))' "$T/c.json"
one_line_error 3 $A verify check "$D" --state "$T/nonexistent"
one_line_error 3 $A verify write "$D" --state "$S"          # state exists
one_line_error 2 $A verify write "$D" --state "$T/x" --raw --kernel
echo "verify ok"
