#!/bin/bash
# Speed and wear of PostgreSQL 15 under pgbench (TPC-B-like), modes side by
# side in one run:
#   pg/bench.sh [MODES]     MODES default "fpw lz4 off atomio" (atomio only
#                           when PRELOAD is set)
#   fpw     full_page_writes=on (stock)
#   lz4     full_page_writes=on, wal_compression=lz4 (stock, compressed images)
#   off     full_page_writes=off, unprotected: the ceiling (unsafe)
#   atomio  full_page_writes=off under the preload library (pg/lib.sh;
#           ATOMIO_LAZY_MS passed on when set); a run that fails is
#           reported, not fatal
# Each mode runs with two configurations (PG_CONFIGS, default "frequent
# defaults"), each with its clients and pgbench arguments (conf_clients,
# conf_args):
#   frequent  checkpoint_timeout=30s, max_wal_size=64MB (a checkpoint every
#             few seconds: full-page images after each)
#   defaults  PostgreSQL's: checkpoint_timeout=5min, max_wal_size=1GB
#   bgwriter  defaults, with a background writer that keeps clean buffers
#             ahead of the backends (bgwriter_delay=10ms,
#             bgwriter_lru_maxpages=1000, bgwriter_lru_multiplier=10), so
#             that a backend rarely writes a page out itself
#   heavy     where full-page images cost most (issue 36, plan section 9):
#             shared_buffers=32MB (the data about 15x), checkpoint_timeout=1min,
#             max_wal_size=256MB, PG_HEAVY_CLIENTS (16) clients, pgbench -N
#             (no updates of the small tables: the clients do not queue on
#             their row locks)
# The data directory is on an ext4 filesystem of its own, on a loop device
# with direct I/O to its image on the real disk, so that the device's
# counters (/sys/block/loopN/stat, sectors written) are this server's writes
# alone (relation files, WAL, the atomio log, ext4's journal).  PostgreSQL's
# files are buffered (no O_DIRECT: wal_sync_method=fdatasync, its default on
# Linux); synchronous_commit=on.  Data larger than shared_buffers: scale
# PG_SCALE (default 30: 3,000,000 accounts, about 450 MB) against
# shared_buffers PG_SHARED (default 64MB).
# One prepared cluster (initdb --data-checksums, pgbench -i, VACUUM, clean
# stop), copied afresh for every run.  PG_PAIRS rounds (default 3); in each,
# every (configuration, mode) once, the modes in a rotated order: copy,
# start, sync, read the counters, pgbench -c PG_CLIENTS (4; heavy:
# PG_HEAVY_CLIENTS) -j 2 for
# PG_SECS (default 60) seconds with a per-transaction log, a clean stop
# (its checkpoint writes the dirty pages), sync, read the counters.
# Per run: TPS, p99 latency (from pgbench's per-transaction log), WAL bytes
# per transaction (pg_current_wal_lsn() before and after), full-page images
# per transaction (pg_stat_wal.wal_fpi), device bytes written per
# transaction; and what waits: WAL fsync time per transaction
# (track_wal_io_timing), pages written by the backends themselves (evicting
# a dirty buffer in the transaction's path), by the checkpointer and the
# background writer (pg_stat_bgwriter); in mode atomio also the store's own
# counters per transaction (build/pg-stats, before and after): groups
# committed (page writes and size changes), log syncs (device flushes in the
# path of those writes) and batches, bytes logged and written home; the
# store's log written whole before each run (PG_WARM_LOG, default 1: a log
# in service, past its first lap).  With
# PG_WAITS=1, what waits: pg_stat_activity sampled every 0.5 s during the
# run (each process's wait event, "CPU:running" when it has none), the most
# frequent (process type, event) pairs per run.  Last,
# the medians per (configuration, mode) and the ratios to fpw.
#   OUT (default /tmp/cutfs), PRELOAD, PG_ATOMIO_LOG_SIZE.
set -eu
PG_PAIRS=${PG_PAIRS:-3}; PG_SECS=${PG_SECS:-60}; PG_CLIENTS=${PG_CLIENTS:-4}
OUT=${OUT:-/tmp/cutfs}
export PG_SCALE=${PG_SCALE:-30} PG_SHARED=${PG_SHARED:-64MB} PG_AV_NAPTIME=60s
MODES=${1:-fpw lz4 off${PRELOAD:+ atomio}}
CONFIGS=${PG_CONFIGS:-frequent defaults}
[ -x /usr/lib/postgresql/15/bin/postgres ] && command -v pgbench >/dev/null \
	|| { echo "SKIP: PostgreSQL 15 is not installed (make pg-deps)" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for the loop device" >&2; exit 77; }
W=$OUT/pg-bench
export PG_D=$W/srv
HERE=$(cd "$(dirname "$0")" && pwd)
PG_STATS=${PG_STATS:-$HERE/../build/pg-stats}
PG_STATS_DIR=$(dirname "$PG_STATS")   # the atomio command beside it
. "$HERE/lib.sh"
IMG=$W/ext4.img; FS=$W/fs; LOOP=""
. "$HERE/../scripts/loopfs.sh"
cleanup() {
	pg_kill
	loopfs_remove
}
trap cleanup EXIT
rm -rf "$W"; mkdir -p "$W" "$FS" "$PG_D"
loopfs_make 8G
chmod 755 "$W" "$FS"
dev=$(basename "$LOOP")
written() { loopfs_written; }
conf_opts() {
	case $1 in
	frequent) echo "-c checkpoint_timeout=30s -c max_wal_size=64MB" ;;
	defaults) echo "-c checkpoint_timeout=5min -c max_wal_size=1GB" ;;
	bgwriter) echo "-c checkpoint_timeout=5min -c max_wal_size=1GB -c bgwriter_delay=10ms -c bgwriter_lru_maxpages=1000 -c bgwriter_lru_multiplier=10" ;;
	heavy) echo "-c checkpoint_timeout=1min -c max_wal_size=256MB -c shared_buffers=32MB" ;;
	esac
}
conf_clients() {
	case $1 in
	heavy) echo "${PG_HEAVY_CLIENTS:-16}" ;;
	*) echo "$PG_CLIENTS" ;;
	esac
}
conf_args() {
	case $1 in
	heavy) echo "-N" ;;
	*) echo "" ;;
	esac
}

