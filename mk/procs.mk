# Many processes, one store: mutants of the shared store's defences that its
# tests must catch (test/procs/mutate.sh, test/t_procs_mutants.sh).  The
# tests themselves (t_procs_kill, t_adopt, t_shm_dead) are ordinary test/t_*.c.

PROCS_MUTANTS := pad homeredo reconcile reap inplace normalize reconcilegen leaderskip
# the test that catches each (test/procs/mutate.sh says why)
procs_test_of = $(if $(filter inplace normalize,$(1)),t_shm_dead,$(if $(filter reconcilegen leaderskip,$(1)),t_ckpt_dead_full,t_adopt))
PROCS_MUTANT_BINS := $(foreach m,$(PROCS_MUTANTS),$(BUILD)/mutants/procs-$(m))
CHECK_DEPS += $(PROCS_MUTANT_BINS)

$(BUILD)/mutants/procs-%.c: test/procs/mutate.sh $(LIB_SRCS) | $(BUILD)/mutants
	test/procs/mutate.sh $* > $@.tmp && mv $@.tmp $@
$(BUILD)/mutants/procs-%.o: $(BUILD)/mutants/procs-%.c $(wildcard src/*.h) include/atomio.h
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
.SECONDEXPANSION:
$(BUILD)/mutants/procs-%: test/$$(call procs_test_of,$$*).c $(TEST_SUPPORT_LIB) $(TEST_HDRS) $(BUILD)/mutants/procs-%.o $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) $(LDFLAGS) -DATOMIO_DEBUG -o $@ $< $(TEST_SUPPORT_LIB) $(BUILD)/mutants/procs-$*.o $(BUILD)/libatomio.a $(LIBS)
.PRECIOUS: $(BUILD)/mutants/procs-%.c $(BUILD)/mutants/procs-%.o

# The multi-process fault campaign (test/t_crash_campaign.c, docs/CRASH.md):
# a process killed at every step of every role, power cuts after each kill,
# over many seeds; its slice (the points that pass, one seed) runs in make
# check.  Niced: it is long.
#   make crash-procs CAMPAIGN_SEEDS=20 CAMPAIGN_STEPS=40 CAMPAIGN_POINTS=all
CAMPAIGN_SEEDS ?= 20
CAMPAIGN_STEPS ?= 40
CAMPAIGN_POINTS ?= all
.PHONY: crash-procs
crash-procs: deps
	$(MAKE) $(BUILD)/test/t_crash_campaign
	@echo "crash-procs: kill points $(CAMPAIGN_POINTS), $(CAMPAIGN_SEEDS) seeds, steps below $(CAMPAIGN_STEPS); log in $(BUILD)/crash-procs.log"
	@nice -n 10 $(BUILD)/test/t_crash_campaign --points $(CAMPAIGN_POINTS) --seeds $(CAMPAIGN_SEEDS) \
		--steps $(CAMPAIGN_STEPS) > $(BUILD)/crash-procs.log 2>&1; rc=$$?; \
	 grep -A3 'CAMPAIGN FAILED' $(BUILD)/crash-procs.log | head -40; \
	 tail -n 9 $(BUILD)/crash-procs.log; exit $$rc
# its locks come to the harness first: a process may die between two calls
$(BUILD)/test/t_crash_campaign $(BUILD)/san/test/t_crash_campaign: private LDFLAGS += -Wl,--wrap=pthread_mutex_lock
