# store_lib.sh: sourced by the shell tests whose stores' processes are
# killed.  A store removes its shared-state file when its last process
# closes it; one whose last process was killed leaves it
# (/dev/shm/atomio-STOREID-INODE where /dev/shm is a tmpfs: src/shm.c,
# shm_where_of; else LOG-shm, beside the log).  The C tests' twin: t_shm_remove
# in test/t.h.  A log starts with "ATOMIOLG", its store id at byte 16
# (src/format.h, struct sb_disk).
#   rm_store_state DIR...  remove the state file of each store whose log is in DIR
#   rm_stores DIR...       that, then rm -rf DIR...
rm_store_state() {
	for _d in "$@"; do
		[ -e "$_d" ] || continue
		find "$_d" -type f -size +23c 2>/dev/null | while IFS= read -r _f; do
			[ "$(od -An -tx1 -N8 "$_f" 2>/dev/null | tr -d ' \n')" = 41544f4d494f4c47 ] || continue
			_id=$(od -An -tx8 -j16 -N8 "$_f" | tr -d ' \n')
			_ino=$(stat -c %i "$_f") || continue
			rm -f "/dev/shm/atomio-$_id-$(printf %x "$_ino")"
		done
	done
}
rm_stores() {
	rm_store_state "$@"
	rm -rf "$@"
}
