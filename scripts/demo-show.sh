#!/usr/bin/env bash
# After `make demo`: show what was deployed on the first sandbox host and ask it for a generation.
set -euo pipefail
host=${1:-sglang-sandbox-1}
unit=sglang-kimi.service
# The sandbox's client key (a server on 0.0.0.0 needs one): clients send it as a bearer token.
key=$(sed -n 's/^sglang_api_key: *//p' "$(dirname "$0")/../inventory/sandbox/group_vars/all.yml")
run() { printf '\n\033[1m$ %s\033[0m\n' "$*"; docker exec "$host" sh -c "$*"; }
run "systemctl cat $unit"
run "systemctl show $unit -p ActiveState -p SubState -p MainPID -p NRestarts -p InvocationID"
run "curl -s -o /dev/null -w 'GET /health_generate -> HTTP %{http_code}\n' http://127.0.0.1:30000/health_generate"
body='{"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8}}'
run "curl -s -o /dev/null -w 'POST /generate without the key -> HTTP %{http_code}\n' http://127.0.0.1:30000/generate -H 'Content-Type: application/json' -d '$body'"
run "curl -s http://127.0.0.1:30000/generate -H 'Authorization: Bearer $key' -H 'Content-Type: application/json' -d '$body'; echo"
