/*
 * lazyrw core: the per-descriptor table, which paths are relation files, the
 * read-only open, and the upgrade to read-write on the first write.
 *
 * Every function here is called from inside an intercepted libc call, so:
 * no malloc, no stdio, errno preserved, and every libc function we also
 * intercept is called through lrw_real (a direct call would come back to us).
 */
#undef _FILE_OFFSET_BITS
#undef _TIME_BITS
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#include "lazyrw.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct lrw_real lrw_real;

/* ---- settings, read once at load time ---------------------------------- */

_Atomic int lrw_ready;           /* lrw_real resolved */
static int g_debug;              /* LAZYRW_DEBUG=1: log upgrades to stderr */
static int g_stats;              /* LAZYRW_STATS=1: print counters at exit */
static char g_probe[4096];       /* LAZYRW_PROBE_FILE, created on first lazy open */
static _Atomic int g_probe_done;

static _Atomic unsigned long n_lazy, n_upgrade, n_trunc;

/* ---- the table ---------------------------------------------------------
 * One slot per descriptor number, mmap'ed once at load (not at all when
 * LAZYRW_DISABLE=1: then g_slots stays NULL and everything passes through).
 * A slot is FREE, LAZY (fd is our read-only stand-in for a read-write open of
 * path), or BUSY (one thread is reading or changing it; others spin). */
enum { FREE = 0, LAZY = 1, BUSY = 2 };

struct slot {
	_Atomic uint32_t state;
	int flags;                /* open flags for the read-write reopen */
	char path[LRW_PATH_LEN];  /* as the caller passed it */
};

static struct slot *_Atomic g_slots;
static _Atomic int g_busy;        /* slots currently BUSY (see atfork_child) */

static int enabled(void)
{
	return atomic_load_explicit(&g_slots, memory_order_acquire) != NULL;
}

static struct slot *slot_of(int fd)
{
	struct slot *t = atomic_load_explicit(&g_slots, memory_order_acquire);
	if (!t || fd < 0 || fd >= LRW_MAX_FDS)
		return NULL;
	return &t[fd];
}

/* Lock a slot; returns the state it had (FREE or LAZY). */
static uint32_t slot_lock(struct slot *s)
{
	for (;;) {
		uint32_t cur = atomic_load_explicit(&s->state, memory_order_acquire);
		if (cur != BUSY && atomic_compare_exchange_weak_explicit(&s->state, &cur, BUSY,
				memory_order_acquire, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&g_busy, 1, memory_order_relaxed);
			return cur;
		}
		if (cur == BUSY)
			sched_yield();
	}
}

static void slot_unlock(struct slot *s, uint32_t state)
{
	atomic_fetch_sub_explicit(&g_busy, 1, memory_order_relaxed);
	atomic_store_explicit(&s->state, state, memory_order_release);
}

/* Lazy slots only; the common case (not lazy) is one atomic load. */
static struct slot *lazy_slot(int fd)
{
	struct slot *s = slot_of(fd);
	if (s && atomic_load_explicit(&s->state, memory_order_acquire) == FREE)
		return NULL;
	return s;
}

/* ---- logging without stdio (stack buffer, one write(2)) ----------------- */

struct lbuf { char b[LRW_PATH_LEN + 256]; size_t n; };

static void lb_s(struct lbuf *l, const char *s)
{
	while (*s && l->n < sizeof(l->b) - 1)
		l->b[l->n++] = *s++;
}

static void lb_u(struct lbuf *l, unsigned long v)
{
	char t[24];
	int i = 0;
	do { t[i++] = (char)('0' + v % 10); v /= 10; } while (v);
	while (i && l->n < sizeof(l->b) - 1)
		l->b[l->n++] = t[--i];
}

static void lb_i(struct lbuf *l, long v)
{
	if (v < 0) { lb_s(l, "-"); lb_u(l, (unsigned long)-v); } else lb_u(l, (unsigned long)v);
}

static void lb_flush(struct lbuf *l, int fd)
{
	l->b[l->n++] = '\n';
	if (lrw_real.write)
		(void)!lrw_real.write(fd, l->b, l->n);
}

static void lb_head(struct lbuf *l)
{
	l->n = 0;
	lb_s(l, "lazyrw[");
	lb_i(l, getpid());
	lb_s(l, "]: ");
}

/* ---- resolving libc ---------------------------------------------------- */

static void *need(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (!p) {
		struct lbuf l = { .n = 0 };
		lb_s(&l, "lazyrw: FATAL: libc symbol not found: ");
		lb_s(&l, name);
		l.b[l.n++] = '\n';
		/* write() would be our own wrapper, possibly unresolved: raw syscall. */
		(void)!syscall(SYS_write, 2, l.b, l.n);
		abort();
	}
	return p;
}

