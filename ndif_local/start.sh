#!/usr/bin/env bash
# Start a real NDIF server (PyPI ndif 0.1.2) on localhost, CPU only, serving a tiny random Llama built here.
#
#   ndif_local/start.sh     installs what is missing (apt redis-server; the venv .venv-ndif with ndif[api,ray],
#                           the CPU torch and moto[server]), builds the model (.ndif/model), starts redis, moto (the
#                           S3 store), a Ray head with the NDIF controller, the NDIF API, deploys the model and
#                           prints NDIF_URL=... and NDIF_MODEL=... . Already running: prints them and does nothing.
#   ndif_local/stop.sh      stops what this script started.
#
# Logs and pid files: .ndif/logs, .ndif/run. Env (defaults): NDIF_PYTHON (python3), NDIF_API_PORT (8001),
# NDIF_REDIS_PORT (6379), NDIF_S3_PORT (9000), NDIF_RAY_HEAD_PORT (6385), NDIF_RAY_CLIENT_PORT (10001),
# NDIF_RAY_DASHBOARD_PORT (8265), NDIF_RAY_TEMP_DIR (/tmp/cw-ndif-ray).
# Not stock NDIF in two places, both outside the ndif package: a CPU model actor (ndif_cpu.py; the stock one
# needs CUDA) and a Ray head that advertises one fake GPU (the controller places models only on nodes with one).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
STATE="$ROOT/.ndif"
VENV="${NDIF_VENV:-$ROOT/.venv-ndif}"
RUN="$STATE/run" LOGS="$STATE/logs" MODEL="$STATE/model"
PORT="${NDIF_API_PORT:-8001}" REDIS_PORT="${NDIF_REDIS_PORT:-6379}" S3_PORT="${NDIF_S3_PORT:-9000}"
URL="http://localhost:$PORT"
# shellcheck source=ndif_local/env.sh
source "$HERE/env.sh"

say_where() { echo "NDIF_URL=$URL"; echo "NDIF_MODEL=$MODEL"; }

connected() { curl -sf "$URL/connected" 2>/dev/null | grep -q '"connected"'; }
if [ -f "$RUN/deployed" ] && connected; then
  echo "NDIF already running"; say_where; exit 0
fi
[ -d "$RUN" ] && "$HERE/stop.sh" >/dev/null  # leftovers of a run that did not finish

T0=$(date +%s)
step() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mkdir -p "$RUN" "$LOGS" "$NDIF_HOME" "$NDIF_RAY_TEMP_DIR"

# ---- 1. installs (skipped when present) ----
command -v redis-server >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server; } \
  >"$LOGS/apt.log" 2>&1
if [ ! -f "$VENV/.installed" ]; then
  step "installing the NDIF venv $VENV (log: $LOGS/pip.log)"
  "${NDIF_PYTHON:-python3}" -m venv "$VENV"
  # ndif 0.1.2 says Requires-Python >=3.12 but runs on 3.11: its dependencies are installed first, by the normal
  # resolver (so that each is a release for this Python; `--ignore-requires-python` on everything picks e.g. a
  # numpy that only builds on 3.12), then ndif without them. torch first, so that nothing pulls a CUDA build.
  {
    "$VENV/bin/pip" install -q torch==2.13.0 &&
    "$VENV/bin/pip" install -q torch==2.13.0 "nnsight==0.8.1" pydantic redis click python-dotenv pyyaml boto3 fastapi \
      "uvicorn[standard]" gunicorn python-multipart "ray[default]" "transformers>=5.15.0" accelerate numpy zstandard peft \
      "moto[server]" &&
    "$VENV/bin/pip" install -q --no-deps --ignore-requires-python "ndif==0.1.2"
  } >"$LOGS/pip.log" 2>&1 || { tail -20 "$LOGS/pip.log"; exit 1; }
  touch "$VENV/.installed"
fi
step "installs ready"

[ -f "$MODEL/model.safetensors" ] || python "$HERE/make_model.py" "$MODEL" >"$LOGS/model.log" 2>&1
step "model at $MODEL"

# ---- 2. services: each in a session of its own, whose id stop.sh ends (Ray's daemons stay in the session) ----
spawn() { local name=$1; shift; setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null & echo $! >"$RUN/$name.sid"; }
spawn redis redis-server --port "$REDIS_PORT" --save "" --appendonly no
spawn moto moto_server -H 127.0.0.1 -p "$S3_PORT"
(
  unset RAY_ADDRESS
  setsid ray start --head --block --num-cpus=4 --num-gpus=1 --object-store-memory=300000000 \
    --resources='{"head": 10, "cuda_memory_bytes": 8589934592, "cpu_memory_bytes": 4294967296}' \
    --port="$NDIF_RAY_HEAD_PORT" --ray-client-server-port="${NDIF_RAY_CLIENT_PORT:-10001}" \
    --include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port="$NDIF_RAY_DASHBOARD_PORT" \
    --temp-dir="$NDIF_RAY_TEMP_DIR" >"$LOGS/ray.log" 2>&1 </dev/null & echo $! >"$RUN/ray.sid"
)
for _ in $(seq 90); do grep -q "Ray runtime started" "$LOGS/ray.log" && break; sleep 1; done
grep -q "Ray runtime started" "$LOGS/ray.log" || { echo "Ray did not start, see $LOGS/ray.log"; exit 1; }
step "ray head up"
# launches the detached Controller actor (in Ray's session), then exits
RAY_ADDRESS="127.0.0.1:$NDIF_RAY_HEAD_PORT" python -m ndif.services.ray.deployments.controller.controller \
  >"$LOGS/controller.log" 2>&1
spawn api bash "$(python -c 'import ndif.services.api, os; print(os.path.dirname(ndif.services.api.__file__))')/start.sh"
for _ in $(seq 120); do connected && break; sleep 2; done
connected || { echo "the API did not reach Ray, see $LOGS/api.log"; exit 1; }
step "API connected"

# ---- 3. deploy the model under the key an nnsight client sends for this path ----
python - "$MODEL" "$HERE/models.yaml" "$STATE/models.yaml" <<'EOF'
import os, sys
import transformers
import nnsight.modeling.huggingface as hf
from nnsight.modeling.transformers import TransformersModel
path, template, out = sys.argv[1:]
hf._ID_CACHE[path] = path  # a local path has no Hub entry to canonicalise the id with
key = TransformersModel(path, task="text-generation", tokenizer=transformers.AutoTokenizer.from_pretrained(path)).to_model_key()
size = os.path.getsize(os.path.join(path, "model.safetensors"))
open(out, "w").write(open(template).read().format(checkpoint=path, model_key=key, size_bytes=size))
EOF
ndif deploy -f "$STATE/models.yaml" >"$LOGS/deploy.log" 2>&1 || { cat "$LOGS/deploy.log"; exit 1; }
touch "$RUN/deployed"
step "model deployed; NDIF started"
say_where
