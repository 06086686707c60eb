#!/bin/sh
# Tests for liblazyrw.so on real OverlayFS mounts. Needs root (mount) and a
# built shim and test program (make test does both).
#   run.sh c     C tests under LD_PRELOAD, then again under valgrind if installed
#   run.sh pg    Postgres smoke: a branch of a frozen cluster reads without copy-up
#   run.sh all   both
set -eu

MODE=${1:-all}
HERE=$(cd "$(dirname "$0")/.." && pwd)
SHIM=$HERE/liblazyrw.so
TBIN=$HERE/tests/bin/t_lazyrw
TBIN64=$HERE/tests/bin/t_lazyrw64
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGUSER_OS=${PGUSER_OS:-postgres}

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root to mount OverlayFS" >&2; exit 1; }
[ -f "$SHIM" ] && [ -x "$TBIN" ] && [ -x "$TBIN64" ] || { echo "run.sh: build first (make -C shim test)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/lazyrw-test.XXXXXX)
chmod 0711 "$TMP"
FAILED=0

# Always: stop any Postgres we started (by its data dir's pid file), unmount,
# remove the temp dir.
cleanup() {
	set +e
	for d in "$TMP"/*/merged "$TMP"/pg/lower; do
		[ -f "$d/postmaster.pid" ] &&
			runuser -u "$PGUSER_OS" -- "$PGBIN/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1
	done
	for m in "$TMP"/*/merged; do
		mountpoint -q "$m" 2>/dev/null && umount "$m"
	done
	[ -n "${KEEP:-}" ] && { echo "kept $TMP"; return; }
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# mount_overlay NAME LOWER [OWNER]: $TMP/NAME/{upper,work,merged}, merged
# mounted. The merged root takes the upper root's owner and mode at mount time.
mount_overlay() {
	mkdir -p "$TMP/$1/upper" "$TMP/$1/work" "$TMP/$1/merged"
	chmod 0755 "$TMP/$1" "$TMP/$1/upper"
	if [ -n "${3:-}" ]; then
		chown "$3" "$TMP/$1/upper"
		chmod 0700 "$TMP/$1/upper"
	fi
	mount -t overlay overlay \
		-o "lowerdir=$2,upperdir=$TMP/$1/upper,workdir=$TMP/$1/work" "$TMP/$1/merged"
}

fail() { echo "FAIL $*"; FAILED=1; }

# ---- C tests -------------------------------------------------------------

CASES="read sync pwrite writes truncate nonrel dup errno abs replaced cwd race fork"

# c_suite NAME BIN [RUNNER...]: every case on a fresh overlay; RUNNER is
# empty or valgrind.
c_suite() {
	name=$1 bin=$2
	shift 2
	mount_overlay "$name" "$TMP/lower"
	M=$TMP/$name/merged U=$TMP/$name/upper
	out=$TMP/$name.out
	: >"$out"
	for c in $CASES; do
		env LD_PRELOAD="$SHIM" LAZYRW_STATS=1 "$@" "$bin" "$M" "$U" "$c" \
			>>"$out" 2>"$TMP/$name.$c.err" || fail "$name/$c (exit $?): $(cat "$TMP/$name.$c.err")"
		# the shim's own counters prove which path a case took
		stats=$(grep '^lazyrw: ' "$TMP/$name.$c.err" | tail -n 1)
		case $c in
		truncate) echo "$stats" | grep -q ' truncates=2 ' || fail "$name/truncate: $stats" ;;
		race) echo "$stats" | grep -q ' upgrades=1 ' || fail "$name/race: $stats" ;;
		read | sync) echo "$stats" | grep -q ' upgrades=0 ' || fail "$name/$c: $stats" ;;
		esac
		# only these cases make an upgrade fail on purpose, which the shim logs
		allow='^lazyrw: '
		case $c in errno | replaced) allow='^lazyrw: \|upgrade FAILED' ;; esac
		grep -v "$allow" "$TMP/$name.$c.err" | grep . && fail "$name/$c wrote to stderr"
	done
	P=$TMP/$name.probe
	env LD_PRELOAD="$SHIM" LAZYRW_PROBE_FILE="$P" "$@" "$bin" "$M" "$U" noprobe >>"$out" ||
		fail "$name/noprobe"
	env LD_PRELOAD="$SHIM" LAZYRW_PROBE_FILE="$P" "$@" "$bin" "$M" "$U" probe >>"$out" ||
		fail "$name/probe"
	env LD_PRELOAD="$SHIM" LAZYRW_PROBE_FILE="$P.off" LAZYRW_DISABLE=1 "$@" "$bin" "$M" "$U" \
		disabled >>"$out" || fail "$name/disabled"
	umount "$M"
	echo "== C tests ($name): $(grep -c '^ok ' "$out") ok, $(grep -c '^skip ' "$out") skipped"
	sed 's/^/   /' "$out"
}

