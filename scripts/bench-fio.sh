#!/bin/sh
# make bench-fio: the comparisons of docs/PERFORMANCE.md, "fio", run by fio itself, stock
# engines beside the atomio engine, in one fio run per repetition
# (fio/perwrite.fio, fio/groups.fio, fio/jobs8.fio, fio/qd32.fio, serialized
# by fio), each followed by `atomio bench` on the same workloads; one table of medians
# from fio's JSON (IOPS, bandwidth, write completion latency p50/p99/p99.9,
# fdatasync latency), each atomio job against the unsafe job beside it, and
# fio's IOPS against `atomio bench`'s rate for the same workload.
#
# usage: scripts/bench-fio.sh [-n REPS] [-t SECS] [-B] [--json FILE] [--keep] [DIR]
#   -n REPS     repetitions of the fio run (default 3); medians over them
#   -t SECS     seconds per fio job (default 3)
#   -B          no `atomio bench` comparison
#   --json FILE the table's numbers as JSON
#   DIR         where the data files go, in a new directory removed afterwards
#               (default: the current directory)
# Needs fio, jq, build/atomio_fio.so (make fio) and build/atomio.
set -eu
reps=3 secs=3 bench=1 json="" keep=0 top=$(pwd)
while [ $# -gt 0 ]; do
	case $1 in
	-n) reps=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	-B) bench=0; shift ;;
	--json) json=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	-h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "bench-fio: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
base=${1:-.}
for c in fio jq; do
	command -v $c >/dev/null 2>&1 || { echo "bench-fio: needs $c (scripts/deps.sh)" >&2; exit 3; }
done
[ -f build/atomio_fio.so ] || { echo "bench-fio: build/atomio_fio.so is missing (make fio)" >&2; exit 3; }
[ -x build/atomio ] || { echo "bench-fio: build/atomio is missing (make)" >&2; exit 3; }
dir=$(mktemp -d "$base/atomio-bench-fio.XXXXXX")
dir=$(cd "$dir" && pwd)
cleanup() { [ "$keep" -eq 1 ] || rm -rf "$dir"; }
trap cleanup EXIT
mkdir -p "$dir/data" "$dir/out"
export ATOMIO_FIO_ENGINE="$top/build/atomio_fio.so" ATOMIO_FIO_DIR="$dir/data" ATOMIO_FIO_RUNTIME="$secs"
JOBS="fio/perwrite.fio fio/groups.fio fio/jobs8.fio fio/qd32.fio"

# Each repetition: one fio run of every job file, then `atomio bench` on the
# same workloads (its modes interleaved, its own data files of 64 MiB), so
# that fio and atomio bench see the same machine load.  groups: -r 8 -f 2
# (its unsafe mode syncs each file once per group, which fio's unsafe job
# does not do: not compared).
: >"$dir/out/bench.tsv"
fsline=""
i=1
while [ "$i" -le "$reps" ]; do
	echo "bench-fio: run $i of $reps: fio ($secs s per job, 8 jobs)" >&2
	# shellcheck disable=SC2086
	fio --output-format=json --output="$dir/out/fio.$i.json" $JOBS 2>"$dir/out/fio.$i.err" ||
		{ cat "$dir/out/fio.$i.err" >&2; exit 3; }
	if [ "$bench" -eq 1 ]; then
		k=0
		for args in "-p 16k" "-p 4k -r 8 -f 2" "-p 16k -t 8"; do
			k=$((k + 1))
			echo "bench-fio: run $i of $reps: atomio bench $args" >&2
			# shellcheck disable=SC2086
			build/atomio bench -q -m unsafe,atomio -n 1 -d $((2 * secs)) $args \
				--json "$dir/out/bench.$k.$i.json" "$dir/data" >"$dir/out/bench.$k.$i.out" 2>&1 ||
				{ cat "$dir/out/bench.$k.$i.out" >&2; exit 3; }
			fsline=$(head -n 1 "$dir/out/bench.$k.$i.out")
			# fio's IOPS count pages: a group of R pages is R writes.
			jq -r --arg k "$k" '.runs[] | [$k, .mode, .ops_per_sec * .ranges_per_group] | @tsv' \
				"$dir/out/bench.$k.$i.json" >>"$dir/out/bench.tsv"
		done
	fi
	i=$((i + 1))
done

