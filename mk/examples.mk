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

# Where a one-thread commit's time goes, against pwrite + fdatasync (docs/PERFORMANCE.md,
# "Speed at the defaults"): `make breakdown [BENCH_DIR=/var/tmp] [BREAKDOWN_ARGS=-n 4000]`
.PHONY: breakdown
breakdown: $(BUILD)/breakdown
	$(BUILD)/breakdown -d $(BENCH_DIR) $(BREAKDOWN_ARGS)

# Where many writers' time goes, against unsafe from as many (docs/PERFORMANCE.md,
# "Where the time goes at 8 writers"): `make pipeline [BENCH_DIR=/var/tmp] [PIPELINE_ARGS=-t 8 -P]`
# (-g 8: groups of 8 pages over 2 files; -N: atomio on a null device, "What the CPU allows")
ALL_EXTRA += $(BUILD)/pipeline
$(BUILD)/pipeline: examples/pipeline.c $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)
.PHONY: pipeline
pipeline: $(BUILD)/pipeline
	$(BUILD)/pipeline -d $(BENCH_DIR) $(PIPELINE_ARGS)

# What a process costs more than a thread here: a wake-up across processes, a
# shared page's first touch (docs/PERFORMANCE.md, "Processes as cheap as
# threads"): `make procs-floor`
ALL_EXTRA += $(BUILD)/procs-floor
$(BUILD)/procs-floor: examples/procs-floor.c | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -pthread
.PHONY: procs-floor
procs-floor: $(BUILD)/procs-floor
	$(BUILD)/procs-floor
