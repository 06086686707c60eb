/*
 * lazyrw interposers: the exported libc entry points. Each one does the
 * lazyrw bookkeeping (core.c) and then calls the real function, so anything
 * that is not a read-write open of a relation file, or a write-like call on
 * such a descriptor, passes through unchanged.
 *
 * Every name a caller may bind is defined, including aliases that share an
 * address in glibc (open/open64, pwrite/pwrite64, ...): a preloaded library
 * only interposes the names it defines.
 */
#undef _FILE_OFFSET_BITS /* keep open, pwrite, ... from being renamed to *64 */
#undef _TIME_BITS
#undef _FORTIFY_SOURCE   /* fortified headers define open() inline */
#define _GNU_SOURCE
#include "lazyrw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

/* musl (before 1.2.4) defines the LFS64 names as macros. */
#undef open64
#undef openat64
#undef pwrite64
#undef pwritev64
#undef ftruncate64
#undef truncate64
#undef fallocate64
#undef posix_fallocate64
#undef fcntl64

/* ---- opens ------------------------------------------------------------- */

static int needs_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define MODE_ARG(last, flags, mode) \
	mode_t mode = 0; \
	if (needs_mode(flags)) { \
		va_list ap; \
		va_start(ap, last); \
		mode = (mode_t)va_arg(ap, int); \
		va_end(ap); \
	}

/* Try the lazy (read-only) open; fall through to the real call otherwise. */
#define LAZY_OPEN(dirfd, path, flags) do { \
	int fd_; \
	LRW_READY(); \
	if (lrw_open_lazy(dirfd, path, flags, &fd_)) \
		return fd_; \
	} while (0)

LRW_API int open(const char *path, int flags, ...)
{
	MODE_ARG(flags, flags, mode);
	LAZY_OPEN(AT_FDCWD, path, flags);
	return lrw_real.open(path, flags, mode);
}

LRW_API int open64(const char *path, int flags, ...)
{
	MODE_ARG(flags, flags, mode);
	LAZY_OPEN(AT_FDCWD, path, flags);
	return lrw_real.open64(path, flags, mode);
}

LRW_API int openat(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG(flags, flags, mode);
	LAZY_OPEN(dirfd, path, flags);
	return lrw_real.openat(dirfd, path, flags, mode);
}

LRW_API int openat64(int dirfd, const char *path, int flags, ...)
{
	MODE_ARG(flags, flags, mode);
	LAZY_OPEN(dirfd, path, flags);
	return lrw_real.openat64(dirfd, path, flags, mode);
}

/* _FORTIFY_SOURCE variants (no mode argument; they reject O_CREAT). */
LRW_API int __open_2(const char *path, int flags);
LRW_API int __open64_2(const char *path, int flags);
LRW_API int __openat_2(int dirfd, const char *path, int flags);
LRW_API int __openat64_2(int dirfd, const char *path, int flags);

LRW_API int __open_2(const char *path, int flags)
{
	LAZY_OPEN(AT_FDCWD, path, flags);
	return lrw_real.open_2 ? lrw_real.open_2(path, flags) : lrw_real.open(path, flags);
}

LRW_API int __open64_2(const char *path, int flags)
{
	LAZY_OPEN(AT_FDCWD, path, flags);
	return lrw_real.open64_2 ? lrw_real.open64_2(path, flags) : lrw_real.open64(path, flags);
}

LRW_API int __openat_2(int dirfd, const char *path, int flags)
{
	LAZY_OPEN(dirfd, path, flags);
	return lrw_real.openat_2 ? lrw_real.openat_2(dirfd, path, flags)
				 : lrw_real.openat(dirfd, path, flags);
}

LRW_API int __openat64_2(int dirfd, const char *path, int flags)
{
	LAZY_OPEN(dirfd, path, flags);
	return lrw_real.openat64_2 ? lrw_real.openat64_2(dirfd, path, flags)
				   : lrw_real.openat64(dirfd, path, flags);
}

/* ---- closes and duplicates: keep the table in step with descriptors ---- */

LRW_API int close(int fd)
{
	LRW_READY();
	lrw_forget(fd);
	return lrw_real.close(fd);
}

LRW_API int close_range(unsigned lo, unsigned hi, int flags)
{
	LRW_READY();
	if (!lrw_real.close_range) {
		errno = ENOSYS;
		return -1;
	}
	int r = lrw_real.close_range(lo, hi, flags);
	/* CLOSE_RANGE_CLOEXEC (4) only marks them; anything else closes. */
	if (r == 0 && !(flags & 4))
		lrw_forget_range(lo, hi);
	return r;
}

LRW_API void closefrom(int lo)
{
	LRW_READY();
	if (lo >= 0)
		lrw_forget_range((unsigned)lo, ~0u);
	if (lrw_real.closefrom)
		lrw_real.closefrom(lo);
}

LRW_API int dup(int fd)
{
	LRW_READY();
	int r = lrw_real.dup(fd);
	if (r >= 0)
		lrw_after_dup(fd, r);
	return r;
}

LRW_API int dup2(int fd, int to)
{
	LRW_READY();
	int r = lrw_real.dup2(fd, to);
	if (r >= 0)
		lrw_after_dup(fd, r);
	return r;
}