# the prepared cluster, made without the preload library (mode fpw)
mkdir -p "$FS/prep"; chown "$PG_USER:" "$FS/prep"
pg_mode fpw "$FS/prep/data"
pg_initdb "$PG_SCALE"
echo "pg/bench.sh: modes $MODES; configurations $CONFIGS; $PG_PAIRS rounds of $PG_SECS s; scale $PG_SCALE" \
	"($(du -sm "$FS/prep/data/base" | cut -f1) MB), shared_buffers $PG_SHARED (heavy: 32MB), $PG_CLIENTS clients (heavy: ${PG_HEAVY_CLIENTS:-16}, -N);" \
	"ext4 on $dev (direct I/O to $IMG), buffered files, wal_sync_method=fdatasync, synchronous_commit=on;" \
	"$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$W/results"
set -- $MODES
n=$#
for i in $(seq 1 "$PG_PAIRS"); do
	order=""
	for k in $(seq 0 $((n - 1))); do
		j=$(( (k + i - 1) % n + 1 ))
		order="$order ${!j}"
	done
	for c in $CONFIGS; do
		for m in $order; do
			rm -rf "${FS:?}/run"; cp -a "$FS/prep" "$FS/run"
			pg_mode "$m" "$FS/run/data"
			# Mode atomio: the store's log made and written whole before the
			# run (PG_WARM_LOG=1, the default), as a log in service is after
			# its first lap.  A new log is fallocated: while its records
			# reach blocks never written, the store zeroes the next ones
			# ahead of them (an unwritten extent's conversion would be a
			# metadata commit in every log write), and those zeros are device
			# writes a log in service no longer makes.
			if [ "$m" = atomio ] && [ "${PG_WARM_LOG:-1}" = 1 ]; then
				log=$FS/run/atomio.log
				as_pg env LD_PRELOAD="$PRELOAD" ATOMIO_LOG="$log" \
					ATOMIO_LOG_SIZE="${PG_ATOMIO_LOG_SIZE:-256M}" ATOMIO_FILES="$FS/run/warm.p" \
					sh -c 'printf x > "$1"' sh "$FS/run/warm.p"
				rm -f "$FS/run/warm.p"
				read -r asize aoff <<< "$("$PG_STATS_DIR/atomio" dump "$log" | sed -n 's/.*record area \([0-9]*\) bytes at \([0-9]*\).*/\1 \2/p')"
				dd if=/dev/zero of="$log" bs=4096 seek=$((aoff / 4096)) count=$((asize / 4096)) conv=notrunc,fdatasync status=none
			fi
			: > "$PG_D/server.log"
			PG_OPTS="$(conf_opts "$c") -c autovacuum_naptime=60s -c autovacuum_vacuum_scale_factor=0.2 -c autovacuum_vacuum_insert_scale_factor=0.2 -c autovacuum_analyze_scale_factor=0.1 -c track_wal_io_timing=on"
			export PG_OPTS
			if ! pg_start; then
				why=$(grep -m1 -E 'atomio_preload|FATAL|PANIC' "$PG_D/server.log" | cut -c1-200)
				echo "$c $m round $i: the server does not start: $why"
				continue
			fi
			if ! pg_sql -c "SELECT pg_stat_reset_shared('wal'), pg_stat_reset_shared('bgwriter')" > "$W/first.out" 2>&1; then
				echo "$c $m round $i: the server does not serve: $(head -n 1 "$W/first.out" | cut -c1-200)"
				pg_kill; continue
			fi
			astats() { # the shared store's counters, name=value ... (mode atomio)
				[ "$m" = atomio ] && [ -x "$PG_STATS" ] && as_pg "$PG_STATS" "$FS/run/atomio.log" 2>/dev/null || true
			}
			a0=$(astats)
			lsn0=$(pg_sql -c "SELECT pg_current_wal_lsn()")
			sync; w0=$(written)
			rm -rf "$W/log"; mkdir -p "$W/log"; chown "$PG_USER:" "$W/log"
			WPID=""
			if [ "${PG_WAITS:-0}" = 1 ]; then
				: > "$W/waits"
				( while :; do
					pg_sql -F '|' -c "SELECT backend_type, coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, 'running')
						FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND (state IS NULL OR state <> 'idle')" || true
					sleep 0.5
				done >> "$W/waits" 2>/dev/null ) &
				WPID=$!
			fi
			# shellcheck disable=SC2046 # conf_args: words
			if ! (cd "$W/log" && as_pg "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres -c "$(conf_clients "$c")" -j 2 \
					-T "$PG_SECS" $(conf_args "$c") -n -l --log-prefix=tx bench > "$W/pgbench.out" 2>&1); then
				echo "$c $m round $i: pgbench failed: $(tail -n 2 "$W/pgbench.out" | tr '\n' ' ')"
				[ -z "$WPID" ] || kill "$WPID" 2>/dev/null || true
				pg_kill; continue
			fi
			if [ -n "$WPID" ]; then
				kill "$WPID" 2>/dev/null || true; wait "$WPID" 2>/dev/null || true
				echo "$c $m round $i, what waits (samples of process type|event, most frequent): $(sort "$W/waits" | uniq -c | sort -rn | head -n 8 | awk '{ n = $1; $1 = ""; printf "%s%s %d", (NR > 1 ? "; " : ""), substr($0, 2), n }')"
			fi
			lsn1=$(pg_sql -c "SELECT pg_current_wal_lsn()")
			walb=$(pg_sql -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
			fpi=$(pg_sql -c "SELECT wal_fpi FROM pg_stat_wal")
			# what waits: WAL fsyncs (ms), pages written by the backends
			# themselves (evictions in the transaction's path), by the
			# checkpointer, by the background writer
			read -r syncms bback bckpt bclean <<< "$(pg_sql -F ' ' -c "SELECT round(w.wal_sync_time), b.buffers_backend,
				b.buffers_checkpoint, b.buffers_clean FROM pg_stat_wal w, pg_stat_bgwriter b")"
			a1=$(astats)
			pg_stop
			sync; w1=$(written)
			tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/pgbench.out")
			tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p' "$W/pgbench.out")
			# per-transaction log: client, transaction, latency (us), ...
			p99=$(cat "$W"/log/tx.* | awk '{ print $3 }' | sort -n | awk '{ a[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", a[i] / 1000 }')
			ckpts=$(grep -c 'checkpoint complete' "$PG_D/server.log" || true)
			per() { awk -v a="$1" -v t="$tx" 'BEGIN { printf "%.2f", a / t }'; }
			echo "$c $m $i $tps $p99 $((walb / tx)) $(per "$fpi") $(( (w1 - w0) / tx )) $tx $ckpts $(per "$syncms") $(per "$bback") $(per "$bckpt") $(per "$bclean")" >> "$W/results"
			printf '%-8s %-6s round %d: %7.1f tps, p99 %6.2f ms, %6d WAL bytes/tx, %5.2f FPI/tx, %6d device bytes/tx (%d tx, %d checkpoints; per tx: WAL sync %s ms, pages written by backends %s, checkpointer %s, bgwriter %s)\n' \
				"$c" "$m" "$i" "$tps" "$p99" $((walb / tx)) "$(per "$fpi")" \
				$(( (w1 - w0) / tx )) "$tx" "$ckpts" "$(per "$syncms")" "$(per "$bback")" "$(per "$bckpt")" "$(per "$bclean")"
			if [ -n "$a1" ]; then
				# per transaction: the store's counters over the run
				echo "$a0" "$a1" | awk -v t="$tx" -v c="$c" -v i="$i" '{ for (k = 1; k <= NF; k++) { split($k, kv, "="); if (k <= NF / 2) b[kv[1]] = kv[2]; else a[kv[1]] = kv[2] } }
					END { printf "%-8s atomio round %d, the store per tx: %.2f groups (%.2f lazy), %.2f log syncs, %.2f batches, %.0f bytes logged (%.0f raw), %.0f bytes home (%.0f written back early, %.0f synced by checkpoints), %.2f checkpoints; flushes by the delay %.3f, by pressure %.3f, by syncs %.3f; %.2f lazy reads\n", c, i,
						(a["commits"] - b["commits"]) / t, (a["lazy_commits"] - b["lazy_commits"]) / t, (a["log_syncs"] - b["log_syncs"]) / t, (a["batches"] - b["batches"]) / t,
						(a["bytes_logged"] - b["bytes_logged"]) / t, (a["bytes_raw"] - b["bytes_raw"]) / t, (a["bytes_home"] - b["bytes_home"]) / t, (a["bytes_written_back"] - b["bytes_written_back"]) / t,
						(a["bytes_checkpointed"] - b["bytes_checkpointed"]) / t,
						(a["checkpoints"] - b["checkpoints"]) / t, (a["flush_delay"] - b["flush_delay"]) / t,
						(a["flush_press"] - b["flush_press"]) / t, (a["flush_sync"] - b["flush_sync"]) / t, (a["lazy_reads"] - b["lazy_reads"]) / t }'
			fi
		done
	done
done
echo "medians over $PG_PAIRS rounds (ratio to fpw of the same configuration); load at the end $(cut -d' ' -f1-3 /proc/loadavg):"
echo "| configuration | mode | TPS | p99 ms | WAL bytes/tx | FPI/tx | device bytes/tx | WAL sync ms/tx | backend page writes/tx |"
echo "|---|---|---|---|---|---|---|---|---|"
awk 'function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
     { key = $1 " " $2; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
       T[key] = T[key] " " $4; P[key] = P[key] " " $5; W[key] = W[key] " " $6; F[key] = F[key] " " $7; D[key] = D[key] " " $8
       S[key] = S[key] " " $11; BB[key] = BB[key] " " $12 }
     END { for (i = 1; i <= nk; i++) { k = keys[i]; t[k] = med(T[k]); p[k] = med(P[k]); w[k] = med(W[k]); f[k] = med(F[k]); d[k] = med(D[k]); sy[k] = med(S[k]); bb[k] = med(BB[k]) }
	   for (i = 1; i <= nk; i++) { k = keys[i]; split(k, cm, " "); b = cm[1] " fpw"
		printf "| %s | %s | %.1f (%.2fx) | %.2f (%.2fx) | %d (%.2fx) | %.2f | %d (%.2fx) | %.2f | %.2f |\n", cm[1], cm[2],
			t[k], (b in t) ? t[k] / t[b] : 0, p[k], (b in p && p[b] > 0) ? p[k] / p[b] : 0,
			w[k], (b in w && w[b] > 0) ? w[k] / w[b] : 0, f[k], d[k], (b in d && d[b] > 0) ? d[k] / d[b] : 0, sy[k], bb[k] } }' "$W/results"
