#!/usr/bin/env bash
# The kill -9 campaign at length: jobs on an oversubscribed simulated GPU
# with 5 ms slices while jobs (mid-run and mid-allocation) and the
# coordinator (often mid-switch) are killed with SIGKILL, and the
# coordinator is stopped for a while, at random. Every job not killed must
# finish with the checksum it has alone. The test command runs it for 20 s;
# this runs it for longer and keeps the output.
#   scripts/kill-campaign.sh [SECONDS] [SEED]     (default 600 s, a fresh seed)
# Output: bench/results/kill-campaign-<date>.txt. Needs a build (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
test_binary=build/tests/tools/coordinator_tests
[ -x "$test_binary" ] || { echo "kill-campaign: build first (scripts/test.sh)" >&2; exit 1; }
out="bench/results/kill-campaign-$(date +%Y-%m-%d).txt"
{
  echo "# msched kill -9 campaign, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, commit $(git rev-parse --short HEAD)"
  echo "# command: scripts/kill-campaign.sh $*"
  MSCHED_KILL_CAMPAIGN_SECONDS="$seconds" MSCHED_KILL_CAMPAIGN_SEED="${2:-}" \
    "$test_binary" --gtest_filter='CoordinatorProcessTest.KillCampaign' 2>&1
} | tee "$out"
