#!/bin/sh
# The first command on a fresh Debian machine, where even make may be
# missing: installs the Debian packages the goal needs (scripts/deps.sh),
# then runs make with the same arguments.
#   ./make.sh demo     builds the library and the command, runs `atomio bench`
#   ./make.sh check    every test, normally and under ASan+UBSan
#   ./make.sh [GOAL...]  anything else: the library's packages, then make GOAL
set -eu
cd "$(dirname "$0")"
group=demo
for goal in "$@"; do
	case $goal in
	demo | all | lib | install | clean | -*) ;;
	*) group=check ;;
	esac
done
sh scripts/deps.sh "$group"
exec make "$@"
