#!/usr/bin/env bash
# The cockpit against a tmux client (issue 17, sections 3 and 4). A benchmark, not a test: it
# prints figures and asserts nothing. Results and their meaning: docs/performance.md,
# "Cockpit CPU (issue 17 §3)".
#
#   benches/cockpit-vs-tmux.sh
#   REPS=3 WINDOW=30 benches/cockpit-vs-tmux.sh
#   P_BEFORE=/tmp/old/proctor benches/cockpit-vs-tmux.sh   # an older cockpit in the same run
#   P=/path/to/proctor benches/cockpit-vs-tmux.sh          # no build: this binary
#
# Both sides show the same two narrating programs: the demo's fakes of claude and gemini in
# their interactive (PTY) form, each playing `!narrate` (a line every second or so).
#   cockpit  `proctor demo --no-cockpit` sets up the demo (its two narrating sessions and the
#            other four); the cockpit (`proctor --home H`) runs in a 160x48 pane of an outer
#            tmux server, as a person would run it.
#   before   the same with the cockpit of P_BEFORE, against the same server and sessions.
#   tmux     an inner tmux server holds the same two programs, one pane each, playing the same
#            narration; a tmux client attached to it runs in a 160x48 pane of the outer tmux
#            server.
# The sides alternate (the order reverses every other repetition). Each side settles for WARM
# seconds, then the measured process's CPU (utime+stime from /proc/PID/stat, in clock ticks,
# and the scheduler's runtime from /proc/PID/schedstat, in nanoseconds) is taken over WINDOW
# seconds, with /proc/loadavg. The servers' CPU over the same window is printed too (the
# proctor server for the cockpit, the inner tmux server for the tmux client): the measured
# figure is the client's. Note: a tmux client hands its terminal to the tmux server (fd
# passing), which parses the panes and writes the client's terminal itself; the client process
# only relays keys and so shows ~0 CPU. The tmux server's runtime is printed beside it, which
# is what a fair reader compares the cockpit with (it parses and draws, as the cockpit does).
#
# Everything lives in a temporary folder under /tmp; the demo's server, both tmux servers and
# the folder are removed on exit, Ctrl-C included.
set -euo pipefail

REPS=${REPS:-2}       # repetitions per side (alternating order)
WARM=${WARM:-10}      # seconds a side settles before its window opens
WINDOW=${WINDOW:-30}  # CPU window, seconds
SETTLE=${SETTLE:-90}  # seconds after the demo's set-up before the first side: its start-up
                      # traffic is over, and its factory run's step shows minutes, no longer
                      # seconds (a whole frame every second); else the first side pays for it
ROWS=${ROWS:-48}
COLS=${COLS:-160}

cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0
if [ -z "${P:-}" ]; then
    cargo build --release --quiet --bin proctor
    P=$PWD/target/release/proctor
fi
HZ=$(getconf CLK_TCK)

T=$(mktemp -d /tmp/pcXXXX)
H=$T/h       # the demo's home
OS=$T/o.sock # the outer tmux server: the terminal both clients run in
IS=$T/i.sock # the inner tmux server: the tmux side's two programs

tmo() { tmux -S "$OS" -f /dev/null "$@"; }
tmi() { tmux -S "$IS" -f /dev/null "$@"; }
tmux_kill() { # SOCKET: stop that tmux server and wait until it is gone
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
    rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

cpu_ticks() { # utime + stime of a process (fields 14 and 15 of /proc/PID/stat)
    local s
    s=$(<"/proc/$1/stat")
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    echo $((${12} + ${13}))
}
cpu_ns() { # time on a CPU of every thread alive, nanoseconds (/proc/PID/schedstat is the main thread's only)
    cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}
load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }

RES=$T/results
: >"$RES"
say() { echo "$*" | tee -a "$RES"; }

# --- The two narrating programs, twice -------------------------------------------------------
# The demo: its server runs the fakes; its two PTY sessions narrate (`!narrate 100`, about
# 18 minutes).
"$P" --home "$H" demo --no-cockpit >/dev/null 2>&1
SPID=$(cat "$H/run/server.lock")
# The tmux side: the same fakes through the demo's own shims, the same narration typed in.
SHIMS=$H/state/demo-shims
[ -x "$SHIMS/claude" ] || SHIMS=$(dirname "$(find "$H" -name claude -path '*demo-shims*' | head -1)")
mkdir -p "$T/ws"
tmi new-session -d -s n -x "$COLS" -y "$ROWS" -c "$T/ws" "$SHIMS/claude"
tmi split-window -h -t n -c "$T/ws" "$SHIMS/gemini"
sleep 2
for pane in $(tmi list-panes -t n -F '#{pane_id}'); do
    tmi send-keys -t "$pane" -l '!narrate 100'
    tmi send-keys -t "$pane" Enter
done
IPID=$(tmi display -p '#{pid}')
tmo new-session -d -s idle -x "$COLS" -y "$ROWS" "sleep 100000"
OPID=$(tmo display -p '#{pid}')
sleep "$SETTLE"

