#!/bin/sh
# make install into a staging directory (PREFIX + DESTDIR, as a package build
# does), then programs built only from what pkg-config says there: one
# against libatomio.so (it must start: soname link present), one linked
# fully static with `pkg-config --static` (the private link line complete),
# one with the SQLite VFS library (atomio_sqlite.pc); then make uninstall
# leaves no file behind.  Also (issue 14 items 3-5): plain `make` builds
# `all`; a program linked against build/ with an rpath starts (the soname
# link is there); an install to another PREFIX writes a .pc naming it.
cd "$(dirname "$0")/.." || exit 1
command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: pkg-config not installed"; exit 77; }
T=$(mktemp -d /tmp/atomio-install.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
R=$T/root
P=/opt/atomio
make -s install PREFIX=$P DESTDIR="$R" >"$T/log" 2>&1 || { cat "$T/log"; fail "make install"; }
ma=$(${CC:-cc} -print-multiarch)
L=$R$P/lib${ma:+/$ma}
for f in "$L/libatomio.so.0" "$L/libatomio.so" "$L/libatomio.a" "$L/libatomio_sqlite.a" \
	"$L/pkgconfig/atomio.pc" "$L/pkgconfig/atomio_sqlite.pc" "$L/sqlite3/atomio_sqlite.so" \
	"$R$P/include/atomio.h" "$R$P/include/atomio_sqlite.h" "$R$P/bin/atomio" \
	"$R$P/share/man/man1/atomio.1" "$R$P/share/man/man7/atomio.7" \
	"$R$P/share/man/man3/atomio_open.3"; do
	[ -e "$f" ] || fail "not installed: ${f#$R}"
done
real=$(readlink "$L/libatomio.so.0")
case $real in libatomio.so.0.*.*) ;; *) fail "libatomio.so.0 -> '$real', not the real name libatomio.so.0.N.M" ;; esac
[ -f "$L/$real" ] && [ ! -L "$L/$real" ] || fail "$real is not a file"
grep -q "^libdir=$P/lib${ma:+/$ma}\$" "$L/pkgconfig/atomio.pc" || fail "atomio.pc libdir: $(grep libdir= "$L/pkgconfig/atomio.pc")"

goal=$(make -pq 2>/dev/null | sed -n 's/^\.DEFAULT_GOAL := //p')
[ "$goal" = all ] || fail "make's default goal is '$goal', not all"

export PKG_CONFIG_PATH="$L/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$R"
cat >"$T/prog.c" <<'C'
#include <atomio.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
	char log[4096], dat[4096];
	snprintf(log, sizeof(log), "%s/store.log", argv[1]);
	snprintf(dat, sizeof(dat), "%s/a.dat", argv[1]);
	struct atomio_options o = {.flags = ATOMIO_CREATE, .log_size = 1 << 20};
	atomio *st;
	int r = atomio_open(log, &o, &st);
	if (r < 0)
		return printf("atomio_open: %s\n", atomio_strerror(r)), 1;
	int f = atomio_file_open(st, dat, O_CREAT, 0644);
	if (f < 0 || atomio_pwrite(st, f, "hello", 5, 0) != 5 || atomio_close(st) < 0)
		return printf("write failed\n"), 1;
	printf("ok %d\n", argc);
	return 0;
}
C
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -o "$T/prog" "$T/prog.c" $(pkg-config --cflags --libs atomio) || fail "link with pkg-config --libs atomio"
readelf -d "$T/prog" | grep -q 'NEEDED.*\[libatomio.so.0\]' || fail "prog does not need libatomio.so.0"
out=$(LD_LIBRARY_PATH="$L" "$T/prog" "$T") || fail "prog: $out"
[ "$out" = "ok 2" ] || fail "prog printed '$out'"
# against build/ itself, as one tries before installing
rm -f "$T/store.log" "$T/a.dat"
$cc -Iinclude -o "$T/prog-build" "$T/prog.c" -Lbuild -latomio -Wl,-rpath,"$(pwd)/build" ||
	fail "link with -Lbuild -latomio"
out=$("$T/prog-build" "$T") || fail "prog linked against build/ with an rpath: $out"
# shellcheck disable=SC2046
$cc -static -o "$T/prog-static" "$T/prog.c" $(pkg-config --static --cflags --libs atomio) 2>"$T/static.log" ||
	{ cat "$T/static.log"; fail "static link with pkg-config --static --libs atomio"; }
rm -f "$T/store.log" "$T/a.dat"
out=$("$T/prog-static" "$T") || fail "prog-static: $out"

cat >"$T/sq.c" <<'C'
#include <atomio_sqlite.h>
#include <sqlite3.h>
#include <stdio.h>
int main(void)
{
	int r = atomio_sqlite_register(NULL, 0);
	printf("%s\n", r == SQLITE_OK && sqlite3_vfs_find("atomio") ? "ok" : "no vfs");
	return r != SQLITE_OK;
}
C
# shellcheck disable=SC2046
$cc -o "$T/sq" "$T/sq.c" $(pkg-config --cflags --libs atomio_sqlite) || fail "link with pkg-config --libs atomio_sqlite"
out=$(LD_LIBRARY_PATH="$L" "$T/sq") || fail "sq: $out"
# shellcheck disable=SC2046
$cc -o "$T/sq-static" "$T/sq.c" $(pkg-config --static --cflags --libs atomio_sqlite | sed 's/-latomio /-l:libatomio.a /') ||
	fail "link with pkg-config --static --libs atomio_sqlite"
out=$("$T/sq-static") || fail "sq-static: $out"

# another PREFIX, the build unchanged: its .pc files name it
R2=$T/root2
make -s install PREFIX=/usr/local/other DESTDIR="$R2" >"$T/log" 2>&1 || { cat "$T/log"; fail "make install PREFIX=/usr/local/other"; }
for pc in atomio atomio_sqlite; do
	f=$R2/usr/local/other/lib${ma:+/$ma}/pkgconfig/$pc.pc
	grep -q "^prefix=/usr/local/other\$" "$f" || fail "$pc.pc after a second install: $(grep prefix= "$f")"
done
rm -rf "$R2"

installed=$(cd "$R" && find . ! -type d | sort | tr '\n' ' ')
make -s uninstall PREFIX=$P DESTDIR="$R" >"$T/log" 2>&1 || { cat "$T/log"; fail "make uninstall"; }
left=$(find "$R" ! -type d)
[ -z "$left" ] || fail "left after make uninstall: $left"
echo "install ok: $installed"
echo "linked and ran: prog (pkg-config --libs atomio), prog-static (--static), prog-build (-Lbuild, rpath), sq, sq-static (atomio_sqlite); a second PREFIX's .pc names it; uninstall left nothing"