#define NEED(f) (lrw_real.f = need(#f))
/* Optional names; a missing *64 alias falls back to the base function only
 * where off_t is 64-bit, so the two are the same call. */
#define MAYBE(f) (lrw_real.f = dlsym(RTLD_NEXT, #f))
#define ALIAS64(f64, f) do { MAYBE(f64); \
	if (!lrw_real.f64 && sizeof(off_t) == 8) lrw_real.f64 = (void *)lrw_real.f; \
	if (!lrw_real.f64) lrw_real.f64 = need(#f64); } while (0)

static void atfork_child(void);

void lrw_init(void)
{
	if (atomic_load_explicit(&lrw_ready, memory_order_acquire))
		return;
	/* Racing first calls both resolve the same values; harmless. */
	NEED(open); NEED(openat); NEED(close); NEED(dup); NEED(dup2); NEED(dup3);
	NEED(fcntl); NEED(write); NEED(writev); NEED(pwrite); NEED(pwritev);
	NEED(ftruncate); NEED(truncate); NEED(fallocate); NEED(posix_fallocate);
	ALIAS64(open64, open); ALIAS64(openat64, openat);
	ALIAS64(pwrite64, pwrite); ALIAS64(pwritev64, pwritev);
	ALIAS64(ftruncate64, ftruncate); ALIAS64(truncate64, truncate);
	ALIAS64(fallocate64, fallocate); ALIAS64(posix_fallocate64, posix_fallocate);
	lrw_real.open_2 = dlsym(RTLD_NEXT, "__open_2");
	lrw_real.open64_2 = dlsym(RTLD_NEXT, "__open64_2");
	lrw_real.openat_2 = dlsym(RTLD_NEXT, "__openat_2");
	lrw_real.openat64_2 = dlsym(RTLD_NEXT, "__openat64_2");
	MAYBE(fcntl64); MAYBE(pwritev2); MAYBE(pwritev64v2);
	MAYBE(close_range); MAYBE(closefrom); MAYBE(copy_file_range);
	atomic_store_explicit(&lrw_ready, 1, memory_order_release);
}

static int env_on(const char *name)
{
	const char *v = getenv(name);
	return v && v[0] && strcmp(v, "0") != 0;
}

__attribute__((constructor)) static void lrw_ctor(void)
{
	lrw_init();
	g_debug = env_on("LAZYRW_DEBUG");
	g_stats = env_on("LAZYRW_STATS");
	if (env_on("LAZYRW_DISABLE"))
		return; /* loaded, but everything passes through */
	const char *p = getenv("LAZYRW_PROBE_FILE");
	if (p && strlen(p) < sizeof(g_probe))
		strcpy(g_probe, p);
	/* MAP_NORESERVE: only the pages of descriptors actually used get memory. */
	void *t = mmap(NULL, sizeof(struct slot) * LRW_MAX_FDS, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED) {
		struct lbuf l;
		lb_head(&l);
		lb_s(&l, "cannot map the descriptor table; passing everything through");
		lb_flush(&l, 2);
		return;
	}
	atomic_store_explicit(&g_slots, t, memory_order_release);
	pthread_atfork(NULL, NULL, atfork_child);
}

__attribute__((destructor)) static void lrw_dtor(void)
{
	if (!g_stats)
		return;
	struct lbuf l = { .n = 0 };
	lb_s(&l, "lazyrw: lazy_opens=");
	lb_u(&l, n_lazy);
	lb_s(&l, " upgrades=");
	lb_u(&l, n_upgrade);
	lb_s(&l, " truncates=");
	lb_u(&l, n_trunc);
	lb_s(&l, " pid=");
	lb_i(&l, getpid());
	lb_flush(&l, 2);
}

/* A forked child has only the forking thread: a slot another thread held
 * BUSY at fork time would never be released, so make it LAZY again (the next
 * upgrade rechecks the descriptor). Counters restart so stats are per process. */
static void atfork_child(void)
{
	n_lazy = n_upgrade = n_trunc = 0;
	struct slot *t = atomic_load(&g_slots);
	if (!t || atomic_load(&g_busy) == 0)
		return;
	for (int i = 0; i < LRW_MAX_FDS; i++)
		if (atomic_load(&t[i].state) == BUSY)
			atomic_store(&t[i].state, LAZY);
	atomic_store(&g_busy, 0);
}

/* ---- which files ------------------------------------------------------- */

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* Relation files live under base/, global/ and pg_tblspc/ of PGDATA. Postgres
 * chdirs into PGDATA and uses relative paths; absolute ones are matched by
 * a /base/, /global/ or /pg_tblspc/ component anywhere. */
static int is_relation_path(const char *p)
{
	if (p[0] == '/')
		return strstr(p, "/base/") || strstr(p, "/global/") || strstr(p, "/pg_tblspc/");
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return has_prefix(p, "base/") || has_prefix(p, "global/") || has_prefix(p, "pg_tblspc/");
}

/* open(2) with the large-file variant where the two differ (32-bit). */
static int sys_open(const char *path, int flags, mode_t mode)
{
	return lrw_real.openat64(AT_FDCWD, path, flags, mode);
}

static void write_probe(void)
{
	if (!g_probe[0] || atomic_exchange(&g_probe_done, 1))
		return;
	int fd = sys_open(g_probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	struct lbuf l = { .n = 0 };
	if (fd < 0) {
		if (g_debug) {
			lb_head(&l);
			lb_s(&l, "probe file not created: errno ");
			lb_i(&l, errno);
			lb_flush(&l, 2);
		}
		return;
	}
	lb_s(&l, "lazyrw " LRW_VERSION " pid=");
	lb_i(&l, getpid());
	lb_flush(&l, fd);
	lrw_real.close(fd);
}

int lrw_open_lazy(int dirfd, const char *path, int flags, int *out)
{
	if (!enabled() || !path)
		return 0;
	if ((flags & O_ACCMODE) != O_RDWR || (flags & (O_CREAT | O_TRUNC | O_APPEND | O_PATH)) ||
	    (flags & O_TMPFILE) == O_TMPFILE)
		return 0;
	/* A path relative to another directory could not be reopened later. */
	if (path[0] != '/' && dirfd != AT_FDCWD)
		return 0;
	if (!is_relation_path(path))
		return 0;
	size_t len = strnlen(path, LRW_PATH_LEN);
	if (len >= LRW_PATH_LEN)
		return 0;

	int saved = errno;
	int fd = sys_open(path, (flags & ~O_ACCMODE) | O_RDONLY, 0);
	if (fd < 0) {
		*out = -1; /* the read-write open would have failed the same way */
		return 1;
	}
	/* Only regular files: O_RDWR on anything else must fail or behave as asked. */
	struct stat st;
	struct slot *s = slot_of(fd);
	if (!s || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		lrw_real.close(fd);
		errno = saved;
		return 0;
	}
	slot_lock(s); /* a stale LAZY here (fd closed behind our back) is overwritten */
	memcpy(s->path, path, len + 1);
	s->flags = (flags & ~(O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY)) | O_RDWR | O_CLOEXEC;
	slot_unlock(s, LAZY);
	atomic_fetch_add_explicit(&n_lazy, 1, memory_order_relaxed);
	write_probe();
	errno = saved;
	*out = fd;
	return 1;
}

/* ---- the upgrade ------------------------------------------------------- */

/* Open a read-write descriptor for the same file as the one behind st (the
 * lazy fd's fstat): by path, or through /proc/self/fd when the path now
 * names another file or none (dropped, replaced, cwd changed). */
static int reopen_same(int fd, const char *path, int flags, const struct stat *st,
	int *err, const char **how)
{
	struct stat nst;
	int nfd = sys_open(path, flags, 0);
	*how = "path";
	if (nfd < 0) {
		*err = errno;
	} else if (fstat(nfd, &nst) != 0 || nst.st_dev != st->st_dev || nst.st_ino != st->st_ino) {
		lrw_real.close(nfd);
		nfd = -1;
		*err = ESTALE;
	}
	if (nfd >= 0 || (*err != ENOENT && *err != ESTALE))
		return nfd;

	struct lbuf p = { .n = 0 };
	lb_s(&p, "/proc/self/fd/");
	lb_i(&p, fd);
	p.b[p.n] = '\0';
	*how = "proc";
	nfd = sys_open(p.b, flags, 0);
	if (nfd >= 0 && (fstat(nfd, &nst) != 0 || nst.st_dev != st->st_dev || nst.st_ino != st->st_ino)) {
		lrw_real.close(nfd);
		nfd = -1;
	}
	return nfd; /* on failure *err stays the path's error */
}

/* Put a read-write descriptor for fd's file on fd. Returns 0 when done or
 * when fd turns out not to be a lazy descriptor (any more): either way the
 * slot is then FREE. Returns an errno value if the reopen failed; fd is then
 * untouched and stays lazy. trunc0: the caller is ftruncate(fd, 0), so a
 * reopen with O_TRUNC through /proc saves copying data that goes anyway. */
static int upgrade(int fd, const char *path, int flags, const char *call, int trunc0)
{
	struct stat st;
	int fl = lrw_real.fcntl(fd, F_GETFL);
	int fdfl = lrw_real.fcntl(fd, F_GETFD);
	if (fl < 0 || fdfl < 0 || (fl & O_ACCMODE) != O_RDONLY || fstat(fd, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	off_t pos = lseek(fd, 0, SEEK_CUR);

	int err = 0, nfd = -1;
	const char *how = "path";
	if (trunc0) {
		struct lbuf p = { .n = 0 };
		lb_s(&p, "/proc/self/fd/");
		lb_i(&p, fd);
		p.b[p.n] = '\0';
		nfd = sys_open(p.b, flags | O_TRUNC, 0);
		how = "proc+trunc";
	}
	if (nfd < 0)
		nfd = reopen_same(fd, path, flags, &st, &err, &how);
	if (nfd >= 0) {
		/* Status flags changed with F_SETFL since the open carry over. */
		int mask = O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK;
		int nfl = lrw_real.fcntl(nfd, F_GETFL);
		if (nfl >= 0 && (nfl & mask) != (fl & mask))
			lrw_real.fcntl(nfd, F_SETFL, (nfl & ~mask) | (fl & mask));
		if (pos >= 0)
			lseek(nfd, pos, SEEK_SET);
		/* dup3, not dup2: keep the FD_CLOEXEC the descriptor had. */
		if (lrw_real.dup3(nfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
			err = errno;
			lrw_real.close(nfd);
			nfd = -1;
		} else {
			lrw_real.close(nfd);
			atomic_fetch_add_explicit(&n_upgrade, 1, memory_order_relaxed);
		}
	}
	if (g_debug || nfd < 0) {
		struct lbuf l;
		lb_head(&l);
		lb_s(&l, nfd >= 0 ? "upgrade fd=" : "upgrade FAILED fd=");
		lb_i(&l, fd);
		lb_s(&l, " by ");
		lb_s(&l, call);
		lb_s(&l, " via ");
		lb_s(&l, how);
		if (nfd < 0) {
			lb_s(&l, " errno=");
			lb_i(&l, err);
		}
		lb_s(&l, " path=");
		lb_s(&l, path);
		lb_flush(&l, 2);
	}
	return nfd >= 0 ? 0 : err;
}

int lrw_before_write(int fd, const char *call, int trunc0)
{
	struct slot *s = lazy_slot(fd);
	if (!s)
		return 0;
	int saved = errno;
	uint32_t st = slot_lock(s);
	int err = 0;
	if (st == LAZY) {
		err = upgrade(fd, s->path, s->flags, call, trunc0);
		if (err == 0)
			st = FREE;
	}
	slot_unlock(s, st);
	errno = saved;
	return err;
}

void lrw_after_dup(int src, int dst)
{
	if (src == dst || !enabled())
		return;
	int saved = errno;
	char path[LRW_PATH_LEN];
	int flags = 0, lazy = 0;
	struct slot *s = lazy_slot(src);
	if (s) {
		uint32_t st = slot_lock(s);
		if (st == LAZY) {
			memcpy(path, s->path, strlen(s->path) + 1);
			flags = s->flags;
			lazy = 1;
		}
		slot_unlock(s, st);
	}
	struct slot *d = slot_of(dst);
	if (d) {
		slot_lock(d);
		if (lazy) {
			memcpy(d->path, path, strlen(path) + 1);
			d->flags = flags;
		}
		slot_unlock(d, lazy ? LAZY : FREE);
	} else if (lazy) {
		/* Beyond the table we cannot track dst: make it read-write now. */
		(void)upgrade(dst, path, flags, "dup", 0);
	}
	errno = saved;
}

void lrw_forget(int fd)
{
	struct slot *s = lazy_slot(fd);
	if (s) {
		slot_lock(s);
		slot_unlock(s, FREE);
	}
}

void lrw_forget_range(unsigned lo, unsigned hi)
{
	if (!enabled())
		return;
	for (unsigned fd = lo; fd <= hi && fd < LRW_MAX_FDS; fd++)
		lrw_forget((int)fd);
}

int lrw_truncate0(const char *path, int *ret)
{
	if (!enabled() || !path || !is_relation_path(path))
		return 0;
	int saved = errno;
	/* O_NONBLOCK: never wait on a FIFO; it has no effect on regular files. */
	int fd = sys_open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
	if (fd < 0) {
		if (errno == ENXIO) { /* a FIFO: let truncate(2) give its own error */
			errno = saved;
			return 0;
		}
		*ret = -1;
		return 1;
	}
	lrw_real.close(fd);
	atomic_fetch_add_explicit(&n_trunc, 1, memory_order_relaxed);
	if (g_debug) {
		struct lbuf l;
		lb_head(&l);
		lb_s(&l, "truncate(0) via O_TRUNC path=");
		lb_s(&l, path);
		lb_flush(&l, 2);
	}
	errno = saved;
	*ret = 0;
	return 1;
}
