# Wear (issue 7): the compression measurement.  (The library's -llz4 is in the
# top Makefile's LIBS: fragments included before this one take LIBS with :=.)

ALL_EXTRA += $(BUILD)/bench-compress

$(BUILD)/bench-compress: examples/bench-compress.c | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $< -llz4 -lzstd

# LZ4 against zstd on the benchmark's pages: `make bench-compress`
.PHONY: bench-compress
bench-compress: $(BUILD)/bench-compress
	$(BUILD)/bench-compress
