#!/bin/sh
# make check's bounded run of the recovery fuzz target: FUZZ_CHECK_RUNS
# inputs (default 3000; a count, not seconds, so that a loaded machine runs
# the same inputs), libFuzzer seeded with ATOMIO_SEED (default 1), from the
# checked-in seeds; skipped when clang is not installed (the target is then
# not built).  `make fuzz FUZZ_SECONDS=N` runs longer.
bin=build/fuzz/fuzz_recover
if [ ! -x "$bin" ]; then
	echo "SKIP: $bin not built (clang not installed)"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seed=${ATOMIO_SEED:-1}
echo "fuzz: seed $seed (ATOMIO_SEED=$seed to repeat), ${FUZZ_CHECK_RUNS:-3000} runs"
fuzz/run.sh 0 "$tmp" -seed="$seed" -runs="${FUZZ_CHECK_RUNS:-3000}"
