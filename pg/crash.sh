#!/bin/bash
# PostgreSQL 15 on cutfs, crashed round after round under load:
#   pg/crash.sh MODE CUTS [KILLS]
# MODE is fpw (stock), off (full_page_writes=off, nothing else) or atomio
# (full_page_writes=off under the preload library): pg/lib.sh.
#
# The cluster: initdb --data-checksums on cutfs, pgbench's tables at scale
# PG_SCALE (default 4: 400,000 accounts, 60 MB), shared_buffers PG_SHARED
# (default 4MB: backends and the background writer write pages out all the
# time, and most of those writes are not synced when the cut comes),
# autovacuum every second, a checkpoint every 30 s or 64 MB of WAL.
# The load: pgbench (TPC-B-like, PGBENCH_CLIENTS connections, default 2),
# pg/ledger.c (the same transaction plus one ledger row from LEDGER_CLIENTS
# connections, default 2, each acknowledged transaction appended to a file
# on the real disk once COMMIT returned), and a CHECKPOINT every 3..12 s
# (seeded), so that some cuts land in checkpoints and most find pages
# written since the last one, not yet synced.
#
# A round: mount cutfs (tear mode: each unsynced 512-byte sector survives a
# cut with probability 1/2; a seed per round), check the previous crash
# (below), start the server, run the load until a seeded number of
# acknowledged ledger transactions (50..50+ACKS_MAX-1), then crash it:
#   cut    echo cut > .cutfs (power cut, sectors torn), SIGKILL everything
#   kill   SIGKILL of the postmaster and every child at once; the files are
#          then synced through cutfs (the page cache survives a process crash)
#   child  SIGKILL of one child of the postmaster, chosen by the seed (a
#          backend, the checkpointer, the background writer, the walwriter,
#          autovacuum): the postmaster recovers in place; then a clean stop
# KILLS rounds (spread evenly among the CUTS) alternate kill and child.
# Before any recovery, pg/torn.c reads the medium as the crash left it:
# "torn at the crash", by fork (the damage recovery must repair or live with).
#
# The check of a crash (the next round's start, and after the last round):
#   1. the server starts (WAL recovery; in mode atomio the store's first)
#   2. every acknowledged ledger transaction is there, no gap
#      (rows 1..m of each client, m = the last acknowledged or one more)
#   3. TPC-B's invariant: sum(abalance) = sum(tbalance) = sum(bbalance) =
#      sum(delta) of pgbench_history (a lost page write breaks it)
#   4. pg_amcheck --heapallindexed --parent-check over every relation and
#      index of every database (reads each whole)
#   5. pg_visibility's pg_check_visible and pg_check_frozen over every table:
#      no tuple the visibility map calls all-visible/frozen that is not
#   6. no checksum failure (pg_stat_database.checksum_failures) and no
#      "invalid page" in the server's log, in any fork
#   7. a clean stop; pg_checksums --check; pg/torn.c over every page of
#      every fork ("torn after recovery")
# A round fails on any of these, except that torn visibility-map and
# free-space-map pages (steps 6 and 7: fsm and vm forks only) are counted
# apart in modes fpw and off: stock PostgreSQL leaves them torn by design
# (they are read with RBM_ZERO_ON_ERROR, zeroed in memory, rebuilt).  In
# mode atomio they fail the round too: no page may tear.
# A failed round is counted, its server log kept, and the data directory set
# back to its prepared copy.  Exit 0 if no round failed.
#
# Mode atomio: every process of the cluster shares one store (the preload
# library's one mode: pg/lib.sh); after each crash the
# store is recovered by the first process to open it (the postmaster's
# library before main), and after the clean stop `atomio recover` (as the
# user postgres, the log's owner) must find nothing left to do.  A setup
# that fails under the library exits 3 with its reason.
#
#   SEED (default 1; printed), ACKS_MAX (default 600), PG_SCALE (4),
#   PGBENCH_CLIENTS (2), LEDGER_CLIENTS (2), PRELOAD (mode atomio),
#   CUTFS (default build/cutfs; build/pg-torn, build/pg-ledger, build/atomio
#   beside it), OUT (default /tmp/cutfs).  touch $OUT/pg-crash-MODE/stop to
#   end after the round under way.
set -eu
MODE=${1:?usage: pg/crash.sh fpw|off|atomio CUTS [KILLS]}
CUTS=${2:?}; KILLS=${3:-0}
SEED=${SEED:-1}
ACKS_MAX=${ACKS_MAX:-600}
CUTFS=${CUTFS:-build/cutfs}
OUT=${OUT:-/tmp/cutfs}
PGBENCH_CLIENTS=${PGBENCH_CLIENTS:-2}
LEDGER_CLIENTS=${LEDGER_CLIENTS:-2}
export PG_SCALE=${PG_SCALE:-4} PG_SHARED=${PG_SHARED:-4MB}
BIN=$(cd "$(dirname "$CUTFS")" && pwd)
for b in "$CUTFS" "$BIN/pg-torn" "$BIN/pg-ledger"; do
	[ -x "$b" ] || { echo "FAIL: $b is not built (make pg-tools)" >&2; exit 1; }
