#!/usr/bin/env bash
# Checks the composite action (action.yml) and the example workflows with actionlint,
# from the Go module proxy (or an actionlint on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
lint=(go run github.com/rhysd/actionlint/cmd/actionlint@v1.7.12)
if command -v actionlint >/dev/null; then lint=(actionlint); fi
# The examples as users copy them.
"${lint[@]}" examples/github/*.yml
# Again with this repository's action in place of the published one, so that the
# inputs and outputs the examples use are checked against action.yml.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/.github/workflows"
cp action.yml "$tmp/"
for f in examples/github/*.yml; do
  sed 's#pgbranchproxy/pgbranchproxy@[^[:space:]]*#./#' "$f" > "$tmp/.github/workflows/$(basename "$f")"
done
(cd "$tmp" && git init -q . && "${lint[@]}")
echo "actionlint: action.yml and examples/github OK"
