#!/bin/sh
# What the README, the guides (docs/*.md) and the man pages name must exist,
# so that a renamed target, option, file or flag fails here rather than
# misleading a reader (t_readme.sh runs the commands they show):
#  - every `make TARGET` in the guides' code names a target of the Makefile, and every VAR=value
#    given to make is a variable the Makefile, mk/ or scripts/ use;
#  - every option of an `atomio COMMAND ...` is in that command's --help;
#  - every file named in the tree's own directories (test/, src/, tools/,
#    ...) exists (a glob or src/codec.[ch] must match something), and every test
#    named t_NAME has a source test/t_NAME.{c,sh} or test/sqlite/t_NAME.c;
#  - every ATOMIO_* name, atomio_*= option (fio's, SQLite's URI) and
#    atomio_* function is spelled somewhere in the sources;
#  - every reference to a section (a guide's or the README's name, a comma
#    and the section's title in quotes) in the guides, man pages, tests,
#    tools and build files names a heading or a bold lead-in of that file
#    (src/, include/, preload/, sqlite/ and the reference guides API.md,
#    FORMAT.md and INTERNALS.md are not checked: their references are
#    updated with their code).
cd "$(dirname "$0")/.." || exit 1
[ -x build/atomio ] || { echo "FAIL: build/atomio first (make)"; exit 1; }
T=$(mktemp -d /var/tmp/atomio-docs.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0 n=0
bad() { echo "FAIL: $*"; fail=1; }
files() { # the tree's files (without git: every file but build/)
	git ls-files 2>/dev/null | grep . || find . -type f ! -path './build/*' ! -path './.git/*' | sed 's|^\./||'
}
DOCS="README.md docs/*.md"
MAN="man/*.1 man/*.3 man/*.7"
# Commands as the reader sees them, one per line after the file they came
# from: inline `spans`, the lines of ```sh blocks (comments cut off) and the
# "$ " lines of other blocks (transcripts; their output and listings are not
# commands).
for f in $DOCS; do
	awk -v f="$f" '/^```/ { if (inb) inb = 0; else { inb = 1; sh = ($0 == "```sh") } next }
		inb && sh { l = $0; sub(/[ \t]+#.*/, "", l); print f "\t" l; next }
		inb { if (sub(/^\$ /, "")) print f "\t" $0; next }
		{ s = $0; while (match(s, /`[^`]+`/)) { print f "\t" substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) } }' "$f"
done >"$T/code"
# man pages: their text, font escapes removed
for f in $MAN; do sed '/^\.TH /d; s/\\f[BIRP]//g; s/\\-/-/g' "$f" | sed "s|^|$f	|"; done >"$T/man"

# 1. make targets and variables
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -qp 2>/dev/null | awk -F: '/^[A-Za-z0-9][^$#\/\t=% ]*:([^=]|$)/ { print $1 }' | sort -u >"$T/targets"
grep -q '^check$' "$T/targets" || bad "could not read the Makefile's targets"
cut -f2- "$T/code" | grep -oE '(^|[^A-Za-z0-9_-])make( -[a-zA-Z]+)* [a-z][a-z0-9-]*( [A-Z_]+=[^ `]*)*' | sed 's/^[^m]*make//' |
	while read -r line; do
		set -- $line
		while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
		[ $# -gt 0 ] || continue
		grep -qx "$1" "$T/targets" || echo "FAIL: documented 'make $1': no such target"
		shift
		for v in "$@"; do
			v=${v%%=*}
			grep -qw "$v" Makefile mk/*.mk scripts/* test/*.sh 2>/dev/null || echo "FAIL: documented make variable $v: not used by the Makefile, mk/ or scripts/"
		done
		echo "ok"
	done >"$T/r1"
! grep -q FAIL "$T/r1" || { grep FAIL "$T/r1" | sort -u; fail=1; }
n=$((n + $(grep -c '^ok' "$T/r1")))

# 2. options of the atomio command
for c in probe bench verify dump recover; do build/atomio $c --help >"$T/help.$c" 2>&1; done
cut -f2- "$T/code" "$T/man" | grep -oE '(^|[^a-z_/-])atomio (probe|bench|verify|dump|recover)( [^`|;&]*)?' | sed 's/^[^a]*atomio //' |
	while read -r c rest; do
		for o in $(printf '%s\n' "$rest" | grep -oE '(^| )--[a-z][a-z-]*' | tr -d ' '); do
			grep -qe "$o\b" "$T/help.$c" || echo "FAIL: documented 'atomio $c ... $o': not in atomio $c --help"
			echo "ok"
		done
	done >"$T/r2"
! grep -q FAIL "$T/r2" || { grep FAIL "$T/r2" | sort -u; fail=1; }
n=$((n + $(grep -c '^ok' "$T/r2")))

# 3. paths in the tree, and tests by name
cat $DOCS "$T/man" | grep -oE '(^|[^A-Za-z0-9_./-])(src|tools|test|scripts|examples|fio|mariadb|cutfs|preload|sqlite|include|man|docs|mk|fuzz|debian)/[][A-Za-z0-9_.*/-]*' |
	sed 's/^[^a-z]//; s/[.]$//; /\[/!s/\]$//' | grep -E '[.*]|/$|/.*/' | sort -u >"$T/paths"
while read -r p; do
	# shellcheck disable=SC2086
	set -- $p
	[ -e "$1" ] || bad "documented path $p does not exist"
done <"$T/paths"
n=$((n + $(wc -l <"$T/paths")))
grep -ohE '\bt_[a-z0-9_]+\b' $DOCS $MAN | sort -u | while read -r t; do
	[ -f "test/$t.c" ] || [ -f "test/$t.sh" ] || [ -f "test/sqlite/$t.c" ] || echo "FAIL: documented test $t: no test/$t.c, test/$t.sh or test/sqlite/$t.c"
done | grep . && fail=1

# 4. names: ATOMIO_*, atomio_*= options, atomio_* functions
# shellcheck disable=SC2046
cat $(files | grep -vE '\.md$|^man/|^fuzz/corpus/') >"$T/src" 2>/dev/null
cat $DOCS "$T/man" >"$T/all"
for w in $(grep -ohE '\bATOMIO_[A-Z0-9_]*[A-Z0-9]\b' "$T/all" | sort -u) \
	$(grep -ohE '\batomio_[a-z0-9_]+=' "$T/all" | tr -d = | sort -u) \
	$(grep -ohE '\batomio_[a-z0-9_]+\(' "$T/all" | tr -d '(' | sort -u); do
	grep -qw -- "$w" "$T/src" || bad "documented name $w is in no source file"
	n=$((n + 1))
done

# 5. references to sections
heads() { # FILE: its headings and bold lead-ins, one per line
	sed -n 's/^#\+ //p; s/^- \*\*\([^*]*\)\*\*.*/\1/p; s/^\*\*\([^*]*\)\*\*.*/\1/p; /^[A-Z][A-Z ,/-]*[A-Z]$/p' "$1" | sed 's/[.:]$//'
}
files | grep -vE '^(src|include|preload|sqlite)/|^docs/(API|FORMAT|INTERNALS)\.md$' |
	grep -vE '\.(png|svg|gz|xz)$|^fuzz/corpus/' >"$T/reffiles"
# a name, then a comma, a colon or a parenthesis and a title in quotes; or a
# comma and a title of one or two words without quotes
# shellcheck disable=SC2046
grep -noE '(README|README\.md|docs/[A-Z]+\.md|[A-Z]+\.md)(, *| *\(|: *)"[^"]+"|(README|README\.md|docs/[A-Z]+\.md|[A-Z]+\.md), [A-Z][a-z]+( [a-z]+)?\b' $(cat "$T/reffiles") 2>/dev/null |
	while IFS= read -r hit; do
		where=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
		file=$(printf '%s' "$ref" | sed 's/[,:( ].*//'); sec=$(printf '%s' "$ref" | sed 's/^[^,:(]*[,:(] *//; s/^"//; s/"$//')
		case $file in README | README.md) file=README.md ;; docs/*) ;; *) file=docs/$file ;; esac
		[ -f "$file" ] || { echo "FAIL: $where:$line refers to $file, which does not exist"; continue; }
		heads "$file" | grep -qiF -- "$sec" || echo "FAIL: $where:$line refers to $file, \"$sec\": no such section"
		echo "ok"
	done >"$T/r5"
grep FAIL "$T/r5" && fail=1
n=$((n + $(grep -c '^ok' "$T/r5")))
[ $fail -eq 0 ] && echo "docs ok: $n names, paths, options and references checked"
exit $fail