done
[ "$MODE" != atomio ] || [ -x "$BIN/atomio" ] || { echo "FAIL: the atomio command is not built" >&2; exit 1; }
[ -x /usr/lib/postgresql/15/bin/postgres ] && command -v pgbench >/dev/null \
	|| { echo "SKIP: PostgreSQL 15 is not installed (make pg-deps)" >&2; exit 77; }
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "SKIP: no FUSE" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (cutfs -o allow_other, the server as postgres)" >&2; exit 77; }
export PG_D=$OUT/pg-crash-$MODE
. "$(dirname "$0")/lib.sh"
CUTFS=$(realpath "$CUTFS")
B=$PG_D/backing; M=$PG_D/mnt; ACKS=$PG_D/acks; EXP=$PG_D/expected
LOAD_PIDS=""
stop_load() {
	for p in $LOAD_PIDS; do kill -9 "$p" 2>/dev/null || true; done
	for p in $LOAD_PIDS; do wait "$p" 2>/dev/null || true; done
	LOAD_PIDS=""
}
cleanup() {
	stop_load
	pg_kill
	mountpoint -q "$M" 2>/dev/null && { sleep 0.2; fusermount3 -u "$M" || fusermount3 -uz "$M"; }
	true
}
trap cleanup EXIT
ATOMIO_CMD=$BIN/atomio
devs_changed=0; last_dev=""
. "$(dirname "$0")/../cutfs/rounds.sh"
mnt() { cutfs_mount "$1" "$PG_D/cutfs.err" "$PG_D/recover.log" as_pg; }
umnt() { cutfs_umount; }
# torn_counts DATADIR: "main fsm vm init" torn pages (short ones included);
# the pages themselves in $PG_D/torn.crash (one round's, with the rounds
# before in torn.crash.all)
torn_counts() {
	"$BIN/pg-torn" -v "$1" > "$PG_D/torn.crash" 2>&1 || true
	sed "s/^/round $r: /" "$PG_D/torn.crash" >> "$PG_D/torn.crash.all"
	tail -n 1 "$PG_D/torn.crash" | sed -n 's/.*(by fork: main \([0-9]*\) fsm \([0-9]*\) vm \([0-9]*\) init \([0-9]*\)).*/\1 \2 \3 \4/p'
}

