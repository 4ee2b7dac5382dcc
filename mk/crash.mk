# Crash consistency (issue 3): the simulator suite (test/t_crash.c, t_simfs.c),
# real processes killed (test/t_crash_kill.c), mutants of the core that the
# simulator must catch (test/t_crash_mutants.sh), and the long run.
#
#   make crash-long SECONDS=600     simulated crashes and killed processes for as long as asked
#   make check-crash-procs          the mutants whose simulated processes die (not in make check:
#                                   about 20 minutes on two loaded cores)

SECONDS ?= 600

# Mutants: one core source file with one crash-safety defence removed
# (test/crash/mutate.sh), linked in front of the normal library.
CRASH_MUTANTS := seq epoch csum resync rfsync dsync resize ckptsync dirsync bgsync bgcut guardall sfrtrust zeroover \
	pad paddsync homeredo reconcile sbsync syncall adoptlog padturn ckptany lzhome lzsync lzread lzchunk lzorder
CRASH_MUTANT_BINS := $(addprefix $(BUILD)/mutants/t_crash-,$(CRASH_MUTANTS))
CHECK_DEPS += $(CRASH_MUTANT_BINS)

$(BUILD)/mutants:
	mkdir -p $@
$(BUILD)/mutants/%.c: test/crash/mutate.sh $(LIB_SRCS) | $(BUILD)/mutants
	test/crash/mutate.sh $* > $@.tmp && mv $@.tmp $@
$(BUILD)/mutants/%.o: $(BUILD)/mutants/%.c $(wildcard src/*.h) include/atomio.h
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(BUILD)/mutants/t_crash-%: test/t_crash.c $(TEST_SUPPORT_LIB) $(TEST_HDRS) $(BUILD)/mutants/%.o $(BUILD)/libatomio.a
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) -Itest $(CFLAGS) $(LDFLAGS) -DATOMIO_DEBUG -o $@ test/t_crash.c $(TEST_SUPPORT_LIB) $(BUILD)/mutants/$*.o $(BUILD)/libatomio.a $(LIBS)
.PRECIOUS: $(BUILD)/mutants/%.c $(BUILD)/mutants/%.o

.PHONY: check-crash-procs
check-crash-procs: deps
	$(MAKE) $(BUILD)/test/t_crash $(CRASH_MUTANT_BINS)
	CRASH_MUTANTS_SET=procs sh test/t_crash_mutants.sh

.PHONY: crash-long
crash-long: deps
	$(MAKE) $(BUILD)/test/t_crash $(BUILD)/test/t_crash_kill
	@echo "crash-long: $(SECONDS) s of simulated crashes, and in parallel of killed processes"
	@$(BUILD)/test/t_crash --seconds $(SECONDS) > $(BUILD)/crash-long-sim.log 2>&1 & sim=$$!; \
	 $(BUILD)/test/t_crash_kill --seconds $(SECONDS) > $(BUILD)/crash-long-kill.log 2>&1; kill_rc=$$?; \
	 wait $$sim; sim_rc=$$?; \
	 grep -A12 -m1 'CRASH-CHECK FAILED' $(BUILD)/crash-long-sim.log; tail -n 5 $(BUILD)/crash-long-sim.log; \
	 tail -n 3 $(BUILD)/crash-long-kill.log; \
	 echo "crash-long: logs in $(BUILD)/crash-long-sim.log and $(BUILD)/crash-long-kill.log"; \
	 test $$sim_rc -eq 0 -a $$kill_rc -eq 0
