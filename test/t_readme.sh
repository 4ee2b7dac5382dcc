#!/bin/sh
# The commands of the README and the guides (docs/*.md), run as written, so
# that they cannot rot (t_docs.sh checks the names they use):
#  - the README's first code block (the two setup commands): its programs
#    and goals exist (scripts/fresh-machine.sh runs them on a fresh Debian);
#  - the README's C example: compiled and linked against build/libatomio.so,
#    and run with its example directory (/srv/db) in a scratch directory;
#  - every other ```sh block: run in a scratch directory, must exit 0;
#  - every "$ atomio ..." line of the transcripts: run with its example
#    paths (/srv/t, /root/t.state) in a scratch directory, must exit 0;
#    `sleep 1` before a kill first waits for ten acknowledged groups
#    (a loaded machine may take longer to create the log).  Lines on
#    /mnt/xfs need an XFS mount (t_cli_xfs.sh covers probe and bench there)
#    and `$ make ...` lines (the demo, the benchmarks) are skipped, and
#    counted; so are sh blocks on example paths, with placeholders (N, ...)
#    or that run make (their targets may take hours or download sources).
cd "$(dirname "$0")/.." || exit 1
src=$(pwd)
. test/store_lib.sh
command -v bash >/dev/null 2>&1 || { echo "SKIP: bash not installed (the transcripts use its job control)"; exit 77; }
[ -x build/atomio ] && [ -f build/atomio_sqlite.so ] || { echo "FAIL: build/atomio and build/atomio_sqlite.so first (make)"; exit 1; }
T=$(mktemp -d /var/tmp/atomio-readme.XXXXXX) || exit 1
# What the commands make in their default places ($ATOMIO_TEST_DIR, else
# /var/tmp: `atomio verify selftest | head -3` is killed by the pipe before
# it cleans up) goes inside the scratch directory, removed at the end.
export ATOMIO_TEST_DIR="$T"
trap 'for p in $(pgrep -f "atomio verify write $T" 2>/dev/null); do kill -9 "$p"; done; rm_stores "$T"' EXIT
fail=0 ran=0 skipped=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. setup block
awk '/^```sh$/ { f = 1; next } f && /^```$/ { exit } f' README.md | sed 's/[[:space:]]*#.*//' | grep -v '^[[:space:]]*$' >"$T/setup"
[ "$(wc -l <"$T/setup")" -ge 2 ] || bad "README's first block has fewer than two commands"
while read -r prog goal; do
	[ -x "$prog" ] || bad "README setup command '$prog $goal': $prog is not an executable here"
	grep -q "^$goal:" Makefile || bad "README setup command '$prog $goal': no make target $goal"
done <"$T/setup"

# 2. the README's C example, as a program: the first ```c block, its
# buffers declared, the rest the body of main
awk '/^```c$/ { f = 1; next } f && /^```$/ { exit } f' README.md >"$T/api.c"
grep -q '^#include <atomio.h>' "$T/api.c" || bad "README's first C block does not include <atomio.h>"
mkdir -p "$T/db"
{
	echo '#include <fcntl.h>'
	grep '^#include' "$T/api.c"
	echo 'static char page1[4096], page2[4096], page3[16384], page[16384];'
	echo 'int main(void) {'
	grep -v '^#include' "$T/api.c" | sed "s|/srv/db|$T/db|g"
	echo 'return r != 0; }'
} >"$T/prog.c"
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude -o "$T/prog" "$T/prog.c" -Lbuild -latomio \
	-Wl,-rpath,"$src/build" >"$T/cc.out" 2>&1; then
	"$T/prog" || bad "README's C example, run in $T/db: exit $?"
	rm -rf "$T/db"
	ran=$((ran + 1))
else
	bad "README's C example does not compile: $(head -n 5 "$T/cc.out")"
fi

# 3. the other sh blocks, of the README and the guides
for md in README.md docs/*.md; do
	awk -v dir="$T" -v name="$(basename "$md" .md)" -v first="$([ "$md" = README.md ] && echo 1 || echo 0)" \
		'/^```sh$/ { n++; if (n > first) { f = 1; file = dir "/block-" name "-" n ".sh" } ; next }
		f && /^```$/ { f = 0; close(file); next } f { print > file }' "$md"
done
for b in "$T"/block-*.sh; do
	[ -f "$b" ] || continue
	# Blocks on example paths or with placeholders ("program ...", /srv/,
	# N), or that run make (fio's engine, built by `make fio` from
	# downloaded source; make check itself) are shown, not run here:
	# t_preload_*, t_fio*, t_crash run what they show, t_docs.sh checks
	# their targets.
	if grep -q -e '/srv/' -e ' \.\.\.' -e '^make ' -e ' N\b' "$b"; then
		skipped=$((skipped + 1))
		continue
	fi
	mkdir -p "$T/run" && (cd "$T/run" && ln -sfn "$src/build" build && sh "$b") >"$b.out" 2>&1 ||
		bad "$(basename "$b" .sh): exit $?: $(tail -n 5 "$b.out")"
	ran=$((ran + 1))
done

# 4. transcript lines
mkdir -p "$T/t"
sed -n 's/^\$ //p' README.md docs/*.md >"$T/lines"
while IFS= read -r l; do
	case $l in
	*/mnt/xfs* | "make "*) skipped=$((skipped + 1)); continue ;;
	atomio\ *) ;;
	*) bad "transcript line not understood (teach t_readme.sh): $l"; continue ;;
	esac
	cmd=$(printf '%s\n' "$l" | sed -e "s|/srv/t|$T/t|g" -e "s|/root/t.state|$T/t.state|g" -e "s|^atomio |$src/build/atomio |" \
		-e "s|\(.*\)&  *sleep 1;|\1\& i=0; while [ \$(stat -c %s $T/t.state 2>/dev/null \|\| echo 0) -lt 288 ] \&\& [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done; sleep 1;|")
	bash -c "$cmd" >"$T/out" 2>&1 || bad "\$ $l: exit $?: $(tail -n 5 "$T/out")"
	ran=$((ran + 1))
done <"$T/lines"
[ $fail -eq 0 ] && echo "README and guides ok: $ran commands ran, $skipped skipped (XFS mount, make targets, placeholders)"
exit $fail
