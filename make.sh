#!/bin/sh
# The first command on a fresh Debian machine, where even make may be
# missing: installs the Debian packages the goal needs (scripts/deps.sh),
# then runs make with the same arguments.
#   ./make.sh demo     builds the library and the command, runs `atomio bench`
#   ./make.sh check    every test, normally and under ASan+UBSan
#   ./make.sh [GOAL...]  anything else (or nothing: all): every package, then make GOAL
set -eu
cd "$(dirname "$0")"
# The demo's short list serves only goals that build nothing more than the
# library and the command; `make` alone (all) also builds the SQLite VFS and
# the benchmarks, so it takes the full list, as every other goal.
group=demo
[ $# -gt 0 ] || group=check
for goal in "$@"; do
	case $goal in
	demo | lib | clean | -*) ;;
	*) group=check ;;
	esac
done
sh scripts/deps.sh "$group"
exec make "$@"
