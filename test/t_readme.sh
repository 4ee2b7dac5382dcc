#!/bin/sh
# The README's commands, run as written, so that they cannot rot:
#  - the first code block (the two setup commands): its programs and goals
#    exist (scripts/fresh-machine.sh runs them on a fresh Debian);
#  - every other ```sh block: run in a scratch directory, must exit 0;
#  - every "$ atomio ..." line of the transcripts: run with its example
#    paths (/srv/t, /root/t.state) in a scratch directory, must exit 0;
#    `sleep 1` before a kill first waits for ten acknowledged groups
#    (a loaded machine may take longer to create the log).  Lines on
#    /mnt/xfs need an XFS mount (t_cli_xfs.sh covers probe and bench there)
#    and `$ make ...` lines (the demo, the benchmarks) are skipped, and
#    counted; so are sh blocks on example paths or with placeholders.
cd "$(dirname "$0")/.." || exit 1
src=$(pwd)
command -v bash >/dev/null 2>&1 || { echo "SKIP: bash not installed (the transcripts use its job control)"; exit 77; }
[ -x build/atomio ] && [ -f build/atomio_sqlite.so ] || { echo "FAIL: build/atomio and build/atomio_sqlite.so first (make)"; exit 1; }
T=$(mktemp -d /var/tmp/atomio-readme.XXXXXX) || exit 1
trap 'for p in $(pgrep -f "atomio verify write $T" 2>/dev/null); do kill -9 "$p"; done; rm -rf "$T"' EXIT
fail=0 ran=0 skipped=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. setup block
awk '/^```sh$/ { f = 1; next } f && /^```$/ { exit } f' README.md | sed 's/[[:space:]]*#.*//' | grep -v '^[[:space:]]*$' >"$T/setup"
[ "$(wc -l <"$T/setup")" -ge 2 ] || bad "README's first block has fewer than two commands"
while read -r prog goal; do
	[ -x "$prog" ] || bad "README setup command '$prog $goal': $prog is not an executable here"
	grep -q "^$goal:" Makefile || bad "README setup command '$prog $goal': no make target $goal"
done <"$T/setup"

# 2. the other sh blocks
awk -v dir="$T" '/^```sh$/ { n++; if (n > 1) { f = 1; file = dir "/block" n ".sh" } ; next }
	f && /^```$/ { f = 0; close(file); next } f { print > file }' README.md
for b in "$T"/block*.sh; do
	[ -f "$b" ] || continue
	# Blocks on example paths or with placeholders ("program ...", /srv/,
	# fio's engine, built by `make fio` from downloaded source) are shown,
	# not run here: t_preload_*, t_fio* run what they show.
	if grep -q -e '/srv/' -e ' \.\.\.' -e 'make fio' "$b"; then
		skipped=$((skipped + 1))
		continue
	fi
	mkdir -p "$T/run" && (cd "$T/run" && ln -sfn "$src/build" build && sh "$b") >"$b.out" 2>&1 ||
		bad "README block $(basename "$b"): exit $?: $(tail -n 5 "$b.out")"
	ran=$((ran + 1))
done

# 3. transcript lines
mkdir -p "$T/t"
sed -n 's/^\$ //p' README.md >"$T/lines"
while IFS= read -r l; do
	case $l in
	*/mnt/xfs* | "make "*) skipped=$((skipped + 1)); continue ;;
	atomio\ *) ;;
	*) bad "transcript line not understood (teach t_readme.sh): $l"; continue ;;
	esac
	cmd=$(printf '%s\n' "$l" | sed -e "s|/srv/t|$T/t|g" -e "s|/root/t.state|$T/t.state|g" -e "s|^atomio |$src/build/atomio |" \
		-e "s|\(.*\)&  *sleep 1;|\1\& i=0; while [ \$(stat -c %s $T/t.state 2>/dev/null \|\| echo 0) -lt 288 ] \&\& [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done; sleep 1;|")
	bash -c "$cmd" >"$T/out" 2>&1 || bad "README: \$ $l: exit $?: $(tail -n 5 "$T/out")"
	ran=$((ran + 1))
done <"$T/lines"
[ $fail -eq 0 ] && echo "README ok: $ran commands ran, $skipped skipped (XFS mount, make targets, placeholders)"
exit $fail
