#!/usr/bin/env bash
# The crawl benchmark beside Colly: crawls ../shared/bench/site (ITEMS items, default 10000) with
# Colly and with `crawlq bench --op crawl`, alternately, ROUNDS times (default 5), then prints the
# medians and crawlq's ratios to Colly. Run-to-run spread on a small machine is large; alternating
# and taking medians keeps the comparison fair, and CPU per 1,000 pages barely depends on load.
#
# MODE=chain (default) serves the site as run.sh does: 20 items per listing page, listing pages
# chained one after the other, so the crawl waits on ~500 hops and measures hop latency.
# MODE=wide serves PER (default 2000) items per listing page: a handful of listing pages open the
# whole frontier at once, so the crawl measures throughput.
#
# Colly is the binary ../shared/bench/peers/run.sh colly builds (peers/colly), run the way run.sh
# runs it, but here against the same site process crawlq crawls, and under /usr/bin/time so its
# own CPU (user+system) is measured from outside. crawlq reports its process CPU and the Postgres
# server's (when the server runs on this machine) itself.
#
# EXEC_MODE picks pgx's query exec mode: exec (default; the mode every Lambda uses, safe behind
# RDS Proxy) or cache_statement (statements planned once per connection; direct connections only).
# CRAWLQ_ARGS adds flags to crawlq bench.
#
# Each crawlq round starts with a CHECKPOINT (as scripts/bench-queue.sh does), so the write-back
# of earlier rounds' pages, and the full-page images a checkpoint under way makes every first write
# log, land in no round but their own; the write-back of a round's own pages comes after it
# (measured: ~0.03 CPU s, ~3% of a wide round's Postgres CPU). Without superuser or pg_checkpoint
# the rounds run without it and say so.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/bench-lib.sh
. "$here/scripts/bench-lib.sh"
: "${DATABASE_URL:?set DATABASE_URL}"
rounds=${ROUNDS:-5}
items=${ITEMS:-10000}
mode=${MODE:-chain}
exec_mode=${EXEC_MODE:-exec}
crawlq=${CRAWLQ:-$here/bin/crawlq}
peers=${PEERS:-$here/../shared/bench/peers}
case $mode in
  chain) per=20 ;;
  wide) per=${PER:-2000} ;;
  *) echo "bench-crawl: MODE must be chain or wide, got '$mode'" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
(cd "$peers/../site" && go build -o "$tmp/benchsite" .)
(cd "$peers/colly" && go build -o "$tmp/collybench" .)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$tmp/benchsite" -addr "127.0.0.1:$port" -items "$items" -per "$per" 2>/dev/null &
site=$!
trap 'kill $site 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/robots.txt" >/dev/null && break; sleep 0.1; done
case $DATABASE_URL in *\?*) url="$DATABASE_URL&default_query_exec_mode=$exec_mode" ;; *) url="$DATABASE_URL?default_query_exec_mode=$exec_mode" ;; esac

colly=() colly_cpu=() crawl=() crawl_cpu=() pg_cpu=() total_cpu=()
for i in $(seq "$rounds"); do
  line=$(/usr/bin/time -f '%U %S' -o "$tmp/time" "$tmp/collybench" -url "http://127.0.0.1:$port/" | grep '^RESULT')
  pages=$(field pages "$line")
  cpu=$(awk '{print $1 + $2}' "$tmp/time")
  per1k=$(python3 -c "print(f'{$cpu * 1000 / $pages:.3f}')")
  echo "$line cpu_s=$cpu cpu_s_per_1k_pages=$per1k mode=$mode"
  colly+=("$(field pages_per_s "$line")") colly_cpu+=("$per1k")
  checkpoint bench-crawl
  # shellcheck disable=SC2086
  line=$("$crawlq" bench --op crawl --url "http://127.0.0.1:$port" --database-url "$url" --quiet ${CRAWLQ_ARGS:-} | grep '^RESULT')
  echo "$line exec_mode=$exec_mode mode=$mode"
  crawl+=("$(field pages_per_s "$line")") crawl_cpu+=("$(field cpu_s_per_1k_pages "$line")")
  pg_cpu+=("$(field pg_cpu_s_per_1k_pages "$line")") total_cpu+=("$(field total_cpu_s_per_1k_pages "$line")")
done
mc=$(median "${colly[@]}") mcc=$(median "${colly_cpu[@]}")
mq=$(median "${crawl[@]}") mqc=$(median "${crawl_cpu[@]}") mpg=$(median "${pg_cpu[@]}") mt=$(median "${total_cpu[@]}")
echo "MEDIAN system=colly mode=$mode rounds=$rounds pages_per_s=$mc cpu_s_per_1k_pages=$mcc"
echo "MEDIAN system=crawlq mode=$mode rounds=$rounds exec_mode=$exec_mode pages_per_s=$mq ratio_to_colly=$(ratio "$mq" "$mc")" \
  "cpu_s_per_1k_pages=$mqc pg_cpu_s_per_1k_pages=$mpg total_cpu_s_per_1k_pages=$mt total_cpu_ratio_to_colly=$(ratio "$mt" "$mcc")"
