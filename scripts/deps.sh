#!/bin/sh
# Install the Debian packages atomio's build and tests need, if any is
# missing.  Called by `make deps` (and so by `make demo` and `make check`).
# Add a package here, not in the Makefile or the CI script.
set -eu
PKGS="gcc make libc6-dev libxxhash-dev"
# compressed log records (issue 7): LZ4
PKGS="$PKGS liblz4-dev"
# make bench-compress: zstd, to compare
PKGS="$PKGS libzstd-dev"
# the engine: io_uring through liburing
PKGS="$PKGS liburing-dev"
# the atomio command's tests: jq reads its JSON; xfsprogs makes the XFS loop image
PKGS="$PKGS jq xfsprogs"
# fuzzing: clang with its libFuzzer runtime
PKGS="$PKGS clang libclang-rt-14-dev"
# the SQLite VFS and its tests
PKGS="$PKGS sqlite3 libsqlite3-dev"
# the fio ioengine's tests and make bench-fio (the engine builds against
# Debian's source of this fio, fetched by scripts/fio-source.sh)
PKGS="$PKGS fio"
# make check-sqlite-batch / check-sqlite-suite build SQLite (and its Tcl
# testfixture) from Debian's source: Tcl and zlib development files
PKGS="$PKGS tcl tcl-dev zlib1g-dev"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "atomio: installing Debian packages:$missing"
if [ "$(id -u)" -eq 0 ]; then
	SUDO=""
elif command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
else
	echo "atomio: need root to run: apt-get install$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
