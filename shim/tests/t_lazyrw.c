/*
 * Tests for liblazyrw.so, run by tests/run.sh under LD_PRELOAD on a real
 * OverlayFS mount:
 *   t_lazyrw setup LOWER            create the lower-layer files (no shim needed)
 *   t_lazyrw MERGED UPPER CASE      chdir into MERGED (as Postgres chdirs into
 *                                   PGDATA) and run CASE; UPPER is inspected
 *                                   directly to see what was copied up.
 * Prints "ok CASE: what" lines; any failure prints "FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fortified entry points; callable directly to check they are intercepted. */
int __open_2(const char *, int);
int __openat_2(int, const char *, int);

static const char *merged, *upper, *cur;

#define CHECK(c) do { if (!(c)) { \
	fprintf(stderr, "FAIL %s: %s:%d: %s (errno %d %s)\n", cur, __FILE__, __LINE__, #c, \
		errno, strerror(errno)); \
	exit(1); } } while (0)
#define OK(what) printf("ok %s: %s\n", cur, what)

/* Lower-layer files: "lower:<name>" padded to 8 KiB, one block. */
#define FILESZ 8192
static const char *lower_files[] = {
	"base/5/read", "base/5/sync", "base/5/pwrite", "base/5/pwrite2", "base/5/creat",
	"base/5/w_pwrite", "base/5/w_pwrite64", "base/5/w_pwritev", "base/5/w_pwritev64",
	"base/5/w_pwritev2", "base/5/w_write", "base/5/w_writev", "base/5/w_ftruncate",
	"base/5/w_ftruncate0", "base/5/w_ftruncate64", "base/5/w_fallocate",
	"base/5/w_fallocate64", "base/5/w_posix_fallocate", "base/5/w_posix_fallocate64",
	"base/5/w_copy_file_range", "base/5/pfa_einval", "base/5/trunc", "base/5/trunc5",
	"base/5/truncabs", "base/5/dup", "base/5/dup2", "base/5/dupfar", "base/5/errno",
	"base/5/ro", "base/5/abs", "global/abs", "global/1262", "base/5/repl", "base/5/cwd",
	"base/5/race", "base/5/fork", "base/5/stale", "base/5/disabled", "base/5/dirrel",
	"base/5/wronly", "pg_tblspc/16400/PG_15/5/16385", "pg_wal/x", "foo", NULL,
};

static void fill(char *buf, const char *name)
{
	memset(buf, '.', FILESZ);
	int n = snprintf(buf, FILESZ, "lower:%s", name);
	buf[n] = '.';
}

static int do_setup(const char *lower)
{
	char path[PATH_MAX], buf[FILESZ];
	for (const char **f = lower_files; *f; f++) {
		snprintf(path, sizeof path, "%s/%s", lower, *f);
		for (char *p = strchr(path + strlen(lower) + 1, '/'); p; p = strchr(p + 1, '/')) {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || (fill(buf, *f), write(fd, buf, FILESZ)) != FILESZ || close(fd)) {
			perror(path);
			return 1;
		}
	}
	snprintf(path, sizeof path, "%s/base/5/ro", lower);
	chmod(path, 0444);
	return 0;
}

/* ---- helpers ----------------------------------------------------------- */

static int in_upper(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", upper, rel);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static off_t upper_size(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", upper, rel);
	return stat(p, &st) == 0 ? st.st_size : -1;
}

static int accmode(int fd)
{
	return fcntl(fd, F_GETFL) & O_ACCMODE;
}

