# Example programs and benchmarks (examples/): the engine benchmark, the compression measurement, the breakdown of a commit's time.

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


ALL_EXTRA += $(BUILD)/breakdown

$(BUILD)/breakdown: examples/breakdown.c $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)

# Where a one-thread commit's time goes, against pwrite + fdatasync (README,
# "Speed at the defaults"): `make breakdown [BENCH_DIR=/var/tmp] [BREAKDOWN_ARGS=-n 4000]`
.PHONY: breakdown
breakdown: $(BUILD)/breakdown
	$(BUILD)/breakdown -d $(BENCH_DIR) $(BREAKDOWN_ARGS)
