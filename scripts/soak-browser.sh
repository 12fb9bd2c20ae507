#!/usr/bin/env bash
# The browser soak of docs/browser.md: PAGES (default 2000) script-drawn item pages of the demo
# site, rendered through the real worker path (one `crawlq worker --queues crawl,long` process,
# its pool's defaults: 1 Chromium, 2 tabs, recycled every 100 pages or past 1 GiB), with the
# Chromium under it SIGKILLed once mid-run (at KILL_AT items, default half the pages, while its
# tabs render). Once a second it samples the summed PSS (and RSS) of the worker's Chromium
# processes and the worker's own RSS, and at the end checks, failing otherwise:
#   - the run succeeded with every item once;
#   - the kill landed under a page (the worker logged the crash with pages rendering) and cost
#     no attempt: every page job of the run completed at its first attempt;
#   - the browser was recycled every 100 pages;
#   - Chromium's peak stayed under CHROMIUM_BOUND_MIB (default 1536: the 1 GiB recycling limit
#     plus a retiring browser's tail) and the worker's under WORKER_BOUND_MIB (default 512).
# It uses a schema of its own (soak_browser) on DATABASE_URL and drops it at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
: "${DATABASE_URL:?set DATABASE_URL}"
pages=${PAGES:-2000}
kill_at=${KILL_AT:-$((pages / 2))}
chromium_bound=${CHROMIUM_BOUND_MIB:-1536}
worker_bound=${WORKER_BOUND_MIB:-512}
crawlq=${CRAWLQ:-$here/bin/crawlq}
schema=soak_browser
tmp=$(mktemp -d)
base_url=$DATABASE_URL
sep='?'
[[ $base_url == *\?* ]] && sep='&'
export DATABASE_URL="${base_url}${sep}options=-csearch_path%3D${schema}"
psql "$base_url" -qXc "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema"
site='' worker=''
cleanup() {
  [[ -n $worker ]] && kill "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
  [[ -n $site ]] && kill "$site" 2>/dev/null
  psql "$base_url" -qXc "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE" || true
  rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$crawlq" demo-site --items "$pages" --addr "127.0.0.1:$port" >/dev/null 2>&1 &
site=$!
for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/robots.txt" >/dev/null && break; sleep 0.1; done
mkdir "$tmp/spiders"
"$crawlq" demo-site --print-spec js >"$tmp/spiders/js.yaml"   # the spec internal/demosite holds
"$crawlq" migrate >/dev/null
"$crawlq" spider push "$tmp/spiders/js.yaml" >/dev/null
"$crawlq" worker --queues crawl,long --allow-loopback 2>"$tmp/worker.log" >/dev/null &
worker=$!
# Schedule once the worker has registered on the long queue, so schedule finds it live and says
# nothing of a queue without workers.
since=$(psql "$DATABASE_URL" -tAXc "SELECT now()")
for _ in $(seq 300); do
  [[ $(psql "$DATABASE_URL" -tAXc "SELECT count(*) FROM crawlq_worker WHERE queue = 'long' AND seen_at >= '$since'") != 0 ]] && break
  kill -0 "$worker" 2>/dev/null || { echo "soak: the worker exited" >&2; tail -20 "$tmp/worker.log" >&2; exit 1; }
  sleep 0.1
done
run=$("$crawlq" schedule --spider js --arg "base_url=http://127.0.0.1:$port")
echo "soak: run $run, $pages rendered pages, worker pid $worker, Chromium killed at $kill_at items" >&2

# kib PID...: the summed field (Pss or Rss) of the processes' smaps_rollup, in KiB.
kib() {
  local f=$1 sum=0 v
  shift
  for p in "$@"; do
    v=$(awk -v f="$f:" '$1 == f {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true)
    sum=$((sum + ${v:-0}))
  done
  echo "$sum"
}
# tree PID: the descendants of PID.
tree() {
  local kids
  kids=$(cat /proc/"$1"/task/*/children 2>/dev/null || true)
  for k in $kids; do
    echo "$k"
    tree "$k"
  done
}
peak_pss=0 peak_rss=0 peak_worker=0 killed='' start=$SECONDS
while :; do
  state=$(psql "$DATABASE_URL" -tAXc "SELECT state FROM crawlq_run WHERE id = $run")
  [[ $state == succeeded || $state == failed || $state == incomplete || $state == cancelled ]] && break
  kill -0 "$worker" 2>/dev/null || { echo "soak: the worker exited" >&2; tail -20 "$tmp/worker.log" >&2; exit 1; }
  mapfile -t procs < <(tree "$worker")
  pss=$(kib Pss "${procs[@]}") rss=$(kib Rss "${procs[@]}") w=$(kib Rss "$worker")
  ((pss > peak_pss)) && peak_pss=$pss
  ((rss > peak_rss)) && peak_rss=$rss
  ((w > peak_worker)) && peak_worker=$w
  if [[ -z $killed ]]; then
    items=$(psql "$DATABASE_URL" -tAXc "SELECT count(*) FROM crawlq_item WHERE run_id = $run")
    if ((items >= kill_at)); then
      # The browser the pool started last (its log line names its pid), a child of the worker.
      pid=$(sed -n 's/.* browser started .* pid=\([0-9]*\) .*/\1/p' "$tmp/worker.log" | tail -1)
      if [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; then
        killed=$pid
        echo "soak: at $items items, SIGKILLed Chromium $pid" >&2
      fi
    fi
  fi
  if ((SECONDS - start > 7200)); then
    echo "soak: the run did not finish in 2 hours" >&2
    exit 1
  fi
  sleep 1
done
elapsed=$((SECONDS - start))
hwm=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$worker/status")
kill "$worker" && wait "$worker" || true
worker=''

items=$(psql "$DATABASE_URL" -tAXc "SELECT count(*) FROM crawlq_item WHERE run_id = $run")
attempts=$(psql "$DATABASE_URL" -tAXc "SELECT coalesce(string_agg(attempt || ':' || n, ' ' ORDER BY attempt), '') FROM (SELECT attempt, count(*) n FROM crawlq_job WHERE parent_id = $run AND kind = 'page' GROUP BY attempt) a")
retried=$(psql "$DATABASE_URL" -tAXc "SELECT count(*) FROM crawlq_job WHERE parent_id = $run AND kind = 'page' AND attempt > 1")
started=$(grep -c ' browser started ' "$tmp/worker.log" || true)
by_pages=$(grep ' browser recycled .* reason=pages' -c "$tmp/worker.log" || true)
by_memory=$(grep ' browser recycled .* reason=memory' -c "$tmp/worker.log" || true)
crash=$(grep 'ERROR browser crashed ' "$tmp/worker.log" | head -1 || true)
putback=$(grep -c 'browser crashed under a page; put back without counting an attempt' "$tmp/worker.log" || true)
rendering=$(sed -n 's/.* pages_rendering=\([0-9]*\).*/\1/p' <<<"$crash")
mib() { echo $(($1 / 1024)); }
echo "RESULT soak=browser state=$state pages=$pages items=$items seconds=$elapsed s_per_page=$(python3 -c "print(f'{$elapsed / $pages:.2f}')") \
launches=$started recycled_pages=$by_pages recycled_memory=$by_memory killed_pid=${killed:-none} pages_rendering_at_kill=${rendering:-na} \
pages_put_back=$putback attempts=${attempts// /,} pages_retried=$retried chromium_peak_pss_mib=$(mib "$peak_pss") \
chromium_peak_rss_mib=$(mib "$peak_rss") worker_peak_rss_mib=$(mib "$peak_worker") worker_hwm_mib=$(mib "${hwm:-0}") load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)"
fail=''
[[ $state == succeeded && $items == "$pages" ]] || fail+=" the run ended $state with $items of $pages items;"
[[ -n $killed && ${rendering:-0} -ge 1 && $putback -ge 1 ]] || fail+=" no Chromium was killed under a page (killed ${killed:-none}, ${rendering:-no} pages rendering, $putback put back);"
[[ $retried == 0 ]] || fail+=" $retried pages took more than one attempt;"
((started >= pages / 100)) || fail+=" $started browsers for $pages pages: not recycled every 100;"
(($(mib "$peak_pss") < chromium_bound)) || fail+=" Chromium peaked at $(mib "$peak_pss") MiB (bound $chromium_bound);"
(($(mib "${hwm:-0}") < worker_bound)) || fail+=" the worker peaked at $(mib "${hwm:-0}") MiB (bound $worker_bound);"
if [[ -n $fail ]]; then
  echo "soak: FAILED:$fail" >&2
  cp "$tmp/worker.log" "${SOAK_LOG:-/tmp/soak-browser-worker.log}"
  echo "soak: the worker's log is in ${SOAK_LOG:-/tmp/soak-browser-worker.log}" >&2
  exit 1
fi
echo "soak: passed" >&2
