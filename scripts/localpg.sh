#!/usr/bin/env bash
# localpg.sh starts (or reuses) a throwaway PostgreSQL server under .local/pg and prints its URL.
#
#   scripts/localpg.sh start   # prints postgres://crawlq@127.0.0.1:PORT/crawlq?sslmode=disable
#   scripts/localpg.sh stop
#   scripts/localpg.sh url
#
# initdb refuses to run as root, so as root the cluster belongs to the unprivileged "postgres"
# user (created when missing). When no server binaries are found, Debian's postgresql package
# is installed. The port is a free loopback port chosen on first start and kept in .local/pg/port.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/.local/pg
data=$dir/data
log=$dir/log

find_bin() {
  local b
  for b in "$(command -v pg_ctl 2>/dev/null || true)" /usr/lib/postgresql/*/bin/pg_ctl; do
    [[ -n $b && -x $b ]] && { dirname "$b"; return 0; }
  done
  return 1
}
bindir=$(find_bin || true)
if [[ -z $bindir ]]; then
  echo "localpg: PostgreSQL server binaries not found; installing Debian's postgresql package" >&2
  if [[ $(id -u) -ne 0 ]]; then echo "localpg: need root to install postgresql (or set DATABASE_URL)" >&2; exit 1; fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
  bindir=$(find_bin) || { echo "localpg: postgresql install did not provide pg_ctl" >&2; exit 1; }
fi

as_owner() { # run a command as the cluster owner
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
url() { echo "postgres://crawlq@127.0.0.1:$(cat "$dir/port")/crawlq?sslmode=disable"; }

start() {
  mkdir -p "$dir"
  if [[ $(id -u) -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    chown postgres "$dir"
    # The owner must be able to reach the data directory through every parent.
    p=$dir; while [[ $p != / ]]; do chmod o+x "$p" 2>/dev/null || true; p=$(dirname "$p"); done
  fi
  if [[ ! -f $data/PG_VERSION ]]; then
    echo "localpg: creating a throwaway PostgreSQL under $dir (once; make clean removes it)" >&2
    as_owner "$bindir/initdb" -D "$data" -U crawlq --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    free_port >"$dir/port"
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $(cat "$dir/port")
unix_socket_directories = ''
max_connections = 200
shared_buffers = 512MB
fsync = on
synchronous_commit = on
CONF
  fi
  if ! as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    echo "localpg: starting it on 127.0.0.1:$(cat "$dir/port")" >&2
    as_owner "$bindir/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null ||
      { tail -20 "$log" >&2; exit 1; }
  fi
  for _ in $(seq 100); do
    psql "postgres://crawlq@127.0.0.1:$(cat "$dir/port")/postgres?sslmode=disable" -qtAc 'select 1' >/dev/null 2>&1 && break
    sleep 0.1
  done
  psql "postgres://crawlq@127.0.0.1:$(cat "$dir/port")/postgres?sslmode=disable" -qtAc \
    "select 1 from pg_database where datname='crawlq'" | grep -q 1 ||
    psql "postgres://crawlq@127.0.0.1:$(cat "$dir/port")/postgres?sslmode=disable" -qc 'create database crawlq' >/dev/null
  url
}

case ${1:-start} in
  start) start ;;
  stop) [[ -f $data/PG_VERSION ]] && as_owner "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true ;;
  url) url ;;
  *) echo "usage: localpg.sh start|stop|url" >&2; exit 2 ;;
esac
