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
resize)   file=engine_plain.c ; expr='s/(if \(t->segs\[j\]\.kind != SEG_WRITE\)\n\t+)__atomic_store_n\(&f->resized, true, __ATOMIC_RELEASE\);/${1}continue;/' ;; # a size change is not synced by the checkpoint (its file not flagged)
ckptsync) file=checkpoint.c ; expr='s/int r = sync_one\(st, f, resized\);/int r = 0; (void)sync_one;/' ;; # the checkpoint frees the log before home data is durable
dirsync)  file=files.c      ; expr='s/r = dir \? sys_fsync_dir\(dir\) : -ENOMEM;/r = 0;/' ;; # a new data file's name is not made durable
bgsync)   file=checkpoint.c ; expr='s/(int r = )sync_files\(st\);(\n\tif \(r == 0\)\n\t\tr = log_write_sb\(st, cut_off)/${1}0;$2/' ;; # a background checkpoint moves the head before the home data is durable
guardall) file=fastpath.c   ; expr='s/for \(uint64_t c = c0; c <= c1; c\+\+\)\n(\t+)guard_put/for (uint64_t c = c0; c <= c1 \&\& !g->all; c++)\n${1}guard_put/' ;; # the fast-path guard forgets records logged under a live size change (the bug 7e792ba fixed)
bgcut)    file=checkpoint.c ; expr='s/uint64_t cut_seq = st->home_seq, cut_off = st->home_off;/uint64_t cut_seq = st->next_seq, cut_off = st->tail % st->area_size;/' ;; # a background checkpoint cuts after batches whose home writes are not done (not flagged for its sync)
sfrtrust) file=writeback.c  ; expr='s/(atomic_fetch_add\(&st->stats\.bytes_written_back, end - v\[i\]\.off\);)/$1\n\t\t\t__atomic_store_n(\&f->dirty, false, __ATOMIC_RELEASE);/' ;; # an early write-back (sync_file_range) is taken for durability: the checkpoint skips the file's fdatasync
zeroover) file=commit.c    ; expr='s/\t\tif \(b->off \+ len > st->zero_lo\)\n\t\t\tst->zero_lo = b->off \+ len;\n//' ;; # a batch written beyond the new log's zeroed part does not keep the lazy zeroing above it: the zeros overwrite records
*) echo "mutate.sh: unknown mutant '$name'" >&2; exit 2 ;;
esac
src=$(dirname "$0")/../../src/$file
out=$(perl -0pe "$expr" "$src")
if [ "$out" = "$(cat "$src")" ]; then
	echo "mutate.sh: mutant '$name' no longer applies to src/$file: update test/crash/mutate.sh" >&2
	exit 1
fi
printf '/* mutant %s of src/%s: see test/crash/mutate.sh */\n#line 1 "src/%s"\n%s\n' "$name" "$file" "$file" "$out"
