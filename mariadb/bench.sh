#!/bin/bash
# Speed and wear of MariaDB under sysbench (ledger.lua: oltp_write_only plus
# a ledger row), modes side by side:
#   mariadb/bench.sh [CONFIG] [MODES]
#     MODES default "dw nodw atomio" (atomio only when PRELOAD is set; heavy:
#     also atomio+raw), each mode optionally with suffixes (mariadb/lib.sh:
#     dw+aio, atomio+odirect+raw, ...)
#     CONFIG  small  (default) 4 tables x 100,000 rows (about 100 MB) against
#                    a 64M buffer pool, 4 threads: the data nearly fits
#             heavy  where doublewrite costs (issue 37): 8 tables x 200,000
#                    rows (about 440 MB) against a 32M buffer pool (the data
#                    more than 10x: nearly every transaction's pages are read
#                    in and written out again), 16 threads, an 8G image, the
#                    store's log 512M.  Each setting still overridable
#                    (MY_TABLES, MY_TABLE_SIZE, MY_POOL, MY_THREADS, ...)
# The data directory is on an ext4 filesystem of its own, on a loop device
# with direct I/O to its image file on the real disk, so that the device's
# counters (/sys/block/loopN/stat, sectors written) are this server's writes
# alone: data files, redo log, doublewrite buffer, the atomio log, ext4's
# journal.  Each mode gets the same prepared data directory (copied), then
# PAIRS (default 3) iterations, the modes in a rotated order each time: start
# mysqld, sync, read the counters, run the load for SECS (default 30) seconds,
# stop mysqld cleanly (its dirty pages are written), sync, read the counters.
# Prints per run and, last, the medians and the ratios to mode dw:
# transactions per second, device bytes written per transaction, mysqld's
# CPU time per transaction (utime + stime over the load, /proc/PID/stat: on a
# shared machine steadier than the rate), InnoDB's own counters per
# transaction (SHOW GLOBAL STATUS over the load: data fsyncs, redo fsyncs,
# pages written, doublewrite pages written) and, in mode atomio, the
# store's counters per transaction (ATOMIO_STATS at exit, the clean stop
# included: groups, log syncs, bytes logged, checkpoints) in $W/results.
#   MY_TABLES, MY_TABLE_SIZE (default 4 x 100000), MY_THREADS, MY_POOL (64M),
#   MY_REDO (96M), MY_IMG (4G), OUT (default /tmp/cutfs), PRELOAD, and
#   MY_EXTRA: more [mysqld] lines for every mode (e.g.
#   "innodb_flush_method=O_DIRECT").
#   MY_DURING: a command run (eval, in the background) 2 s into each load,
#   waited for after it; it sees m (the mode), i (the round), MY_PID (mysqld)
#   and W, e.g. 'perf record -g -p $MY_PID -o $W/perf.$m -- sleep 10' or
#   'timeout 10 strace -c -f -p $MY_PID -o $W/strace.$m' (its output in
#   $W/during.MODE.ROUND.log; OUT=/somewhere keeps W out of /tmp/cutfs).
#   MY_PREP_CACHE: a directory where the prepared data directory is kept (a
#   tar per first mode, tables and rows) and taken from by the next run.
set -eu
PAIRS=${PAIRS:-3}; SECS=${SECS:-30}
OUT=${OUT:-/tmp/cutfs}
CONFIG=small
case ${1:-} in
small|heavy) CONFIG=$1; shift ;;
esac
if [ "$CONFIG" = heavy ]; then
	export MY_TABLES=${MY_TABLES:-8} MY_TABLE_SIZE=${MY_TABLE_SIZE:-200000} MY_POOL=${MY_POOL:-32M}
	export MY_THREADS=${MY_THREADS:-16} MY_IMG=${MY_IMG:-8G} MY_ATOMIO_LOG_SIZE=${MY_ATOMIO_LOG_SIZE:-512M}
fi
export MY_TABLE_SIZE=${MY_TABLE_SIZE:-100000} MY_POOL=${MY_POOL:-64M} MY_REDO=${MY_REDO:-96M}
if [ "$CONFIG" = heavy ]; then
	MODES=${1:-dw nodw${PRELOAD:+ atomio atomio+raw}}
else
	MODES=${1:-dw nodw${PRELOAD:+ atomio}}
fi
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
loopfs_make "${MY_IMG:-4G}"
dev=$(basename "$LOOP")
written() { loopfs_written; }

# One data directory prepared (install, sysbench prepare, clean stop: the
# first mode's, with a 256M buffer pool, which only makes it quicker), then
# copied for every other mode and started and stopped once in that mode
# (atomio: its store's log exists from the start, so that creating it is
# not counted in the first round).
first=""
for m in $MODES; do
	cache=${MY_PREP_CACHE:+$MY_PREP_CACHE/prep.$m.$MY_TABLES.$MY_TABLE_SIZE.tar}
	if [ -z "$first" ] && [ -n "$cache" ] && [ -f "$cache" ]; then
		first=$m
		tar -C "$FS" -xf "$cache"
	elif [ -z "$first" ]; then
		first=$m
		MY_POOL=256M my_config "$m" "$FS/$m/data"
		my_install
		my_start || { tail "$MY_D/err.log"; die "$m: mysqld does not start"; }
		my_prepare
		my_stop
		[ -z "$cache" ] || tar -C "$FS" -cf "$cache" "$m"
	else
		cp -a "$FS/$first.prepared" "$FS/$m"
		my_config "$m" "$FS/$m/data"
		my_start || { tail "$MY_D/err.log"; die "$m: mysqld does not start"; }
		my_stop
	fi
	cp -a "$FS/$m" "$FS/$m.prepared"