static int cloexec(int fd)
{
	return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

/* Open a relation file O_RDWR; it must come back lazy: read-only, no copy. */
static int open_lazy(const char *rel, int extra)
{
	int fd = open(rel, O_RDWR | extra);
	CHECK(fd >= 0);
	CHECK(accmode(fd) == O_RDONLY);
	CHECK(!in_upper(rel));
	return fd;
}

static void check_bytes(int fd, off_t off, const char *want)
{
	char b[64] = {0};
	size_t n = strlen(want);
	CHECK(pread(fd, b, n, off) == (ssize_t)n);
	CHECK(memcmp(b, want, n) == 0);
}

/* ---- cases ------------------------------------------------------------- */

/* (1) O_RDWR open + pread of a relation file does not copy it up. */
static void t_read(void)
{
	int fd = open_lazy("base/5/read", 0);
	check_bytes(fd, 0, "lower:base/5/read");
	char b[FILESZ];
	CHECK(read(fd, b, sizeof b) == FILESZ);
	CHECK(close(fd) == 0);
	CHECK(!in_upper("base/5/read"));
	OK("open(O_RDWR)+pread+read: read-only, not copied up");

	int fds[] = {
		open64("base/5/read", O_RDWR),
		openat(AT_FDCWD, "base/5/read", O_RDWR),
		openat64(AT_FDCWD, "base/5/read", O_RDWR),
		__open_2("base/5/read", O_RDWR),
		__openat_2(AT_FDCWD, "base/5/read", O_RDWR),
		open("global/1262", O_RDWR),
		open("pg_tblspc/16400/PG_15/5/16385", O_RDWR),
		open("./base/5/read", O_RDWR),
	};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
		CHECK(fds[i] >= 0);
		CHECK(accmode(fds[i]) == O_RDONLY);
		CHECK(close(fds[i]) == 0);
	}
	CHECK(!in_upper("base/5/read") && !in_upper("global/1262") &&
	      !in_upper("pg_tblspc/16400/PG_15/5/16385"));
	OK("open64/openat/openat64/__open_2/__openat_2, global/, pg_tblspc/, ./: all lazy");

	errno = 0;
	CHECK(open("base/5/missing", O_RDWR) == -1 && errno == ENOENT);
	CHECK(open("base/5", O_RDWR) == -1 && errno == EISDIR);
	OK("missing file: ENOENT; directory: EISDIR, as without the shim");
}

