# cli_lib.sh: sourced by test/t_cli_*.sh (the `atomio` command's tests).
# Gives: $BINS (the command, normal and ASan+UBSan builds, as built), $T (a
# fresh directory on a real filesystem, removed at exit unless ATOMIO_KEEP),
# fail MSG (exit 1), skip MSG (exit 77), jqv FILTER FILE (jq -e, or fail).
set -eu
. test/store_lib.sh
BINS=""
for b in build/atomio build/san/atomio; do
	[ -x "$b" ] && BINS="$BINS $b"
done
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
[ -n "$BINS" ] || fail "build/atomio is not built"
command -v jq >/dev/null 2>&1 || skip "jq is not installed (scripts/deps.sh installs it)"
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-cli-XXXXXX")
cli_cleanup() {
	[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$T"
}
trap cli_cleanup EXIT
# jqv FILTER FILE: the filter must print true.
jqv() {
	jq -e "$1" "$2" >/dev/null || fail "$2: expected $1; got: $(jq -c . "$2" | cut -c1-600)"
}
# Exactly one line on stderr, and the expected exit status.
one_line_error() { # RC CMD...
	want=$1; shift
	set +e
	"$@" >/dev/null 2>"$T/err"
	rc=$?
	set -e
	[ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$T/err")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "'$*' printed $(wc -l <"$T/err") lines on stderr, expected 1: $(cat "$T/err")"
}