LRW_API int dup3(int fd, int to, int flags)
{
	LRW_READY();
	int r = lrw_real.dup3(fd, to, flags);
	if (r >= 0)
		lrw_after_dup(fd, r);
	return r;
}

/* fcntl's third argument is an int or a pointer depending on cmd; like libc
 * itself, pass it on as a pointer-sized value. */
static int do_fcntl(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	int r = real(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		lrw_after_dup(fd, r);
	return r;
}

LRW_API int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	LRW_READY();
	return do_fcntl(lrw_real.fcntl, fd, cmd, arg);
}

LRW_API int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	LRW_READY();
	return do_fcntl(lrw_real.fcntl64 ? lrw_real.fcntl64 : lrw_real.fcntl, fd, cmd, arg);
}

/* ---- write-like calls: upgrade a lazy descriptor first ------------------ */

/* On a failed upgrade: fail the call with the reopen's errno, -1 returned. */
#define UPGRADE(fd, name, trunc0) do { \
	LRW_READY(); \
	int e_ = lrw_before_write(fd, name, trunc0); \
	if (e_) { \
		errno = e_; \
		return -1; \
	} \
	} while (0)

#define REQUIRE(f) do { if (!lrw_real.f) { errno = ENOSYS; return -1; } } while (0)

LRW_API ssize_t write(int fd, const void *buf, size_t n)
{
	UPGRADE(fd, "write", 0);
	return lrw_real.write(fd, buf, n);
}

LRW_API ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	UPGRADE(fd, "writev", 0);
	return lrw_real.writev(fd, iov, cnt);
}

LRW_API ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	UPGRADE(fd, "pwrite", 0);
	return lrw_real.pwrite(fd, buf, n, off);
}

LRW_API ssize_t pwrite64(int fd, const void *buf, size_t n, lrw_off64_t off)
{
	UPGRADE(fd, "pwrite64", 0);
	return lrw_real.pwrite64(fd, buf, n, off);
}

LRW_API ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	UPGRADE(fd, "pwritev", 0);
	return lrw_real.pwritev(fd, iov, cnt, off);
}

LRW_API ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, lrw_off64_t off)
{
	UPGRADE(fd, "pwritev64", 0);
	return lrw_real.pwritev64(fd, iov, cnt, off);
}

LRW_API ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	UPGRADE(fd, "pwritev2", 0);
	REQUIRE(pwritev2);
	return lrw_real.pwritev2(fd, iov, cnt, off, fl);
}

LRW_API ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, lrw_off64_t off, int fl)
{
	UPGRADE(fd, "pwritev64v2", 0);
	REQUIRE(pwritev64v2);
	return lrw_real.pwritev64v2(fd, iov, cnt, off, fl);
}

LRW_API ssize_t copy_file_range(int in, lrw_off64_t *inoff, int out, lrw_off64_t *outoff,
	size_t n, unsigned fl)
{
	UPGRADE(out, "copy_file_range", 0);
	REQUIRE(copy_file_range);
	return lrw_real.copy_file_range(in, inoff, out, outoff, n, fl);
}

/* ftruncate(fd, 0) may reopen with O_TRUNC, which copies no data
 * (PG 14 empties a dropped relation's first segment this way). */
LRW_API int ftruncate(int fd, off_t len)
{
	UPGRADE(fd, "ftruncate", len == 0);
	return lrw_real.ftruncate(fd, len);
}

LRW_API int ftruncate64(int fd, lrw_off64_t len)
{
	UPGRADE(fd, "ftruncate64", len == 0);
	return lrw_real.ftruncate64(fd, len);
}

LRW_API int fallocate(int fd, int mode, off_t off, off_t len)
{
	UPGRADE(fd, "fallocate", 0);
	return lrw_real.fallocate(fd, mode, off, len);
}

LRW_API int fallocate64(int fd, int mode, lrw_off64_t off, lrw_off64_t len)
{
	UPGRADE(fd, "fallocate64", 0);
	return lrw_real.fallocate64(fd, mode, off, len);
}

/* posix_fallocate returns the error number instead of setting errno. */
LRW_API int posix_fallocate(int fd, off_t off, off_t len)
{
	LRW_READY();
	int e = lrw_before_write(fd, "posix_fallocate", 0);
	return e ? e : lrw_real.posix_fallocate(fd, off, len);
}

LRW_API int posix_fallocate64(int fd, lrw_off64_t off, lrw_off64_t len)
{
	LRW_READY();
	int e = lrw_before_write(fd, "posix_fallocate64", 0);
	return e ? e : lrw_real.posix_fallocate64(fd, off, len);
}

/* ---- path truncate: truncate(path, 0) copies the whole file up first on
 * OverlayFS; open(O_TRUNC) copies nothing. Postgres 15+ empties dropped
 * relation files with truncate(path, 0). */

LRW_API int truncate(const char *path, off_t len)
{
	int r;
	LRW_READY();
	if (len == 0 && lrw_truncate0(path, &r))
		return r;
	return lrw_real.truncate(path, len);
}

LRW_API int truncate64(const char *path, lrw_off64_t len)
{
	int r;
	LRW_READY();
	if (len == 0 && lrw_truncate0(path, &r))
		return r;
	return lrw_real.truncate64(path, len);
}
