#!/bin/sh
# The preload's *64 wrappers (pread64, pwrite64, lseek64, ftruncate64,
# fallocate64, mmap64, sendfile64, ...) and sync_file_range,
# copy_file_range, splice take off64_t as libc declares them; on a 64-bit
# build off_t is the same type and a wrong prototype compiles.  This compiles
# the library for i386 (syntax only: no 32-bit libc is needed, only gcc's
# -m32 and the x86 headers, which serve both widths) where off_t is 32 bits,
# so a wrapper declared with off_t conflicts with libc's declaration and
# fails.  Skips where the compiler cannot target i386 at all.
set -eu
CC=${CC:-cc}
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-preload-lfs-XXXXXX")
trap 'rm -rf "$T"' EXIT
# Debian's x86_64 headers without the i386 multilib: bits/ lives in the
# multiarch directory and gnu/stubs-32.h is missing (it lists only stubs).
mkdir -p "$T/stub/gnu"
: >"$T/stub/gnu/stubs-32.h"
MA=$($CC -print-multiarch 2>/dev/null || true)
FLAGS="-m32 -fsyntax-only -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Isrc -Ipreload -Isqlite
	-Wall -Wextra -Werror -Wno-unused-parameter -Wno-psabi -idirafter /usr/include/$MA -idirafter $T/stub"
printf '#include <unistd.h>\n_Static_assert(sizeof(off_t) == 4, "off_t");\n' >"$T/probe.c"
# shellcheck disable=SC2086
if ! $CC $FLAGS "$T/probe.c" 2>/dev/null; then
	echo "skip: $CC cannot compile for i386 with a 32-bit off_t here"
	exit 0
fi
# shellcheck disable=SC2086
$CC $FLAGS preload/*.c || { echo "FAIL: the preload does not compile with a 32-bit off_t" >&2; exit 1; }
echo ok
