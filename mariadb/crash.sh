#!/bin/bash
# MariaDB on cutfs, crashed round after round under sysbench load:
#   mariadb/crash.sh MODE CUTS [KILLS]
# MODE is dw, nodw or atomio (mariadb/lib.sh).  Each round: mount cutfs
# (tear mode, a seed per round), start mysqld (crash recovery), check that
# every table passes CHECK TABLE, that every transaction acknowledged before
# any earlier crash is in the ledger (and no gap), stop it cleanly and run
# innochecksum over every page file; then start it again, run the ledger load
# (mariadb/ledger.lua: oltp_write_only + a ledger row) and, after a seeded
# number of acknowledged transactions, cut the power (CUTS rounds) or
# SIGKILL mysqld (KILLS rounds, spread evenly among them).  The round's last check runs
# after the loop.  Before each check the page files on the medium as the cut
# left them are run through innochecksum as well: the torn pages recovery
# must repair ("torn at the cut").
# touch $MY_D/stop ($OUT/crash-MODE/stop) to end the run after the round
# under way; its crash is checked as usual.
# A failed round (mysqld does not start, a table or page is corrupt, an
# acknowledged transaction is missing) is counted, and the data directory is
# set back to its prepared copy.  Exit 0 if no round failed.
#   SEED (default 1), ACKS_MAX (the crash comes after 50..50+ACKS_MAX-1
#   acknowledged transactions; default 1000), PRELOAD (mode atomio), CUTFS (default build/cutfs),
#   MY_TABLES, MY_TABLE_SIZE, MY_THREADS, OUT (default /tmp/cutfs).
set -eu
MODE=${1:?usage: crash.sh dw|nodw|atomio CUTS [KILLS]}
CUTS=${2:?}; KILLS=${3:-0}
SEED=${SEED:-1}
ACKS_MAX=${ACKS_MAX:-1000}
CUTFS=${CUTFS:-build/cutfs}
OUT=${OUT:-/tmp/cutfs}
[ -x "$CUTFS" ] || { echo "FAIL: $CUTFS is not built" >&2; exit 1; }
[ "$MODE" != atomio ] || [ -x "$(dirname "$CUTFS")/atomio" ] || { echo "FAIL: the atomio command is not built" >&2; exit 1; }
command -v mariadbd >/dev/null && command -v sysbench >/dev/null \
	|| { echo "SKIP: mariadb-server or sysbench is not installed (make mariadb-deps)" >&2; exit 77; }
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "SKIP: no FUSE" >&2; exit 77; }
export MY_D=$OUT/crash-$MODE
. "$(dirname "$0")/lib.sh"
CUTFS=$(realpath "$CUTFS")
B=$MY_D/backing; M=$MY_D/mnt; ACKS=$MY_D/acks; EXP=$MY_D/expected
SB_PID=""
cleanup() {
	[ -n "$SB_PID" ] && kill -9 "$SB_PID" 2>/dev/null
	my_kill
	mountpoint -q "$M" 2>/dev/null && { sleep 0.2; fusermount3 -u "$M" || fusermount3 -uz "$M"; }
	true
}
trap cleanup EXIT
ATOMIO_CMD=$(dirname "$CUTFS")/atomio
devs_changed=0; last_dev=""
. "$(dirname "$0")/../cutfs/rounds.sh"
mnt() { cutfs_mount "$1" "$MY_D/cutfs.err" "$MY_D/recover.log"; }
umnt() { cutfs_umount; }

rm -rf "$MY_D"; mkdir -p "$B" "$M" "$ACKS"
: > "$EXP"
mnt 0
my_config "$MODE" "$M/data"
my_install
my_start || { tail "$MY_D/err.log"; die "the fresh server does not start"; }
my_prepare
my_stop
umnt
cp -a "$B" "$MY_D/pristine"
echo "crash.sh: mode $MODE, $CUTS cuts and $KILLS kills, seed $SEED, $MY_TABLES tables x $MY_TABLE_SIZE rows, $MY_THREADS threads"

ncut=0; nkill=0; fails=0; nostart=0; badtable=0; badpage=0; lost=0; torn_rounds=0; acked_total=0; kept=0; dropped=0
fail_round() { # REASON
	echo "round $r: FAIL: $1"
	fails=$((fails + 1))
	cp "$MY_D/err.log" "$MY_D/err.round$r.log" 2>/dev/null || true
	my_kill
	mountpoint -q "$M" && umnt
	rm -rf "$B"; cp -a "$MY_D/pristine" "$B"
	: > "$EXP"
}

