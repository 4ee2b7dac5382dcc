#!/bin/sh
# Fetch Debian's source package of the installed fio (the same version as
# /usr/bin/fio) and configure it as Debian's build does, so that
# build/atomio_fio.so compiles against the very headers (struct thread_data,
# io_u, fio_file, ioengine_ops) of the binary that loads it.  Leaves
#   $BUILD/fio-src/fio/              the configured source (config-host.h, FIO-VERSION-FILE)
# Called by `make fio` (mk/fio.mk).  With --try: exit 0 with a note on stderr
# where fio is not installed or its source cannot be had (no deb-src access),
# so `make check` goes on and the fio tests skip.
# Needs: apt-get source access (a deb-src entry is supplied privately, the
# system's apt configuration is not touched).
set -eu
try=0
[ "${1:-}" = "--try" ] && try=1
out=${BUILD:-build}/fio-src
give_up() {
	echo "fio-source: $*" >&2
	[ "$try" -eq 1 ] && exit 0
	exit 1
}
ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null) || give_up "fio is not installed (apt-get install fio)"
[ -n "$ver" ] || give_up "fio is not installed (apt-get install fio)"
if [ -f "$out/fio/config-host.h" ] && [ "$(cat "$out/version" 2>/dev/null)" = "$ver" ]; then
	exit 0
fi
rm -rf "$out"
mkdir -p "$out/apt/lists/partial" "$out/src"
out=$(cd "$out" && pwd) # apt takes relative paths as relative to its own directories
. /etc/os-release
cat >"$out/apt/sources.list" <<EOS
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $VERSION_CODENAME main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security $VERSION_CODENAME-security main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $VERSION_CODENAME-updates main
EOS
opts="-o Dir::Etc::SourceList=$out/apt/sources.list -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists=$out/apt/lists"
# shellcheck disable=SC2086
apt-get -qq $opts update >/dev/null 2>&1 || give_up "apt-get update of a deb-src list failed (no network?)"
# shellcheck disable=SC2086
(cd "$out/src" && apt-get -qq $opts source --download-only "fio=$ver" >/dev/null 2>&1) ||
	give_up "cannot download Debian's source of fio $ver"
tar -C "$out/src" -xzf "$out"/src/fio_*.orig.tar.gz
srcdir=$(find "$out/src" -maxdepth 1 -type d -name 'fio-*' | head -n 1)
[ -n "$srcdir" ] || give_up "no fio-* directory in the source package"
mv "$srcdir" "$out/fio"
# Debian's configure line (debian/rules) without the GUI and libnbd, which
# only add programs and engines.  Which libraries configure finds changes no
# structure an engine sees: CONFIG_CUDA (off in Debian) is the only option in
# struct thread_data, and the libaio/rdma members of struct io_u are in its
# last member, a union.
(cd "$out/fio" && ./configure --disable-native --prefix=/usr >../configure.log 2>&1) ||
	give_up "fio's configure failed (see $out/configure.log)"
(cd "$out/fio" && ./FIO-VERSION-GEN >/dev/null 2>&1)
echo "$ver" >"$out/version"
echo "fio-source: $(sed -n 's/^FIO_VERSION = //p' "$out/fio/FIO-VERSION-FILE") (Debian $ver) configured in $out/fio"
