#!/bin/sh
# Every subcommand has --help (exit 0); every option a --help names is in
# the man page; the man page renders without warnings; usage errors are one
# line on stderr with exit 2.
. test/cli_lib.sh
A=build/atomio
M=man/atomio.1
[ -f "$M" ] || fail "no $M"
$A --help >/dev/null || fail "atomio --help"
$A --version | grep -q '^atomio ' || fail "atomio --version"
# the subcommands, as atomio --help lists them (tools/atomio.c's one table)
cmds=$($A --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 { print $1 }')
[ "$(echo "$cmds" | wc -l)" -ge 5 ] || fail "atomio --help lists too few commands: $cmds"
for c in $cmds; do
	$A $c --help >"$T/h" || fail "atomio $c --help exited non-zero"
	[ -s "$T/h" ] || fail "atomio $c --help printed nothing"
	grep -q "^\.SS $c\$\|^\.SS \"$c\|^\.SS atomio $c" "$M" || grep -q "atomio $c" "$M" || fail "man page lacks $c"
	for o in $(grep -o -- '--[a-z][a-z-]*' "$T/h" | sort -u); do
		grep -q -- "$(echo "$o" | sed 's/-/\\\\-/g')" "$M" || grep -q -- "$o" "$M" ||
			fail "option $o of 'atomio $c' is not in $M"
	done
	one_line_error 2 $A $c --no-such-option
done
$A verify selftest --help >/dev/null || fail "verify selftest --help"
one_line_error 2 $A
one_line_error 2 $A no-such-command
for code in 0 1 2 3 4; do
	grep -q "^\.B $code\$\|^\.IP $code\|^$code " "$M" || fail "exit status $code not documented in $M"
done
if command -v groff >/dev/null 2>&1; then
	groff -man -Tutf8 -ww -z "$M" 2>"$T/w" || fail "groff failed"
	[ ! -s "$T/w" ] || fail "man page warnings: $(cat "$T/w")"
fi
echo "help ok"
