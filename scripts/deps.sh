#!/bin/sh
# Install the Debian packages a part of atomio needs, if any is missing:
#   scripts/deps.sh demo    the library, the atomio command, `make demo`
#   scripts/deps.sh check   that, plus what `make check` and `make fuzz` need
#   scripts/deps.sh pg      PostgreSQL's tests apart from check's (make pg-deps)
#   scripts/deps.sh mariadb MariaDB's tests apart from check's (make mariadb-deps)
# Called by ./make.sh (which needs nothing but sh and apt) and by the make
# targets deps-demo / deps.  Add a package here, not in the Makefile or CI.
# Runs apt-get as root, or through sudo.
set -eu
group=${1:-check}
# the library and the command: compiler, make, xxHash (checksums), LZ4
# (compressed records), liburing (the io_uring engine)
DEMO="gcc make libc6-dev libxxhash-dev liblz4-dev liburing-dev"
CHECK="$DEMO"
# the atomio command's tests: jq reads its JSON; xfsprogs makes the XFS loop image
CHECK="$CHECK jq xfsprogs"
# the SQLite VFS and its tests (sqlite3: the shell docs/SQLITE.md's first command uses)
CHECK="$CHECK sqlite3 libsqlite3-dev"
# make bench-compress (built by `make`): zstd, to compare
CHECK="$CHECK libzstd-dev"
# t_install.sh: programs linked from pkg-config; t_man.sh renders the man pages
CHECK="$CHECK pkg-config man-db"
# fuzzing (t_fuzz.sh, make fuzz): clang with its libFuzzer runtime
CHECK="$CHECK clang libclang-rt-14-dev"
# the fio ioengine's tests and make bench-fio (the engine builds against
# Debian's source of this fio, fetched by scripts/fio-source.sh)
CHECK="$CHECK fio"
# cutfs, the power-cut filesystem for real programs (issue 16): libfuse3
CHECK="$CHECK libfuse3-dev fuse3"
# make check-sqlite-batch / check-sqlite-suite build SQLite (and its Tcl
# testfixture) from Debian's source: Tcl and zlib development files
CHECK="$CHECK tcl tcl-dev zlib1g-dev"
# PostgreSQL's crash and speed runs (pg/, not make check's): a server, its
# client programs (pgbench, psql, pg_amcheck, pg_checksums; amcheck and
# pg_visibility ship in postgresql-15), libpq's headers for pg/ledger.c,
# strace for pg/strace.sh, fuser and losetup
PG="postgresql-15 postgresql-client-15 libpq-dev psmisc strace util-linux"
# MariaDB's (mariadb/): a server, its client and a load generator
MARIADB="mariadb-server mariadb-client sysbench psmisc"
case $group in
demo) PKGS=$DEMO ;;
check) PKGS=$CHECK ;;
pg) PKGS=$PG ;;
mariadb) PKGS=$MARIADB ;;
*) echo "usage: scripts/deps.sh demo|check|pg|mariadb" >&2; exit 2 ;;
esac
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
# A fresh machine may have no package lists yet; a failed update (offline)
# still lets apt-get install try with the lists there are.
$SUDO apt-get update -qq || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
