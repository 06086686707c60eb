/*
 * lazyrw: internal declarations shared by core.c (state, upgrade) and
 * interpose.c (the exported libc wrappers). Nothing here is exported.
 */
#ifndef LAZYRW_H
#define LAZYRW_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define LRW_VERSION "0.1.0"

/* Exported symbols; everything else is hidden by -fvisibility=hidden. */
#define LRW_API __attribute__((visibility("default")))

/* Descriptors >= LRW_MAX_FDS, and paths of LRW_PATH_LEN bytes or more, are
 * opened as the caller asked (eager). Override with -D at build time. */
#ifndef LRW_MAX_FDS
#define LRW_MAX_FDS 16384
#endif
#ifndef LRW_PATH_LEN
#define LRW_PATH_LEN 248
#endif

/* The 64-bit offset type of the *64 entry points, written without off64_t so
 * the same code builds on glibc and musl (which only has macros for them). */
typedef int64_t lrw_off64_t;

/* Real libc functions, resolved once with dlsym(RTLD_NEXT). Optional ones
 * (not in every libc) may be NULL. */
struct lrw_real {
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*open_2)(const char *, int);
	int (*open64_2)(const char *, int);
	int (*openat_2)(int, const char *, int);
	int (*openat64_2)(int, const char *, int);
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	void (*closefrom)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*pwrite64)(int, const void *, size_t, lrw_off64_t);
	ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
	ssize_t (*pwritev64)(int, const struct iovec *, int, lrw_off64_t);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev64v2)(int, const struct iovec *, int, lrw_off64_t, int);
	int (*ftruncate)(int, off_t);
	int (*ftruncate64)(int, lrw_off64_t);
	int (*truncate)(const char *, off_t);
	int (*truncate64)(const char *, lrw_off64_t);
	int (*fallocate)(int, int, off_t, off_t);
	int (*fallocate64)(int, int, lrw_off64_t, lrw_off64_t);
	int (*posix_fallocate)(int, off_t, off_t);
	int (*posix_fallocate64)(int, lrw_off64_t, lrw_off64_t);
	ssize_t (*copy_file_range)(int, lrw_off64_t *, int, lrw_off64_t *, size_t, unsigned);
};
extern struct lrw_real lrw_real;

/* Resolve lrw_real (idempotent; the constructor calls it, and so does any
 * wrapper that runs before the constructor). */
void lrw_init(void);
extern _Atomic int lrw_ready;
#define LRW_READY() do { \
	if (!atomic_load_explicit(&lrw_ready, memory_order_acquire)) \
		lrw_init(); \
	} while (0)

/* Open hook: if (dirfd, path, flags) is a read-write open of a relation file,
 * open it read-only, remember it, set *fd and return 1. Returns 0 when the
 * caller must do the open exactly as asked. */
int lrw_open_lazy(int dirfd, const char *path, int flags, int *fd);

/* Before a write-like call on fd: upgrade it if it is lazy. Returns 0 to go
 * on with the real call, or an errno value to fail it with. errno is kept.
 * trunc0 marks ftruncate(fd, 0), which may reopen with O_TRUNC (no copy). */
int lrw_before_write(int fd, const char *call, int trunc0);

/* After a successful dup/dup2/dup3/F_DUPFD of src to dst. errno is kept. */
void lrw_after_dup(int src, int dst);
/* Before dup2/dup3 to dst, which closes dst. */
void lrw_forget(int fd);
/* close_range/closefrom: forget every descriptor in [lo, hi]. */
void lrw_forget_range(unsigned lo, unsigned hi);

/* truncate(path, 0) of a relation file: open(O_WRONLY|O_TRUNC), close.
 * Returns 1 and sets *ret (0 or -1 with errno) when handled, else 0. */
int lrw_truncate0(const char *path, int *ret);

#endif
