#!/bin/sh
# Mutation test of the crash simulator: each mutant is the core with one
# crash-safety defence removed (test/crash/mutate.sh: the seq check, the epoch
# check, the checksum, stopping at a torn record, syncing replayed files,
# RWF_DSYNC on records, syncing resized files, syncing data at checkpoints,
# syncing a new file's directory, and two of the background checkpoint's
# ordering: syncing before it moves the head, cutting only after batches whose
# home writes are done; the fast-path guard's bug that the background
# checkpoint exposed; and an early write-back (sync_file_range) taken for
# durability).  `t_crash --mutant` hunts with random seeds; it must
# report a failure for every mutant within its time.
# Environment: CRASH_SEED (base seed), MUTANT_SECONDS (per mutant, default 30).
cd "$(dirname "$0")/.." || exit 1
secs=${MUTANT_SECONDS:-30}
seed=${CRASH_SEED:-$(date +%s)}
echo "mutants: seed $seed, up to $secs s each"
fail=0
for m in seq epoch csum resync rfsync dsync resize ckptsync dirsync bgsync bgcut guardall sfrtrust; do
	bin=build/mutants/t_crash-$m
	[ -x "$bin" ] || { echo "mutants: $bin missing (make test-bins)"; exit 1; }
	# Bias the hunt where a bug needs a rarer scenario.
	case $m in
	# The concurrency ones need several threads; the others run one
	# thread without the checkpointer thread (bg=0), so that the failure
	# replays on the real core as a control.  The background checkpoint's
	# need that thread: their runs are not deterministic, and are replayed
	# a few times instead.
	epoch) cfg="threads=6,blockrec=1,crash_pct=60,files=1,ckpt_pct=10,samples=4,nest_pct=0" ;;
	resync) cfg="threads=6,blockrec=1,files=1,samples=4,nest_pct=0" ;;
	dirsync) cfg="threads=1,files=3,groups=6,samples=8,bg=0" ;;
	resize) cfg="threads=1,files=3,ranges=3,trunc_pct=50,ckpt_pct=30,bg=0" ;;
	bgsync|bgcut) cfg="threads=1,bg=1,ckpt_pct=0,reopen_pct=0,nest_pct=0" ;;
	guardall) cfg="threads=7,files=1,groups=20,bg=1,fast=1,direct=3,trunc_pct=15,ranges=4,log=65536,nest_pct=0,samples=4" ;;
	*) cfg="threads=1,bg=0" ;;
	esac
	start=$(date +%s.%N)
	out=$("$bin" --mutant --seconds "$secs" --seed "$seed" ${cfg:+--cfg "$cfg"} 2>&1)
	rc=$?
	t=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	if [ $rc -eq 1 ] && echo "$out" | grep -q 'CRASH-CHECK FAILED'; then
		echo "mutant $m: caught in ${t}s: $(echo "$out" | grep -m1 'CRASH-CHECK FAILED' | cut -c1-150)"
		# Control: the same crash image on the real core must pass, or the
		# failure was not the mutant's.
		repro=$(echo "$out" | sed -n 's/^  reproduce: [^ ]* \(--cfg .*\) \[--dump DIR\] \[-v\]$/\1/p' | head -n 1)
		if [ -n "$repro" ] && echo "$out" | grep -q 'not deterministic'; then
			# Another interleaving each time (the checkpointer thread):
			# the real core must pass six replays; the mutant usually
			# fails one again, but an interleaving-dependent failure
			# need not.
			again=0 ok=1
			for i in 1 2 3 4 5 6; do
				[ $again = 1 ] || eval "$bin $repro" >/dev/null 2>&1 || again=1
				eval "build/test/t_crash $repro" >/dev/null 2>&1 || ok=0
			done
			if [ $ok = 0 ]; then
				echo "  control FAILED: the unmutated core fails a replay: build/test/t_crash $repro"
				fail=1
			elif [ $again = 1 ]; then
				echo "  replayed (another interleaving each time): fails again; control: the unmutated core passes six replays"
			else
				echo "  not reproduced in six replays (the interleaving differs); control: the unmutated core passes six replays"
			fi
		elif [ -n "$repro" ]; then
			if eval "$bin $repro" >/dev/null 2>&1; then
				echo "  replay FAILED: the reproducer does not fail again: $bin $repro"
				fail=1
			elif eval "build/test/t_crash $repro" >/dev/null 2>&1; then
				echo "  replayed; control: the unmutated core passes that crash image"
			else
				echo "  control FAILED: the unmutated core fails the same image: build/test/t_crash $repro"
				fail=1
			fi
		else
			echo "  (multi-threaded run: no replay for a control)"
		fi
	else
		echo "mutant $m: NOT caught in ${t}s (exit $rc)"
		echo "$out" | tail -n 5
		fail=1
	fi
done
exit $fail
