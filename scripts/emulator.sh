#!/usr/bin/env bash
# emulator.sh starts (or reuses) a local AWS emulator on one loopback endpoint and prints its URL.
#
#   export AWS_ENDPOINT_URL=$(scripts/emulator.sh start)
#   scripts/emulator.sh url
#   scripts/emulator.sh stop
#
# LocalStack (in Docker) when a Docker engine answers, otherwise moto_server in the background.
# State lives under .local/emulator/: kind (localstack|moto), port, pid and log. Running start
# twice reuses the emulator that is already up. Set CRAWLQ_EMULATOR=moto|localstack to choose.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/.local/emulator
container=crawlq-localstack
image=${LOCALSTACK_IMAGE:-localstack/localstack:4}
mkdir -p "$dir"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
url() { echo "http://127.0.0.1:$(cat "$dir/port")"; }
answers() { curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null; }

docker_ok() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

wait_up() { # wait_up URL PATH
  for _ in $(seq 300); do answers "$1$2" && return 0; sleep 0.2; done
  echo "emulator: $1 did not answer within 60s (log: $dir/log)" >&2
  return 1
}

running() {
  [[ -f $dir/kind && -f $dir/port ]] || return 1
  case $(cat "$dir/kind") in
    moto) [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null && answers "$(url)/moto-api/" ;;
    localstack) answers "$(url)/_localstack/health" ;;
    *) return 1 ;;
  esac
}

start_moto() {
  command -v moto_server >/dev/null 2>&1 ||
    { echo "emulator: no Docker engine and moto_server not on PATH (pip install 'moto[server]')" >&2; exit 1; }
  free_port >"$dir/port"
  echo moto >"$dir/kind"
  # setsid detaches it from this shell so it outlives the caller.
  setsid moto_server -H 127.0.0.1 -p "$(cat "$dir/port")" >"$dir/log" 2>&1 < /dev/null &
  echo $! >"$dir/pid"
  wait_up "$(url)" /moto-api/
}

start_localstack() {
  echo 4566 >"$dir/port"
  echo localstack >"$dir/kind"
  if ! docker ps -q --filter "name=^${container}$" | grep -q .; then
    docker rm -f "$container" >/dev/null 2>&1 || true
    docker run -d --name "$container" -p 127.0.0.1:4566:4566 \
      -v /var/run/docker.sock:/var/run/docker.sock "$image" >"$dir/log"
  fi
  wait_up "$(url)" /_localstack/health
}

start() {
  if running; then url; return; fi
  case ${CRAWLQ_EMULATOR:-} in
    moto) start_moto ;;
    localstack) start_localstack ;;
    "") if docker_ok; then start_localstack; else start_moto; fi ;;
    *) echo "emulator: CRAWLQ_EMULATOR must be moto or localstack" >&2; exit 2 ;;
  esac
  url
}

stop() {
  [[ -f $dir/kind ]] || return 0
  case $(cat "$dir/kind") in
    moto)
      if [[ -f $dir/pid ]]; then
        pid=$(cat "$dir/pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        rm -f "$dir/pid"
      fi
      ;;
    localstack) docker rm -f "$container" >/dev/null 2>&1 || true ;;
  esac
  rm -f "$dir/kind" "$dir/port"
}

case ${1:-start} in
  start) start ;;
  stop) stop ;;
  url) running && url || { echo "emulator: not running" >&2; exit 1; } ;;
  *) echo "usage: emulator.sh start|stop|url" >&2; exit 2 ;;
esac
