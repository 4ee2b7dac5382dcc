/*
 * sysio.h: the SQLite VFS's own system calls (sysio.c): each returns a
 * result >= 0 or a negative errno.
 */
#ifndef ATOMIO_SQLITE_SYSIO_H
#define ATOMIO_SQLITE_SYSIO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sys.h"

const struct atomio_sysops *os(void);
int f_open(const char *path, int flags, mode_t mode);
void f_close(int fd);
int f_fstat(int fd, struct stat *sb);
int f_flock(int fd, int op);
int f_unlink(const char *path);
int f_exists(const char *path);
ssize_t f_pread_all(int fd, void *buf, size_t len, off_t off);
ssize_t f_read_all(int fd, void *buf, size_t len);
int f_pwrite_all(int fd, const void *buf, size_t len, off_t off);
int f_write_all(int fd, const void *buf, size_t len);
int f_fdatasync(int fd);
int f_ftruncate(int fd, off_t size);
int f_fsync(int fd);
ino_t f_ino(const char *path);
int64_t f_size(int fd);
bool f_btime(const char *path, struct statx_timestamp *t);
int ofd(int fd, short type, off_t start, off_t len);
int lock_rc(int r, int ioerr);
int sync_dir_of(const char *path);

#endif