/* (2) fsync, fdatasync, sync_file_range, posix_fadvise, lseek: no copy-up. */
static void t_sync(void)
{
	int fd = open_lazy("base/5/sync", 0);
	struct stat st;
	CHECK(fsync(fd) == 0);
	CHECK(fdatasync(fd) == 0);
	CHECK(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK(lseek(fd, 0, SEEK_END) == FILESZ);
	CHECK(fstat(fd, &st) == 0 && st.st_size == FILESZ);
	CHECK(accmode(fd) == O_RDONLY && !in_upper("base/5/sync"));
	CHECK(close(fd) == 0);
	OK("fsync/fdatasync/sync_file_range/posix_fadvise/lseek/fstat: not copied up");
}

/* (3) The first pwrite upgrades: copied up once, write lands, FD_CLOEXEC kept,
 * F_SETFL status flags kept. */
static void t_pwrite(void)
{
	int fd = open_lazy("base/5/pwrite", O_CLOEXEC);
	CHECK(cloexec(fd));
	CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	CHECK(pwrite(fd, "XY", 2, 2) == 2);
	CHECK(in_upper("base/5/pwrite"));
	CHECK(accmode(fd) == O_RDWR);
	CHECK(cloexec(fd));
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	check_bytes(fd, 0, "loXYr:base/5/pwrite");
	CHECK(pwrite(fd, "Z", 1, 0) == 1);
	CHECK(close(fd) == 0);
	fd = open("base/5/pwrite", O_RDONLY);
	check_bytes(fd, 0, "ZoXYr");
	close(fd);
	OK("pwrite: copied up, data written, FD_CLOEXEC and O_NONBLOCK kept");

	fd = open_lazy("base/5/pwrite2", 0);
	CHECK(!cloexec(fd));
	CHECK(pwrite(fd, "Q", 1, 0) == 1);
	CHECK(accmode(fd) == O_RDWR && !cloexec(fd) && in_upper("base/5/pwrite2"));
	close(fd);
	OK("pwrite: no FD_CLOEXEC before, none after");
}

/* (4) Each write-like call upgrades on its own file. */
static void t_writes(void)
{
	static const char *calls[] = {
		"pwrite", "pwrite64", "pwritev", "pwritev64", "pwritev2", "write", "writev",
		"ftruncate", "ftruncate0", "ftruncate64", "fallocate", "fallocate64",
		"posix_fallocate", "posix_fallocate64", "copy_file_range", NULL,
	};
	for (const char **c = calls; *c; c++) {
		char rel[64], msg[96];
		snprintf(rel, sizeof rel, "base/5/w_%s", *c);
		int fd = open_lazy(rel, 0);
		struct iovec iov[2] = { { "X", 1 }, { "Y", 1 } };
		struct stat st;
		off_t wantsize = FILESZ;
		const char *name = *c;
		if (!strcmp(name, "pwrite")) CHECK(pwrite(fd, "XY", 2, 3) == 2);
		else if (!strcmp(name, "pwrite64")) CHECK(pwrite64(fd, "XY", 2, 3) == 2);
		else if (!strcmp(name, "pwritev")) CHECK(pwritev(fd, iov, 2, 3) == 2);
		else if (!strcmp(name, "pwritev64")) CHECK(pwritev64(fd, iov, 2, 3) == 2);
		else if (!strcmp(name, "pwritev2")) CHECK(pwritev2(fd, iov, 2, 3, 0) == 2);
		else if (!strcmp(name, "write") || !strcmp(name, "writev")) {
			/* the file offset survives the swap of descriptions */
			CHECK(lseek(fd, 3, SEEK_SET) == 3);
			if (name[5] == 'v') CHECK(writev(fd, iov, 2) == 2);
			else CHECK(write(fd, "XY", 2) == 2);
			CHECK(lseek(fd, 0, SEEK_CUR) == 5);
		} else if (!strcmp(name, "ftruncate")) { CHECK(ftruncate(fd, 100) == 0); wantsize = 100; }
		else if (!strcmp(name, "ftruncate0")) { CHECK(ftruncate(fd, 0) == 0); wantsize = 0; }
		else if (!strcmp(name, "ftruncate64")) { CHECK(ftruncate64(fd, 100) == 0); wantsize = 100; }
		else if (!strcmp(name, "fallocate")) { CHECK(fallocate(fd, 0, 0, 65536) == 0); wantsize = 65536; }
		else if (!strcmp(name, "fallocate64")) { CHECK(fallocate64(fd, 0, 0, 65536) == 0); wantsize = 65536; }
		else if (!strcmp(name, "posix_fallocate")) { CHECK(posix_fallocate(fd, 0, 65536) == 0); wantsize = 65536; }
		else if (!strcmp(name, "posix_fallocate64")) { CHECK(posix_fallocate64(fd, 0, 65536) == 0); wantsize = 65536; }
		else if (!strcmp(name, "copy_file_range")) {
			int src = open("foo", O_RDONLY);
			off64_t off = 3;
			CHECK(src >= 0 && copy_file_range(src, NULL, fd, &off, 2, 0) == 2);
			close(src);
		}
		CHECK(accmode(fd) == O_RDWR && in_upper(rel));
		CHECK(fstat(fd, &st) == 0 && st.st_size == wantsize && upper_size(rel) == wantsize);
		if (wantsize == FILESZ)
			check_bytes(fd, 0, strcmp(name, "copy_file_range") ? "lowXY" : "lowlo");
		close(fd);
		snprintf(msg, sizeof msg, "%s upgrades (copied up, size %ld)", name, (long)wantsize);
		OK(msg);
	}

	/* posix_fallocate returns its error instead of -1/errno. */
	int fd = open_lazy("base/5/pfa_einval", 0);
	errno = 0;
	CHECK(posix_fallocate(fd, 0, 0) == EINVAL && errno == 0);
	close(fd);
	OK("posix_fallocate(len 0) returns EINVAL as its value, errno untouched");
}

/* (5) truncate(path, 0) leaves an empty file in upper; other lengths and
 * other paths pass through. run.sh checks the stats line for truncates=2. */
static void t_truncate(void)
{
	char abs[PATH_MAX];
	CHECK(truncate("base/5/trunc", 0) == 0);
	CHECK(in_upper("base/5/trunc") && upper_size("base/5/trunc") == 0);
	snprintf(abs, sizeof abs, "%s/base/5/truncabs", merged);
	CHECK(truncate64(abs, 0) == 0);
	CHECK(in_upper("base/5/truncabs") && upper_size("base/5/truncabs") == 0);
	OK("truncate(rel, 0) and truncate64(abs, 0): empty file in upper");
	CHECK(truncate("base/5/trunc5", 5) == 0 && upper_size("base/5/trunc5") == 5);
	CHECK(truncate("base/5/missing", 0) == -1 && errno == ENOENT);
	CHECK(truncate("base/5", 0) == -1 && errno == EISDIR);
	OK("truncate(len 5) passes through; ENOENT and EISDIR as without the shim");
}

/* (6) Non-relation paths and non-lazy flags are opened as asked. */
static void t_nonrel(void)
{
	const char *rels[] = { "pg_wal/x", "foo" };
	for (int i = 0; i < 2; i++) {
		int fd = open(rels[i], O_RDWR);
		CHECK(fd >= 0 && accmode(fd) == O_RDWR && in_upper(rels[i]));
		close(fd);
	}
	OK("pg_wal/x and foo: O_RDWR, copied up on open (normal OverlayFS)");
	int fd = open("base/5/creat", O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0 && accmode(fd) == O_RDWR && in_upper("base/5/creat"));
	close(fd);
	fd = open("base/5/wronly", O_WRONLY);
	CHECK(fd >= 0 && accmode(fd) == O_WRONLY && in_upper("base/5/wronly"));
	close(fd);
	int dir = open("base", O_RDONLY | O_DIRECTORY);
	fd = openat(dir, "5/dirrel", O_RDWR);
	CHECK(fd >= 0 && accmode(fd) == O_RDWR && in_upper("base/5/dirrel"));
	close(fd);
	close(dir);
	OK("O_CREAT, O_WRONLY, openat(dirfd, relative): opened as asked");
}

/* (7) Duplicates of a lazy descriptor are lazy too and upgrade on write. */
static void t_dup(void)
{
	int fd = open_lazy("base/5/dup", 0);
	int d = dup(fd);
	CHECK(d >= 0 && accmode(d) == O_RDONLY);
	CHECK(pwrite(d, "D", 1, 0) == 1);
	CHECK(accmode(d) == O_RDWR && in_upper("base/5/dup"));
	/* fd still holds the read-only description, and OverlayFS lets it read
	 * the copied-up file; its own first write upgrades it too. */
	CHECK(accmode(fd) == O_RDONLY);
	check_bytes(fd, 0, "Dower");
	CHECK(pwrite(fd, "E", 1, 1) == 1 && accmode(fd) == O_RDWR);
	check_bytes(d, 0, "DEwer");
	close(fd);
	close(d);
	OK("dup: lazy, write through the dup upgrades it, the original reads it");

	fd = open_lazy("base/5/dup2", 0);
	CHECK(dup2(fd, 100) == 100 && accmode(100) == O_RDONLY);
	CHECK(dup3(fd, 101, O_CLOEXEC) == 101 && accmode(101) == O_RDONLY && cloexec(101));
	int f = fcntl(fd, F_DUPFD_CLOEXEC, 200);
	CHECK(f >= 200 && accmode(f) == O_RDONLY);
	CHECK(write(101, "3", 1) == 1 && accmode(101) == O_RDWR && cloexec(101));
	CHECK(pwrite(100, "2", 1, 1) == 1 && accmode(100) == O_RDWR && !cloexec(100));
	CHECK(pwrite(f, "F", 1, 2) == 1 && accmode(f) == O_RDWR && cloexec(f));
	check_bytes(fd, 0, "32F");
	close(100);
	close(101);
	close(f);
	close(fd);
	OK("dup2, dup3(O_CLOEXEC), F_DUPFD_CLOEXEC: lazy, each upgrades, FD_CLOEXEC kept");

	/* A closed lazy descriptor's number, reused for a pipe, is not lazy. */
	fd = open_lazy("base/5/stale", 0);
	close(fd);
	int p[2];
	CHECK(pipe(p) == 0 && (p[0] == fd || p[1] == fd));
	CHECK(write(p[1], "x", 1) == 1);
	close(p[0]);
	close(p[1]);
	CHECK(!in_upper("base/5/stale"));
	OK("close forgets: the reused number is a plain pipe");

	/* Beyond the shim's table: a dup there is made read-write at once. */
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur <= 19000 && rl.rlim_max > 19000) {
		rl.rlim_cur = 19001;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	fd = open_lazy("base/5/dupfar", 0);
	if (dup2(fd, 19000) != 19000) {
		printf("skip %s: cannot dup2 to fd 19000 (%s)\n", cur, strerror(errno));
	} else {
		CHECK(accmode(19000) == O_RDWR && in_upper("base/5/dupfar"));
		CHECK(pwrite(19000, "far", 3, 0) == 3);
		check_bytes(fd, 0, "far");
		close(19000);
		OK("dup2 to fd 19000 (beyond the table): upgraded at dup time");
	}
	close(fd);
}

/* (8) errno is left alone by the shim's own work; failed upgrades report the
 * reopen's errno and leave the descriptor as it was. */
static void t_errno(void)
{
	errno = EXDEV;
	int fd = open("base/5/errno", O_RDWR);
	CHECK(fd >= 0 && errno == EXDEV && accmode(fd) == O_RDONLY);
	int d = dup(fd);
	CHECK(d >= 0 && errno == EXDEV);
	CHECK(pwrite(fd, "e", 1, 0) == 1 && errno == EXDEV && accmode(fd) == O_RDWR);
	CHECK(close(d) == 0 && close(fd) == 0 && errno == EXDEV);
	CHECK(truncate("base/5/errno", 0) == 0 && errno == EXDEV);
	OK("errno unchanged across lazy open, dup, upgrade, close, truncate");

	/* Reopen failure: as an unprivileged user, a 0444 file opens lazily
	 * (read-only) but cannot be reopened read-write. */
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
			_exit(3);
		fd = open("base/5/ro", O_RDWR);
		if (fd < 0)
			_exit(4);
		errno = 0;
		if (pwrite(fd, "x", 1, 0) != -1 || errno != EACCES) _exit(5);
		if (posix_fallocate(fd, 0, 10) != EACCES) _exit(6);
		if (ftruncate(fd, 0) != -1 || errno != EACCES) _exit(7);
		char b[5];
		if (accmode(fd) != O_RDONLY || pread(fd, b, 5, 0) != 5 || memcmp(b, "lower", 5)) _exit(8);
		if (in_upper("base/5/ro")) _exit(9);
		_exit(0);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
		printf("skip %s: cannot switch to uid 65534\n", cur);
		return;
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	OK("reopen EACCES: pwrite -1/EACCES, posix_fallocate returns EACCES, fd unchanged");
}

/* (9) The probe file appears on the first lazy open (run.sh sets
 * LAZYRW_PROBE_FILE); case "noprobe" expects none without lazy opens. */
static void t_probe(int want)
{
	const char *p = getenv("LAZYRW_PROBE_FILE");
	CHECK(p != NULL);
	int fd = open(want ? "base/5/read" : "foo", O_RDWR);
	CHECK(fd >= 0);
	close(fd);
	int pf = open(p, O_RDONLY);
	if (!want) {
		CHECK(pf < 0 && errno == ENOENT);
		OK("no lazy open, no probe file");
		return;
	}
	char b[128] = {0}, want_s[128];
	CHECK(pf >= 0 && read(pf, b, sizeof b - 1) > 0);
	close(pf);
	snprintf(want_s, sizeof want_s, " pid=%d\n", (int)getpid());
	CHECK(strncmp(b, "lazyrw ", 7) == 0 && strstr(b, want_s) != NULL);
	OK("probe file written on the first lazy open");
}

/* Absolute paths, as when PGDATA is given absolute. */
static void t_abs(void)
{
	char p[PATH_MAX];
	const char *rels[] = { "base/5/abs", "global/abs" };
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s/%s", merged, rels[i]);
		int fd = open(p, O_RDWR);
		CHECK(fd >= 0 && accmode(fd) == O_RDONLY && !in_upper(rels[i]));
		check_bytes(fd, 0, "lower:");
		CHECK(pwrite(fd, "A", 1, 0) == 1 && accmode(fd) == O_RDWR && in_upper(rels[i]));
		close(fd);
	}
	OK("absolute paths: lazy, upgraded by pwrite");
}

