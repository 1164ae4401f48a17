#!/usr/bin/env bash
# The first five minutes of a newcomer, replayed (issue 34): a fresh clone, the setup
# README's `make serve` does, then every command README.md, docs/agent.md and
# docs/demo-model.md print for pasting, each under a time budget. A command fails the
# check on a Python traceback in its output, on running past its budget, or on a
# non-zero exit where the docs promise success. Server commands start in the
# background, are probed with curl (the banner's requests), then stopped with Ctrl+C.
#
#   tools/newcomer_check.sh [REPO]      REPO: what to clone (default: this checkout's
#                                       repository; commit first: a clone sees commits only)
# Environment:
#   NEWCOMER_VENV=/path/to/venv  reuse that venv instead of building .venv from the lock
#                  files: the clone's native code is built in place with its Python
#                  (setup.py build_ext --inplace, what `make serve`'s editable install
#                  compiles) and .venv/bin/{ds4,python} in the clone run the clone's
#                  sources with it, so every command still runs as printed
#   NEWCOMER_SCALE=N   multiply every budget by N (a slow or shared machine)
#   NEWCOMER_KEEP=1    keep the clone and the logs (else removed on success)
#   NEWCOMER_PORT=P    the servers' port (default: a free one; the docs say 8000, which
#                      the commands and curls are rewritten to)
# Exit status: 0 when every command passed, 1 otherwise; one line per command on stdout.
set -u -o pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
repo=${1:-$here}
scale=${NEWCOMER_SCALE:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/ds4-newcomer.XXXXXX")
clone=$work/ds4
logs=$work/logs
mkdir -p "$logs"
failures=0
count=0

say() { printf '%s\n' "$*"; }
budget() { echo $(($1 * scale)); }

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=${NEWCOMER_PORT:-$(free_port)}

# ---- the clone and the setup `make serve` does ---------------------------------------

say "==> cloning $repo into $clone"
git clone --quiet "$repo" "$clone" || { say "FAIL clone"; exit 1; }
cd "$clone" || exit 1

setup_log=$logs/00-setup.log
setup_start=$(date +%s)
if [ -n "${NEWCOMER_VENV:-}" ]; then
    say "==> setup: native code built in place with $NEWCOMER_VENV (NEWCOMER_VENV)"
    timeout "$(budget 1200)" "$NEWCOMER_VENV/bin/python" setup.py --quiet build_ext --inplace \
        >"$setup_log" 2>&1
    rc=$?
    mkdir -p .venv/bin
    for tool in python ds4; do
        if [ "$tool" = ds4 ]; then run='-m ds4'; else run=''; fi
        cat >".venv/bin/$tool" <<EOF
#!/bin/sh
PYTHONPATH="$clone/src:$clone\${PYTHONPATH:+:\$PYTHONPATH}" exec "$NEWCOMER_VENV/bin/python" $run "\$@"
EOF
        chmod +x ".venv/bin/$tool"
    done
else
    say "==> setup: make .venv/.ds4-runtime-built (what make serve builds before it serves)"
    timeout "$(budget 1800)" make .venv/.ds4-runtime-built >"$setup_log" 2>&1
    rc=$?
fi
say "    setup: exit $rc in $(($(date +%s) - setup_start)) s (log $setup_log)"
if [ "$rc" -ne 0 ]; then
    tail -20 "$setup_log"
    say "FAIL setup"
    exit 1
fi

# ---- one command -----------------------------------------------------------------------

# verdict NAME LOG RC EXPECT SECONDS BUDGET: one line, and the failure count
verdict() {
    local name=$1 log=$2 rc=$3 expect=$4 took=$5 limit=$6 why=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        why="hung past its ${limit}s budget"
    elif grep -q "Traceback (most recent call last)" "$log"; then
        why="traceback in its output"
    elif [ "$expect" = ok ] && [ "$rc" -ne 0 ]; then
        why="exit $rc where success is documented"
    fi
    if [ -n "$why" ]; then
        failures=$((failures + 1))
        say "FAIL  $name (${took}s): $why; log $log"
        tail -8 "$log" | sed 's/^/      | /'
    else
        say "ok    $name (${took}s, exit $rc)"
    fi
}

# check EXPECT BUDGET COMMAND: EXPECT is ok (exit 0 documented) or any (a documented
# failure or refusal: only hangs and tracebacks count)
check() {
    local expect=$1 limit
    limit=$(budget "$2")
    local command=$3
    count=$((count + 1))
    local log
    log=$logs/$(printf '%02d' "$count").log
    printf '$ %s\n' "$command" >"$log"
    local start
    start=$(date +%s)
    timeout -k 10 "$limit" bash -c "exec $command" </dev/null >>"$log" 2>&1
    local rc=$?
    verdict "$command" "$log" "$rc" "$expect" "$(($(date +%s) - start))" "$limit"
}

# A server command: started in the background, ready when /health answers, probed by
# the given curl lines (each must succeed and print what grep -E PATTERN finds), then
# stopped with SIGINT; its exit must be clean (0 or 130) and its log traceback-free.
SERVER_PID=
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -INT "$SERVER_PID" 2>/dev/null
        for _ in $(seq 1 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$SERVER_PID" 2>/dev/null
    fi
}
trap stop_server EXIT

serve() {
    local limit
    limit=$(budget "$1")
    local command="$2 --port $port"
    shift 2
    count=$((count + 1))
    local log
    log=$logs/$(printf '%02d' "$count").log
    printf '$ %s\n' "$command" >"$log"
    local start
    start=$(date +%s)
    # Job control on: a background job of a script otherwise starts with SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler (no Ctrl+C stop).
    set -m
    bash -c "exec $command" </dev/null >>"$log" 2>&1 &
    SERVER_PID=$!
    set +m
    local up=0
    for _ in $(seq 1 $((limit * 2))); do
        if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then up=1; break; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.5
    done
    local why=""
    if [ "$up" -ne 1 ]; then
        kill -0 "$SERVER_PID" 2>/dev/null && why="not ready within ${limit}s" || why="exited before it was ready"
    fi
    while [ -z "$why" ] && [ "$#" -ge 2 ]; do
        local probe=${1//8000/$port} pattern=$2
        shift 2
        printf '$ %s\n' "$probe" >>"$log"
        local out
        out=$(timeout "$limit" bash -c "$probe" 2>&1)
        local prc=$?
        printf '%s\n' "$out" >>"$log"
        if [ "$prc" -ne 0 ]; then
            why="probe exited $prc: $probe"
        elif ! grep -Eq -- "$pattern" <<<"$out"; then
            why="probe printed no /$pattern/: $probe"
        fi
    done
    stop_server
    wait "$SERVER_PID" 2>/dev/null
    local rc=$?
    SERVER_PID=
    local took=$(($(date +%s) - start))
    if [ -n "$why" ]; then
        failures=$((failures + 1))
        say "FAIL  $command (${took}s): $why; log $log"
        tail -8 "$log" | sed 's/^/      | /'
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ]; then
        verdict "$command" "$log" 1 ok "$took" "$limit"
    else
        verdict "$command" "$log" 0 ok "$took" "$limit"
    fi
}

skip() { say "skip  $1: $2"; }

# ---- README.md: the two commands and "More tools" ---------------------------------------

CHAT_CURL="curl -sS http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{\"model\":\"deepseek-v4-flash\",\"max_tokens\":200,
       \"messages\":[{\"role\":\"user\",\"content\":\"Quel ramo del lago di Como\"}]}'"
TOOL_CURL="curl -sS http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{
 \"model\": \"deepseek-v4-flash\", \"max_tokens\": 200,
 \"messages\": [{\"role\": \"user\", \"content\": \"Leggi il file note/renzo.txt.\"}],
 \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"read_file\",
   \"description\": \"Legge un file di testo e ne restituisce il contenuto.\",
   \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\",
     \"description\": \"Il percorso del file da leggere.\"}}, \"required\": [\"path\"]}}}]}'"

say "==> README.md and docs/demo-model.md: make serve (its server) and the banner's requests"
serve 300 ".venv/bin/ds4 server" \
    "$CHAT_CURL" '"finish_reason": ?"stop"' \
    "$TOOL_CURL" '"finish_reason": ?"tool_calls"'

say "==> README.md: more tools"
check ok 60 ".venv/bin/ds4 --help"
check ok 600 '.venv/bin/ds4 cli -p "Quel ramo del lago di Como"'
check ok 120 '.venv/bin/ds4 cli --dump-tokens -p "text"'
check ok 120 ".venv/bin/ds4 cli --render-chat docs/examples/chat-request.json"
check any 120 ".venv/bin/ds4 agent"  # a terminal app: without one, a one-line refusal
check ok 120 ".venv/bin/ds4 gguf inspect models/demo.gguf"
check ok 600 ".venv/bin/ds4 gguf tiny --out tiny.gguf"
serve 300 ".venv/bin/ds4 server --backend scripted --script docs/examples/scripted-replies.json" \
    "$CHAT_CURL" '"choices"'
serve 300 ".venv/bin/ds4 server --sessions 4 --kv-disk-dir kv" \
    "$CHAT_CURL" '"finish_reason"'
check ok 1800 ".venv/bin/ds4 bench --prompt-file data/promessi_sposi.txt --ctx-max 8192"
check any 1800 ".venv/bin/ds4 test-vectors"  # documented: the demo model fails them
check ok 900 ".venv/bin/ds4 gguf score --text docs/demo-model.md --out a.tsv"
skip ".venv/bin/ds4 gguf convert --hf CHECKPOINT_DIR ..." "needs a DeepSeek V4 checkpoint"
if .venv/bin/python -c "import ray" 2>/dev/null; then
    serve 600 ".venv/bin/ds4 server --distributed local:2" "$CHAT_CURL" '"finish_reason"'
else
    skip ".venv/bin/ds4 server --distributed local:2" "Ray is not installed (make test installs it)"
fi
check ok 120 ".venv/bin/ds4 gguf split --layers 0-1,2-output models/demo.gguf demo"
check ok 600 '.venv/bin/ds4 cli --mtp models/demo-mtp.gguf --temp 0 -p "Renzo"'
skip ".venv/bin/ds4 steer build --good-file G --bad-file B ..." "G and B are the reader's files"
check ok 600 '.venv/bin/ds4 cli --power 50 -p "Renzo"'

say "==> docs/agent.md"
skip "ds4 agent -m ds4flash.gguf -c 200000" "needs ds4flash.gguf"
check ok 900 '.venv/bin/ds4 agent --non-interactive --yes -p "run the tests and fix the first failure" > answer.txt'
skip "ds4 agent --backend scripted --script outputs.json" "outputs.json is the reader's file"
check ok 300 '.venv/bin/ds4 agent --backend scripted --script examples/agent/tour.json -p "show me every tool" --non-interactive'

say "==> docs/demo-model.md"
check ok 600 '.venv/bin/ds4 cli -p "Renzo e Lucia"'
skip "tools/train_demo.py" "the demo model's training: 17-30 min on 2 cores"

# ---- verdict ---------------------------------------------------------------------------

trap - EXIT
if [ "$failures" -eq 0 ]; then
    say "newcomer check: all $count commands passed"
    [ -n "${NEWCOMER_KEEP:-}" ] && say "kept $work" || rm -rf "$work"
    exit 0
fi
say "newcomer check: $failures of $count commands failed (logs in $logs)"
exit 1
