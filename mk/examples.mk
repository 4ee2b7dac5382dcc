# Example programs and benchmarks (examples/): the engine benchmark, the compression measurement.

ALL_EXTRA += $(BUILD)/bench-engine

$(BUILD)/bench-engine: examples/bench-engine.c $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)

# Side by side, medians of REPS: `make bench-engine [BENCH_DIR=/var/tmp] [BENCH_ARGS=...]`
BENCH_DIR ?= /var/tmp
.PHONY: bench-engine
bench-engine: $(BUILD)/bench-engine
	$(BUILD)/bench-engine -d $(BENCH_DIR) $(BENCH_ARGS)


ALL_EXTRA += $(BUILD)/bench-compress

$(BUILD)/bench-compress: examples/bench-compress.c | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -llz4 -lzstd

# LZ4 against zstd on the benchmark's pages: `make bench-compress`
.PHONY: bench-compress
bench-compress: $(BUILD)/bench-compress
	$(BUILD)/bench-compress
