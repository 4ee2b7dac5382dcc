# Fuzzing (hostile input): the libFuzzer target on log parsing and recovery, its seed corpus, and `make fuzz`.
#   (issue 8; issue 3 items 4 and 6)
#   make fuzz FUZZ_SECONDS=N   run the fuzzer N seconds (corpus kept in build/fuzz/corpus)
#   make fuzz-corpus           rewrite the checked-in seeds in fuzz/corpus
# `make check` builds the target when clang is installed and test/t_fuzz.sh
# runs it for a bounded number of inputs (FUZZ_CHECK_RUNS, default 3000); without clang
# that test is skipped.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 600
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer -DATOMIO_DEBUG -fsanitize-coverage-ignorelist=fuzz/coverage-ignore.txt
HAVE_FUZZ_CC := $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo yes)

$(BUILD)/fuzz:
	mkdir -p $@

$(BUILD)/fuzz/fuzz_recover: fuzz/fuzz_recover.c $(LIB_SRCS) $(wildcard src/*.h) include/atomio.h \
		test/support/logpatch.h fuzz/coverage-ignore.txt | $(BUILD)/fuzz
	$(FUZZ_CC) $(BASE_CFLAGS) -Itest $(FUZZ_FLAGS) -o $@ fuzz/fuzz_recover.c $(LIB_SRCS) $(LIBS)

$(BUILD)/fuzz/mkcorpus: fuzz/mkcorpus.c $(TEST_HDRS) $(BUILD)/libatomio.a | $(BUILD)/fuzz
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libatomio.a $(LIBS)

.PHONY: fuzz fuzz-corpus
fuzz: deps
	$(MAKE) $(BUILD)/fuzz/fuzz_recover
	fuzz/run.sh $(FUZZ_SECONDS) $(BUILD)/fuzz/corpus

fuzz-corpus: $(BUILD)/fuzz/mkcorpus
	mkdir -p fuzz/corpus
	rm -f fuzz/corpus/*
	$(BUILD)/fuzz/mkcorpus fuzz/corpus

ifeq ($(HAVE_FUZZ_CC),yes)
CHECK_DEPS += $(BUILD)/fuzz/fuzz_recover
endif
