#!/usr/bin/env bash
# The database cost per job of River's insert+work, measured the way `crawlq bench --op dbcost`
# measures crawlq's: around ../shared/bench/peers/run.sh river N, on the server at DATABASE_URL,
# the WAL written (pg_current_wal_lsn before and after, cluster-wide), the transactions and rows
# written in River's database (pg_stat_database) and the statements it ran (pg_stat_statements,
# when the server loads it). Round trips are not counted: River's client is not instrumented.
# River's run also truncates and VACUUM FULLs its (empty) table and checks its migrations first;
# that is a few statements, not per job.
#
#   DATABASE_URL=... scripts/bench-dbcost.sh [N]      (default 100000)
set -euo pipefail
n=${1:-100000}
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS_DIR:-$here/../../shared/bench/peers}
[[ -x $peers/run.sh ]] || peers=/work/shared/bench/peers
: "${DATABASE_URL:?set DATABASE_URL}"
psql "$DATABASE_URL" -qtAc "select 1 from pg_database where datname='peer_river'" | grep -q 1 ||
  psql "$DATABASE_URL" -qc "create database peer_river"
pss=$(psql "$DATABASE_URL" -qtAc "select extnamespace::regnamespace from pg_extension where extname='pg_stat_statements'")
read_counters() {
  local stmts="-1 -1"
  if [[ -n $pss ]] && psql "$DATABASE_URL" -qtAc "select 1 from $pss.pg_stat_statements limit 1" >/dev/null 2>&1; then
    stmts=$(psql "$DATABASE_URL" -qtAF' ' -c "select coalesce(sum(calls),0), coalesce(sum(shared_blks_dirtied),0) from $pss.pg_stat_statements where dbid=(select oid from pg_database where datname='peer_river')")
  fi
  stmts=${stmts// /, }
  psql "$DATABASE_URL" -qtAc "select pg_stat_clear_snapshot()" >/dev/null
  psql "$DATABASE_URL" -qtAF' ' -c "select pg_current_wal_lsn(), xact_commit+xact_rollback, tup_inserted+tup_updated+tup_deleted, $stmts from pg_stat_database where datname='peer_river'"
}
"$peers/run.sh" river 1000 >/dev/null # build it and migrate its database outside the measurement
read -r lsn0 x0 r0 s0 d0 < <(read_counters)
"$peers/run.sh" river "$n"
# River's connections report their counters as they exit; wait for them to be gone.
for _ in $(seq 100); do
  [[ $(psql "$DATABASE_URL" -qtAc "select count(*) from pg_stat_activity where datname='peer_river'") == 0 ]] && break
  sleep 0.1
done
read -r lsn1 x1 r1 s1 d1 < <(read_counters)
wal=$(psql "$DATABASE_URL" -qtAc "select pg_wal_lsn_diff('$lsn1','$lsn0')::bigint")
python3 - "$n" "$wal" "$x0" "$x1" "$r0" "$r1" "$s0" "$s1" "$d0" "$d1" <<'PY'
import sys
n, wal, x0, x1, r0, r1, s0, s1, d0, d1 = (int(float(a)) for a in sys.argv[1:])
dirt = f"{(d1 - d0) / n:.3f}" if d0 >= 0 else "n/a"
st = f"{(s1 - s0) / n:.3f}" if s0 >= 0 and s1 >= 0 else "n/a"
src = "pg_stat_statements" if st != "n/a" else "none"
print(f"RESULT system=river op=queue_dbcost jobs={n} statements_per={st} round_trips_per=n/a "
      f"rows_written_per={(r1 - r0) / n:.2f} wal_bytes_per={wal / n:.0f} xacts_per={(x1 - x0) / n:.3f} blocks_dirtied_per={dirt} statements_from={src}")
PY
