#!/usr/bin/env bash
# The crawl benchmark beside Colly: crawls ../shared/bench/site (ITEMS items, default 10000) with
# Colly (../shared/bench/peers/run.sh colly) and with `crawlq bench --op crawl`, alternately, ROUNDS
# times (default 5), then prints the medians and crawlq's ratio to Colly. Run-to-run spread on a
# small machine is large; alternating and taking medians keeps the comparison fair.
#
# crawlq connects straight to DATABASE_URL, so it uses pgx's cache_statement exec mode (statements
# planned once per connection), as a worker with a direct connection should; EXEC_MODE=exec measures
# the default mode, the one that is safe behind RDS Proxy. CRAWLQ_ARGS adds flags to crawlq bench.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
: "${DATABASE_URL:?set DATABASE_URL}"
rounds=${ROUNDS:-5}
items=${ITEMS:-10000}
mode=${EXEC_MODE:-cache_statement}
crawlq=${CRAWLQ:-$here/bin/crawlq}
peers=${PEERS:-$here/../shared/bench/peers}
sitebin=$(mktemp -d)/benchsite
(cd "$peers/../site" && go build -o "$sitebin" .)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$sitebin" -addr "127.0.0.1:$port" -items "$items" 2>/dev/null &
site=$!
trap 'kill $site 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/robots.txt" >/dev/null && break; sleep 0.1; done
case $DATABASE_URL in *\?*) url="$DATABASE_URL&default_query_exec_mode=$mode" ;; *) url="$DATABASE_URL?default_query_exec_mode=$mode" ;; esac

colly=() crawl=()
for i in $(seq "$rounds"); do
  line=$("$peers/run.sh" colly "$items")
  echo "$line"
  colly+=("$(sed -n 's/.*pages_per_s=\([0-9]*\).*/\1/p' <<<"$line")")
  # shellcheck disable=SC2086
  line=$("$crawlq" bench --op crawl --url "http://127.0.0.1:$port" --database-url "$url" --quiet ${CRAWLQ_ARGS:-} | grep '^RESULT')
  echo "$line exec_mode=$mode"
  crawl+=("$(sed -n 's/.*pages_per_s=\([0-9]*\).*/\1/p' <<<"$line")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mc=$(median "${colly[@]}") mq=$(median "${crawl[@]}")
echo "MEDIAN system=colly rounds=$rounds pages_per_s=$mc"
echo "MEDIAN system=crawlq rounds=$rounds exec_mode=$mode pages_per_s=$mq ratio_to_colly=$(python3 -c "print(f'{$mq/$mc:.2f}')")"
