#!/bin/sh
# The speed targets (docs/PERFORMANCE.md, "Speed at the defaults"), measured with
# `atomio bench` at the default options on incompressible pages unless the
# row says otherwise, every comparison side by side in one run (modes
# interleaved, medians of REPS repetitions):
#   make bench-targets [BENCH_DIR=/var/tmp] [REPS=3] [SECS=60] [LOG_SIZE=1G]
# (LOG_SIZE: atomio's log instead of the library's default, for a row that
# says which tuning it needs.)
# Prints one table: target, measured, met.  Needs jq; the XFS row needs root,
# losetup and mkfs.xfs (skipped otherwise).  Exit 0 whether or not the
# targets are met: this measures, it does not judge a machine.
set -eu
ATOMIO=${ATOMIO:-build/atomio}
DIR=${BENCH_DIR:-/var/tmp}
REPS=${REPS:-3}
SECS=${SECS:-60}
command -v jq >/dev/null || { echo "bench-targets: needs jq" >&2; exit 1; }
[ -x "$ATOMIO" ] || { echo "bench-targets: $ATOMIO is not built" >&2; exit 1; }
T=$(mktemp -d "$DIR/atomio-targets-XXXXXX")
LOOP=""
cleanup() {
	mountpoint -q "$T/mnt" 2>/dev/null && umount "$T/mnt"
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
b() { # name, bench arguments...
	n=$1; shift
	echo "bench-targets: $n: atomio bench $*" >&2
	"$ATOMIO" bench -q -n "$REPS" ${LOG_SIZE:+--log-size "$LOG_SIZE"} --json "$T/$n.json" "$@" >/dev/null
}
# v FILE MODE THREADS FIELD [WRITERS]: WRITERS threads (default) or processes
v() {
	jq -r --arg m "$2" --argjson t "$3" --arg w "${5:-threads}" \
		".runs[] | select(.mode == \$m and .threads == \$t and (.writers // \"threads\") == \$w) | .$4 // \"-\"" "$1" |
		awk '{ if ($1 == "-") print "-"; else if ($1 + 0 >= 100) printf "%.0f\n", $1; else printf "%.3g\n", $1 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
met() { awk -v x="$1" -v op="$2" -v y="$3" 'BEGIN { if (x == "-") print "-"; else if ((op == ">=" && x + 0 >= y) || (op == "<=" && x + 0 <= y)) print "yes"; else print "no" }'; }

b speed -s 128M -t 1,8 -m unsafe,doublewrite,atomio -d "$SECS" "$T"
b async -s 128M -t 1 -m atomio,atomio-async -d "$((SECS / 2))" "$T"
b procs -s 128M -t 8 -m atomio,atomio:procs,unsafe:procs -d "$SECS" "$T"
b zipf -s 256M -z 0.99 -c 50 --buffered -t 1 -m doublewrite,atomio -d "$SECS" "$T"
b uniform -s 256M -t 1 -m doublewrite,atomio -d "$SECS" "$T"
xfs=""
if [ "$(id -u)" = 0 ] && command -v mkfs.xfs >/dev/null && command -v losetup >/dev/null &&
	{ grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null; }; then
	truncate -s 2G "$T/xfs.img" && mkdir "$T/mnt" &&
		LOOP=$(losetup -f --show --direct-io=on "$T/xfs.img") &&
		mkfs.xfs -q -f -m reflink=1 "$LOOP" >/dev/null 2>&1 && mount "$LOOP" "$T/mnt" &&
		b xfs -s 128M -t 1 -m unsafe,atomio,kernel -d "$((SECS / 2))" "$T/mnt" && xfs=1
fi

S=$T/speed.json A=$T/async.json P=$T/procs.json Z=$T/zipf.json U=$T/uniform.json X=$T/xfs.json
u1=$(v "$S" unsafe 1 ops_per_sec) d1=$(v "$S" doublewrite 1 ops_per_sec) a1=$(v "$S" atomio 1 ops_per_sec)
u8=$(v "$S" unsafe 8 ops_per_sec) a8=$(v "$S" atomio 8 ops_per_sec)
echo
echo "$(jq -r '"\(.filesystem) on \(.device), O_DIRECT \(.direct), \(.kernel), atomio \(.atomio_version), log \(.log_size / 1048576) MiB, \(.timestamp)"' "$S"); medians of $REPS; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| target | measured | met |"
echo "|---|---|---|"
r=$(ratio "$a1" "$u1"); echo "| 1 thread: atomio >= 1.0x unsafe | $r ($a1/s against $u1) | $(met "$r" ">=" 1.0) |"
r=$(ratio "$a1" "$d1"); echo "| 1 thread: atomio >= 2.0x doublewrite | $r ($a1/s against $d1) | $(met "$r" ">=" 2.0) |"
p=$(v "$S" atomio 1 p999_us) q=$(v "$S" unsafe 1 p999_us); r=$(ratio "$p" "$q")
echo "| 1 thread: p99.9 <= 1.5x unsafe's | $r ($p us against $q) | $(met "$r" "<=" 1.5) |"
r=$(ratio "$a8" "$u8"); echo "| 8 threads: atomio >= 1.5x unsafe | $r ($a8/s against $u8) | $(met "$r" ">=" 1.5) |"
r=$(ratio "$a8" "$a1"); echo "| 8 threads: >= 3.5x atomio at 1 thread | $r ($a8/s against $a1) | $(met "$r" ">=" 3.5) |"
l=$(v "$S" atomio 8 log_syncs_per_op); echo "| 8 threads: <= 0.2 log syncs per commit | $l | $(met "$l" "<=" 0.2) |"
p=$(v "$S" atomio 8 p99_us) q=$(v "$S" unsafe 8 p99_us); r=$(ratio "$p" "$q")
echo "| 8 threads: p99 <= 2x unsafe's | $r ($p us against $q) | $(met "$r" "<=" 2.0) |"
s=$(v "$A" atomio 1 ops_per_sec) a=$(v "$A" atomio-async 1 ops_per_sec); r=$(ratio "$a" "$s")
echo "| async, 32 in flight: >= 3x synchronous | $r ($a/s against $s; $(v "$A" atomio-async 1 log_syncs_per_op) log syncs per commit) | $(met "$r" ">=" 3.0) |"
pa=$(v "$P" atomio 8 ops_per_sec processes) pt=$(v "$P" atomio 8 ops_per_sec) pu=$(v "$P" unsafe 8 ops_per_sec processes)
r=$(ratio "$pa" "$pt"); echo "| 8 processes x 1 writer: atomio >= 0.9x 8 threads | $r ($pa/s against $pt; p50/p99/p99.9 $(v "$P" atomio 8 p50_us processes)/$(v "$P" atomio 8 p99_us processes)/$(v "$P" atomio 8 p999_us processes) us against $(v "$P" atomio 8 p50_us)/$(v "$P" atomio 8 p99_us)/$(v "$P" atomio 8 p999_us)) | $(met "$r" ">=" 0.9) |"
r=$(ratio "$pa" "$pu"); echo "| 8 processes: atomio >= 1.0x 8 unsafe processes | $r ($pa/s against $pu; unsafe p50/p99/p99.9 $(v "$P" unsafe 8 p50_us processes)/$(v "$P" unsafe 8 p99_us processes)/$(v "$P" unsafe 8 p999_us processes) us) | $(met "$r" ">=" 1.0) |"
l=$(v "$P" atomio 8 log_syncs_per_op processes); echo "| 8 processes: <= 0.2 log syncs per commit | $l (threads: $(v "$P" atomio 8 log_syncs_per_op)) | $(met "$l" "<=" 0.2) |"
if [ -n "$xfs" ]; then
	xu=$(v "$X" unsafe 1 ops_per_sec) xa=$(v "$X" atomio 1 ops_per_sec) xk=$(v "$X" kernel 1 ops_per_sec); r=$(ratio "$xa" "$xu")
	echo "| XFS (reflink loop image): >= 1.0x unsafe | $r ($xa/s against $xu; kernel RWF_ATOMIC $xk/s) | $(met "$r" ">=" 1.0) |"
else
	echo "| XFS (reflink loop image): >= 1.0x unsafe | not run (needs root, losetup, mkfs.xfs) | - |"
fi
w=$(v "$Z" atomio 1 process_bytes_per_user_byte) dw=$(v "$Z" atomio 1 device_bytes_per_user_byte)
echo "| wear, zipfian 0.99, 256 MiB, 50% compressible, buffered: <= 1.0 B/B | $w (device counters: $dw; doublewrite $(v "$Z" doublewrite 1 process_bytes_per_user_byte)) | $(met "$w" "<=" 1.0) |"
w=$(v "$U" atomio 1 process_bytes_per_user_byte) x=$(v "$U" doublewrite 1 process_bytes_per_user_byte)
echo "| wear, uniform incompressible: <= doublewrite's | $w against $x (device counters: $(v "$U" atomio 1 device_bytes_per_user_byte) against $(v "$U" doublewrite 1 device_bytes_per_user_byte)) | $(met "$w" "<=" "$x") |"
echo "(B/B: bytes this process wrote per user byte, /proc/self/io, each slice's final checkpoint counted; device counters count every process's writes to the disk)"
# What tells this machine from another (atomio bench's lines under each
# table): the device's own durable write of atomio's mean log write (probed
# after each slice), CPU per commit, the checkpoints' share, the load.
for t in 1 8; do
	echo "machine, $t thread(s): atomio $(v "$S" atomio "$t" log_writes_per_sec) log writes/s of $(v "$S" atomio "$t" log_write_bytes_mean) bytes;" \
		"the device alone $(v "$S" atomio "$t" device_log_write_us) us each (p50 $(v "$S" atomio "$t" device_log_write_p50_us), busy $(v "$S" atomio "$t" device_log_busy_fraction));" \
		"CPU per op: atomio $(v "$S" atomio "$t" cpu_us_per_op) us, unsafe $(v "$S" unsafe "$t" cpu_us_per_op) us;" \
		"a checkpoint running $(v "$S" atomio "$t" checkpoint_time_fraction) of the time"
done
echo "machine: $(jq -r '"\(.cpus_online) CPUs (\(.cpu_model // "?")), \(.filesystem) on \(.device // "?"); load average \(.load_average_start | map(. * 100 | round / 100) | join(" ")) at the start of the first run"' "$S"), $(jq -r '.load_average_end | map(. * 100 | round / 100) | join(" ")' "$P") at the end of the processes' run"
