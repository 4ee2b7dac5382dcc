#!/bin/sh
# sqlite-source.sh DIR: unpack the source of the SQLite that Debian ships
# (the version of the installed libsqlite3-0, from Debian's source package)
# into DIR/src once, and print the source tree's path.  Shared by
# sqlite-batch-atomic.sh and sqlite-suite.sh.
# Needs apt-get source access: a deb-src entry is supplied privately, the
# system's apt configuration is not touched.
set -eu
out=$1
mkdir -p "$out/src"
srcdir=$(find "$out/src" -maxdepth 1 -type d -name 'sqlite3-*' | head -n 1)
if [ -z "$srcdir" ] || [ ! -f "$srcdir/configure" ]; then
	ver=$(dpkg-query -W -f='${Version}' libsqlite3-0)
	apt="$out/apt"
	mkdir -p "$apt/lists/partial"
	. /etc/os-release
	cat >"$apt/sources.list" <<EOS
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $VERSION_CODENAME main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security $VERSION_CODENAME-security main
EOS
	opts="-o Dir::Etc::SourceList=$apt/sources.list -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists=$apt/lists"
	# shellcheck disable=SC2086
	apt-get -qq $opts update >&2
	# shellcheck disable=SC2086
	(cd "$out/src" && apt-get -qq $opts source --download-only "sqlite3=$ver" >&2)
	tar -C "$out/src" -xf "$out"/src/sqlite3_*.orig.tar.xz
	srcdir=$(find "$out/src" -maxdepth 1 -type d -name 'sqlite3-*' | head -n 1)
fi
echo "$srcdir"
