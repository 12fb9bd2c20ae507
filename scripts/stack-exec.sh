#!/usr/bin/env bash
# stack-exec.sh is the `go test -exec` program scripts/test.sh runs ./terraform's test binary
# through: go test builds the binary once, and this runs it twice side by side,
# TestStackOnEmulator in one process and every other test in the other, then prints the two
# outputs one after the other and exits with the first failure's status.
#
# Why two processes: the two stack tests each deploy to a moto server of their own but set the
# process environment to reach it, so they cannot run in parallel in one process; and each spends
# most of its time in the AWS provider's fixed RDS polls, so side by side the package lasts as
# long as the longer one. Why one go test: two `go test ./terraform` started together each
# compile the whole module and its dependencies with -race (the go command shares its build
# cache between processes only for what one has finished), twice the CPU on the run's longest
# path.
#
# With -test.run or -test.skip among the arguments (scripts/test.sh -run X) the binary runs once,
# as given. STACK_BUILT, when set, is a file created as soon as the binary is built, for
# scripts/test.sh to start what would compete with that build.
#   go test -exec "$PWD/scripts/stack-exec.sh" ./terraform
set -uo pipefail
[[ -n ${STACK_BUILT:-} ]] && : >"$STACK_BUILT"
for a in "$@"; do
  case $a in -test.run=* | -test.skip=*) exec "$@" ;; esac
done
apart='^TestStackOnEmulator$'
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$@" -test.run="$apart" >"$out/apart" 2>&1 &
p1=$!
"$@" -test.skip="$apart" >"$out/rest" 2>&1 &
p2=$!
wait "$p1"
r1=$?
wait "$p2"
r2=$?
cat "$out/apart" "$out/rest"
((r1)) && exit "$r1"
exit "$r2"
