# fio ioengine (issue 15): fio/engine.c, fio/*.fio, test/t_fio*.sh.
#   build/atomio_fio.so   fio --ioengine=external:build/atomio_fio.so
#   make fio              fetches Debian's source of the installed fio (for its
#                         headers) and builds the engine; not in the default build
#   make bench-fio        the fio/ job files side by side, one table (not in check)
#   make check-fio-crash  the long crash test (more kills than check's)
# `make check` builds the engine where fio and its source can be had; its tests
# skip (77) elsewhere.

FIO_SRC := $(BUILD)/fio-src/fio
# fio's headers are GNU C (typeof, statement expressions); warnings in them
# are theirs (-isystem), the engine itself gets the project's.
FIO_CFLAGS := -std=gnu11 -D_GNU_SOURCE -pthread -Iinclude $(WARN) -isystem $(FIO_SRC) \
	-include $(FIO_SRC)/config-host.h -fPIC

.PHONY: fio fio-try bench-fio check-fio-crash
fio: deps
	scripts/fio-source.sh
	$(MAKE) $(BUILD)/atomio_fio.so

# For make check: build the engine if the source can be had, else say why.
fio-try: $(LIB_OBJS)
	@scripts/fio-source.sh --try
	@if [ -f $(FIO_SRC)/config-host.h ]; then $(MAKE) --no-print-directory $(BUILD)/atomio_fio.so $(BUILD)/fio/atomio_fio_otherfio.so; fi
CHECK_DEPS += fio-try

$(FIO_SRC)/config-host.h:
	scripts/fio-source.sh

# The engine carries libatomio inside (hidden): only get_ioengine is exported;
# fio's own functions (log_err, fio_gettime, ...) come from the fio binary.
$(BUILD)/atomio_fio.so: fio/engine.c fio/atomio_fio.map $(FIO_SRC)/config-host.h $(LIB_OBJS) include/atomio.h
	$(CC) $(FIO_CFLAGS) $(CFLAGS) \
		-DATOMIO_FIO_BUILT_FOR="\"$$(sed -n 's/^FIO_VERSION = //p' $(FIO_SRC)/FIO-VERSION-FILE)\"" \
		-shared -Wl,--version-script=fio/atomio_fio.map -o $@ fio/engine.c $(LIB_OBJS) $(LIBS) -ldl

bench-fio: fio
	$(MAKE) $(BUILD)/atomio
	scripts/bench-fio.sh $(BENCH_FIO_ARGS)

check-fio-crash: fio
	FIO_CRASH_KILLS=$${FIO_CRASH_KILLS:-20} test/t_fio_crash.sh

# The same engine built for a fio that is not this one: t_fio checks it refuses to load.
$(BUILD)/fio/atomio_fio_otherfio.so: fio/engine.c fio/atomio_fio.map $(FIO_SRC)/config-host.h $(LIB_OBJS) include/atomio.h
	mkdir -p $(BUILD)/fio
	$(CC) $(FIO_CFLAGS) $(CFLAGS) -DATOMIO_FIO_BUILT_FOR='"fio-0.0-other"' \
		-shared -Wl,--version-script=fio/atomio_fio.map -o $@ fio/engine.c $(LIB_OBJS) $(LIBS) -ldl
