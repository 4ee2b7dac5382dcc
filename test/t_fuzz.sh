#!/bin/sh
# make check's bounded run of the recovery fuzz target (FUZZ_CHECK_SECONDS,
# default 20) from the checked-in seeds; skipped when clang is not installed
# (the target is then not built).  `make fuzz FUZZ_SECONDS=N` runs longer.
bin=build/fuzz/fuzz_recover
if [ ! -x "$bin" ]; then
	echo "SKIP: $bin not built (clang not installed)"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fuzz/run.sh "${FUZZ_CHECK_SECONDS:-20}" "$tmp" -seed=1
