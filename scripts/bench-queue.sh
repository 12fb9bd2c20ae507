#!/usr/bin/env bash
# The queue benchmark beside the peers: ROUNDS (default 3) alternating rounds of River,
# graphile-worker and crawlq (insert, work, then unique), JOBS jobs each (default 100000), on the
# Postgres at DATABASE_URL; then the SQL ceiling once, and the medians with crawlq's ratios to River.
#
# Each system's turn starts with a CHECKPOINT. Every one of them writes hundreds of MB of WAL, so
# checkpoints start by themselves every few runs; whoever runs while one is under way pays for the
# full-page images the first write to each page then logs (it measured ~30% slower inserts). Run
# one after the other without this, the same system came out fast or slow depending on what ran
# before it. The CHECKPOINT needs superuser or pg_checkpoint (the local server's user has both);
# without it the rounds run anyway and say so.
#
# ../shared/bench/peers/run.sh measures the peers, each at its own best settings, exactly as
# when it runs them all in one go.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/bench-lib.sh
. "$here/scripts/bench-lib.sh"
: "${DATABASE_URL:?set DATABASE_URL}"
rounds=${ROUNDS:-3}
jobs=${JOBS:-100000}
crawlq=${CRAWLQ:-$here/bin/crawlq}
peers=${PEERS:-$here/../shared/bench/peers}

declare -A figs
# measure CMD...: runs one system's turn after a checkpoint; echoes its RESULT lines and files each
# line's jobs_per_s under system/op. A turn that fails stops the benchmark.
measure() {
  local out line sys op
  checkpoint bench-queue
  out=$("$@") || { echo "bench-queue: $* failed" >&2; exit 1; }
  while IFS= read -r line; do
    [[ $line == RESULT* ]] || continue
    echo "$line"
    sys=$(sed -n 's/.*system=\([^ ]*\).*/\1/p' <<<"$line") op=$(sed -n 's/.*op=\([^ ]*\).*/\1/p' <<<"$line")
    [[ $op == claim_latency ]] && continue
    figs[$sys/$op]+="$(field jobs_per_s "$line") "
  done <<<"$out"
}
for i in $(seq "$rounds"); do
  echo "# round $i of $rounds"
  measure "$peers/run.sh" river "$jobs"
  measure "$peers/run.sh" graphile "$jobs"
  measure "$crawlq" bench --jobs "$jobs" --quiet
  measure "$crawlq" bench --op unique --jobs "$jobs" --quiet
done
measure "$peers/run.sh" ceiling "$jobs"

for k in river/insert river/work graphile-worker/insert graphile-worker/work sql-ceiling/work crawlq/insert crawlq/work crawlq/unique; do
  [[ -n ${figs[$k]:-} ]] || { echo "bench-queue: no figure for $k" >&2; exit 1; }
  # shellcheck disable=SC2086
  m=$(median ${figs[$k]}) n=$(wc -w <<<"${figs[$k]}")
  line="MEDIAN system=${k%/*} op=${k#*/} runs=$n jobs_per_s=$m"
  case $k in
    crawlq/insert | crawlq/work)
      # shellcheck disable=SC2086
      line+=" ratio_to_river=$(ratio "$m" "$(median ${figs[river/${k#*/}]})")" ;;
  esac
  echo "$line"
done
