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
# says so), and VERIFY, when set (make test sets it to `make verify`), runs beside the build and
# then beside the other tests, at a lower priority: its static checks build nothing the tests
# share but the CGO_ENABLED=0 set the tests' crawlq binaries use, and with a warm cache they are
# mostly cached vet results (5.5 s of CPU in a 28 s make verify on a loaded machine), so the
# tests need not wait for them. A failed check stops everything at once.
#
# The outputs of the stack and of VERIFY go to build/test-terraform.log and build/verify.log and
# are printed when all are done (VERIFY's at once when it fails), so the streams never
# interleave. The exit status is the first failure's. With a -run flag the stack package runs in
# one process.
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
# The longest packages first: go test starts packages in the order given, -p at a time, so a long
# one late in import-path order (crawl, local, scrapyd) would start when the rest is nearly done
# and end the run alone. Their order is that of their times in a clean make test under -p 3
# (crawl 214 s, scrapyd 80, local 55, browser 45, docscheck 44, functions/migrate 41, cli 40,
# events 35, command 23; the rest under 22 s each).
first=(internal/crawl internal/scrapyd internal/local internal/browser internal/docscheck functions/migrate internal/cli internal/events internal/command)
first=("${first[@]/#/crawlq/}")
others=$(
  for p in "${first[@]}"; do grep -x "$p" <<<"$all"; done
  grep -vxF -f <(printf '%s\n' "${first[@]}") <<<"$all"
)

start=$(date +%s)
built=build/test-terraform.built
verified=build/verify.status
rm -f "$built" "$verified" build/verify.log
# The stack, VERIFY and the other tests each in a process group of its own (set -m while they
# start), so stopping one stops its test binaries, terraform and moto too; and unlike a
# background job without job control, they do not start with SIGINT ignored, which tests that
# trap it need.
set -m
STACK_BUILT=$here/$built "$go" test "${flags[@]}" -exec "$here/scripts/stack-exec.sh" "$stack" >build/test-terraform.log 2>&1 &
pid=$!
vpid= opid=
if [[ -n ${VERIFY:-} ]]; then
  { nice -n 10 bash -c "$VERIFY"; echo "$? $(date +%s)" >"$verified"; } >build/verify.log 2>&1 &
  vpid=$!
fi
set +m
stop() { for p in "$pid" "$vpid" "$opid"; do [[ -n $p ]] && kill -- "-$p" 2>/dev/null; done; }
trap stop EXIT
# verify_failed ends the run when VERIFY has failed, or ended without a status.
verify_failed() {
  [[ -n $vpid ]] || return 0
  if [[ ! -s $verified ]]; then
    kill -0 "$vpid" 2>/dev/null && return 0
    sleep 1 # it may have written its status as it exited
  fi
  local st
  st=$(cat "$verified" 2>/dev/null) || st="none: it ended without one"
  [[ ${st%% *} == 0 ]] && return 0
  cat build/verify.log
  echo "# $VERIFY failed (status ${st%% *}) after $(($(date +%s) - start)) s: the tests are stopped" >&2
  exit 1
}
while [[ ! -e $built ]] && kill -0 "$pid" 2>/dev/null; do
  verify_failed
  sleep 1
done
echo "# $stack built: $(($(date +%s) - start)) s"
# -p 3 (go test's default is one package per core, 2 here): these tests wait on processes,
# Postgres and timers more than they use the CPU, and a third package shortened their run
# (flags given win). At nice 5: the stack's line is its provider's waits and terraform's CPU
# bursts between them (start-ups, plans, refreshes), which these tests, on the CPU for most of
# the run, stretched several times; at a lower priority they take the CPU terraform leaves
# between its bursts, and wait through a burst instead of halving it.
set -m
# shellcheck disable=SC2086 # one package path a word
nice -n 5 "$go" test -p 3 "${flags[@]}" $others &
opid=$!
set +m
# Wait for the tests, and for VERIFY while it runs, to stop the tests as soon as it fails.
rc= vdone=${vpid:+0}
while [[ -z $rc ]]; do
  verify_failed
  if [[ $vdone == 0 ]]; then
    ended=
    wait -n -p ended "$opid" "$vpid"
    s=$?
    if [[ $ended == "$opid" ]]; then rc=$s; else vdone=1; fi
  else
    wait "$opid"
    rc=$?
  fi
done
opid=
echo "# everything but $stack: $(($(date +%s) - start)) s; waiting for $stack (build/test-terraform.log)"
if [[ -n $vpid ]]; then
  while [[ ! -e $verified ]] && kill -0 "$vpid" 2>/dev/null; do sleep 1; done
  verify_failed
  echo "# verify done: $(($(cut -d' ' -f2 "$verified") - start)) s (build/verify.log):"
  cat build/verify.log
fi
wait "$pid"
r=$?
cat build/test-terraform.log
((rc)) || rc=$r
trap - EXIT
echo "# make test: $(($(date +%s) - start)) s"
exit "$rc"