# Medians over the repetitions, per fio job (jobs of a group_reporting job
# are one entry); the atomio job of each file against the unsafe job before it.
jq -s --rawfile btsv "$dir/out/bench.tsv" '
	def median: sort | if length == 0 then null
		elif length % 2 == 1 then .[length / 2 | floor]
		else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def pct(p): .percentile[p] // 0;
	($btsv | split("\n") | map(select(length > 0) | split("\t"))
		| map({key: (.[0] + "/" + .[1]), value: (.[2] | tonumber)})
		| group_by(.key) | map({key: .[0].key, value: {median: ([.[].value] | median),
			lo: ([.[].value] | min), hi: ([.[].value] | max)}}) | from_entries) as $b
	| {"unsafe-16k": "1/unsafe", "atomio-16k": "1/atomio",
	   "atomio-groups8-2files": "2/atomio",
	   "unsafe-16k-8jobs": "3/unsafe", "atomio-16k-8jobs": "3/atomio"} as $bmap
	| [.[] | [.jobs[] | {name: .jobname, g: .groupid, iops: .write.iops}]] as $reps
	| [.[].jobs[]] | group_by(.groupid) | map({
		group: .[0].groupid,
		job: .[0].jobname,
		iops: [.[].write.iops] | median,
		iops_lo: [.[].write.iops] | min,
		iops_hi: [.[].write.iops] | max,
		mb_per_sec: (([.[].write.bw_bytes] | median) / 1e6),
		clat_p50_us: (([.[].write.clat_ns | pct("50.000000")] | median) / 1e3),
		clat_p99_us: (([.[].write.clat_ns | pct("99.000000")] | median) / 1e3),
		clat_p999_us: (([.[].write.clat_ns | pct("99.900000")] | median) / 1e3),
		sync_p50_us: (([.[].sync.lat_ns | pct("50.000000")] | median) / 1e3),
		sync_p99_us: (([.[].sync.lat_ns | pct("99.000000")] | median) / 1e3),
		errors: ([.[].error] | add)
	  })
	| . as $rows
	| map(.group as $g | . + (if $g % 2 == 1 then
		{vs_unsafe: (.iops / $rows[$g - 1].iops),
		 vs_unsafe_per_rep: ([$reps[] | ((map(select(.g == $g)) | .[0].iops)
			/ (map(select(.g == $g - 1)) | .[0].iops))] | median)}
		else {vs_unsafe: null, vs_unsafe_per_rep: null} end)
	     + ($b[$bmap[.job] // "-"] as $bv | {bench_writes_per_sec: $bv.median,
		bench_lo: $bv.lo, bench_hi: $bv.hi,
		fio_vs_bench: (if $bv then .iops / $bv.median else null end)}))
' "$dir"/out/fio.*.json >"$dir/out/summary.json"

[ -n "$json" ] && cp "$dir/out/summary.json" "$json"
[ "$(jq '[.[].errors] | add' "$dir/out/summary.json")" -eq 0 ] ||
	{ echo "bench-fio: a fio job reported an error" >&2; exit 3; }

echo "fio $(fio --version | sed 's/^fio-//'), ioengine external:build/atomio_fio.so; $reps runs x $secs s per job, medians; data files in $dir"
[ -n "$fsline" ] && echo "${fsline#atomio bench: }; incompressible data (fio's default buffers)"
echo "atomio's write latency runs until the write's group is durable; unsafe's ends before its fdatasync"
printf '%-22s %7s %12s %6s %7s %7s %8s %6s %6s %11s %7s %12s %6s\n' job IOPS "(runs)" MB/s "p50 us" "p99 us" \
	"p99.9 us" "fs p50" "fs p99" "vs unsafe" "bench" "(runs)" "fio/b"
jq -r '.[] | [.job, .iops, .iops_lo, .iops_hi, .mb_per_sec, .clat_p50_us, .clat_p99_us, .clat_p999_us,
	.sync_p50_us, .sync_p99_us, (.vs_unsafe // -1), (.vs_unsafe_per_rep // -1),
	(.bench_writes_per_sec // -1), (.bench_lo // -1), (.bench_hi // -1), (.fio_vs_bench // -1)] | @tsv' \
	"$dir/out/summary.json" |
	awk -F'\t' '{
		vs = $11 < 0 ? "-" : sprintf("%.2fx(%.2f)", $11, $12)
		bw = $13 < 0 ? "-" : sprintf("%.0f", $13)
		br = $13 < 0 ? "" : sprintf("%.0f-%.0f", $14, $15)
		fb = $16 < 0 ? "-" : sprintf("%.2f", $16)
		s50 = $9 > 0 ? sprintf("%.0f", $9) : "-"
		s99 = $10 > 0 ? sprintf("%.0f", $10) : "-"
		printf "%-22s %7.0f %12s %6.1f %7.0f %7.0f %8.0f %6s %6s %11s %7s %12s %6s\n", $1, $2, \
			sprintf("%.0f-%.0f", $3, $4), $5, $6, $7, $8, s50, s99, vs, bw, br, fb
	}'
echo "IOPS: fio's write IOPS, median (lowest-highest) of the runs; p50-p99.9: write completion latency; fs: fdatasync latency (us)"
echo "vs unsafe: IOPS against the unsafe job of the same file (in parentheses: the median of each run's own ratio)"
echo "bench: atomio bench's rate for the same workload in writes/s (groups x 8), run after each fio run; fio/b: fio's IOPS over it"
