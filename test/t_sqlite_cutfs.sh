#!/bin/bash
# Power cuts under SQLite through the VFS (issue 35): the databases, their
# logs, the WAL and its index, the markers and journals all on cutfs
# (cutfs/cutfs.c, tear mode: unsynced sectors reach the medium or not, one
# by one).  Each round: build/sqlite/sqcut writes transactions over a.db and
# b.db (rollback mode: one group over both) and w.db (WAL), some larger
# than the 1 MiB log; the power is cut after a seeded number of
# acknowledged COMMITs; remounted, sqcut check opens each database through
# the VFS (recovery) and checks SQLite's promise: every acknowledged COMMIT
# whole in every database it wrote, none half, nothing unacknowledged but
# the one in flight, that one in both a and b or neither.
#   SQCUT_SEED=N to reproduce (default $ATOMIO_SEED, else 1),
#   SQCUT_ROUNDS=N (default 3; make sqlite-x runs more).
set -eu
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
for b in build/cutfs build/sqlite/sqcut; do [ -x $b ] || fail "$b is not built"; done
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 is not installed (fuse3)"
SEED=${SQCUT_SEED:-${ATOMIO_SEED:-1}}
ROUNDS=${SQCUT_ROUNDS:-3}
echo "seed $SEED (SQCUT_SEED=$SEED or ATOMIO_SEED=$SEED to repeat), rounds $ROUNDS"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-sqcut-XXXXXX")
B=$T/backing; M=$T/mnt
mkdir -p "$B" "$M"
writer=""
cleanup() {
	[ -n "$writer" ] && kill -9 "$writer" 2>/dev/null
	mountpoint -q "$M" 2>/dev/null && fusermount3 -u "$M"
	[ -n "${ATOMIO_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
mnt() { build/cutfs --mode tear --seed "$1" "$B" "$M" 2>>"$T/cutfs.err"; }
umnt() { fusermount3 -u "$M"; }
mnt "$SEED" || skip "cannot mount a FUSE filesystem: $(tail -n 1 "$T/cutfs.err")"
umnt
total=0; torn=0; kept=0
for r in $(seq 1 "$ROUNDS"); do
	s=$((SEED * 1000 + r))
	want=$(( ((s % 1000003) * 2654435761) % 40 + 1 ))
	mkdir -p "$B/db"
	mnt "$s"
	: > "$T/acks" # there before the loop reads it (the writer's redirection is its own)
	build/sqlite/sqcut write "$M/db" "$s" > "$T/acks" 2>"$T/writer.err" &
	writer=$!
	i=0
	while [ "$(wc -l < "$T/acks")" -lt "$want" ]; do
		kill -0 "$writer" 2>/dev/null || fail "round $r: the writer died: $(cat "$T/writer.err")"
		i=$((i + 1)); [ $i -lt 12000 ] || fail "round $r: $want transactions not acknowledged in time"
		sleep 0.01
	done
	echo cut > "$M/.cutfs"
	torn=$((torn + $(sed -n 's/^dropped //p' "$M/.cutfs")))
	kept=$((kept + $(sed -n 's/^kept //p' "$M/.cutfs")))
	kill -9 "$writer" 2>/dev/null || true
	wait "$writer" 2>/dev/null || true
	writer=""
	umnt
	mnt "$s"
	out=$(build/sqlite/sqcut check "$M/db" "$s" "$T/acks" 2>&1) || fail "round $r (seed $s): $out"
	umnt
	acked=$(wc -l < "$T/acks")
	total=$((total + acked))
	echo "round $r: cut after $acked acknowledged COMMITs: $(echo "$out" | tail -n 1)"
	rm -rf "$B/db"
done
[ "$torn" -gt 0 ] && [ "$kept" -gt 0 ] || fail "the cuts dropped $torn and kept $kept unsynced sectors"
echo "ok: $ROUNDS cuts under SQLite, $total acknowledged COMMITs checked; $kept unsynced sectors kept, $torn dropped at the cuts"
