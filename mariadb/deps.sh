#!/bin/sh
# The Debian packages of the MariaDB tests (make mariadb-deps), apart from
# the default ones (scripts/deps.sh, which brings cutfs's libfuse3): a
# server and a load generator are not what the library's own check needs.
set -eu
PKGS="mariadb-server mariadb-client sysbench psmisc"
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
