#!/bin/sh
# The Debian packages of the PostgreSQL tests (make pg-deps), apart from the
# default ones (scripts/deps.sh, which brings cutfs's libfuse3): a server,
# its client programs (pgbench, psql, pg_amcheck, pg_checksums), libpq's
# headers for pg/ledger.c, strace for pg/strace.sh; not what the library's
# own check needs.  amcheck and pg_visibility ship in postgresql-15.
set -eu
PKGS="postgresql-15 postgresql-client-15 libpq-dev psmisc strace util-linux"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "atomio: installing Debian packages:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