/* The path now names another file: the write must not land there. */
static void t_replaced(void)
{
	int fd = open_lazy("base/5/repl", 0);
	CHECK(unlink("base/5/repl") == 0);
	int n = open("base/5/repl", O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(n >= 0 && write(n, "new", 3) == 3);
	close(n);
	errno = 0;
	ssize_t r = pwrite(fd, "Z", 1, 0);
	int e = errno;
	n = open("base/5/repl", O_RDONLY);
	check_bytes(n, 0, "new");
	close(n);
	close(fd);
	printf("ok %s: the new file at the path is untouched (pwrite on the old fd: %s)\n",
		cur, r == 1 ? "written to the old file" : strerror(e));
}

/* The cwd changed since the open: the reopen goes through /proc/self/fd. */
static void t_cwd(void)
{
	int fd = open_lazy("base/5/cwd", 0);
	CHECK(chdir("/") == 0);
	CHECK(pwrite(fd, "C", 1, 0) == 1 && accmode(fd) == O_RDWR);
	CHECK(chdir(merged) == 0);
	CHECK(in_upper("base/5/cwd"));
	check_bytes(fd, 0, "Cower");
	close(fd);
	OK("cwd changed after the open: upgraded through /proc/self/fd");
}

/* Threads racing for the first write on one descriptor: one upgrade (run.sh
 * checks upgrades=1 in the stats line), every write lands. */
#define NTHREADS 8
static int race_fd;
static pthread_barrier_t race_bar;

static void *racer(void *arg)
{
	long i = (long)arg;
	char c = (char)('a' + i);
	pthread_barrier_wait(&race_bar);
	return (void *)(long)(pwrite(race_fd, &c, 1, i) == 1);
}

static void t_race(void)
{
	pthread_t th[NTHREADS];
	race_fd = open_lazy("base/5/race", 0);
	pthread_barrier_init(&race_bar, NULL, NTHREADS);
	for (long i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&th[i], NULL, racer, (void *)i) == 0);
	for (int i = 0; i < NTHREADS; i++) {
		void *ok;
		CHECK(pthread_join(th[i], &ok) == 0 && ok);
	}
	pthread_barrier_destroy(&race_bar);
	CHECK(accmode(race_fd) == O_RDWR);
	check_bytes(race_fd, 0, "abcdefgh");
	close(race_fd);
	OK("8 threads' first writes on one fd: all landed");
}

