#!/bin/sh
# Print a copy of one file of sqlite/ (the mutant's file= below) with one
# of the VFS's defences removed (a "mutant"), for
# test/t_sqlite_sim_mutants.sh (t_sqlite_sim, power cuts in the simulator)
# and test/t_sqlite_vfs_mutants.sh (the kill and process tests): the test
# named beside each mutant there must catch it.  Fails loudly when its file
# no longer has the code a mutant edits, so that a change there cannot
# silently retire a mutant.
#   test/sqlite/mutate.sh NAME      (NAME from the list below)
set -eu
name=$1
case $name in
# each database's group committed on its own, at its own phase two (as SQLite itself does in MEMORY mode)
separate) file=group.c expr='s/\t} else if \(n <= 1\) \{\n/\t} else if (1 || n <= 1) {\n/' ;;
# no markers: a database's recovery does not know that its group lies in another's log
nomarker) file=group.c expr='s/\t\tr = write_marker\(m\[i\]->db, list, len\);/\t\tr = (0 \&\& write_marker(m[i]->db, list, len));/' ;;
# the markers' names not made durable (their directory not synced)
nodirsync) file=group.c expr='s/\treturn r < 0 \? r : sync_dir_of\(d->db_path\);/\t(void)sync_dir_of;\n\treturn r;/' ;;
# the markers removed as soon as the group is committed, before the checkpoint made it home everywhere
earlyunmark) file=group.c expr='s/(\t\tcommitted = true;\n)(\t\tif \(r == 0\)\n\t\t\tr = atomio_checkpoint\(st\);)/$1\t\tfor (int j = 0; r == 0 \&\& j < n; j++)\n\t\t\tremove_marker(m[j]->db);\n$2/' ;;
# no checkpoint after the group: the markers go while it is live in the first log only
nockpt) file=group.c expr='s/(\t\tif \(r == 0\)\n\t\t\tr = )atomio_checkpoint\(st\);/${1}0;/' ;;
# the other databases' own logs not checkpointed first: an older group of one of them is replayed over this one
nopreckpt) file=group.c expr='s/if \(o && o != st && \(r = atomio_checkpoint\(o\)\) < 0\)/if (0 \&\& o \&\& o != st \&\& (r = atomio_checkpoint(o)) < 0)/' ;;
# WAL: a checkpoint's sync of the database does nothing (the WAL is reset over frames not yet in the file)
walnosync) file=io.c expr='s/\t\treturn c->db->dfd >= 0 && f_fdatasync\(c->db->dfd\) == 0 \? SQLITE_OK : SQLITE_IOERR_FSYNC;/\t\treturn SQLITE_OK;/' ;;
# WAL: a new WAL file's name not made durable (its directory not synced at its first sync)
walnodirsync) file=wal.c expr='s/\t\tsync_dir_of\(w->name\);/\t\t(void)sync_dir_of;/' ;;
# synchronous=FULL commits lazily too: a COMMIT acknowledged at FULL that a power cut takes back
fulllazy) file=group.c expr='s/\tbool lazy = fold && !to_wal && c->sync_level <= 1;/\tbool lazy = fold \&\& !to_wal;/' ;;
# the diff compares pages with the mapped file, which lacks lazy groups not yet home: bytes a lazy group changed and this one changes back are not logged
lzbase) file=group.c expr='s/\tc->base_mode = !st \|\| atomio_lazy_pending\(st, c->db->fid\) == 0 \? BASE_FILE : c->chain \? BASE_CHAIN : BASE_READ;/\tc->base_mode = BASE_FILE + 0 * (st != NULL);/' ;;
# the diff's base cache kept across another process's commit (no change-counter check): a byte that commit changed and ours changes back is not logged
bcnochain) file=group.c expr='s/\t\} else if \(!d->bc_ok \|\| ctr < 0 \|\| \(uint32_t\)ctr != d->bc_counter \+ 1\) \{/\t} else if (!d->bc_ok || ctr < 0) {/' ;;
# a journal opened without SQLITE_OPEN_CREATE (a hot one SQLite rolls back) kept in memory too
hotmem) file=journal.c expr='s/if \(!name \|\| !\(flags & SQLITE_OPEN_CREATE\) \|\| /if (!name || /' ;;
# the super-journal always in memory, also where a journal of another VFS names it
supermem) file=journal.c expr='s/\t\tif \(!j \|\| j->disk\)\n\t\t\tmem = false;/\t\tif (0 \&\& (!j || j->disk))\n\t\t\tmem = false;/' ;;
# the super-journal on disk, but the journals of ours it names left in memory (and their groups committed after its deletion)
nomembers) file=io.c expr='s/\t\tif \(arg && !super_in_memory\(arg\)\) \{/\t\tif (0 \&\& arg \&\& !super_in_memory(arg)) {/' ;;
# a group synced for a commit that then failed (no phase two) committed at the unlock, with whatever SQLite's rollback did to it since
readycommit) file=lock.c expr='s/\tready_drop\(c\);\n\tpend_clear\(&c->pend\);\n\tif \(level == SQLITE_LOCK_SHARED\)/\tif (c->ready)\n\t\tcommit_group(c, false);\n\tpend_clear(\&c->pend);\n\tif (level == SQLITE_LOCK_SHARED)/' ;;
# the group that switches a database to WAL leaves the store open and its log with live groups
noswitchdrop) file=group.c expr='s/\tif \(r == 0 && to_wal\) \{/\tif (0 \&\& r == 0 \&\& to_wal) {/' ;;
# opening a WAL file leaves this process's store open (locking_mode=EXCLUSIVE: a log beside a WAL database)
noopendrop) file=wal.c expr='s/\twal_drop_store\(d\);\n\tpthread_mutex_unlock\(&g_mu\);\n\tw->base.pMethods/\t(void)wal_drop_store;\n\tpthread_mutex_unlock(\&g_mu);\n\tw->base.pMethods/' ;;
# journal_mode=WAL over several databases (one group over them) leaves their stores and logs
nosetdrop) file=group.c expr='s/\t\tif \(to_wal\[i\]\) \{/\t\tif (0 \&\& to_wal[i]) {/' ;;
# recovery of a WAL database keeps its log (another process then needs the exclusive lock that WAL readers refuse)
norecoverremove) file=store.c expr='s/\t\t\tif \(r == 0 && header_wal\(d\)\)\n/\t\t\tif (0 \&\& r == 0 \&\& header_wal(d))\n/' ;;
# a reader does not wait for the store to settle: it may read a group a killed writer left half home
nosettle) file=lock.c expr='s/\t\tint r = atomio_settle\(st\);/\t\tint r = 0 * (int)sizeof(atomio_settle);/' ;;
# writers never hand the lock off (no turns): the writer that commits first keeps it
noturns) file=lock.c expr='s/\t\tif \(wrote && \+\+c->streak >= TURNS_STREAK && turns_released_write\(t\)\)/\t\tif (0 \&\& wrote \&\& ++c->streak >= TURNS_STREAK \&\& turns_released_write(t))/' ;;
*) echo "mutate.sh: unknown mutant '$name'" >&2; exit 2 ;;
esac
src=$(dirname "$0")/../../sqlite/$file
out=$(perl -0pe "$expr" "$src")
if [ "$out" = "$(cat "$src")" ]; then
	echo "mutate.sh: mutant '$name' no longer applies to sqlite/$file: update test/sqlite/mutate.sh" >&2
	exit 1
fi
printf '/* mutant %s of sqlite/%s: see test/sqlite/mutate.sh */\n#line 1 "sqlite/%s"\n%s\n' "$name" "$file" "$file" "$out"
