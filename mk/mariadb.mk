# MariaDB without its doublewrite buffer (issue 16): mariadb/.  Not part of
# check; its packages are apart too (scripts/deps.sh mariadb: mariadb-server, sysbench).
#   make check-mariadb       short: a few cuts and kills per mode, one bench round
#   make mariadb-crash       MARIADB_MODE=atomio CUTS=200 KILLS=100 (or dw, nodw)
#   make mariadb-bench       PAIRS=3 SECS=30: TPS and device bytes per transaction
#   make mariadb-bench-heavy PAIRS=3 SECS=30: the same where doublewrite costs
#                            (mariadb/bench.sh heavy: data 13x the buffer
#                            pool, 16 threads; modes dw nodw atomio atomio+raw)
# Mode atomio needs the preload library: PRELOAD (default build/libatomio_preload.so).

PRELOAD ?= $(abspath $(BUILD)/libatomio_preload.so)
MARIADB_MODE ?= atomio
CUTS ?= 200
KILLS ?= 100
PAIRS ?= 3
SECS ?= 30
MARIADB_MODES = dw nodw $(if $(wildcard $(PRELOAD)),atomio)

.PHONY: mariadb-deps check-mariadb mariadb-crash mariadb-bench mariadb-bench-heavy
mariadb-deps: deps
	sh scripts/deps.sh mariadb

# dw and atomio must pass every round; nodw is expected to fail rounds (torn
# pages): its count is reported, not judged.
check-mariadb: mariadb-deps
	$(MAKE) $(BUILD)/cutfs $(BUILD)/atomio
	@$(if $(wildcard $(PRELOAD)),,echo "check-mariadb: $(PRELOAD) is not built: mode atomio left out";)
	mariadb/crash.sh dw 3 2
	-mariadb/crash.sh nodw 3 0
	$(if $(wildcard $(PRELOAD)),PRELOAD=$(PRELOAD) mariadb/crash.sh atomio 5 3)
	PRELOAD=$(wildcard $(PRELOAD)) PAIRS=1 SECS=10 MY_TABLE_SIZE=20000 mariadb/bench.sh

mariadb-crash: mariadb-deps
	$(MAKE) $(BUILD)/cutfs $(BUILD)/atomio
	PRELOAD=$(PRELOAD) mariadb/crash.sh $(MARIADB_MODE) $(CUTS) $(KILLS)

mariadb-bench: mariadb-deps
	PRELOAD=$(wildcard $(PRELOAD)) PAIRS=$(PAIRS) SECS=$(SECS) mariadb/bench.sh

mariadb-bench-heavy: mariadb-deps
	PRELOAD=$(wildcard $(PRELOAD)) PAIRS=$(PAIRS) SECS=$(SECS) mariadb/bench.sh heavy