side() { # REP NAME: one window of one side
    local rep=$1 name=$2 cmd pid srv t0 n0 s0 o0 t1 n1 s1 o1 l0
    case $name in
    cockpit) cmd="exec $P --home $H"; srv=$SPID ;;
    before) cmd="exec $P_BEFORE --home $H"; srv=$SPID ;;
    tmux) cmd="exec tmux -S $IS -f /dev/null attach -t n"; srv=$IPID ;;
    esac
    tmo new-session -d -s "$name" -x "$COLS" -y "$ROWS" "$cmd"
    pid=$(tmo display -p -t "$name" '#{pane_pid}')
    sleep "$WARM"
    l0=$(load)
    t0=$(cpu_ticks "$pid") n0=$(cpu_ns "$pid") s0=$(cpu_ticks "$srv") o0=$(cpu_ticks "$OPID") i0=$(cpu_ns "$IPID")
    sleep "$WINDOW"
    t1=$(cpu_ticks "$pid") n1=$(cpu_ns "$pid") s1=$(cpu_ticks "$srv") o1=$(cpu_ticks "$OPID") i1=$(cpu_ns "$IPID")
    if ! kill -0 "$IPID" 2>/dev/null || ! kill -0 "$SPID" 2>/dev/null; then
        echo "a server ended during the window of $name, rep $rep (tmux $IPID, proctor $SPID): no figure" >&2
        exit 1
    fi
    if [ "$rep" = 1 ]; then
        tmo capture-pane -p -t "$name" >"$T/screen-$name.txt"
    fi
    say "cockpit rep=$rep side=$name ticks=$((t1 - t0)) ns=$((n1 - n0)) server_ticks=$((s1 - s0))" \
        "terminal_ticks=$((o1 - o0)) tmux_server_ns=$((i1 - i0)) window=$WINDOW load_before=$l0 load_after=$(load)"
    tmo kill-session -t "$name"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

say "machine: $(nproc) cores, $(uname -r), tmux $(tmux -V | cut -d' ' -f2), ${COLS}x${ROWS}, load at start $(load)"
sides="cockpit tmux"
[ -n "${P_BEFORE:-}" ] && sides="cockpit before tmux"
for rep in $(seq "$REPS"); do
    if [ $((rep % 2)) -eq 1 ]; then order=$sides; else order=$(echo "$sides" | tr ' ' '\n' | tac | paste -sd' '); fi
    for name in $order; do side "$rep" "$name"; done
done

# --- Table -----------------------------------------------------------------------------------
echo
echo "== CPU over $WINDOW s, ${COLS}x${ROWS}, two narrating programs (each rep; one tick is $((1000 / HZ)) ms) =="
printf '%-8s %-4s %7s %12s %8s %13s %15s %16s %s\n' side rep ticks "runtime ms" "% core" "server ticks" "terminal ticks" "tmux server ms" "load (1/5/15 min) before, after"
while read -r line; do
    v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
    printf '%-8s %-4s %7s %12s %8s %13s %15s %16s %s\n' "$(v side)" "$(v rep)" "$(v ticks)" \
        "$(awk -v n="$(v ns)" 'BEGIN {printf "%.1f", n / 1e6}')" \
        "$(awk -v n="$(v ns)" -v w="$WINDOW" 'BEGIN {printf "%.3f", n / 1e7 / w}')" \
        "$(v server_ticks)" "$(v terminal_ticks)" \
        "$(awk -v n="$(v tmux_server_ns)" 'BEGIN {printf "%.1f", n / 1e6}')" "$(v load_before), $(v load_after)"
done < <(grep '^cockpit ' "$RES")
sum_ns() { grep "^cockpit .* side=$1 " "$RES" | sed -n 's/.* ns=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}'; }
tm=$(sum_ns tmux)
ts=$(grep "^cockpit .* side=tmux " "$RES" | sed -n 's/.* tmux_server_ns=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
for name in cockpit before; do
    n=$(sum_ns "$name")
    [ "$n" -gt 0 ] || continue
    if [ "$tm" -gt 0 ]; then
        echo "runtime of $name relative to the tmux client (all reps): $(awk -v a="$n" -v b="$tm" 'BEGIN {printf "%.2f", a / b}')x"
    else
        echo "runtime of $name relative to the tmux client: the client used no measurable CPU (its server draws its terminal)"
    fi
    [ "$ts" -gt 0 ] && echo "runtime of $name relative to the tmux server with its client attached (all reps): $(awk -v a="$n" -v b="$ts" 'BEGIN {printf "%.2f", a / b}')x"
done
for f in "$T"/screen-*.txt; do
    [ -f "$f" ] || continue
    echo
    echo "== what $(basename "$f" .txt | sed 's/screen-//') showed at the end of its first window (top 14 rows) =="
    head -14 "$f"
done
