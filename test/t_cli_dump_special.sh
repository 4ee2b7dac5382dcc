#!/bin/sh
# atomio dump on what is not a regular file (issue 12, item 4): it looks with
# O_PATH first, as the library and atomio recover do, so a FIFO (whose open
# would block for ever) or a device node is refused without being opened.
. test/cli_lib.sh
mkfifo -m600 "$T/s.log"
ln -s "$T/s.log" "$T/fifo-link.log"
ln -s /dev/zero "$T/zero.log"
for A in $BINS; do
	for L in "$T/s.log" "$T/fifo-link.log" "$T/zero.log"; do
		for J in "" --json; do
			set +e
			timeout 20 $A dump $J "$L" >/dev/null 2>"$T/err"
			rc=$?
			set -e
			[ $rc -ne 124 ] || fail "$A dump $J $L blocked (killed after 20 s)"
			[ $rc -eq 3 ] || fail "$A dump $J $L exited $rc, expected 3: $(cat "$T/err")"
			grep -q "not a regular file" "$T/err" || fail "$A dump $J $L: $(cat "$T/err")"
		done
	done
done
echo "ok: dump refuses a FIFO, a symlink to one and a device node without opening them"
