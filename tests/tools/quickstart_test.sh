#!/usr/bin/env bash
# docs/quickstart.md runs as written: its shell block (the same lines as
# the README's quickstart) is run from the source root with its build tree
# set to this build, and must show both jobs, the pause, and the two jobs'
# equal checksums, within two minutes.
#   quickstart_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; rm -f /dev/shm/msim-quickstart /tmp/quickstart.sock' EXIT

block() { awk '/^```sh$/ {on = 1; next} /^```$/ {if (on) exit} on' "$1"; }
block "$src/docs/quickstart.md" >"$tmp/quickstart.sh"
block "$src/README.md" >"$tmp/readme.sh"
if ! diff -u "$tmp/quickstart.sh" "$tmp/readme.sh"; then
  echo "FAIL: the README's quickstart differs from docs/quickstart.md's"
  exit 1
fi
grep -q '^B=build ' "$tmp/quickstart.sh" || { echo "FAIL: the block does not start by naming its build tree"; exit 1; }
sed -i "s|^B=build |B=$build |" "$tmp/quickstart.sh"

cd "$src"
if ! timeout 120 bash -e "$tmp/quickstart.sh" >"$tmp/out" 2>&1; then
  cat "$tmp/out"
  echo "FAIL: the quickstart did not run to its end"
  exit 1
fi
cat "$tmp/out"
expect() {
  grep -Eq "$1" "$tmp/out" || { echo "FAIL: no line matching '$1' ($2)"; exit 1; }
}
expect '^ +1 +a ' "job a shows in the status table"
expect '^ +2 +b ' "job b shows in the status table"
expect '^job 2 paused: ' "the pause is answered"
expect '^ +2 +b .* paused ' "the status table shows b paused"
expect '^job 2 resumed' "the resume is answered"
sums=$(grep -c '^checksum C ' "$tmp/out")
distinct=$(grep '^checksum C ' "$tmp/out" | sort -u | wc -l)
[ "$sums" -eq 2 ] && [ "$distinct" -eq 1 ] || { echo "FAIL: expected two equal checksums, got $sums ($distinct distinct)"; exit 1; }
[ ! -e /dev/shm/msim-quickstart ] || { echo "FAIL: the simulated GPU was left in /dev/shm"; exit 1; }
echo "PASS: the quickstart ran as written"
