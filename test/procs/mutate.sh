#!/bin/sh
# Print a copy of one core source file with one of the shared store's
# defences removed (a "mutant"), for test/t_procs_mutants.sh: the test named
# beside each must catch it.  Fails loudly when the source no longer has the
# lines a mutant edits, so that a change in src/ cannot silently retire it.
#   test/procs/mutate.sh NAME
set -eu
name=$1
case $name in
# t_adopt: a batch whose leader died before its home writes keeps its torn or
# whole records in the log: recovery stops at them, or replays a group whose
# owner was never told it committed, after later ones
pad)       file=commit.c ; expr='s/r = nrec \? log_write_pad\(st, off, len, seq0, nrec\) : 0;/r = 0; (void)off, (void)len, (void)seq0, (void)nrec;/' ;;
# t_adopt: a batch whose leader died half-way through its home writes is
# handed back without them: half a group in the files
homeredo)  file=commit.c ; expr='s/(\t\tr = view_build\(st, v, n, vw\);\n\t\tif \(r == 0\)\n\t\t\t)r = engine_home\(st, vw->g, vw->n\);/${1}r = 0;/' ;;
# t_adopt: a full checkpoint's superblock written by a process that died is
# not read back: new records go where recovery does not look
reconcile) file=checkpoint.c ; expr='s/\tS->sb_stale = 0;\n/\tS->sb_stale = 0;\n\tif (1)\n\t\treturn 0;\n/' ;;
# t_ckpt_dead_full: the superblock read back is taken for known when its
# generation is: a holder that died after publishing its copy and before
# moving the ring leaves the tail where recovery does not look
reconcilegen) file=checkpoint.c ; expr='s/\tS->sb_stale = 0;\n/\tS->sb_stale = 0;\n\tif (sb.generation <= st->sh->sb.generation)\n\t\treturn 0;\n/' ;;
# t_ckpt_dead_full: a leader places records without reading the superblock
# back while a new checkpoint, which reads it too, runs
leaderskip) file=commit.c ; expr='s/\t\tif \(S->sb_stale\) \{/\t\tif (S->sb_stale \&\& !S->ckpt_owner) {/' ;;
# t_adopt (its timeout): a dead process counts as alive: what it held is never taken over
reap)      file=shm.c ; expr='s/return sys_ofd_lock\(st->log_fd, SYS_LK_TEST, F_WRLCK, LK_PROC \+ slot1 - 1, 1\) != 0;/return true;/' ;;
# t_shm_dead: the state is changed in place: a holder that dies leaves it half changed
inplace)   file=shm.c ; expr='s/\tsh->s\[1 - c\] = sh->s\[c\];\n\tst->S = &sh->s\[1 - c\];/\tst->S = \&sh->s[c];/' ;;
# t_shm_dead: the entries a dead holder was queueing are not put right: one
# marked queued but in no queue is never committed nor freed
normalize) file=shm.c ; expr='s/\tif \(dead\) \{\n\t\tnormalize_locked\(st\);/\tif (dead) {\n\t\tif (0)\n\t\t\tnormalize_locked(st);/' ;;
*) echo "mutate.sh: unknown mutant '$name'" >&2; exit 2 ;;
esac
src=$(dirname "$0")/../../src/$file
out=$(perl -0pe "$expr" "$src")
if [ "$out" = "$(cat "$src")" ]; then
	echo "mutate.sh: mutant '$name' no longer applies to src/$file: update test/procs/mutate.sh" >&2
	exit 1
fi
printf '/* mutant %s of src/%s: see test/procs/mutate.sh */\n#line 1 "src/%s"\n%s\n' "$name" "$file" "$file" "$out"