# mode atomio: a setup that fails says where, plainly, before any round
atomio_setup_failed() {
	line=$(grep -m1 -E 'atomio_preload:|EBUSY|Device or resource busy|FATAL|PANIC' "$PG_D"/*.log 2>/dev/null | cut -c1-300)
	echo "pg/crash.sh: mode atomio: the cluster could not be set up under the preload library:"
	echo "  ${line:-$(tail -n 3 "$PG_D/server.log" "$PG_D/initdb.log" 2>/dev/null | tr '\n' ' ' | cut -c1-300)}"
	pg_kill
	exit 3
}

rm -rf "$PG_D"; mkdir -p "$B" "$M" "$ACKS"
chown "$PG_USER:" "$B"
: > "$EXP"
mnt 0
pg_mode "$MODE" "$M/data"
if [ "$MODE" = atomio ]; then
	( pg_initdb ) >"$PG_D/setup.log" 2>&1 || atomio_setup_failed
else
	pg_initdb
fi
cutfs_sync_all
umnt
cp -a "$B" "$PG_D/pristine"
echo "pg/crash.sh: mode $MODE, $CUTS cuts and $KILLS kills, seed $SEED (SEED=$SEED to repeat); scale $PG_SCALE," \
	"$PGBENCH_CLIENTS pgbench + $LEDGER_CLIENTS ledger clients; PostgreSQL $("$PG_BIN/postgres" -V | awk '{print $3}');" \
	"$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

ncut=0; nkill=0; nchild=0; fails=0; nostart=0; lost=0; badsum=0; badcheck=0; badvis=0; badcsum=0; badtorn=0
acked_total=0; kept=0; dropped=0
cut_torn_rounds=0; cut_torn_main=0; cut_torn_vmfsm=0   # on the medium at the crash
vmfsm_rounds=0; vmfsm_pages=0; vmfsm_zeroed=0          # left after recovery (stock: by design)
short_rounds=0                                          # a partial page at a file's end after recovery
fail_round() { # REASON
	echo "round $r: FAIL: $1"
	fails=$((fails + 1))
	cp "$PG_D/server.log" "$PG_D/server.round$r.log" 2>/dev/null || true
	stop_load
	pg_kill
	mountpoint -q "$M" && umnt
	rm -rf "$B"; cp -a "$PG_D/pristine" "$B"
	: > "$EXP"
}

# why_down: the server log's reason (the startup process's error, a PANIC,
# a page it could not read; not a client's "the database system is starting up")
why_down() {
	{ grep -E 'PANIC|invalid page|startup (FATAL|ERROR)|postmaster (FATAL|LOG:  startup process)' "$PG_D/server.log" \
		|| grep -E 'FATAL' "$PG_D/server.log" | grep -v 'is starting up' || true; } | head -n 2 | cut -c1-200 | tr '\n' ' '
}

# check: recovery and every check; 0 if all passed (else fail_round done)
check() {
	: > "$PG_D/server.log"
	if ! pg_start; then
		nostart=$((nostart + 1))
		fail_round "the server does not start: $(why_down)"; return 1
	fi
	pg_sql -F ' ' -c "SELECT run, client, count(*), max(n) FROM ledger GROUP BY run, client" > "$PG_D/ledger.now" \
		|| { fail_round "reading the ledger: $(tail -n 1 "$PG_D/server.log")"; return 1; }
	miss=$(awk 'NR == FNR { c[$1 " " $2] = $3; m[$1 " " $2] = $4; next }
		{ k = $1 " " $2; if (!(k in c) && $3 > 0) print k " acked " $3 " found none";
		  else if (k in c && (c[k] != m[k] || m[k] < $3 || m[k] > $3 + 1)) print k " acked " $3 " found " c[k] " rows up to " m[k] }' \
		"$PG_D/ledger.now" "$EXP")
	if [ -n "$miss" ]; then
		lost=$((lost + 1)); fail_round "acknowledged transactions missing (run client): $(echo "$miss" | head -n 3 | tr '\n' ';')"; return 1
	fi
	sums=$(pg_sql -F ' ' -c "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers),
		(SELECT sum(bbalance) FROM pgbench_branches), (SELECT coalesce(sum(delta), 0) FROM pgbench_history)" 2>&1) \
		|| { badsum=$((badsum + 1)); fail_round "reading the balances: $sums"; return 1; }
	if [ "$(echo "$sums" | awk '{ print ($1 == $2 && $2 == $3 && $3 == $4) }')" != 1 ]; then
		badsum=$((badsum + 1)); fail_round "TPC-B balances disagree (accounts tellers branches history): $sums"; return 1
	fi
	if ! as_pg "$PG_BIN/pg_amcheck" -h "$PG_SOCK" -U postgres --all --heapallindexed --parent-check \
			> "$PG_D/amcheck.out" 2>&1; then
		badcheck=$((badcheck + 1)); fail_round "pg_amcheck: $(head -n 3 "$PG_D/amcheck.out" | tr '\n' ' ' | cut -c1-300)"; return 1
	fi
	vis=$(pg_sql -c "SELECT c.relname || ': ' || count(*) FROM pg_class c,
		LATERAL (SELECT * FROM pg_check_visible(c.oid) UNION ALL SELECT * FROM pg_check_frozen(c.oid)) v
		WHERE c.relkind IN ('r', 'm', 't') GROUP BY c.relname" 2>"$PG_D/vis.err") \
		|| { badvis=$((badvis + 1)); fail_round "pg_visibility: $(head -n 2 "$PG_D/vis.err")"; return 1; }
	# (a torn vm page read here is zeroed with a WARNING on stderr, and the
	# server's log says which: judged with the other "invalid page" lines)
	if [ -n "$vis" ]; then
		badvis=$((badvis + 1)); fail_round "the visibility map calls tuples all-visible or frozen that are not: $vis"; return 1
	fi
	nfail=$(pg_sql -c "SELECT coalesce(sum(checksum_failures), 0) FROM pg_stat_database")
	pg_stop
	# "invalid page in block 3 of relation base/5/16397_vm; zeroing out page":
	# the server read a page whose checksum failed (vm and fsm are read with
	# RBM_ZERO_ON_ERROR: zeroed in memory, a WARNING; a main-fork page is an
	# ERROR).  The "page verification failed" WARNING before each names no
	# relation: the "invalid page" lines say which fork.
	inval=$(grep -E 'invalid page in block' "$PG_D/server.log" || true)
	inval_vmfsm=$(echo "$inval" | grep -E 'relation [^ ]*_(vm|fsm)(\.[0-9]+)?[;" ]' | grep -c . || true)
	inval_main=$(( $(echo "$inval" | grep -c . || true) - inval_vmfsm ))
	if [ "$inval_main" -gt 0 ] || { [ "$nfail" -gt 0 ] && [ "$inval_vmfsm" -eq 0 ]; }; then
		badcsum=$((badcsum + 1)); fail_round "checksum failures read by the server: $nfail; $(echo "$inval" | grep -v -E '_(vm|fsm)' | grep -m2 . | tr '\n' ' ' | cut -c1-300)"; return 1
	fi
	# (as postgres: the log is its, mode 0600, and atomio refuses a log
	# another user owns)
	[ "$MODE" != atomio ] || as_pg "$BIN/atomio" recover "$(dirname "$PG_DATA")/atomio.log" >>"$PG_D/recover.log" 2>&1 \
		|| { fail_round "atomio recover: $(tail -n 1 "$PG_D/recover.log")"; return 1; }
	as_pg "$PG_BIN/pg_checksums" --check -D "$PG_DATA" > "$PG_D/pg_checksums.out" 2>&1 || true
	csum_main=$(grep 'checksum verification failed' "$PG_D/pg_checksums.out" | grep -v -E '_(vm|fsm)(\.[0-9]+)?"' | grep -c . || true)
	"$BIN/pg-torn" -v "$PG_DATA" > "$PG_D/torn.after" 2>&1 || true
	read -r tm tf tv ti <<< "$(tail -n 1 "$PG_D/torn.after" | sed -n 's/.*(by fork: main \([0-9]*\) fsm \([0-9]*\) vm \([0-9]*\) init \([0-9]*\)).*/\1 \2 \3 \4/p')"
	# A "short" main or init page: the file ends inside a page, sectors of an
	# extension kept past the last whole page.  Stock PostgreSQL never reads
	# it (mdnblocks rounds the size down; the next extension overwrites it):
	# counted apart in modes fpw and off, a failure in mode atomio.
	short=$(grep -c -E '^short .*\((main|init)\)' "$PG_D/torn.after" || true)
	tm=$(( ${tm:-0} - short ))
	if [ "$short" -gt 0 ]; then
		if [ "$MODE" = atomio ]; then
			badtorn=$((badtorn + 1)); fail_round "a relation file ends inside a page after recovery: $(grep -m1 '^short' "$PG_D/torn.after")"; return 1
		fi
		short_rounds=$((short_rounds + 1))
		echo "round $r: known stock artifact after recovery: $(grep -m1 '^short' "$PG_D/torn.after" | cut -c1-200)"
	fi
	if [ -z "${tf:-}" ] || [ "$((tm + ti))" -gt 0 ] || [ "$csum_main" -gt 0 ]; then
		badtorn=$((badtorn + 1)); fail_round "torn pages after recovery: $(grep -m3 -E '^(torn|short|bad)' "$PG_D/torn.after" | tr '\n' ' ' | cut -c1-300) pg_checksums: $csum_main"; return 1
	fi
	if [ "$((tf + tv + inval_vmfsm))" -gt 0 ]; then
		if [ "$MODE" = atomio ]; then
			badtorn=$((badtorn + 1)); fail_round "torn vm/fsm pages after recovery: $tf fsm, $tv vm, zeroed by the server: $inval_vmfsm"; return 1
		fi
		vmfsm_rounds=$((vmfsm_rounds + 1)); vmfsm_pages=$((vmfsm_pages + tf + tv)); vmfsm_zeroed=$((vmfsm_zeroed + inval_vmfsm))
		echo "round $r: known stock tears after recovery: $tf fsm + $tv vm pages torn on disk, $inval_vmfsm zeroed by the server: $(echo "$inval" | grep -E '_(vm|fsm)' | sed 's/.*relation //' | sort -u | tr '\n' ' ' | cut -c1-160)"
	fi
	return 0
}

ROUNDS=$((CUTS + KILLS))
r=0
for r in $(seq 1 "$ROUNDS"); do
	[ -e "$PG_D/stop" ] && { ROUNDS=$((r - 1)); break; }
	s=$((SEED * 100000 + r))
	t0=$(date +%s)
	want=$(( (s * 2654435761) % ACKS_MAX + 50 ))
	mnt "$s"
	if [ "$r" -gt 1 ] && ! check; then
		mnt "$s"
	fi
	: > "$PG_D/server.log"
	if ! pg_start; then
		fail_round "the server does not start after a clean stop: $(why_down)"; continue
	fi
	rm -f "$ACKS"/ack.*
	"$BIN/pg-ledger" "host=$PG_SOCK user=postgres dbname=bench" "$ACKS" "$r" "$LEDGER_CLIENTS" "$PG_SCALE" "$SEED" \
		2>"$PG_D/ledger.err" &
	LOAD_PIDS=$!
	as_pg "$PG_BIN/pgbench" -h "$PG_SOCK" -U postgres -c "$PGBENCH_CLIENTS" -T 600 -n bench >"$PG_D/pgbench.log" 2>&1 &
	LOAD_PIDS="$LOAD_PIDS $!"
	( k=0; while :; do sleep $(( (s + k) % 10 + 3 )); k=$((k + 1)); pg_sql -c CHECKPOINT >/dev/null 2>&1 || true; done ) &
	LOAD_PIDS="$LOAD_PIDS $!"
	n=0
	for _ in $(seq 1 6000); do
		n=$(cat "$ACKS"/ack.* 2>/dev/null | wc -l)
		[ "$n" -ge "$want" ] && break
		kill -0 "${LOAD_PIDS%% *}" 2>/dev/null || break
		sleep 0.05
	done
	# the KILLS rounds spread evenly among the cuts; they alternate kill, child
	if [ $((r * KILLS / ROUNDS)) -eq $(((r - 1) * KILLS / ROUNDS)) ]; then
		cutfs_cut
		how=cut; ncut=$((ncut + 1))
		pg_kill
	elif [ $(( (nkill + nchild) % 2 )) -eq 0 ]; then
		how=kill; nkill=$((nkill + 1))
		pg_kill
	else
		how="child $(pg_kill_child "$s")"; nchild=$((nchild + 1))
		# the postmaster's own crash recovery, in place; then a clean stop
		sleep 0.5
		if pg_wait_ready; then how="$how, recovered in place"; pg_stop; else how="$how, no in-place recovery"; pg_kill; fi
	fi
	stop_load
	for f in "$ACKS"/ack.*; do
		[ -s "$f" ] || continue
		echo "$r ${f##*.} $(tail -n 1 "$f")" >> "$EXP"
		acked_total=$((acked_total + $(tail -n 1 "$f")))
	done
	# a process crash keeps what the processes wrote (the page cache): sync
	# it through cutfs before the unmount, which would drop it
	[ "$how" = cut ] || cutfs_sync_all
	umnt
	read -r tm tf tv ti <<< "$(torn_counts "$B/data")"
	if [ "$((tm + tf + tv + ti))" -gt 0 ]; then
		cut_torn_rounds=$((cut_torn_rounds + 1))
		cut_torn_main=$((cut_torn_main + tm + ti)); cut_torn_vmfsm=$((cut_torn_vmfsm + tf + tv))
	fi
	echo "round $r: $how after $n acknowledged transactions; torn at the crash on the medium: main $tm, fsm $tf, vm $tv, init $ti ($(( $(date +%s) - t0 )) s)"
done
r=$((ROUNDS + 1))
mnt "$((SEED * 100000 + r))"
check || true
mountpoint -q "$M" && umnt
echo "pg/crash.sh: mode $MODE, seed $SEED: $ROUNDS rounds ($ncut cuts, $nkill kills of every process, $nchild kills of one child)," \
	"$acked_total acknowledged transactions checked; $fails failed rounds (no start: $nostart, acknowledged lost: $lost," \
	"balances: $badsum, amcheck: $badcheck, visibility map: $badvis, checksum failures read: $badcsum, torn after recovery: $badtorn);" \
	"crashes that left torn pages on the medium: $cut_torn_rounds ($cut_torn_main main/init pages, $cut_torn_vmfsm vm/fsm pages);" \
	"stock's known vm/fsm tears after recovery: $vmfsm_rounds rounds, $vmfsm_pages pages torn on disk, $vmfsm_zeroed zeroed by the server;" \
	"partial pages left at a file's end after recovery: $short_rounds rounds;" \
	"unsynced sectors at the cuts: $kept kept, $dropped dropped; remounts with a new device number: $devs_changed"
[ "$fails" -eq 0 ]
