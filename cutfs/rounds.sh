# The steps of a crash round on cutfs that the database harnesses share
# (pg/crash.sh, mariadb/crash.sh; sourced by bash).  They set CUTFS (the
# cutfs binary), ATOMIO_CMD (the atomio command), B (the backing
# directory), M (the mount point) and MODE, and start with kept=0 dropped=0
# devs_changed=0 last_dev="".

# cutfs_mount SEED ERRLOG RECOVERLOG [PREFIX...]: mount in tear mode (each
# unsynced 512-byte sector survives a cut or not, by SEED).  A FUSE
# filesystem has no f_fsid and gets its device number anew at a mount when
# another mount took the last one: atomio's identity check (same device or
# filesystem id, same inode) then refuses the data files as replaced.  They
# are not (the same backing files): in mode atomio the store is then
# recovered with --force-paths (as its operator would; PREFIX runs the
# command as the server's user) and it is counted in devs_changed.
cutfs_mount() {
	local seed=$1 errlog=$2 reclog=$3 dev
	shift 3
	"$CUTFS" --mode tear --seed "$seed" "$B" "$M" -o allow_other 2>>"$errlog"
	dev=$(stat -c %d "$M")
	if [ "$MODE" = atomio ] && [ -n "$last_dev" ] && [ "$dev" != "$last_dev" ] && [ -f "$M/atomio.log" ]; then
		devs_changed=$((devs_changed + 1))
		"$@" "$ATOMIO_CMD" recover --force-paths "$M/atomio.log" >>"$reclog" 2>&1 ||
			echo "atomio recover --force-paths failed: $(tail -n 1 "$reclog")"
	fi
	last_dev=$dev
}

# cutfs_cut: the power cut (unsynced sectors torn); its counts of unsynced
# sectors kept and dropped added to kept and dropped
cutfs_cut() {
	local st
	echo cut >"$M/.cutfs"
	st=$(cat "$M/.cutfs")
	kept=$((kept + $(echo "$st" | sed -n 's/^kept //p')))
	dropped=$((dropped + $(echo "$st" | sed -n 's/^dropped //p')))
}

# cutfs_sync_all: every file synced through cutfs, as the page cache keeps
# what a killed process wrote (an unmount drops what is not synced: without
# this a kill round would lose what a process crash keeps)
cutfs_sync_all() { find "$M" -type f ! -name .cutfs -exec sync {} + 2>/dev/null || true; }

# cutfs_umount: unmount once a killed server's files are closed (which may
# take a moment)
cutfs_umount() {
	for _ in $(seq 1 100); do
		fusermount3 -u "$M" 2>/dev/null && return 0
		sleep 0.1
	done
	fuser -vm "$M" >&2 || true
	fusermount3 -u "$M"
}
