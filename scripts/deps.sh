#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks use when they are missing.
set -euo pipefail
need=()
command -v /usr/lib/postgresql/15/bin/postgres >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v psql >/dev/null || need+=(postgresql-client)
command -v cc >/dev/null || need+=(gcc)
command -v valgrind >/dev/null || need+=(valgrind)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v losetup >/dev/null || need+=(mount)
command -v ip >/dev/null || need+=(iproute2)  # the simulation's network namespaces (sim/)
command -v chattr >/dev/null || need+=(e2fsprogs)
command -v pgbouncer >/dev/null || need+=(pgbouncer)
command -v chromium >/dev/null || need+=(chromium)  # the web page's browser test
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # Packages must not start their own services (pgbouncer would take 127.0.0.1:6432,
  # the proxy's default port): deny service starts for the length of the install.
  added_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ -z "$added_policy" ] || $sudo rm -f /usr/sbin/policy-rc.d
fi
