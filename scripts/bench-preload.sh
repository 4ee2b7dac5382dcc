#!/bin/sh
# make bench-preload: the preload library side by side with plain files, in
# one run, modes interleaved, REPS rounds, medians.
#   BENCH_DIR (default /var/tmp), REPS (default 5)
set -eu
B=build/bench-preload
SO=$(realpath build/libatomio_preload.so)
D=$(mktemp -d "${BENCH_DIR:-/var/tmp}/atomio-bench-preload-XXXXXX")
trap 'rm -rf "$D"' EXIT
REPS=${REPS:-5}
run() { # MODE ARGS...: prints the rate
	mode=$1; shift
	rm -f "$D"/f.* "$D"/log
	case $mode in
	plain) $B "$D/f.x" "$@" ;;
	passthrough) ATOMIO_LOG="$D/log" ATOMIO_FILES='*.p' LD_PRELOAD=$SO $B "$D/f.x" "$@" ;;
	protected) ATOMIO_LOG="$D/log" ATOMIO_FILES='*.x' LD_PRELOAD=$SO $B "$D/f.x" "$@" ;;
	esac | awk '{ print $2 }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
bench() { # LABEL ARGS...
	label=$1; shift
	for m in plain passthrough protected; do : >"$D/r.$m"; done
	i=0
	while [ $i -lt "$REPS" ]; do
		for m in plain passthrough protected; do run $m "$@" >>"$D/r.$m"; done
		i=$((i + 1))
	done
	p=$(median <"$D/r.plain"); t=$(median <"$D/r.passthrough"); a=$(median <"$D/r.protected")
	printf '| %s | %s | %s (%.2fx) | %s (%.2fx) |\n' "$label" "$p" "$t" "$(echo "$t / $p" | bc -l)" \
		"$a" "$(echo "$a / $p" | bc -l)"
}
echo "medians of $REPS interleaved rounds, in $D ($(df -T "$D" | awk 'NR == 2 { print $2 }'))"
echo '| workload | plain | pass-through | protected |'
echo '|---|---|---|---|'
bench "64-byte write() calls/s, no sync" small 1000000
bench "16 KiB pwrite/s, fdatasync every 100" 16384 5000 100
bench "16 KiB pwrite/s, fdatasync every 10" 16384 2000 10
bench "4 KiB pwrite/s, fdatasync each" 4096 500 1
