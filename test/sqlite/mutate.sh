#!/bin/sh
# Print a copy of sqlite/vfs.c with one defence of its transactions over
# several databases removed (a "mutant"), for test/t_sqlite_sim_mutants.sh:
# t_sqlite_sim (power cuts in the simulator) must catch every one.  Fails
# loudly when vfs.c no longer has the code a mutant edits, so that a change
# there cannot silently retire a mutant.
#   test/sqlite/mutate.sh NAME      (NAME from the list below)
set -eu
name=$1
case $name in
# each database's group committed on its own, at its own phase two (as SQLite itself does in MEMORY mode)
separate)  expr='s/\tif \(n <= 1 \|\| !t_ready \|\| t_ready->rnext == NULL\)\n/\tif (1 || n <= 1 || !t_ready || t_ready->rnext == NULL)\n/' ;;
# no markers: a database's recovery does not know that its group lies in another's log
nomarker)  expr='s/\t\tr = write_marker\(m\[i\]->db, list, len\);/\t\tr = (0 \&\& write_marker(m[i]->db, list, len));/' ;;
# the markers' names not made durable (their directory not synced)
nodirsync) expr='s/\treturn r < 0 \? r : sync_dir_of\(d->db_path\);/\t(void)sync_dir_of;\n\treturn r;/' ;;
# the markers removed as soon as the group is committed, before the checkpoint made it home everywhere
earlyunmark) expr='s/(\t\tcommitted = true;\n)(\t\tif \(r == 0\)\n\t\t\tr = atomio_checkpoint\(st\);)/$1\t\tfor (int j = 0; r == 0 \&\& j < n; j++)\n\t\t\tremove_marker(m[j]->db);\n$2/' ;;
# no checkpoint after the group: the markers go while it is live in the first log only
nockpt)    expr='s/(\t\tif \(r == 0\)\n\t\t\tr = )atomio_checkpoint\(st\);/${1}0;/' ;;
# the other databases' own logs not checkpointed first: an older group of one of them is replayed over this one
nopreckpt) expr='s/if \(o && o != st && \(r = atomio_checkpoint\(o\)\) < 0\)/if (0 \&\& o \&\& o != st \&\& (r = atomio_checkpoint(o)) < 0)/' ;;
*) echo "mutate.sh: unknown mutant '$name'" >&2; exit 2 ;;
esac
src=$(dirname "$0")/../../sqlite/vfs.c
out=$(perl -0pe "$expr" "$src")
if [ "$out" = "$(cat "$src")" ]; then
	echo "mutate.sh: mutant '$name' no longer applies to sqlite/vfs.c: update test/sqlite/mutate.sh" >&2
	exit 1
fi
printf '/* mutant %s of sqlite/vfs.c: see test/sqlite/mutate.sh */\n#line 1 "sqlite/vfs.c"\n%s\n' "$name" "$out"
