#!/usr/bin/env bash
# test.sh runs every test with -race in two go test processes started together: the Terraform
# stack (./terraform) and everything else.
#
# Why two: the stack test spends most of its time in the AWS provider's fixed waits (an RDS
# instance is polled for a minute or more after each create, modify and delete, even on moto),
# not on the CPU. One `go test ./...` starts packages in import-path order, so ./terraform, last
# in that order, only started once most other packages had run, and the run lasted the sum of
# the two. Side by side it lasts as long as the longer of them.
#
# The stack's output goes to build/test-terraform.log and is printed when both are done, so the
# two streams never interleave. The exit status is the first failure's.
#   scripts/test.sh [go test flags...]   # e.g. scripts/test.sh -run TestX; default -race -count=1 -timeout 40m
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
go=${GO:-go}
flags=("$@")
((${#flags[@]})) || flags=(-race -count=1 -timeout 40m)
mkdir -p build
stack=./terraform
others=$("$go" list ./... | grep -vx "crawlq/terraform") || exit 1

start=$(date +%s)
"$go" test "${flags[@]}" "$stack" >build/test-terraform.log 2>&1 &
tf=$!
trap 'kill "$tf" 2>/dev/null' EXIT
# shellcheck disable=SC2086 # one package path a word
"$go" test "${flags[@]}" $others
rc=$?
echo "# everything but $stack: $(($(date +%s) - start)) s; waiting for $stack (build/test-terraform.log)"
wait "$tf"
tfrc=$?
trap - EXIT
cat build/test-terraform.log
echo "# make test: $(($(date +%s) - start)) s"
((rc)) && exit "$rc"
exit "$tfrc"
