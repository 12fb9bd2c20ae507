#!/usr/bin/env bash
# What a rendered page costs, beside Puppeteer: serves the demo site (ITEMS items, default 400),
# runs `crawlq bench --op crawl --render browser` on its script-drawn section (the same pages
# fetched plainly, then with the item pages rendered by the system's Chromium, 4 tabs), then
# Puppeteer (puppeteer-core, scripts/bench-browser/puppeteer.mjs) driving the same Chromium over
# the same pages, 4 tabs, under /usr/bin/time (node's CPU and Chromium's, reaped at its close).
# ROUNDS (default 1) alternates them, and ends with a MEDIAN line of the rounds. puppeteer-core is installed once into build/puppeteer
# (npm; no browser is downloaded: executablePath is the system's Chromium). The crawl works in a
# schema of its own (SCHEMA, default crawlq_bench_browser), so other benches on the database
# (crawlq bench's default crawlq_bench) do not drop it under this one.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/bench-lib.sh
. "$here/scripts/bench-lib.sh"
: "${DATABASE_URL:?set DATABASE_URL}"
rounds=${ROUNDS:-1}
items=${ITEMS:-400}
crawlq=${CRAWLQ:-$here/bin/crawlq}
chromium=${CHROMIUM:-/usr/lib/chromium/chromium}
pup=$here/build/puppeteer
if [[ ! -d $pup/node_modules/puppeteer-core ]]; then
  mkdir -p "$pup"
  echo '{"private":true,"type":"module"}' >"$pup/package.json"
  (cd "$pup" && npm install --no-audit --no-fund --silent puppeteer-core@23 >/dev/null)
fi
cp "$here/scripts/bench-browser/puppeteer.mjs" "$pup/"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$crawlq" demo-site --items "$items" --addr "127.0.0.1:$port" >/dev/null 2>&1 &
site=$!
tmp=$(mktemp -d)
trap 'kill $site 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/robots.txt" >/dev/null && break; sleep 0.1; done
plain_rate=() plain_cpu=() br_rate=() br_cpu=() added=() pup_rate=() pup_cpu=()
for _ in $(seq "$rounds"); do
  checkpoint bench-browser
  out=$("$crawlq" bench --op crawl --render browser --schema "${SCHEMA:-crawlq_bench_browser}" --url "http://127.0.0.1:$port" --quiet | grep '^RESULT')
  echo "$out"
  plain=$(grep ' op=crawl_plain ' <<<"$out") rendered=$(grep ' op=crawl_browser ' <<<"$out") vs=$(grep ' op=browser_vs_plain ' <<<"$out")
  plain_rate+=("$(field pages_per_s "$plain")") plain_cpu+=("$(field all_cpu_s_per_1k_pages "$plain")")
  br_rate+=("$(field pages_per_s "$rendered")") br_cpu+=("$(field all_cpu_s_per_1k_pages "$rendered")")
  added+=("$(field ms_cpu_per_rendered_page "$vs")")
  line=$(cd "$pup" && URL="http://127.0.0.1:$port" TABS=4 CHROMIUM=$chromium /usr/bin/time -f '%U %S' -o "$tmp/time" node puppeteer.mjs | grep '^RESULT')
  pages=$(field pages "$line")
  cpu=$(awk '{print $1 + $2}' "$tmp/time")
  all=$(python3 -c "print(f'{$cpu * 1000 / $pages:.3f}')")
  echo "$line cpu_s=$cpu all_cpu_s_per_1k_pages=$all"
  pup_rate+=("$(field pages_per_s "$line")") pup_cpu+=("$all")
done
echo "MEDIAN rounds=$rounds plain_pages_per_s=$(median "${plain_rate[@]}") plain_all_cpu_s_per_1k_pages=$(median "${plain_cpu[@]}")" \
  "browser_pages_per_s=$(median "${br_rate[@]}") browser_all_cpu_s_per_1k_pages=$(median "${br_cpu[@]}")" \
  "ms_cpu_per_rendered_page=$(median "${added[@]}")" \
  "puppeteer_pages_per_s=$(median "${pup_rate[@]}") puppeteer_all_cpu_s_per_1k_pages=$(median "${pup_cpu[@]}")"
