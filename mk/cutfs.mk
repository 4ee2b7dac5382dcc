# cutfs (issue 16): a FUSE power-cut filesystem for real programs, and its test.
#   build/cutfs                  cutfs [--mode drop|tear] [--seed N] BACKING MOUNTPOINT
#   build/cutfs-log              an atomio workload with an oracle, run on cutfs by the test
# test/t_cutfs.sh (in make check) mounts it, cuts, remounts and checks.

FUSE_CFLAGS = $(shell pkg-config --cflags fuse3 2>/dev/null || echo -I/usr/include/fuse3)
FUSE_LIBS = $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3)

ALL_EXTRA += $(BUILD)/cutfs $(BUILD)/cutfs-log
CHECK_DEPS += $(BUILD)/cutfs $(BUILD)/cutfs-log

$(BUILD)/cutfs: cutfs/cutfs.c | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(FUSE_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(FUSE_LIBS) -pthread
$(BUILD)/cutfs-log: cutfs/cutfs-log.c $(BUILD)/libatomio.a | $(BUILD)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)
