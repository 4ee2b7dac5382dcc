/*
 * faultsys.h: a fault-injecting ops backend (issue 3, item 4).
 *
 * It wraps the real Linux ops table and counts the calls of each kind; armed
 * with a plan, it makes the Nth call (0-based, counted from arming) of one
 * kind fail in one of these ways:
 *   FK_ERROR        return -err without doing anything;
 *   FK_ERROR_AFTER  do the call, then return -err (the outcome the caller
 *                   cannot know: a write that reached the media, an fsync
 *                   that synced, reported as failed);
 *   FK_EINTR        return -EINTR without doing anything;
 *   FK_SHORT        pread / pwritev: transfer about half (a multiple of
 *                   4096 on O_DIRECT descriptors) and report that.
 * With persist set, every later call of that kind fails the same way (a disk
 * that died).  One plan at a time; the counters are process-wide.
 */
#ifndef ATOMIO_FAULTSYS_H
#define ATOMIO_FAULTSYS_H

#include <stdbool.h>
#include <stdint.h>

enum fault_op {
	FOP_OPEN,
	FOP_CLOSE,
	FOP_PREAD,
	FOP_PWRITEV,
	FOP_FSYNC,
	FOP_FDATASYNC,
	FOP_FTRUNCATE,
	FOP_FSTAT,
	FOP_LSTAT,
	FOP_FSTATFS,
	FOP_STATX,
	FOP_FLOCK,
	FOP_RENAME,
	FOP_UNLINK,
	FOP_GETRANDOM,
	FOP_REALPATH,
	FOP_LSEEK,
	FOP_FALLOCATE,
	FOP_OFDLOCK,
	FOP_COUNT
};

enum fault_kind { FK_NONE, FK_ERROR, FK_ERROR_AFTER, FK_EINTR, FK_SHORT };

struct fault_plan {
	enum fault_op op;
	uint64_t nth;
	enum fault_kind kind;
	int err;      /* positive errno for FK_ERROR / FK_ERROR_AFTER */
	bool persist; /* keep failing every later call of op */
};

/* Install the wrapper as atomio's ops table (and restore the default). */
void fault_install(void);
void fault_uninstall(void);

/* Arm a plan (FK_NONE: only count) and zero the per-op counters. */
void fault_arm(const struct fault_plan *p);
void fault_disarm(void);

/* Act as a kernel or filesystem that refuses RWF_DSYNC (EOPNOTSUPP) for
 * writes at offsets >= off (0: accept it everywhere). */
void fault_refuse_dsync_from(uint64_t off);

uint64_t fault_calls(enum fault_op op); /* calls of op since arming */
bool fault_fired(void);                 /* the armed fault was injected */
/* The fault injected made a durability call (fsync, fdatasync, or a write
 * with RWF_DSYNC) report an error. */
bool fault_sync_error(void);
uint64_t fault_total_injected(void);    /* faults injected since install */
const char *fault_op_name(enum fault_op op);
const char *fault_kind_name(enum fault_kind k);

#endif
