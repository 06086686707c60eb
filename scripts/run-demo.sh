#!/usr/bin/env bash
# Starts pgbranchproxy in the foreground with a demo source seeded from
# examples/demo.sql, and prints the psql command to try. Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${STATE_DIR:-$PWD/.state}
listen=${LISTEN:-127.0.0.1:6432}
bin=./bin/pgbranchproxy
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"

mkdir -p "$state"
$sudo "$bin" serve --state-dir "$state" --listen "$listen" --auth trust &
pid=$!
stop() { $sudo kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
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
