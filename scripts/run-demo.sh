#!/usr/bin/env bash
# Starts pgbranchproxy in the foreground with a demo source seeded from
# examples/demo.sql, and prints the psql command to try. Ctrl-C stops it cleanly.
#
# STATE_DIR picks the state directory (serve refuses one the Postgres OS user cannot
# reach). Without it: .state in this clone when PG_USER (default postgres) can reach
# it, else /var/lib/pgbranchproxy-demo, so that a clone anywhere (/root/src/...) works.
set -euo pipefail
cd "$(dirname "$0")/.."
listen=${LISTEN:-127.0.0.1:6432}
pg_user=${PG_USER:-postgres}
bin=./bin/pgbranchproxy
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

if [ -n "${STATE_DIR:-}" ]; then
  state=$STATE_DIR
elif $sudo runuser -u "$pg_user" -- test -x "$PWD" 2>/dev/null; then
  state=$PWD/.state
else
  state=/var/lib/pgbranchproxy-demo
  echo "OS user $pg_user cannot reach $PWD: the demo keeps its state in $state (set STATE_DIR to choose)"
fi

$sudo mkdir -p "$state"
$sudo "$bin" serve --state-dir "$state" --listen "$listen" --auth trust --pg-user "$pg_user" &
pid=$!
stopped=""
stop() {
  [ -z "$stopped" ] || return 0
  stopped=1
  $sudo kill -TERM "$pid" 2>/dev/null || true
  rc=0; wait "$pid" 2>/dev/null || rc=$?
  if [ "$rc" = 0 ]; then echo "pgbranchproxy stopped"; else echo "pgbranchproxy serve exited with status $rc" >&2; fi
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
for _ in $(seq 1 100); do
  [ -S "$state/admin.sock" ] && break
  kill -0 $pid 2>/dev/null || { echo "pgbranchproxy serve exited; see the log above" >&2; exit 1; }
  sleep 0.1
done
if ! $sudo "$bin" --state-dir "$state" source ls | grep -q '^demo '; then
  $sudo "$bin" --state-dir "$state" source add demo --from-sql examples/demo.sql --database demo
fi
host=${listen%:*}; port=${listen##*:}
cat <<MSG

pgbranchproxy is listening on $listen. Try a branch of your own:

  psql "host=$host port=$port user=postgres dbname=demo@feature-x"

Branches: $bin --state-dir $state branch ls     Stop: Ctrl-C
MSG
wait $pid
