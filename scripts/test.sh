#!/usr/bin/env bash
# test.sh runs every test with -race in three go test processes started together: the
# Terraform stack's package in two (./terraform: TestStackOnEmulator in one,
# TestStackDeployDestroyCycles and the rest in the other) and everything else.
#
# Why apart: the stack tests spend most of their time in the AWS provider's fixed waits (an RDS
# instance is polled for about 80 s after each create, modify and delete, even on moto), not on
# the CPU. One `go test ./...` starts packages in import-path order, so ./terraform, last in
# that order, only started once most other packages had run, and the run lasted the sum of the
# two. Within ./terraform the two stack tests each deploy to a moto server of their own, but
# set the process environment to reach it, so they cannot run in parallel in one process.
# Side by side the run lasts as long as the longest of the three. Each stack test waits on three
# RDS operations, TestStackOnEmulator also on the CPU (three plans, the contract tests), so the
# package's other tests go with the cycles.
#
# VERIFY, when set (make test sets it to `make verify`), runs once the stack's processes have
# started and before the other packages' tests: the stack waits on those polls meanwhile, so the
# static checks no longer add to the run. A failed check stops everything at once.
#
# The stack's output goes to build/test-terraform*.log and is printed when all are done, so the
# streams never interleave. The exit status is the first failure's. With a -run flag the stack
# package runs in one process.
#   scripts/test.sh [go test flags...]   # e.g. scripts/test.sh -run TestX; default -race -count=1 -timeout 40m
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
go=${GO:-go}
flags=("$@")
((${#flags[@]})) || flags=(-race -count=1 -timeout 40m)
mkdir -p build
stack=./terraform
apart='^TestStackOnEmulator$'
all=$("$go" list ./... | grep -vx "crawlq/terraform") || exit 1
# The longest packages first (measured, each several minutes with -race): go test starts packages
# in the order given, -p at a time, so a long one late in import-path order (crawl, local,
# spider) would start when the rest is nearly done and end the run alone.
first=(browser crawl cli command bench local deploy docscheck spider)
first=("${first[@]/#/crawlq/internal/}")
others=$(
  for p in "${first[@]}"; do grep -x "$p" <<<"$all"; done
  grep -vxF -f <(printf '%s\n' "${first[@]}") <<<"$all"
)

start=$(date +%s)
# Each stack process in a process group of its own (set -m while they start), so stopping one
# stops its test binary, terraform and moto too.
set -m
logs=(build/test-terraform.log)
pids=()
if [[ " ${flags[*]}" == *" -run"* ]]; then
  "$go" test "${flags[@]}" "$stack" >build/test-terraform.log 2>&1 &
  pids+=($!)
else
  "$go" test "${flags[@]}" -skip "$apart" "$stack" >build/test-terraform.log 2>&1 &
  pids+=($!)
  "$go" test "${flags[@]}" -run "$apart" "$stack" >build/test-terraform-emulator.log 2>&1 &
  pids+=($!)
  logs+=(build/test-terraform-emulator.log)
fi
set +m
stop() { for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null; done; }
trap stop EXIT
if [[ -n ${VERIFY:-} ]] && ! bash -c "$VERIFY"; then
  echo "# $VERIFY failed: the tests are stopped" >&2
  exit 1
fi
# shellcheck disable=SC2086 # one package path a word
"$go" test "${flags[@]}" $others
rc=$?
echo "# everything but $stack: $(($(date +%s) - start)) s; waiting for $stack (${logs[*]})"
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  r=$?
  cat "${logs[$i]}"
  ((rc)) || rc=$r
done
trap - EXIT
echo "# make test: $(($(date +%s) - start)) s"
exit "$rc"
