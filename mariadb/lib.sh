# mariadb/lib.sh (bash): sourced by mariadb/crash.sh and mariadb/bench.sh.
# One MariaDB server in a directory of its own: D/my.cnf, D/sock, D/err.log,
# D/tmp; its data directory DATA (on cutfs or on the real disk).
#   MODE  dw     innodb_doublewrite=1 (stock)
#         nodw   innodb_doublewrite=0, nothing else: torn pages are possible
#         atomio innodb_doublewrite=0 under LD_PRELOAD=$PRELOAD, with the
#                InnoDB page files (ibdata1, undo*, *.ibd) protected
#   and any of them with suffixes, for measuring (mariadb/bench.sh), e.g.
#   dw+aio, atomio+odirect+raw:
#         +aio       innodb_use_native_aio=1 (not with atomio: see below)
#         +odirect   innodb_flush_method=O_DIRECT
#         +raw       (atomio) ATOMIO_COMPRESS=0: the store's log records
#                    uncompressed (no LZ4 per page write, twice the log bytes)
# Settings common to all modes, and why:
#   innodb_use_native_aio=0    page writes are pwrite() calls from InnoDB's
#                              I/O threads, which the preload library sees;
#                              native AIO submits them through io_uring
#                              (10.11: "Using io_uring") or io_submit, where
#                              no wrapper runs.  Under the library =1 ends the
#                              same: it declines both (ENOSYS) and InnoDB
#                              falls back to =OFF (mode suffix +aio)
#   innodb_flush_method=fsync  buffered writes made durable by fsync, the
#                              preload library's durability point; O_DIRECT
#                              (+odirect) is served too, but the library's
#                              home writes and its reads while a page has a
#                              lazy group go through the page cache anyway
#   innodb_flush_log_at_trx_commit=1  a COMMIT returns once its redo is durable:
#                              an acknowledged transaction must survive
set -eu
MY_D=${MY_D:?}
MY_SOCK=$MY_D/sock
MY_CNF=$MY_D/my.cnf
MY_TABLES=${MY_TABLES:-4}
MY_TABLE_SIZE=${MY_TABLE_SIZE:-20000}
MY_THREADS=${MY_THREADS:-4}
PRELOAD=${PRELOAD:-}
MY_LUA=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ledger.lua
MY_PID=""

die() { echo "FAIL: $*" >&2; exit 1; }

# my_config MODE DATA: write the configuration
my_config() {
	MY_MODE=$1; MY_DATA=$2
	MY_BASE=${MY_MODE%%+*}
	local aio=0 flush=fsync suf
	case $MY_BASE in
	dw) dw=1 ;;
	nodw|atomio) dw=0 ;;
	*) die "unknown mode $MY_MODE" ;;
	esac
	for suf in $(echo "${MY_MODE#"$MY_BASE"}" | tr + ' '); do
		case $suf in
		aio) aio=1 ;;
		odirect) flush=O_DIRECT ;;
		raw) [ "$MY_BASE" = atomio ] || die "$MY_MODE: +raw is atomio's" ;;
		*) die "unknown mode $MY_MODE" ;;
		esac
	done
	if [ "$MY_BASE" = atomio ]; then
		[ -n "$PRELOAD" ] && [ -f "$PRELOAD" ] || die "mode atomio needs PRELOAD=path/to/libatomio_preload.so"
	fi
	mkdir -p "$MY_D/tmp"
	cat > "$MY_CNF" <<CNF
[mysqld]
datadir=$MY_DATA
socket=$MY_SOCK
pid-file=$MY_D/mysqld.pid
log-error=$MY_D/err.log
tmpdir=$MY_D/tmp
skip-networking
user=root
innodb_doublewrite=$dw
innodb_use_native_aio=$aio
innodb_flush_method=$flush
innodb_flush_log_at_trx_commit=1
innodb_buffer_pool_size=${MY_POOL:-16M}
innodb_log_file_size=${MY_REDO:-8M}
innodb_fast_shutdown=1
${MY_EXTRA:-}
[client]
socket=$MY_SOCK
user=root
CNF
}

# The preload library's environment (mode atomio): its log beside the data
# directory, on the same filesystem, and the InnoDB page files.  The log is
# MY_ATOMIO_LOG_SIZE (256M: a few times this data set; the library's 1 GiB
# default would not fit the benchmark's 4 GiB filesystem beside its copies).
# MY_ATOMIO_ENV: more of the library's variables (e.g. ATOMIO_COMPRESS=0).
my_env() {
	if [ "$MY_BASE" = atomio ]; then
		case $MY_MODE in *+raw*) echo "ATOMIO_COMPRESS=0" ;; esac
		echo "LD_PRELOAD=$PRELOAD ATOMIO_LOG=$(dirname "$MY_DATA")/atomio.log ATOMIO_LOG_SIZE=${MY_ATOMIO_LOG_SIZE:-256M} ATOMIO_FILES=$MY_DATA/ibdata1:$MY_DATA/undo*:$MY_DATA/*/*.ibd ATOMIO_STATS=$MY_D/atomio.stats ${MY_ATOMIO_ENV:-}"
	fi
}

