#!/usr/bin/env bash
# Stop what ndif_local/start.sh started: every process of the sessions it recorded in .ndif/run/*.sid
# (redis, moto, the Ray head with its daemons and workers, the API), by process id. Safe to run twice.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="$(dirname "$HERE")/.ndif/run"
[ -d "$RUN" ] || { echo "NDIF not running (no $RUN)"; exit 0; }
members() { for f in "$RUN"/*.sid; do [ -f "$f" ] && ps -s "$(cat "$f")" -o pid= 2>/dev/null; done | tr -s ' \n' ' '; }
pids=$(members)
if [ -n "${pids// /}" ]; then
  kill $pids 2>/dev/null
  for _ in $(seq 20); do sleep 0.5; pids=$(members); [ -z "${pids// /}" ] && break; done
  [ -n "${pids// /}" ] && kill -9 $pids 2>/dev/null
fi
rm -rf "$RUN"
echo "NDIF stopped"