# check ROUND: recovery and every check; 0 if all passed (else fail_round done)
check() {
	if ! my_start; then
		nostart=$((nostart + 1)); fail_round "mysqld does not start: $(grep -m1 -E 'ERROR|corrupt' "$MY_D/err.log" | cut -c1-200)"; return 1
	fi
	bad=$(my_check_tables 2>&1)
	if [ -n "$bad" ]; then
		badtable=$((badtable + 1)); fail_round "CHECK TABLE: $(echo "$bad" | head -n 3 | tr '\n' ' ')"; return 1
	fi
	my_sql -e "SELECT run, t, COUNT(*), MAX(s) FROM sbtest.ledger GROUP BY run, t" > "$MY_D/ledger.now"
	miss=$(awk 'NR == FNR { c[$1 " " $2] = $3; m[$1 " " $2] = $4; next }
		{ k = $1 " " $2; if (!(k in c) && $3 > 0) print k " acked " $3 " found none";
		  else if (k in c && (c[k] != m[k] || m[k] < $3 || m[k] > $3 + 1)) print k " acked " $3 " found " c[k] " rows up to " m[k] }' \
		"$MY_D/ledger.now" "$EXP")
	if [ -n "$miss" ]; then
		lost=$((lost + 1)); fail_round "acknowledged transactions missing: $(echo "$miss" | head -n 3 | tr '\n' ';')"; return 1
	fi
	my_stop
	bad=$(my_innochecksum)
	if [ -n "$bad" ]; then
		badpage=$((badpage + 1)); fail_round "innochecksum: $(echo "$bad" | tr '\n' ' ')"; return 1
	fi
	return 0
}

ROUNDS=$((CUTS + KILLS))
for r in $(seq 1 "$ROUNDS"); do
	# touch $MY_D/stop to end early: the crash of the last round is still checked
	[ -e "$MY_D/stop" ] && { ROUNDS=$((r - 1)); break; }
	s=$((SEED * 100000 + r))
	t0=$(date +%s)
	want=$(( (s * 2654435761) % ACKS_MAX + 50 ))  # acknowledged transactions before the crash
	mnt "$s"
	if [ "$r" -gt 1 ] && ! check; then
		mnt "$s"
	fi
	if ! my_start; then
		fail_round "mysqld does not start after a clean stop"; continue
	fi
	rm -f "$ACKS"/ack.*
	LEDGER_DIR=$ACKS LEDGER_RUN=$r my_sysbench run --threads="$MY_THREADS" --time=600 --events=0 \
		>"$MY_D/sysbench.log" 2>&1 &
	SB_PID=$!
	n=0
	for _ in $(seq 1 6000); do
		n=$(cat "$ACKS"/ack.* 2>/dev/null | wc -l)
		[ "$n" -ge "$want" ] && break
		kill -0 "$SB_PID" 2>/dev/null || break
		sleep 0.02
	done
	# the KILLS rounds spread evenly among the cuts
	if [ $((r * KILLS / ROUNDS)) -eq $(((r - 1) * KILLS / ROUNDS)) ]; then
		cutfs_cut
		how=cut; ncut=$((ncut + 1))
	else
		how=kill; nkill=$((nkill + 1))
	fi
	my_kill
	kill -9 "$SB_PID" 2>/dev/null || true; wait "$SB_PID" 2>/dev/null || true; SB_PID=""
	for f in "$ACKS"/ack.*; do
		[ -s "$f" ] || continue
		t=${f##*.}
		echo "$r $t $(tail -n 1 "$f")" >> "$EXP"
		acked_total=$((acked_total + $(tail -n 1 "$f")))
	done
	# a process crash keeps what mysqld wrote (the page cache): sync it
	# through cutfs before the unmount, which would drop it
	[ "$how" = cut ] || cutfs_sync_all
	umnt
	# the medium as the crash left it, before any recovery
	torn=$(MY_MODE=nodw MY_DATA=$B/data my_innochecksum | wc -l)
	[ "$torn" -gt 0 ] && torn_rounds=$((torn_rounds + 1))
	echo "round $r: $how after $n acknowledged transactions; page files with torn pages on the medium: $torn ($(( $(date +%s) - t0 )) s)"
done
r=$((ROUNDS + 1))
mnt "$((SEED * 100000 + r))"
check || true
mountpoint -q "$M" && umnt
echo "crash.sh: mode $MODE: $ROUNDS rounds ($ncut cuts, $nkill kills), $acked_total acknowledged transactions checked;" \
	"$fails failed rounds (mysqld did not start: $nostart, CHECK TABLE: $badtable, innochecksum: $badpage," \
	"acknowledged transactions lost: $lost); rounds that left torn pages on the medium: $torn_rounds;" \
	"unsynced sectors at the cuts: $kept kept, $dropped dropped; remounts with a new device number (mode atomio: atomio recover --force-paths): $devs_changed"
[ "$fails" -eq 0 ]