my_install() {
	mkdir -p "$MY_DATA"
	env $(my_env) mariadb-install-db --defaults-file="$MY_CNF" --auth-root-authentication-method=normal \
		--skip-test-db >"$MY_D/install.log" 2>&1 || { tail "$MY_D/install.log"; die "mariadb-install-db"; }
}

# my_start: start the server (recovery), wait until it answers; 1 if it
# does not (it died, or 120 s passed).
my_start() {
	: > "$MY_D/err.log"
	env $(my_env) mariadbd --defaults-file="$MY_CNF" >>"$MY_D/err.log" 2>&1 &
	MY_PID=$!
	for _ in $(seq 1 1200); do
		if mariadb-admin --defaults-file="$MY_CNF" ping >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$MY_PID" 2>/dev/null || { wait "$MY_PID" 2>/dev/null || true; MY_PID=""; return 1; }
		sleep 0.1
	done
	my_kill
	return 1
}

my_stop() {
	[ -n "$MY_PID" ] || return 0
	mariadb-admin --defaults-file="$MY_CNF" shutdown >/dev/null 2>&1 || true
	wait "$MY_PID" 2>/dev/null || true
	MY_PID=""
}

my_kill() {
	[ -n "$MY_PID" ] || return 0
	kill -9 "$MY_PID" 2>/dev/null || true
	wait "$MY_PID" 2>/dev/null || true
	MY_PID=""
}

my_sql() { mariadb --defaults-file="$MY_CNF" -N -B "$@"; }

# my_cpu_ticks: mysqld's user + system time so far, in clock ticks
my_cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$MY_PID/stat"; }

# my_status: InnoDB's counters: data fsyncs, redo fsyncs, pages written,
# doublewrite pages written (one line, in that order)
my_status() {
	my_sql -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_data_fsyncs', 'Innodb_os_log_fsyncs',
		'Innodb_pages_written', 'Innodb_dblwr_pages_written')" |
		awk '{ v[$1] = $2 } END { print v["Innodb_data_fsyncs"] + 0, v["Innodb_os_log_fsyncs"] + 0,
			v["Innodb_pages_written"] + 0, v["Innodb_dblwr_pages_written"] + 0 }'
}

# sysbench against the server: my_sysbench COMMAND [options]
my_sysbench() {
	cmd=$1; shift
	sysbench "$MY_LUA" --db-driver=mysql --mysql-socket="$MY_SOCK" --mysql-user=root \
		--mysql-db=sbtest --tables="$MY_TABLES" --table-size="$MY_TABLE_SIZE" "$@" "$cmd"
}

# my_prepare: the sbtest tables and the ledger
my_prepare() {
	my_sql -e "CREATE DATABASE sbtest; CREATE TABLE sbtest.ledger (run INT NOT NULL, t INT NOT NULL,
		s INT NOT NULL, PRIMARY KEY (run, t, s)) ENGINE=InnoDB"
	my_sysbench prepare --threads=2 >"$MY_D/prepare.log" 2>&1 \
		|| { tail "$MY_D/prepare.log"; die "sysbench prepare"; }
}

# my_check_tables: CHECK TABLE of every table of sbtest; prints what is not OK
my_check_tables() {
	tabs=$(my_sql -e "SELECT GROUP_CONCAT(CONCAT('sbtest.', table_name)) FROM information_schema.tables WHERE table_schema='sbtest'")
	my_sql -e "CHECK TABLE $tabs" | awk '$3 != "status" || $4 != "OK"'
}

# my_innochecksum: innochecksum over every InnoDB page file (server stopped
# cleanly); prints the files it finds corrupt.  Without the preload library
# also in mode atomio: its store was closed with the server, which checkpoints
# it, so the files on the medium must be whole by themselves.
my_innochecksum() {
	# pages 64..191 of ibdata1 are the doublewrite buffer: copies of other
	# pages, which innochecksum calls invalid (their page numbers differ)
	[ -f "$MY_DATA/ibdata1" ] && { innochecksum -e 63 "$MY_DATA/ibdata1" >/dev/null 2>&1 &&
		innochecksum -s 192 "$MY_DATA/ibdata1" >/dev/null 2>&1 || echo "$MY_DATA/ibdata1"; }
	for f in "$MY_DATA"/undo* "$MY_DATA"/*/*.ibd; do
		[ -f "$f" ] || continue
		innochecksum "$f" >/dev/null 2>&1 || echo "$f"
	done
}