/* A child writes through an inherited lazy fd: it upgrades its own copy; the
 * parent's stays read-only and reads the child's write. */
static void t_fork(void)
{
	int fd = open_lazy("base/5/fork", 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(pwrite(fd, "K", 1, 0) == 1 && accmode(fd) == O_RDWR ? 0 : 1);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(accmode(fd) == O_RDONLY && in_upper("base/5/fork"));
	check_bytes(fd, 0, "Kower");
	CHECK(pwrite(fd, "P", 1, 1) == 1 && accmode(fd) == O_RDWR);
	check_bytes(fd, 0, "KPwer");
	close(fd);
	OK("fork: child upgrades its fd; parent's lazy fd reads the child's write");
}

/* LAZYRW_DISABLE=1: loaded but passes everything through. */
static void t_disabled(void)
{
	int fd = open("base/5/disabled", O_RDWR);
	CHECK(fd >= 0 && accmode(fd) == O_RDWR && in_upper("base/5/disabled"));
	close(fd);
	const char *p = getenv("LAZYRW_PROBE_FILE");
	CHECK(p && access(p, F_OK) != 0);
	OK("disabled: O_RDWR as asked, copied up, no probe file");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "setup"))
		return do_setup(argv[2]);
	if (argc != 4) {
		fprintf(stderr, "usage: t_lazyrw setup LOWER | t_lazyrw MERGED UPPER CASE\n");
		return 2;
	}
	merged = argv[1];
	upper = argv[2];
	cur = argv[3];
	CHECK(chdir(merged) == 0);
	static const struct { const char *name; void (*fn)(void); } cases[] = {
		{ "read", t_read }, { "sync", t_sync }, { "pwrite", t_pwrite }, { "writes", t_writes },
		{ "truncate", t_truncate }, { "nonrel", t_nonrel }, { "dup", t_dup },
		{ "errno", t_errno }, { "abs", t_abs }, { "replaced", t_replaced }, { "cwd", t_cwd },
		{ "race", t_race }, { "fork", t_fork }, { "disabled", t_disabled },
	};
	if (!strcmp(cur, "probe") || !strcmp(cur, "noprobe")) {
		t_probe(!strcmp(cur, "probe"));
		return 0;
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(cur, cases[i].name)) {
			cases[i].fn();
			return 0;
		}
	fprintf(stderr, "unknown case %s\n", cur);
	return 2;
}
