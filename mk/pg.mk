# PostgreSQL without full-page writes: pg/ (docs/POSTGRESQL.md).  Not part of
# check (a round takes a minute or more on 2 busy cores, and PostgreSQL is not
# among check's packages: scripts/deps.sh pg installs postgresql-15, libpq-dev,
# strace); test/t_preload_shared.sh is check's test of the preload with many processes.
#   make pg-crash     PG_MODE=atomio|fpw|off (default atomio) CUTS=200
#                     KILLS=100: power cuts and SIGKILLs on cutfs, every
#                     check (pg/crash.sh); SEED=N
#   make check-pg     short: a few cuts and kills of modes fpw, off and
#                     atomio, minutes
#   make pg-bench     PG_PAIRS=3 PG_SECS=60 [PG_WAITS=1] [PG_CONFIGS=frequent]:
#                     TPS, p99, WAL and device bytes per transaction, what
#                     waits, modes interleaved (pg/bench.sh)
#   make pg-strace    the calls PostgreSQL makes on its relation files (pg/strace.sh)
# Mode atomio needs the preload library: PRELOAD (default build/libatomio_preload.so).
PG_CFLAGS = $(BASE_CFLAGS) -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)
PG_TOOLS := $(BUILD)/pg-torn $(BUILD)/pg-ledger $(BUILD)/pg-stats
PG_MODE ?= atomio
CUTS ?= 200
KILLS ?= 100
PG_PAIRS ?= 3
PG_SECS ?= 60
PG_WAITS ?= 0
PG_CONFIGS ?= frequent defaults

$(BUILD)/pg-torn: pg/torn.c | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<
$(BUILD)/pg-stats: pg/stats.c $(BUILD)/libatomio.a | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)
$(BUILD)/pg-ledger: pg/ledger.c | $(BUILD)
	$(CC) $(PG_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -lpq

.PHONY: pg-deps pg-tools pg-crash check-pg pg-bench pg-strace
pg-deps: deps
	sh scripts/deps.sh pg
pg-tools: pg-deps
	$(MAKE) $(PG_TOOLS) $(BUILD)/cutfs $(BUILD)/atomio $(BUILD)/libatomio_preload.so

pg-crash: pg-tools
	PRELOAD=$(PRELOAD) nice -n 10 pg/crash.sh $(PG_MODE) $(CUTS) $(KILLS)

# fpw and atomio must pass every round; off is expected to fail rounds (torn
# pages), but three cuts may miss: its count is reported, not judged.
check-pg: pg-tools
	nice -n 10 pg/crash.sh fpw 4 2
	-nice -n 10 pg/crash.sh off 3 0
	PRELOAD=$(PRELOAD) nice -n 10 pg/crash.sh atomio 2 1

pg-bench: pg-tools
	PRELOAD=$(PRELOAD) PG_PAIRS=$(PG_PAIRS) PG_SECS=$(PG_SECS) PG_WAITS=$(PG_WAITS) \
		PG_CONFIGS="$(PG_CONFIGS)" nice -n 10 pg/bench.sh

pg-strace: pg-tools
	nice -n 10 pg/strace.sh