done
echo "bench.sh: config $CONFIG, modes $MODES; $PAIRS rounds of $SECS s; $MY_TABLES tables x $MY_TABLE_SIZE rows" \
	"($(du -sm "$FS/$m.prepared/data/sbtest" | cut -f1) MB), $MY_THREADS threads, buffer pool $MY_POOL, redo $MY_REDO," \
	"${MY_EXTRA:+$MY_EXTRA, }store log ${MY_ATOMIO_LOG_SIZE:-256M}; ext4 on $dev (direct I/O to $IMG); $(nproc) cores, $(uptime)"
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
		rm -f "$MY_D/atomio.stats"
		sync; w0=$(written); c0=$(my_cpu_ticks); s0=$(my_status)
		rm -rf "$W/acks"; mkdir -p "$W/acks"
		during=""
		if [ -n "${MY_DURING:-}" ]; then
			(sleep 2; eval "$MY_DURING") > "$W/during.$m.$i.log" 2>&1 &
			during=$!
		fi
		LEDGER_DIR=$W/acks LEDGER_RUN=$i my_sysbench run --threads="$MY_THREADS" --time="$SECS" --events=0 > "$W/sb.log" 2>&1 \
			|| { tail "$W/sb.log"; die "$m: sysbench"; }
		[ -z "$during" ] || wait "$during" || true
		c1=$(my_cpu_ticks); s1=$(my_status)
		my_stop
		sync; w1=$(written)
		tx=$(sed -n 's/^ *transactions: *\([0-9]*\).*/\1/p' "$W/sb.log")
		tps=$(sed -n 's/^ *transactions: .*(\([0-9.]*\) per sec.*/\1/p' "$W/sb.log")
		bpt=$(( (w1 - w0) / tx ))
		cpt=$(( (c1 - c0) * 1000000 / $(getconf CLK_TCK) / tx ))
		inno=$(echo "$s0 $s1" | awk -v tx="$tx" '{ printf "fsyncs/tx %.2f redo_fsyncs/tx %.2f pages/tx %.2f dblwr_pages/tx %.2f",
			($5 - $1) / tx, ($6 - $2) / tx, ($7 - $3) / tx, ($8 - $4) / tx }')
		st=""
		[ -f "$MY_D/atomio.stats" ] && st=$(awk -v tx="$tx" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
			END { printf "groups/tx %.2f log_syncs/tx %.3f logged_B/tx %d home_B/tx %d checkpoints %d syncs/tx %.2f syncs_waited/tx %.2f lazy_reads/tx %.2f lazy_waits/tx %.2f flushes(delay,press,sync) %d,%d,%d",
			v["commits"] / tx, v["log_syncs"] / tx, v["bytes_logged"] / tx, v["bytes_home"] / tx, v["checkpoints"],
			v["syncs"] / tx, v["syncs_waited"] / tx, v["lazy_reads"] / tx, v["lazy_waits"] / tx,
			v["flush_delay"], v["flush_press"], v["flush_sync"] }' "$MY_D/atomio.stats")
		echo "$m $i $tps $bpt $tx $((w1 - w0)) $cpt $inno $st" >> "$W/results"
		printf '%-7s round %d: %8.1f tps, %7d device bytes/tx, %5d us CPU/tx (%d transactions, %d MiB written); %s%s; load %s\n' \
			"$m" "$i" "$tps" "$bpt" "$cpt" "$tx" $(( (w1 - w0) >> 20 )) "$inno" "${st:+; atomio $st}" "$(cut -d' ' -f1-3 /proc/loadavg)"
	done
done
echo "medians over $PAIRS rounds (ratio to dw):"
awk '{ tps[$1] = tps[$1] " " $3; bpt[$1] = bpt[$1] " " $4; cpt[$1] = cpt[$1] " " $7 }
     function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
     END { for (m in tps) { T[m] = med(tps[m]); B[m] = med(bpt[m]); C[m] = med(cpt[m]) }
	   for (m in tps) printf "%-7s %8.1f tps (%.2fx, %.2fx nodw)  %7d bytes/transaction (%.2fx)  %5d us CPU/transaction (%.2fx)\n", m,
		T[m], ("dw" in T) ? T[m] / T["dw"] : 0, ("nodw" in T) ? T[m] / T["nodw"] : 0, B[m], ("dw" in B) ? B[m] / B["dw"] : 0,
		C[m], ("dw" in C) ? C[m] / C["dw"] : 0 }' "$W/results"
echo "$(uptime)"
