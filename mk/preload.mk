# The preload library (issue 16): build/libatomio_preload.so, loaded with
# LD_PRELOAD, gives unmodified programs atomic writes to the files that
# ATOMIO_FILES names (man/atomio_preload.7).  libatomio is linked in, hidden.
# Tests: test/t_preload*.sh and test/t_preload_sim (make check).
PRELOAD_SRCS := $(wildcard preload/*.c)
PRELOAD_OBJS := $(patsubst preload/%.c,$(BUILD)/preload/%.o,$(PRELOAD_SRCS))
PRELOAD_SO := $(BUILD)/libatomio_preload.so
# The wrappers define libc's names, some of which no header declares
# (__open_2, __read_chk, ...).
PRELOAD_CFLAGS := $(BASE_CFLAGS) -Ipreload -Wno-missing-prototypes -fvisibility=hidden

$(BUILD)/preload:
	mkdir -p $@
$(BUILD)/preload/%.o: preload/%.c preload/preload.h $(wildcard src/*.h) include/atomio.h | $(BUILD)/preload
	$(CC) $(PRELOAD_CFLAGS) $(CFLAGS) -fPIC -c -o $@ $<
$(PRELOAD_SO): $(PRELOAD_OBJS) $(LIB_OBJS) preload/libatomio_preload.map
	$(CC) -shared -Wl,--version-script=preload/libatomio_preload.map -o $@ $(PRELOAD_OBJS) $(LIB_OBJS) $(LIBS) -ldl

ALL_EXTRA += $(PRELOAD_SO)
