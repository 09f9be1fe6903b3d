#!/usr/bin/env bash
# The cockpit against a tmux server, in instructions (issue 17, sections 3 and 4). A
# benchmark, not a test: it prints figures and asserts nothing. Results and their meaning:
# docs/performance.md, "Cockpit CPU (issue 17 §3)", sixth pass.
#
#   benches/cockpit-callgrind.sh
#   P=/path/to/proctor P_BEFORE=/tmp/old/proctor WINDOW=40 benches/cockpit-callgrind.sh
#
# The same set-up as benches/cockpit-vs-tmux.sh (the demo's two narrating PTY sessions, an
# inner tmux server playing the same two fakes), but every measured process runs under
# valgrind's callgrind, which counts the instructions it executes: a figure that another
# builder's load does not move (the CPU time of benches/cockpit-vs-tmux.sh does). Sides, one
# after the other, each in a 160x48 pane of an outer tmux server:
#   cockpit  `proctor --home H` under callgrind;
#   before   the same with P_BEFORE (when set);
#   tmux     a `tmux attach` client of the inner tmux server, which runs under callgrind
#            from its start: the server parses both panes and draws the client's terminal
#            (the client process draws nothing; see the other script).
# Each side settles WARM seconds, then its counters are zeroed (`callgrind_control -z`) and
# dumped WINDOW seconds later (`callgrind_control -d`): the instructions of that window.
# Under callgrind a process runs some 50 times slower; a frame of the cockpit still takes
# well under the narration's second, so the frames drawn are the same ones.
set -euo pipefail

WARM=${WARM:-15}
WINDOW=${WINDOW:-40}
ROWS=${ROWS:-48}
COLS=${COLS:-160}

cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0
if [ -z "${P:-}" ]; then
    cargo build --release --quiet --bin proctor
    P=$PWD/target/release/proctor
fi

T=$(mktemp -d /tmp/pcgXXXX)
H=$T/h
OS=$T/o.sock
IS=$T/i.sock
tmo() { tmux -S "$OS" -f /dev/null "$@"; }
tmi() { tmux -S "$IS" -f /dev/null "$@"; }
tmux_kill() {
    local pid
    pid=$(tmux -S "$1" -f /dev/null display -p '#{pid}' 2>/dev/null) || return 0
    tmux -S "$1" -f /dev/null kill-server >/dev/null 2>&1 || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
cleanup() {
    set +e
    trap - EXIT INT TERM
    [ -S "$OS" ] && tmux_kill "$OS"
    [ -S "$IS" ] && tmux_kill "$IS"
    [ -S "$H/run/server.sock" ] && "$P" --home "$H" server stop >/dev/null 2>&1
    [ -n "${KEEP:-}" ] && { echo "dumps kept in $T"; return; }
    rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM
load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }
# The instructions of a dump (its `summary:` or `totals:` line).
total() { sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$1" | head -1; }
# The last dump callgrind wrote for PID (OUT.PID.N, or OUT.PID when only one).
last_dump() { ls -t "$1".*"$2"* 2>/dev/null | head -1; }

"$P" --home "$H" demo --no-cockpit >/dev/null 2>&1
SHIMS=$H/state/demo-shims
[ -x "$SHIMS/claude" ] || SHIMS=$(dirname "$(find "$H" -name claude -path '*demo-shims*' | head -1)")
mkdir -p "$T/ws"
# The inner server in the foreground (`-D`), so that it is valgrind's own process
# (callgrind_control does not find a daemon forked under valgrind).
valgrind --tool=callgrind --callgrind-out-file="$T/cg-tmux.%p" \
    tmux -S "$IS" -f /dev/null -D </dev/null >/dev/null 2>"$T/valgrind-tmux.log" &
for _ in $(seq 100); do [ -S "$IS" ] && break; sleep 0.2; done
tmi new-session -d -s n -x "$COLS" -y "$ROWS" -c "$T/ws" "$SHIMS/claude"
tmi split-window -h -t n -c "$T/ws" "$SHIMS/gemini"
sleep 3
for pane in $(tmi list-panes -t n -F '#{pane_id}'); do
    tmi send-keys -t "$pane" -l '!narrate 100'
    tmi send-keys -t "$pane" Enter
done
IPID=$(tmi display -p '#{pid}')
tmo new-session -d -s idle -x "$COLS" -y "$ROWS" "sleep 100000"

side() { # NAME
    local name=$1 cmd pid measured l0 dump n
    case $name in
    cockpit) cmd="exec valgrind --tool=callgrind --callgrind-out-file=$T/cg-cockpit.%p $P --home $H 2>$T/vg-cockpit.log" ;;
    before) cmd="exec valgrind --tool=callgrind --callgrind-out-file=$T/cg-before.%p $P_BEFORE --home $H 2>$T/vg-before.log" ;;
    tmux) cmd="exec tmux -S $IS -f /dev/null attach -t n" ;;
    esac
    tmo new-session -d -s "$name" -x "$COLS" -y "$ROWS" "$cmd"
    pid=$(tmo display -p -t "$name" '#{pane_pid}')
    measured=$pid
    [ "$name" = tmux ] && measured=$IPID
    sleep "$WARM"
    l0=$(load)
    callgrind_control -z "$measured" >/dev/null
    sleep "$WINDOW"
    callgrind_control -d "$measured" >/dev/null
    sleep 1
    dump=$(last_dump "$T/cg-$([ "$name" = tmux ] && echo tmux || echo "$name")" "$measured")
    n=$(total "$dump")
    tmo capture-pane -p -t "$name" >"$T/screen-$name.txt"
    echo "callgrind side=$name instructions=$n window=$WINDOW load_before=$l0 load_after=$(load) dump=$(basename "$dump")" | tee -a "$T/results"
    callgrind_annotate "$dump" 2>/dev/null | sed -n '1,40p' >"$T/annotate-$name.txt" || true
    tmo kill-session -t "$name"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
}

echo "machine: $(nproc) cores, $(uname -r), tmux $(tmux -V | cut -d' ' -f2), valgrind $(valgrind --version), ${COLS}x${ROWS}, load at start $(load)"
sides="cockpit tmux"
[ -n "${P_BEFORE:-}" ] && sides="cockpit before tmux"
for name in $sides; do side "$name"; done

echo
echo "== instructions over $WINDOW s (callgrind), ${COLS}x${ROWS}, two narrating programs =="
tm=$(sed -n 's/.* side=tmux instructions=\([0-9]*\).*/\1/p' "$T/results")
while read -r line; do
    s=$(echo "$line" | sed -n 's/.* side=\([^ ]*\).*/\1/p')
    n=$(echo "$line" | sed -n 's/.* instructions=\([0-9]*\).*/\1/p')
    r=$(awk -v a="$n" -v b="$tm" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    printf '%-8s %15s instructions   %6sx the tmux server\n' "$s" "$n" "$r"
done <"$T/results"
for s in $sides; do
    echo
    echo "== $s: top of callgrind_annotate =="
    sed -n '1,30p' "$T/annotate-$s.txt"
done
for f in "$T"/screen-*.txt; do
    echo
    echo "== what $(basename "$f" .txt | sed 's/screen-//') showed at the end of its window (top 8 rows) =="
    head -8 "$f"
done
