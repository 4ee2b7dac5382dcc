# The engine (issue 4): io_uring through liburing, the engine benchmark.

ALL_EXTRA += $(BUILD)/bench-engine

$(BUILD)/bench-engine: examples/bench-engine.c $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)

# Side by side, medians of REPS: `make bench-engine [BENCH_DIR=/var/tmp] [BENCH_ARGS=...]`
BENCH_DIR ?= /var/tmp
.PHONY: bench-engine
bench-engine: $(BUILD)/bench-engine
	$(BUILD)/bench-engine -d $(BENCH_DIR) $(BENCH_ARGS)
