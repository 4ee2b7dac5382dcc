#!/bin/sh
# The man pages: every function the libraries export (src/libatomio.map,
# sqlite/libatomio_sqlite.map but SQLite's extension entry points) has a
# section-3 page, and every page a function; each full page has NAME,
# SYNOPSIS, DESCRIPTION, RETURN VALUE, NOTES and SEE ALSO, its SEE ALSO names
# pages that exist here (or the system's sections 1-2), and `man -l` renders
# every page (atomio.1 and atomio.7 too) without a warning.
cd "$(dirname "$0")/.." || exit 1
command -v man >/dev/null 2>&1 || { echo "SKIP: man (man-db) not installed"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
syms=$(sed -n 's/^[[:space:]]*\(atomio_[a-z_]*\);$/\1/p' src/libatomio.map sqlite/libatomio_sqlite.map | sort -u)
[ "$(echo "$syms" | wc -l)" -ge 20 ] || bad "too few symbols read from the maps: $syms"
for s in $syms; do
	[ -f "man/$s.3" ] || bad "exported $s has no man/$s.3"
done
for p in man/*.3; do
	n=$(basename "$p" .3)
	echo "$syms" | grep -qx "$n" || bad "$p documents $n, which no library exports"
done
[ -f man/atomio.7 ] || bad "no atomio(7)"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
# .so links resolve relative to the directory man runs in, as under MANDIR.
mkdir -p "$T/man1" "$T/man3" "$T/man7"
cp man/*.1 "$T/man1/"; cp man/*.3 "$T/man3/"; cp man/*.7 "$T/man7/"
n=0
for p in man/*.1 man/*.3 man/*.7; do
	sec=${p##*.}
	f=$T/man$sec/$(basename "$p")
	if ! head -n 1 "$p" | grep -q '^\.so '; then
		for h in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" NOTES "SEE ALSO"; do
			case $sec/$h in 1/RETURN*|7/SYNOPSIS|7/RETURN*|7/NOTES|1/NOTES) continue ;; esac
			grep -q "^\.SH \"\?$h\"\?\$" "$p" || bad "$p has no $h section"
		done
		# SEE ALSO: our pages must exist
		sed -n '/^\.SH "\?SEE ALSO/,/^\.SH/p' "$p" | sed -n 's/^\.BR \([a-z_0-9]*\) (\([0-9]\)).*/\1.\2/p' |
			while read -r ref; do
				case $ref in atomio*) [ -f "man/$ref" ] || echo "FAIL: $p: SEE ALSO names $ref, not in man/" ;; esac
			done | grep . && fail=1
	fi
	w=$(cd "$T" && LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=mac,font,escape,char,number,range -E UTF-8 -l "man$sec/$(basename "$p")" 2>&1 >/dev/null)
	[ -z "$w" ] || bad "man -l $p: $w"
	out=$(cd "$T" && LC_ALL=C.UTF-8 MANWIDTH=80 man -E UTF-8 -l "man$sec/$(basename "$p")" 2>/dev/null | wc -l)
	[ "$out" -ge 10 ] || bad "man -l $p rendered only $out lines"
	n=$((n + 1))
done
# What docs/API.md documents, the pages say too (issue 12: the pages had
# kept codes and limits from before it): every atomio code and errno that a
# section names from its "Errors" on appears in one of the section's pages;
# every ATOMIO_E* code of atomio.h in atomio_strerror(3); every counter of
# struct atomio_stats in atomio_stats(3).
has() { # TOKEN FILE...: TOKEN as a word in one of the files (font escapes aside)
	t=$1; shift
	for pg in "$@"; do
		sed 's/\\f[BIRP]//g; s/\\-/-/g' "$pg" | grep -qE "(^|[^A-Za-z0-9_])$t([^A-Za-z0-9_]|\$)" && return 0
	done
	return 1
}
awk '/^## /{ sec = substr($0, 4); on = 0 } /Errors/{ on = 1 } on && sec != "" { print sec "|" $0 }' docs/API.md |
	while IFS='|' read -r sec line; do
		pages=""
		for f in $(echo "$sec" | tr -d ','); do
			[ -f "man/$f.3" ] && pages="$pages man/$f.3"
		done
		[ -n "$pages" ] || continue
		for t in $(echo "$line" | grep -oE 'ATOMIO_E[A-Z]+|-E[A-Z0-9]+' | sed 's/^-//'); do
			# shellcheck disable=SC2086
			has "$t" $pages || echo "FAIL: docs/API.md, $sec: $t is not in$pages"
		done
	done | sort -u | grep . && fail=1
for t in $(sed -n 's/^#define \(ATOMIO_E[A-Z]*\) (-[0-9]*).*/\1/p' include/atomio.h); do
	has "$t" man/atomio_strerror.3 || bad "include/atomio.h's $t is not in man/atomio_strerror.3"
	has "$t" docs/API.md || bad "include/atomio.h's $t is not in docs/API.md"
done
for c in $(sed -n '/^struct atomio_stats {/,/^};/s/^[[:space:]]*uint64_t \([a-z_]*\)[;[].*/\1/p' include/atomio.h); do
	[ "$c" = reserved ] && continue
	has "$c" man/atomio_stats.3 || bad "struct atomio_stats's $c is not in man/atomio_stats.3"
done
[ $fail -eq 0 ] && echo "man ok: $n pages, $(echo "$syms" | wc -w) exported functions"
exit $fail
