#!/usr/bin/env bash
# Builds the image the manifests run, fronts and nodes alike, without a registry:
# the local PostgreSQL image of scripts/image.sh (Postgres from this host's Debian
# packages, a `postgres` user of uid 999), plus pgbranchproxy and its lazyrw shim
# in /usr/local/bin (the entrypoint), and the programs a node runs besides
# Postgres (cp and chown for seeds and forks, fallocate for sparse copies, diff for
# branch diff) with the shared libraries they load, from this host. Push it to a
# registry the cluster pulls from and set the manifests' image to it.
#
#   deploy/kubernetes/image.sh [TAG]   (default pgbranchproxy/pgbranchproxy:dev)
#   BIN=path/to/pgbranchproxy SHIM=path/to/liblazyrw.so  (default: bin/ of the repo)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tag=${1:-pgbranchproxy/pgbranchproxy:dev}
bin=${BIN:-$repo/bin/pgbranchproxy}
shim=${SHIM:-$repo/bin/liblazyrw.so}
base=pgbranchproxy/postgres:${PG_MAJOR:-15}
for f in "$bin" "$shim"; do
  [ -f "$f" ] || { echo "no $f: run make build" >&2; exit 1; }
done
"$repo/scripts/image.sh" "$base" >/dev/null

ctx=$(mktemp -d /tmp/pgbranch-k8s-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/usr/bin"
cp "$bin" "$ctx/root/usr/local/bin/pgbranchproxy"
cp "$shim" "$ctx/root/usr/local/bin/liblazyrw.so"
progs=(/usr/bin/cp /usr/bin/chown /usr/bin/fallocate /usr/bin/diff)
for p in "${progs[@]}"; do
  cp -L "$p" "$ctx/root$p"
done
# Their shared libraries, where the base image lacks them (it has glibc and
# Postgres's own).
for p in "${progs[@]}" "$bin"; do
  ldd "$p" | awk '/=> \//{print $3} /^\t\//{print $1}'
done | sort -u | while read -r lib; do
  mkdir -p "$ctx/root$(dirname "$lib")"
  cp -L "$lib" "$ctx/root$lib"
done
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY root/ /
ENTRYPOINT ["/usr/local/bin/pgbranchproxy"]
CMD ["serve"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >/dev/null
echo "built image $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
