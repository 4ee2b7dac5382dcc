#!/bin/sh
# Mutation test of the shared store's defences (test/procs/mutate.sh): each
# mutant is the core with one defence removed, linked into the test that
# must catch it (t_adopt: a process killed at each step of a batch or a
# checkpoint; t_shm_dead: a process killed holding the shared mutex;
# t_ckpt_dead_full: a full checkpoint's holder killed after its superblock).  A
# mutant that makes the survivors wait forever is caught by t_adopt's own
# bound (10 s, where the real core takes a tenth of a second), or by the time
# limit here (20 s).
# timeout: 600
cd "$(dirname "$0")/.." || exit 1
fail=0
for m in pad homeredo reconcile reap inplace normalize reconcilegen leaderskip; do
	bin=build/mutants/procs-$m
	[ -x "$bin" ] || { echo "mutants: $bin missing (make test-bins)"; exit 1; }
	out=$(timeout -k 5 20 "$bin" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "mutant $m: NOT caught"
		echo "$out" | tail -n 5 | sed 's/^/    /'
		fail=1
	elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		echo "mutant $m: caught (its test did not finish in 20 s: the survivors waited forever)"
	else
		echo "mutant $m: caught: $(echo "$out" | grep -m1 -i 'fail\|not \|replayed\|status' | cut -c1-150)"
	fi
done
[ $fail -eq 0 ] && echo "all shared-store mutants caught"
exit $fail
