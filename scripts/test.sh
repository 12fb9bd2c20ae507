#!/usr/bin/env bash
# test.sh runs every test with -race: the Terraform stack's package (./terraform) from the start,
# in one go test whose binary scripts/stack-exec.sh runs as two processes (TestStackOnEmulator in
# one, TestStackDeployDestroyCycles and the rest in the other), and everything else in a second
# go test once that binary is built.
#
# Why apart: the stack tests spend most of their time in the AWS provider's fixed waits (an RDS
# instance is polled for about 80 s after each create, modify and delete, even on moto), not on
# the CPU. One `go test ./...` starts packages in import-path order, so ./terraform, last in
# that order, only started once most other packages had run, and the run lasted the sum of the
# two. Side by side the run lasts as long as the longest of them, which is the stack's build and
# then its three RDS waits.
#
# What may compete with the stack's build waits for it: its binary needs most of the module and
# its dependencies compiled with -race, and two go commands started together compile the same
# packages twice (the build cache holds only what one of them has finished). So the other tests,
# which need those same packages, start when the stack's binary is built (scripts/stack-exec.sh
# says so), and VERIFY, when set (make test sets it to `make verify`), runs beside the build at
# a lower priority: its static checks build nothing the tests share but the CGO_ENABLED=0 set the
# tests' crawlq binaries use. A failed check stops everything at once.
#
# The stack's output goes to build/test-terraform.log and is printed when all are done, so the
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
built=build/test-terraform.built
rm -f "$built"
# The stack in a process group of its own (set -m while it starts), so stopping it stops its
# test binaries, terraform and moto too.
set -m
STACK_BUILT=$here/$built "$go" test "${flags[@]}" -exec "$here/scripts/stack-exec.sh" "$stack" >build/test-terraform.log 2>&1 &
pid=$!
set +m
stop() { kill -- "-$pid" 2>/dev/null; }
trap stop EXIT
if [[ -n ${VERIFY:-} ]] && ! nice -n 10 bash -c "$VERIFY"; then
  echo "# $VERIFY failed: the tests are stopped" >&2
  exit 1
fi
echo "# verify done: $(($(date +%s) - start)) s"
while [[ ! -e $built ]] && kill -0 "$pid" 2>/dev/null; do sleep 1; done
echo "# $stack built: $(($(date +%s) - start)) s"
# -p 3 (go test's default is one package per core, 2 here): these tests wait on processes,
# Postgres and timers more than they use the CPU, and a third package shortened their run
# (flags given win).
# shellcheck disable=SC2086 # one package path a word
"$go" test -p 3 "${flags[@]}" $others
rc=$?
echo "# everything but $stack: $(($(date +%s) - start)) s; waiting for $stack (build/test-terraform.log)"
wait "$pid"
r=$?
cat build/test-terraform.log
((rc)) || rc=$r
trap - EXIT
echo "# make test: $(($(date +%s) - start)) s"
exit "$rc"
