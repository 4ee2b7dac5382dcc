#!/bin/sh
# The README's promise, tried as a new user would: a clean Debian 12
# minbase (mmdebstrap, from Debian's packages), /proc /sys /dev bound, a
# clean clone of this repository's HEAD, then the commands of the README's
# first code block, in order, as root.  Prints each command's last lines,
# its time and the number of installed packages after it; then builds the
# Debian packages there (dpkg-buildpackage), checks them with lintian (no
# error), installs them and links a program with `pkg-config atomio`.
# `make fresh-machine`; not in `make check`.
# Environment: FRESH_DIR (default /var/tmp/atomio-fresh; removed first),
# FRESH_MIRROR (default http://deb.debian.org/debian), FRESH_DEBS=0 skips
# the packaging step.  Needs root and mmdebstrap.
set -eu
cd "$(dirname "$0")/.."
src=$(pwd)
dir=${FRESH_DIR:-/var/tmp/atomio-fresh}
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine: run as root (chroot, mounts)" >&2; exit 1; }
command -v mmdebstrap >/dev/null 2>&1 || { echo "fresh-machine: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }
root=$dir/root
# Every mount under the chroot, deepest first: /dev/pts, /dev, /sys, /proc
# and whatever a test there left mounted (a loop device, a FUSE mount).
umount_all() {
	awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m" || true; done
	return 0
}
[ -d "$root" ] && umount_all
# --one-file-system: never into a mount left behind (a bound /dev above all)
rm -rf --one-file-system "$dir"
mkdir -p "$dir"
trap umount_all EXIT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
t=$(now)
mmdebstrap --variant=minbase --quiet bookworm "$root" "$mirror" >"$dir/mmdebstrap.log" 2>&1 ||
	{ tail -n 20 "$dir/mmdebstrap.log"; exit 1; }
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
in_root() { chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -c "$1"; }
pkgs() { in_root "dpkg-query -W -f='\${Status}\n' | grep -c 'install ok installed'"; }
usr() { du -sm "$root/usr" | cut -f1; }
echo "fresh-machine: Debian 12 minbase in $root ($(secs "$t") s): $(pkgs) packages, /usr $(usr) MB"
echo "fresh-machine: make installed: $(in_root 'command -v make || echo no')"
# A clean clone of HEAD: what is committed, nothing of this work tree.
git clone -q --no-hardlinks "$src" "$root/root/atomio"
head=$(git -C "$src" rev-parse HEAD)
[ "$(git -C "$root/root/atomio" rev-parse HEAD)" = "$head" ] ||
	{ echo "fresh-machine: the clone is not at $head"; exit 1; }
echo "fresh-machine: clone of $(git -C "$src" rev-parse --short HEAD) in /root/atomio"

# The README's first code block: one command per line (comments stripped).
awk '/^```sh$/ { f = 1; next } f && /^```$/ { exit } f' README.md | sed 's/[[:space:]]*#.*//' |
	grep -v '^[[:space:]]*$' >"$dir/commands"
n=0 rc=0
while read -r cmd; do
	n=$((n + 1))
	before=$(pkgs)
	t=$(now)
	in_root "cd /root/atomio && $cmd" >"$dir/cmd$n.log" 2>&1 </dev/null || rc=$?
	echo
	echo "fresh-machine: \$ $cmd   -> exit $rc, $(secs "$t") s; packages $before -> $(pkgs), /usr $(usr) MB"
	tail -n 6 "$dir/cmd$n.log" | sed 's/^/    /'
	[ "$rc" -eq 0 ] || { echo "fresh-machine: FAILED: $cmd (log: $dir/cmd$n.log)"; exit 1; }
done <"$dir/commands"
[ "$n" -ge 2 ] || { echo "fresh-machine: the README's first code block has $n commands"; exit 1; }

if [ "${FRESH_DEBS:-1}" != 0 ]; then
	before=$(pkgs)
	t=$(now)
	in_root 'cd /root/atomio && export DEBIAN_FRONTEND=noninteractive &&
		apt-get install -y -qq --no-install-recommends build-essential dpkg-dev debhelper fakeroot lintian >/dev/null &&
		dpkg-buildpackage -b -us -uc && cd .. && ls *.deb &&
		{ lintian --allow-root --fail-on error atomio_*.changes >lintian.log 2>&1; lr=$?; cat lintian.log;
		  echo "lintian: exit $lr, $(grep -c "^E:" lintian.log) errors, $(grep -c "^W:" lintian.log) warnings"; [ $lr -eq 0 ]; } &&
		apt-get install -y -qq ./libatomio0_*.deb ./libatomio-dev_*.deb ./atomio_*.deb ./libsqlite3-mod-atomio_*.deb ./libatomio-sqlite-dev_*.deb &&
		printf "#include <atomio.h>\n#include <stdio.h>\nint main(void) { puts(atomio_strerror(ATOMIO_ECORRUPT)); return 0; }\n" >/tmp/p.c &&
		cc -o /tmp/p /tmp/p.c $(pkg-config --cflags --libs atomio) && /tmp/p && ldd /tmp/p | grep atomio &&
		atomio --help | head -n 2 && man -w atomio_open atomio' >"$dir/debs.log" 2>&1 || rc=$?
	echo
	echo "fresh-machine: Debian packages built, lintian, installed, a program linked with pkg-config atomio -> exit $rc, $(secs "$t") s; packages $before -> $(pkgs), /usr $(usr) MB"
	grep -e '\.deb$' -e '^lintian: ' "$dir/debs.log" | sed 's/^/    /'
	tail -n 8 "$dir/debs.log" | sed 's/^/    /'
	[ "$rc" -eq 0 ] || { echo "fresh-machine: FAILED: packaging (log: $dir/debs.log)"; exit 1; }
fi
echo "fresh-machine: passed (logs in $dir)"
