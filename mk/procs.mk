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
