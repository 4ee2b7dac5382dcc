#!/bin/sh
# Print a copy of one core source file with one crash-safety defence removed
# (a "mutant"), for test/t_crash_mutants.sh: the crash simulator must catch
# every one.  Fails loudly when the source no longer has the line a mutant
# edits, so that a change in src/ cannot silently retire a mutant.
#   test/crash/mutate.sh NAME      (NAME from the list below)
set -eu
name=$1
case $name in
seq)      file=codec.c      ; expr='s/\tif \(h->seq != x->seq\)\n\t\treturn REC_WRONG_SEQ;\n//' ;;            # a record of an earlier lap of the log is replayed
epoch)    file=codec.c      ; expr='s/\tif \(h->epoch != x->epoch\)\n\t\treturn REC_STALE;\n//' ;;    # a record of an earlier open (epoch) is replayed
csum)     file=recover.c    ; expr='s/if \(sum != h\.csum\)/if (0)/' ;; # a torn record is replayed
resync)   file=recover.c    ; expr='s@(\t\tif \(r < 0\)\n\t\t\treturn r;\n\t\tif \(r == 0\) \{\n\t\t\t\*stop = at;\n\t\t\tbreak;\n\t\t\})@\t\tfor (uint64_t q = pos + 8; r == 0 \&\& q + REC_HDR <= st->area_size \&\& q < pos + 65536; q += 8)\n\t\t\tif ((r = read_record(rc, q, seq + 1, \&rec)) == 1) {\n\t\t\t\tseq++;\n\t\t\t\tpos = q;\n\t\t\t}\n$1@' ;; # recovery skips a torn record to a valid one after it
rfsync)   file=recover.c    ; expr='s/r = sys_fsync_full\(rc\.fds\[id\]\);/r = 0;/' ;; # replayed data not synced before the log is emptied
dsync)    file=engine_plain.c ; expr='s/return sys_pwrite_durable\(st->log_fd, buf, len, \(off_t\)off\);/return sys_pwrite_full(st->log_fd, buf, len, (off_t)off, 0);/' ;; # records not durable before home writes and the ack
resize)   file=engine_plain.c ; expr='s/(if \(g\[i\]\.segs\[j\]\.kind != SEG_WRITE\)\n\t+)atomic_fetch_or\(&sh->fresized\[id \/ 64\], 1ull << \(id % 64\)\);/${1}continue;/' ;; # a size change is not synced by the checkpoint (its file not flagged)
ckptsync) file=checkpoint.c ; expr='s/int r = sync_one\(st, f, resized \|\| all\);/int r = 0; (void)sync_one;/' ;; # the checkpoint frees the log before home data is durable
dirsync)  file=files.c      ; expr='s/r = dir \? sys_fsync_dir\(dir\) : -ENOMEM;/r = 0;/' ;; # a new data file's name is not made durable
bgsync)   file=checkpoint.c ; expr='s/(wb_drain\(st\);\n\t\tfd_use_begin\(st\);\n\t\tr = )sync_files\(st, top, all, false\);/${1}0;/' ;; # a background checkpoint moves the head before the home data is durable
guardall) file=fastpath.c   ; expr='s/for \(uint64_t k = c0; k <= c1; k\+\+\)\n(\t+)guard_put/for (uint64_t k = c0; k <= c1 \&\& !guard_seq(st, s->file, GUARD_WHOLE); k++)\n${1}guard_put/' ;; # the fast-path guard forgets records logged under a live size change (the bug 7e792ba fixed)
bgcut)    file=checkpoint.c ; expr='s/uint64_t cut_seq = S->home_seq, cut_off = S->home_off;/uint64_t cut_seq = S->next_seq, cut_off = S->tail % st->area_size;/' ;; # a background checkpoint cuts after batches whose home writes are not done (not flagged for its sync)
sfrtrust) file=writeback.c  ; expr='s/(atomic_fetch_add\(&st->sh->stats\.bytes_written_back, end - v\[i\]\.off\);)/$1\n\t\t\t\tatomic_fetch_and(\&st->sh->fdirty[v[i].file \/ 64], ~(1ull << (v[i].file % 64)));/' ;; # an early write-back (sync_file_range) is taken for durability: the checkpoint skips the file's fdatasync
zeroover) file=commit.c    ; expr='s/\t\tif \(b->off \+ len > S->zero_lo\)\n\t\t\tS->zero_lo = b->off \+ len;\n//' ;; # a batch written beyond the new log's zeroed part does not keep the lazy zeroing above it: the zeros overwrite records
# Defences of a store shared by several processes (src/commit.c, ADOPTION;
# src/checkpoint.c), caught with procs=1,kill_pct (crashsim.h, SEVERAL PROCESSES):
pad)      file=commit.c     ; expr='s/r = nrec \? log_write_pad\(st, off, len, seq0, nrec\) : 0;/r = 0; (void)off, (void)len, (void)seq0, (void)nrec;/' ;; # a dead leader's log space is not padded: the log ends where its write did not land, and later groups are lost
paddsync) file=logfile.c    ; expr='s/int r = sys_pwrite_durable\(st->log_fd, st->pad_buf, st->block, \(off_t\)\(st->area_off \+ off\)\);/int r = sys_pwrite_full(st->log_fd, st->pad_buf, st->block, (off_t)(st->area_off + off), 0);/' ;; # the pad is written but not made durable before later groups are acknowledged
homeredo) file=commit.c     ; expr='s/(\t\tr = view_build\(st, v, n, vw\);\n\t\tif \(r == 0\)\n\t\t\t)r = engine_home\(st, vw->g, vw->n\);/${1}r = 0;/' ;; # a dead leader's home writes are not done again: its batch is acknowledged half home
reconcile) file=checkpoint.c ; expr='s/(int checkpoint_reconcile_locked_drops\(atomio \*st\)\n\{\n)/${1}\tst->S->sb_stale = 0;\n\treturn 0;\n/' ;; # after a checkpointer died, the superblock it may have written is not read back: records go where recovery will not look
sbsync)   file=checkpoint.c ; expr='s/r = sys_fdatasync_full\(st->log_fd\);\n(\t\tif \(r < 0\)\n\t\t\tst_err\(st, "%s: syncing the superblock)/r = 0;\n$1/' ;; # the superblock a dead checkpointer wrote is read back but not made durable before it is counted on (the bug fixed with t_reconcile_durable)
syncall)  file=checkpoint.c ; expr='s/\*all = S->ckpt_lost;/*all = 0;/' ;; # after a checkpointer died, the next checkpoint syncs only flagged files: those whose flags it took are never synced
adoptlog) file=commit.c     ; expr='s/\tif \(state == BAT_TAKEN \|\| state == BAT_LOGGING \|\| state == BAT_LOGGED\) \{\n/\tif (state == BAT_LOGGING) {\n\t\tif (!shm_bat(st->sh, k)->fast)\n\t\t\tst->S->log_inflight--;\n\t\twhile (st->S->home_next != k)\n\t\t\tif (!st->S->orphans || !adopt_below_locked_drops(st, k))\n\t\t\t\tshm_wait_locked_drops(st, \&st->sh->ev_home);\n\t\tst->S->bstate[k % SHM_BATCHES] = BAT_HOMING;\n\t\tr = adopt_home_locked_drops(st, k, \&vw);\n\t\thome_done_locked(st, k, \&vw, r, false);\n\t\tadopt_finish_locked(st, k, r < 0 ? ATOMIO_EUNKNOWN : 0, true);\n\t} else if (state == BAT_TAKEN || state == BAT_LOGGED) {\n/' ;; # an adopter takes a batch whose dead leader never finished its log write for logged: redoes its home writes and acknowledges its groups, the record never known durable (or never written)
padturn)  file=commit.c     ; expr='s/(\t\tr = adopt_pad_locked_drops\(st, k, state\);\n)(.*?)(\t\twhile \(st->S->home_next != k\) \{\n.*?\n\t\t\}\n)\t\thome_done_locked\(st, k, &vw, r < 0 \? r : 0, true\);\n/$3\t\thome_done_locked(st, k, \&vw, 0, true);\n$1$2/s' ;; # a dead leader's home turn is passed on before its pad is written: later batches go home and are acknowledged while the log still ends at the dead leader's torn or missing records
ckptany)  file=checkpoint.c ; expr='s/struct afile \*f = file_get_any\(st, id, &err\);/struct afile *f = file_get(st, (int)id);\n\t\tif (!f)\n\t\t\tcontinue;/; s/struct afile \*f = file_get_any\(st, id, &gerr\);/struct afile *f = file_get(st, (int)id);\n\t\t(void)gerr;/' ;; # a checkpoint syncs only the files its own process has open: another process's home writes to a file it never opened stay in the page cache while the log space that could redo them is freed
# Defences of lazy groups (issue 36: src/commit.c LAZY GROUPS, src/lazy.c),
# caught with lazy_pct (crashsim.h, LAZY GROUPS):
lzhome)   file=commit.c     ; expr='s/(\tr = commit_submit_and_lock\(tx, SUBMIT_LAZY\);\n\tif \(r < 0\)\n\t\treturn r;\n)/$1\t{\n\t\tstruct view hv = {0};\n\t\tuint32_t hi1 = tx->ent;\n\t\tif (view_build(st, \&hi1, 1, \&hv) == 0)\n\t\t\t(void)engine_home(st, hv.g, hv.n);\n\t\tview_free(\&hv);\n\t}\n/' ;; # a lazy group is written home at its commit, before any record of it (I2)
lzsync)   file=commit.c     ; expr='s/(\tfor \(;;\) \{\n\t\tS = st->S;\n\t\tif \()!lz_pending_locked\(st, target\)(\) \{)/$1!S->q_head || ENT(S->q_head)->ticket > target$2/' ;; # a sync returns once its groups are batched, not once they are durable
lzread)   file=lazy.c       ; expr='s/(\t\t\tconst struct lz_seg \*s = shm_lzseg\(sh, c\);\n)(\t\t\tuint64_t lo = s->off > po)/$1\t\t\tif (atomic_load(\&shm_ent(sh, s->ent)->owner) != st->me)\n\t\t\t\tcontinue;\n$2/' ;; # a read misses the lazy groups of other processes (the overlay takes only its own)
lzchunk)  file=lazy.c       ; expr='s/\t\t\tchunks_add_locked\(sh, d\[j\]\.file, d\[j\]\.off, d\[j\]\.len, 1\);/\t\t\t(void)0;/' ;; # the chunk filter is not raised as a write is indexed: a read of its chunk skips the overlay
lzorder)  file=commit.c     ; expr='s/(\t    )(bat_visible_locked\(st, k\)\) \{\n\t\tadopt_relog_locked_drops)/${1}0 \&\& $2/' ;; # a dead leader's batch of visible groups is padded and requeued, not re-logged in place: later lazy groups, logged meanwhile, come before them (I1)
*) echo "mutate.sh: unknown mutant '$name'" >&2; exit 2 ;;
esac
src=$(dirname "$0")/../../src/$file
out=$(perl -0pe "$expr" "$src")
if [ "$out" = "$(cat "$src")" ]; then
	echo "mutate.sh: mutant '$name' no longer applies to src/$file: update test/crash/mutate.sh" >&2
	exit 1
fi
printf '/* mutant %s of src/%s: see test/crash/mutate.sh */\n#line 1 "src/%s"\n%s\n' "$name" "$file" "$file" "$out"
