# fio_lib.sh: sourced by test/t_fio*.sh (the fio ioengine's tests).
# Gives: $ENG (the engine, absolute), $T (a fresh directory on a real
# filesystem, removed at exit unless ATOMIO_KEEP), fail MSG, skip MSG,
# afio NAME ARGS... (fio with the engine, JSON to $T/NAME.json, output to
# $T/NAME.out; fails the test when fio does), jqv FILTER FILE.
set -eu
. test/store_lib.sh
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
command -v fio >/dev/null 2>&1 || skip "fio is not installed (scripts/deps.sh installs it)"
command -v jq >/dev/null 2>&1 || skip "jq is not installed (scripts/deps.sh installs it)"
[ -f build/atomio_fio.so ] ||
	skip "build/atomio_fio.so is not built (make fio: needs Debian's fio source, see scripts/fio-source.sh)"
ENG=$(pwd)/build/atomio_fio.so
T=$(mktemp -d "${ATOMIO_TEST_DIR:-/var/tmp}/atomio-fio-XXXXXX")
fio_cleanup() {
	[ -n "${ATOMIO_KEEP:-}" ] || rm_stores "$T"
}
trap fio_cleanup EXIT
jqv() {
	jq -e "$1" "$2" >/dev/null || fail "$2: expected $1; got: $(jq -c '.jobs[0] // .' "$2" | cut -c1-800)"
}
afio() { # NAME FIO-ARGS...
	n=$1; shift
	(cd "$T" && fio --output-format=json --output="$T/$n.json" --name="$n" \
		--ioengine="external:$ENG" "$@") >"$T/$n.out" 2>&1 ||
		fail "fio $n $*: $(cat "$T/$n.out")"
}
