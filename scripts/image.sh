#!/usr/bin/env bash
# Builds a local PostgreSQL image for `--runtime docker` without a registry: a root
# filesystem assembled from this host's installed Debian packages (postgresql-<major>
# and postgresql-client-<major>, the shared libraries their programs load, /bin/sh,
# locale, the C.UTF-8 locale and the time zone data), laid out like the official `postgres` image
# (programs under /usr/lib/postgresql/<major>/bin, a `postgres` user, uid 999), and
# imported with `docker import`. Does nothing when the tag already exists as this
# script builds it (its label pgbranchproxy.image is the layout below); an image an older
# script built is built again.
#
#   scripts/image.sh [TAG]     (default pgbranchproxy/postgres:15; PG_MAJOR=15)
set -euo pipefail
major=${PG_MAJOR:-15}
tag=${1:-pgbranchproxy/postgres:$major}
# The image's layout: raise it when the image gains or loses something, so that
# `make image` builds existing tags again. 2: locale, for initdb's collations.
layout=2
if have=$(docker image inspect -f '{{index .Config.Labels "pgbranchproxy.image"}}' "$tag" 2>/dev/null); then
  if [ "$have" = "$layout" ]; then
    echo "image $tag exists"
    exit 0
  fi
  echo "image $tag was built by an older $0: building it again"
  older=$(docker image inspect -f '{{.Id}}' "$tag")
fi
bindir=/usr/lib/postgresql/$major/bin
[ -x "$bindir/postgres" ] || { echo "no $bindir/postgres: install postgresql-$major" >&2; exit 1; }

root=$(mktemp -d /tmp/pgbranch-image.XXXXXX)
trap 'rm -rf "$root"' EXIT
# Debian 12 merges /bin, /sbin and /lib into /usr; so does the image.
mkdir -p "$root"/usr/{bin,sbin,lib,lib64} "$root"/{etc,tmp,var/run/postgresql,var/lib/postgresql}
for d in bin sbin lib lib64; do ln -s usr/$d "$root/$d"; done
chmod 1777 "$root/tmp"

# The packages' own files (directories excluded: tar --no-recursion copies each path
# once), without JIT (LLVM alone is larger than the rest) and the extension build kit.
files=$(mktemp)
for p in "postgresql-$major" "postgresql-client-$major"; do
  dpkg -L "$p" | grep -Ev '/(bitcode|pgxs)/|llvmjit' | while read -r f; do [ -d "$f" ] || echo "$f"; done
done >"$files"
tar -C / --no-recursion -cf - -T "$files" 2>/dev/null | tar -C "$root" -xf -
rm -f "$files"

# Every shared library an ELF file of theirs loads, and the dynamic loader.
copy_lib() {
  local src=$1 dst="$root$1"
  [ -e "$dst" ] && return
  mkdir -p "$(dirname "$dst")"
  cp -L "$src" "$dst"
}
find "$root/usr/lib/postgresql/$major" -type f \( -perm -u+x -o -name '*.so' \) | while read -r f; do
  { ldd "${f#"$root"}" 2>/dev/null || true; } | awk '/=> \//{print $3} /^\t\//{print $1}'
done | sort -u >"$root/.libs"
for prog in /usr/bin/dash /usr/bin/locale; do
  ldd "$prog" | awk '/=> \//{print $3} /^\t\//{print $1}'
done >>"$root/.libs"
while read -r lib; do copy_lib "$lib"; done < <(sort -u "$root/.libs")
rm -f "$root/.libs"

cp /usr/bin/dash "$root/usr/bin/dash"
ln -s dash "$root/usr/bin/sh"
# initdb fills pg_collation from `locale -a`, as on the host (C.utf8 and the others
# installed); without it a seed has only C, POSIX and ucs_basic.
cp /usr/bin/locale "$root/usr/bin/locale"
cp -a /usr/lib/locale "$root/usr/lib/locale"
mkdir -p "$root/usr/share"
cp -a /usr/share/zoneinfo "$root/usr/share/zoneinfo"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
postgres:x:999:999::/var/lib/postgresql:/bin/sh
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
postgres:x:999:
EOF
printf 'passwd: files\ngroup: files\n' >"$root/etc/nsswitch.conf"
chown -R 999:999 "$root/var/run/postgresql" "$root/var/lib/postgresql"

tar -C "$root" -cf - . | docker import \
  -c "ENV PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  -c "ENV PG_MAJOR=$major" -c "ENV LANG=C.UTF-8" -c "ENV PGDATA=/var/lib/postgresql/data" \
  -c "USER postgres" -c 'CMD ["postgres"]' -c "LABEL pgbranchproxy.image=$layout" \
  -m "PostgreSQL $major from the host's Debian packages" - "$tag" >/dev/null
echo "built image $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
# The image it replaced, untagged now, is removed unless a container still uses it.
if [ -n "${older:-}" ]; then docker image rm "$older" >/dev/null 2>&1 || true; fi