run_c() {
	mkdir -p "$TMP/lower"
	"$TBIN" setup "$TMP/lower"
	chmod -R a+rX "$TMP/lower"
	c_suite plain "$TBIN"
	c_suite lfs+fortify "$TBIN64"
	if command -v valgrind >/dev/null 2>&1; then
		c_suite valgrind "$TBIN" valgrind -q --error-exitcode=1 --leak-check=full
	else
		echo "== valgrind not installed: skipped"
	fi
}

# ---- Postgres smoke --------------------------------------------------------

pg() { runuser -u "$PGUSER_OS" -- "$@"; }
# pgctl ARGS...: pg_ctl as the OS user; its output (and the shim's stats lines
# of pg_ctl and its shell, which load the shim too) only on failure.
pgctl() {
	pg "$@" >"$TMP/pg_ctl.out" 2>&1 || { cat "$TMP/pg_ctl.out"; return 1; }
}

run_pg() {
	[ -x "$PGBIN/postgres" ] || { echo "== Postgres smoke: no $PGBIN/postgres, skipped"; return; }
	# Every I/O name this postgres binary imports that the shim must see.
	imports=$(nm -D --undefined-only "$PGBIN/postgres" | awk '{ sub(/@.*/, "", $2); print $2 }' |
		grep -xE '(__)?open(at)?(64)?(_2)?|close(_range|from)?|dup[23]?|fcntl(64)?|(p?writev?|pwritev)(64)?(v?2)?|f?truncate(64)?|(posix_)?fallocate(64)?|copy_file_range' |
		tr '\n' ' ')
	for s in $imports; do
		nm -D --defined-only "$SHIM" | grep -q " $s\$" || fail "pg: postgres imports $s; the shim does not define it"
	done
	echo "ok pg: postgres imports, all interposed: $imports"

	D=$TMP/pg
	mkdir -p "$D/lower" "$D/run"
	chown "$PGUSER_OS" "$D/lower" "$D/run"
	chmod 0755 "$D"
	chmod 0700 "$D/lower"
	OPTS="-c listen_addresses='' -c unix_socket_directories=$D/run"
	psql() { pg "$PGBIN/psql" -h "$D/run" -U postgres -d postgres -XAtq -v ON_ERROR_STOP=1 "$@"; }

	# The seed: two tables, frozen, cleanly shut down.
	pg "$PGBIN/initdb" -D "$D/lower" -U postgres -A trust --no-sync >/dev/null
	pgctl "$PGBIN/pg_ctl" -D "$D/lower" -o "$OPTS" -l "$D/run/seed.log" -w start
	psql -c "create table t as select g from generate_series(1, 100000) g" \
		-c "create table t2 as select g from generate_series(1, 100000) g" \
		-c "vacuum (freeze, analyze)" -c "checkpoint"
	REL=$(psql -c "select pg_relation_filepath('t')")
	REL2=$(psql -c "select pg_relation_filepath('t2')")
	SIZE=$(psql -c "select pg_relation_size('t')")
	pgctl "$PGBIN/pg_ctl" -D "$D/lower" -m fast -w stop

	# A branch with the shim.
	mount_overlay branch "$D/lower" "$PGUSER_OS"
	B=$TMP/branch
	PROBE=$D/run/lazyrw.active
	pgctl env LD_PRELOAD="$SHIM" LAZYRW_PROBE_FILE="$PROBE" LAZYRW_STATS=1 ${LAZYRW_DEBUG:+LAZYRW_DEBUG=1} \
		"$PGBIN/pg_ctl" -D "$B/merged" -o "$OPTS -c recovery_init_sync_method=syncfs" \
		-l "$D/run/branch.log" -w start
	PMPID=$(head -n 1 "$B/merged/postmaster.pid")
	if grep -q "^lazyrw .* pid=$PMPID\$" "$PROBE" 2>/dev/null; then
		echo "ok pg: probe file written by the postmaster: $(cat "$PROBE")"
	else
		fail "pg: probe file: $(cat "$PROBE" 2>&1) (postmaster $PMPID)"
	fi

	n=$(psql -c "select count(*) from t" -c "checkpoint")
	[ "$n" = 100000 ] || fail "pg: count(*) gave $n"
	if [ -f "$B/upper/$REL" ]; then
		fail "pg: $REL copied up by a read"
	else
		echo "ok pg: select count(*) + checkpoint: $REL ($SIZE bytes) not in upper;" \
			"upper holds $(du -sb "$B/upper" | cut -f1) bytes"
	fi

	psql -c "truncate t2"
	if [ -f "$B/upper/$REL2" ] && [ "$(stat -c %s "$B/upper/$REL2")" = 0 ]; then
		echo "ok pg: truncate t2: old file $REL2 emptied in upper without copying its data"
	else
		fail "pg: truncate t2: $(ls -l "$B/upper/$REL2" 2>&1)"
	fi

	psql -c "update t set g = g where g = 1" -c "checkpoint"
	if [ -f "$B/upper/$REL" ]; then
		echo "ok pg: update + checkpoint: $REL copied up ($(stat -c %s "$B/upper/$REL") bytes)"
	else
		fail "pg: update did not reach $REL in upper"
	fi
	[ "$(psql -c "select count(*) from t where g = 1")" = 1 ] || fail "pg: row lost"
	pgctl "$PGBIN/pg_ctl" -D "$B/merged" -m fast -w stop
	awk '/^lazyrw: / { for (i = 2; i <= NF; i++) { split($i, kv, "="); s[kv[1]] += kv[2] } n++ }
		END { printf "ok pg: %d processes reported: lazy_opens=%d upgrades=%d truncates=%d\n",
			n, s["lazy_opens"], s["upgrades"], s["truncates"] }' "$D/run/branch.log"
	grep -i 'lazyrw.*FAIL\|PANIC' "$D/run/branch.log" && fail "pg: see $D/run/branch.log"

	# The same read on a branch with the shim disabled copies the table up.
	mount_overlay eager "$D/lower" "$PGUSER_OS"
	E=$TMP/eager
	pgctl env LD_PRELOAD="$SHIM" LAZYRW_DISABLE=1 LAZYRW_PROBE_FILE="$D/run/eager.active" \
		"$PGBIN/pg_ctl" -D "$E/merged" -o "$OPTS -c recovery_init_sync_method=syncfs" \
		-l "$D/run/eager.log" -w start
	psql -c "select count(*) from t" -c "checkpoint" >/dev/null
	if [ -f "$E/upper/$REL" ] && [ ! -e "$D/run/eager.active" ]; then
		echo "ok pg: LAZYRW_DISABLE=1: the same read copied $REL up, no probe file;" \
			"upper holds $(du -sb "$E/upper" | cut -f1) bytes"
	else
		fail "pg: disabled shim: $(ls -l "$E/upper/$REL" "$D/run/eager.active" 2>&1)"
	fi
	pgctl "$PGBIN/pg_ctl" -D "$E/merged" -m fast -w stop
	[ $FAILED = 0 ] || { echo "--- branch.log"; cat "$D/run/branch.log"; }
}

case $MODE in
c) run_c ;;
pg) run_pg ;;
all) run_c; run_pg ;;
*) echo "usage: run.sh [all|c|pg]" >&2; exit 2 ;;
esac

if [ $FAILED = 0 ]; then echo "== PASS"; else echo "== FAIL"; exit 1; fi
