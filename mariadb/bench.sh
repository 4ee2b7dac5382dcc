#!/bin/bash
# Speed and wear of MariaDB under sysbench (ledger.lua: oltp_write_only plus
# a ledger row), modes side by side:
#   mariadb/bench.sh [MODES]        MODES default "dw nodw atomio" (atomio
#                                   only when PRELOAD is set)
# The data directory is on an ext4 filesystem of its own, on a loop device
# with direct I/O to its image file on the real disk, so that the device's
# counters (/sys/block/loopN/stat, sectors written) are this server's writes
# alone: data files, redo log, doublewrite buffer, the atomio log, ext4's
# journal.  Each mode gets the same prepared data directory (copied), then
# PAIRS (default 3) iterations, the modes in a rotated order each time: start
# mysqld, sync, read the counters, run the load for SECS (default 30) seconds,
# stop mysqld cleanly (its dirty pages are written), sync, read the counters.
# Prints per run and, last, the medians and the ratios to mode dw:
# transactions per second and device bytes written per transaction.
#   MY_TABLES, MY_TABLE_SIZE (default 4 x 100000), MY_THREADS, MY_POOL (64M),
#   MY_REDO (96M), OUT (default /tmp/cutfs), PRELOAD.
set -eu
PAIRS=${PAIRS:-3}; SECS=${SECS:-30}
OUT=${OUT:-/tmp/cutfs}
export MY_TABLE_SIZE=${MY_TABLE_SIZE:-100000} MY_POOL=${MY_POOL:-64M} MY_REDO=${MY_REDO:-96M}
MODES=${1:-dw nodw${PRELOAD:+ atomio}}
command -v mariadbd >/dev/null && command -v sysbench >/dev/null \
	|| { echo "SKIP: mariadb-server or sysbench is not installed (make mariadb-deps)" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for the loop device" >&2; exit 77; }
W=$OUT/bench
export MY_D=$W/srv
. "$(dirname "$0")/lib.sh"
IMG=$W/ext4.img; FS=$W/fs; LOOP=""
. "$(dirname "$0")/../scripts/loopfs.sh"
cleanup() {
	my_kill
	loopfs_remove
}
trap cleanup EXIT
rm -rf "$W"; mkdir -p "$W" "$FS" "$MY_D"
loopfs_make 4G
dev=$(basename "$LOOP")
written() { loopfs_written; }

# one prepared data directory per mode (the atomio mode's from its own
# install, so that its log exists from the start)
for m in $MODES; do
	my_config "$m" "$FS/$m/data"
	my_install
	my_start || { tail "$MY_D/err.log"; die "$m: mysqld does not start"; }
	my_prepare
	my_stop
	cp -a "$FS/$m" "$FS/$m.prepared"
done
echo "bench.sh: modes $MODES; $PAIRS rounds of $SECS s; $MY_TABLES tables x $MY_TABLE_SIZE rows, $MY_THREADS threads," \
	"buffer pool $MY_POOL, redo $MY_REDO; ext4 on $dev (direct I/O to $IMG); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$W/results"
set -- $MODES
n=$#
for i in $(seq 1 "$PAIRS"); do
	order=""
	for k in $(seq 0 $((n - 1))); do
		j=$(( (k + i - 1) % n + 1 ))
		order="$order ${!j}"
	done
	for m in $order; do
		rm -rf "${FS:?}/$m"; cp -a "$FS/$m.prepared" "$FS/$m"
		my_config "$m" "$FS/$m/data"
		my_start || { tail "$MY_D/err.log"; die "$m: mysqld does not start"; }
		sync; w0=$(written)
		rm -rf "$W/acks"; mkdir -p "$W/acks"
		LEDGER_DIR=$W/acks LEDGER_RUN=$i my_sysbench run --threads="$MY_THREADS" --time="$SECS" --events=0 > "$W/sb.log" 2>&1 \
			|| { tail "$W/sb.log"; die "$m: sysbench"; }
		my_stop
		sync; w1=$(written)
		tx=$(sed -n 's/^ *transactions: *\([0-9]*\).*/\1/p' "$W/sb.log")
		tps=$(sed -n 's/^ *transactions: .*(\([0-9.]*\) per sec.*/\1/p' "$W/sb.log")
		bpt=$(( (w1 - w0) / tx ))
		echo "$m $i $tps $bpt $tx $((w1 - w0))" >> "$W/results"
		printf '%-7s round %d: %8.1f tps, %7d device bytes per transaction (%d transactions, %d MiB written)\n' \
			"$m" "$i" "$tps" "$bpt" "$tx" $(( (w1 - w0) >> 20 ))
	done
done
echo "medians over $PAIRS rounds (ratio to dw):"
awk '{ tps[$1] = tps[$1] " " $3; bpt[$1] = bpt[$1] " " $4 }
     function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
     END { for (m in tps) { T[m] = med(tps[m]); B[m] = med(bpt[m]) }
	   for (m in tps) printf "%-7s %8.1f tps (%.2fx)  %7d bytes/transaction (%.2fx)\n", m, T[m], ("dw" in T) ? T[m] / T["dw"] : 0, B[m], ("dw" in B) ? B[m] / B["dw"] : 0 }' "$W/results"
