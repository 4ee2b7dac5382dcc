#!/bin/sh
# Run the recovery fuzz target: fuzz/run.sh SECONDS [CORPUS_DIR [libFuzzer flags...]]
# New inputs go to CORPUS_DIR (default build/fuzz/corpus); the checked-in
# seeds in fuzz/corpus are read too.  Crashes, leaks, timeouts and
# out-of-memory inputs are written to build/fuzz/artifacts/.
#   -malloc_limit_mb: any single allocation above it is a finding (the log
#                     must not size atomio's allocations);
#   -rss_limit_mb:    the process must stay below it;
#   -timeout:         one input taking longer is a finding (no loop forever).
set -eu
secs=${1:-60}
work=${2:-build/fuzz/corpus}
[ $# -ge 2 ] && shift 2 || shift $#
bin=${FUZZ_BIN:-build/fuzz/fuzz_recover}
mkdir -p "$work" build/fuzz/artifacts
exec "$bin" -rss_limit_mb=1024 -malloc_limit_mb=64 -timeout=10 -max_len=65536 \
	-use_value_profile=1 -max_total_time="$secs" -print_final_stats=1 \
	-artifact_prefix=build/fuzz/artifacts/ "$@" "$work" fuzz/corpus
