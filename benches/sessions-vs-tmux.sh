#!/usr/bin/env bash
# The session server against tmux (issue 3, section 6). A benchmark, not a test: it prints
# figures and asserts nothing. Results and their meaning: docs/performance.md, "Session server".
#
#   benches/sessions-vs-tmux.sh            # everything, default sizes
#   REPS=5 RUNS=100 WINDOW=30 benches/sessions-vs-tmux.sh
#   ONLY=throughput benches/sessions-vs-tmux.sh      # or ONLY=many
#   ONLY=throughput BYTES=67108864 P_BEFORE=/tmp/old/proctor benches/sessions-vs-tmux.sh
#
# Both sides run the same child: the demo fake of claude in its interactive (PTY) form, through
# the shim `claude` that execs `proctor demo-agent claude`. Everything lives in a temporary
# folder under /tmp; the server, the tmux server and the folder are removed on exit, Ctrl-C
# included.
set -euo pipefail

REPS=${REPS:-3}            # throughput repetitions per side (alternating order)
BYTES=${BYTES:-268435456}  # bytes the child writes in the throughput benchmark (256 MiB)
TROWS=${TROWS:-50}         # throughput pane size
TCOLS=${TCOLS:-200}
RUNS=${RUNS:-100}          # concurrent runs / panes
MREPS=${MREPS:-2}          # repetitions of the many-runs benchmark per side (alternating)
IDLE=${IDLE:-60}           # idle window, seconds (CPU over it; memory and threads after it)
WARM=${WARM:-5}            # steady phase: seconds before the window opens
WINDOW=${WINDOW:-20}       # steady phase: CPU window, seconds
FILL=${FILL:-5242880}      # full-ring phase: bytes each run writes (more than the 4 MiB ring); 0 skips it
TPUT_RING_KIB=${TPUT_RING_KIB:-4096} # the server's ring in the throughput benchmark (4096: the default)
TPUT_TRANSCRIPT_MIB=${TPUT_TRANSCRIPT_MIB:-$((BYTES / 1048576 * 11 / 10 + 16))} # the server's transcript cap there
TPUT_CGROUPS=${TPUT_CGROUPS:-1}  # 0: the throughput server holds its runs without cgroups
ONLY=${ONLY:-all}
STEADY=${STEADY:-1}        # 0: the many-runs benchmark skips its steady phase (1,000 runs printing
                           # a line every ~50 ms each would only measure a saturated machine)

cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0
cargo build --release --quiet --bin proctor --example sessions_bench
P=$PWD/target/release/proctor
H=$PWD/target/release/examples/sessions_bench
HZ=$(getconf CLK_TCK)

T=$(mktemp -d /tmp/pbXXXX)
UH=$T/u      # HOME of the children (the fakes keep their transcripts under it)
WS=$T/w      # workspace
TM=$T/t.sock # tmux server socket: ours alone
mkdir -p "$UH" "$WS"
SPATH="$T/s:/usr/local/bin:/usr/bin:/bin"

cleanup() {
    set +e
    trap - EXIT INT TERM
    [ -S "$T/h/run/server.sock" ] && "$P" --home "$T/h" server stop >/dev/null 2>&1
    [ -S "$T/hb/run/server.sock" ] && "$P_BEFORE" --home "$T/hb" server stop >/dev/null 2>&1
    [ -S "$TM" ] && tmux_kill
    rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

"$H" shims "$T/s" "$P"

server_start() { # a fresh home each time, so memory starts from nothing; args go to `serve`
    rm -rf "$T/h"
    env HOME="$UH" PATH="$SPATH" "$P" --home "$T/h" serve "$@" >/dev/null
    SPID=$(cat "$T/h/run/server.lock")
}
server_stop() { "$P" --home "$T/h" server stop >/dev/null; }
tmx() { tmux -S "$TM" -f /dev/null "$@"; }
tmux_kill() { # stop our tmux server and wait until it is gone
    local pid
    pid=$(tmx display -p '#{pid}' 2>/dev/null) || return 0
    tmx kill-server >/dev/null 2>&1 || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}
cpu_ticks() { # utime + stime of a process (fields 14 and 15 of /proc/PID/stat)
    local s
    s=$(<"/proc/$1/stat")
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    echo $((${12} + ${13}))
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
cpu_pct() { # PID SECONDS -> % of one core over the window
    local a b
    a=$(cpu_ticks "$1")
    sleep "$2"
    b=$(cpu_ticks "$1")
    awk -v a="$a" -v b="$b" -v hz="$HZ" -v s="$2" 'BEGIN {printf "%.1f", (b - a) * 100 / hz / s}'
}
now() { date +%s.%N; }

RES=$T/results
: >"$RES"
say() { echo "$*" | tee -a "$RES"; }

# --- 1. Throughput ---------------------------------------------------------------------------
# Sides, the same child each time (the fake claude's `!emit`), in alternated order:
#   server        this helper's own attach client (SSE, base64) on the server's stream
#   server-tail   `proctor session tail --follow --raw`, the CLI's client
#   tmux          tmux, timed until its screen (polled) shows the marker
#   tmux-control  a tmux control-mode client, timed until it has read the marker
#   bare          the child on a bare PTY read by the helper alone (the floor)
# With P_BEFORE=/path/to/an/older/proctor, `before` and `before-tail` run the same two
# clients against a server of that binary (the child is still this tree's fake).
throughput_side() {
    local rep=$1 side=$2
    case $side in
    server) say "tput rep=$rep $("$H" server-throughput --home "$T/h" --workspace "$WS" \
        --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS")" ;;
    server-tail) say "tput rep=$rep $("$H" server-throughput --home "$T/h" --workspace "$WS" \
        --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS" --tail "$P" --side server-tail)" ;;
    before) say "tput rep=$rep $("$H" server-throughput --home "$T/hb" --workspace "$WS" \
        --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS" --side before)" ;;
    before-tail) say "tput rep=$rep $("$H" server-throughput --home "$T/hb" --workspace "$WS" \
        --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS" --tail "$P_BEFORE" --side before-tail)" ;;
    tmux) say "tput rep=$rep $(env HOME="$UH" PATH="$SPATH" "$H" tmux-throughput --socket "$TM" \
        --program "$T/s/claude" --workspace "$WS" --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS")" ;;
    tmux-control) say "tput rep=$rep $(env HOME="$UH" PATH="$SPATH" "$H" tmux-throughput --socket "$TM" \
        --program "$T/s/claude" --workspace "$WS" --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS" --control)" ;;
    bare) say "tput rep=$rep $(env HOME="$UH" PATH="$SPATH" "$H" bare-throughput \
        --program "$T/s/claude" --workspace "$WS" --bytes "$BYTES" --rows "$TROWS" --cols "$TCOLS")" ;;
    esac
}
throughput() {
    # The transcript holds the whole burst (the output is BYTES plus a \r a line): the
    # screen takes what the ring evicted from it. Past its cap the reader would keep the
    # screen up itself (docs/runs.md); TPUT_TRANSCRIPT_MIB=64 shows that (the default cap).
    # TPUT_CGROUPS=0: the runs are not put in cgroups of their own, so the child competes
    # for the CPU as tmux's and the bare reader's do (a run's own cgroup gets a fair share
    # against everything else on a loaded machine).
    local cg=()
    [ "$TPUT_CGROUPS" = 0 ] && cg=(--no-cgroups)
    server_start --ring-kib "$TPUT_RING_KIB" --transcript-mib "$TPUT_TRANSCRIPT_MIB" "${cg[@]}"
    local sides="server server-tail tmux tmux-control bare" rep side order
    if [ -n "${P_BEFORE:-}" ]; then
        rm -rf "$T/hb"
        env HOME="$UH" PATH="$SPATH" "$P_BEFORE" --home "$T/hb" serve --ring-kib "$TPUT_RING_KIB" "${cg[@]}" >/dev/null
        sides="server before server-tail before-tail tmux tmux-control bare"
    fi
    for rep in $(seq "$REPS"); do
        if [ $((rep % 2)) -eq 1 ]; then order=$sides; else order=$(echo "$sides" | tr ' ' '\n' | tac | paste -sd' '); fi
        for side in $order; do throughput_side "$rep" "$side"; done
    done
    server_stop
    [ -n "${P_BEFORE:-}" ] && "$P_BEFORE" --home "$T/hb" server stop >/dev/null
    tmux_kill
}

# --- 2. Many concurrent runs -----------------------------------------------------------------
# The steady text: one `!sleep 100` turn per line. Each turn prints "(working)" at once and
# "demo reply #N: (no text)" plus a new prompt 100 ms later: a short line every ~50 ms.
turns_needed=$(((WARM + WINDOW + IDLE) * 10 + 100))
STEADY_API=$(printf '!sleep 100\\r%.0s' $(seq "$turns_needed"))
STEADY_TMUX=$(printf '!sleep 100\r%.0s' $(seq "$turns_needed"))

tmux_turns() { # sum over panes of the last "demo reply #N"
    local w sum=0 n
    for w in $(tmx list-windows -t m -F '#{window_id}'); do
        n=$(tmx capture-pane -p -t "$w" | grep -o 'demo reply #[0-9]*' | tail -1 | tr -dc '0-9' || true)
        sum=$((sum + ${n:-0}))
    done
    echo "$sum"
}
tmux_wait_prompts() {
    local w
    for w in $(tmx list-windows -t m -F '#{window_id}'); do
        until tmx capture-pane -p -t "$w" | grep -x '>' >/dev/null; do sleep 0.05; done
    done
}

many_server() {
    local rep=$1 r1 ri ci t0 u0 t1 u1 cb rb th1 thi rs ths ob
    server_start
    "$H" start-many --home "$T/h" --workspace "$WS" --count 1 >"$T/refs"
    sleep 2
    r1=$(rss_kib "$SPID")
    th1=$(threads "$SPID")
    "$H" start-many --home "$T/h" --workspace "$WS" --count $((RUNS - 1)) >>"$T/refs"
    sleep 3
    ri=$(rss_kib "$SPID")
    thi=$(threads "$SPID")
    ci=$(cpu_pct "$SPID" "$IDLE")
    # After the idle window: a screen nobody asked for during 30 s has given its emulator back.
    rs=$(rss_kib "$SPID")
    ths=$(threads "$SPID")
    ob=$("$H" output-bytes --home "$T/h" --refs "$T/refs")
    if [ "$STEADY" = 1 ]; then
        "$H" input-all --home "$T/h" --refs "$T/refs" --text "$STEADY_API"
        sleep "$WARM"
        u0=$("$H" turns --home "$T/h" --refs "$T/refs")
        t0=$(now)
        cb=$(cpu_pct "$SPID" "$WINDOW")
        u1=$("$H" turns --home "$T/h" --refs "$T/refs")
        t1=$(now)
        rb=$(rss_kib "$SPID")
    else
        u0=0 u1=0 t0=0 t1=1 cb=- rb=-
    fi
    say "many rep=$rep side=server runs=$RUNS rss1_kib=$r1 rss_idle_kib=$ri rss_slept_kib=$rs out_bytes=$ob threads1=$th1 threads_idle=$thi threads_slept=$ths idle_cpu_pct=$ci busy_cpu_pct=$cb" \
        "rss_busy_kib=$rb turns_per_run_s=$(awk -v a="$u0" -v b="$u1" -v t0="$t0" -v t1="$t1" -v n="$RUNS" \
            'BEGIN {printf "%.2f", (b - a) / (t1 - t0) / n}') load1=$(load1)"
    server_stop
}

many_tmux() {
    local rep=$1 pid r1 ri ci t0 u0 t1 u1 cb rb i th1 thi rs ths
    env HOME="$UH" PATH="$SPATH" tmux -S "$TM" -f /dev/null new-session -d -s m -x 80 -y 24 -c "$WS" "$T/s/claude"
    pid=$(tmx display -p '#{pid}')
    tmux_wait_prompts
    sleep 2
    r1=$(rss_kib "$pid")
    th1=$(threads "$pid")
    for i in $(seq $((RUNS - 1))); do tmx new-window -d -t m -c "$WS" "$T/s/claude"; done
    tmux_wait_prompts
    sleep 3
    ri=$(rss_kib "$pid")
    thi=$(threads "$pid")
    ci=$(cpu_pct "$pid" "$IDLE")
    rs=$(rss_kib "$pid")
    ths=$(threads "$pid")
    if [ "$STEADY" = 1 ]; then
        for i in $(tmx list-windows -t m -F '#{window_id}'); do tmx send-keys -t "$i" -l "$STEADY_TMUX"; done
        sleep "$WARM"
        u0=$(tmux_turns)
        t0=$(now)
        cb=$(cpu_pct "$pid" "$WINDOW")
        u1=$(tmux_turns)
        t1=$(now)
        rb=$(rss_kib "$pid")
    else
        u0=0 u1=0 t0=0 t1=1 cb=- rb=-
    fi
    say "many rep=$rep side=tmux runs=$RUNS rss1_kib=$r1 rss_idle_kib=$ri rss_slept_kib=$rs out_bytes=0 threads1=$th1 threads_idle=$thi threads_slept=$ths idle_cpu_pct=$ci busy_cpu_pct=$cb" \
        "rss_busy_kib=$rb turns_per_run_s=$(awk -v a="$u0" -v b="$u1" -v t0="$t0" -v t1="$t1" -v n="$RUNS" \
            'BEGIN {printf "%.2f", (b - a) / (t1 - t0) / n}') load1=$(load1)"
    tmux_kill
}

# Every run writes FILL bytes (more than its ring holds), then idles: memory with full rings.
fill_server() {
    local r0 t0 rf
    server_start
    sleep 1
    r0=$(rss_kib "$SPID")
    "$H" start-many --home "$T/h" --workspace "$WS" --count "$RUNS" >"$T/refs"
    t0=$(now)
    "$H" input-all --home "$T/h" --refs "$T/refs" --text "!emit $FILL\\r"
    until [ "$("$H" turns --home "$T/h" --refs "$T/refs")" -ge "$RUNS" ]; do sleep 0.5; done
    local secs
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}')
    sleep 3
    rf=$(rss_kib "$SPID")
    say "fill side=server runs=$RUNS bytes_each=$FILL rss0_kib=$r0 rss_full_kib=$rf secs=$secs load1=$(load1)"
    server_stop
}
fill_tmux() {
    local pid r0 t0 rf i
    env HOME="$UH" PATH="$SPATH" tmux -S "$TM" -f /dev/null new-session -d -s m -x 80 -y 24 -c "$WS" "$T/s/claude"
    pid=$(tmx display -p '#{pid}')
    tmux_wait_prompts
    sleep 1
    r0=$(rss_kib "$pid")
    for i in $(seq $((RUNS - 1))); do tmx new-window -d -t m -c "$WS" "$T/s/claude"; done
    tmux_wait_prompts
    t0=$(now)
    for i in $(tmx list-windows -t m -F '#{window_id}'); do tmx send-keys -t "$i" -l "!emit $FILL"$'\r'; done
    until [ "$(tmux_turns)" -ge "$RUNS" ]; do sleep 0.5; done
    local secs
    secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}')
    sleep 3
    rf=$(rss_kib "$pid")
    say "fill side=tmux runs=$RUNS bytes_each=$FILL rss0_kib=$r0 rss_full_kib=$rf secs=$secs load1=$(load1)"
    tmux_kill
}

many() {
    local rep
    for rep in $(seq "$MREPS"); do
        if [ $((rep % 2)) -eq 1 ]; then many_server "$rep"; many_tmux "$rep"; else many_tmux "$rep"; many_server "$rep"; fi
    done
    if [ "$FILL" -gt 0 ]; then
        fill_server
        fill_tmux
    fi
}

say "machine: $(nproc) cores, $(uname -r), tmux $(tmux -V | cut -d' ' -f2), load1 at start $(load1)"
case $ONLY in
throughput) throughput ;;
many) many ;;
*) throughput; many ;;
esac

# --- Table -----------------------------------------------------------------------------------
if grep -q '^tput ' "$RES"; then
echo
echo "== Throughput: $BYTES bytes through a ${TROWS}x${TCOLS} PTY, server ring $TPUT_RING_KIB KiB (median of $REPS; min-max) =="
median() { sort -n | awk '{v[NR] = $1} END {if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
printf '%-13s %9s %17s %9s %14s %11s\n' side "median s" "min-max s" "MiB/s" "server CPU s" "client CPU s"
for side in server before server-tail before-tail tmux tmux-control bare; do
    lines=$(grep "^tput .* side=$side " "$RES" || true)
    [ -n "$lines" ] || continue
    m=$(echo "$lines" | field secs | median)
    printf '%-13s %9.2f %17s %9.1f %14s %11s\n' "$side" "$m" \
        "$(echo "$lines" | field secs | sort -n | sed -n '1p;$p' | paste -sd-)" \
        "$(awk -v b="$BYTES" -v m="$m" 'BEGIN {print b / m / 1048576}')" \
        "$(echo "$lines" | sed 's/tmux_cpu=/server_cpu=/' | field server_cpu | median | sed 's/^$/-/')" \
        "$(echo "$lines" | field client_cpu | median | sed 's/^$/-/')"
done
for side in server before server-tail before-tail; do
    lines=$(grep "^tput .* side=$side " "$RES" || true)
    [ -n "$lines" ] && echo "GET /screen right after the burst, $side: median $(echo "$lines" | field screen_ms | median) ms (the server parses what its screen is behind)"
done
bare_m=$(grep '^tput .* side=bare ' "$RES" | field secs | median || true)
if [ -n "$bare_m" ]; then
    for side in server before server-tail before-tail tmux tmux-control; do
        m=$(grep "^tput .* side=$side " "$RES" | field secs | median || true)
        [ -n "$m" ] && echo "speed of $side relative to the bare reader: $(awk -v a="$bare_m" -v b="$m" 'BEGIN {printf "%.2f", a / b}')"
    done
fi
echo "server lag: $(grep '^tput .* side=server ' "$RES" | field lag_events | awk '{s += $1} END {print s + 0}') lag events," \
    "$(grep '^tput .* side=server ' "$RES" | field lost_frames | paste -sd, ) frames lost per rep," \
    "of $(grep '^tput .* side=server ' "$RES" | field frames | paste -sd, ) frames received"
fi
if grep -q '^many ' "$RES"; then
echo
echo "== $RUNS concurrent runs (each rep) =="
echo "KiB/run at 3 s: (RSS at 3 s - RSS with one run) / (runs - 1); after the idle window: the same with its RSS;"
echo "out B/run: the output each run holds (its ring's payload), which the goal's 16 KiB excludes."
printf '%-7s %-4s %10s %14s %14s %9s %9s %9s %11s %9s %13s %6s\n' side rep "idle CPU%" "KiB/run at 3s" "KiB/run after" "out B/run" "busy CPU%" "turns/s" "busy RSS MiB" "RSS1 MiB" "threads" load1
grep '^many ' "$RES" | while read -r line; do
    v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
    printf '%-7s %-4s %10s %14s %14s %9s %9s %9s %11s %9s %13s %6s\n' "$(v side)" "$(v rep)" "$(v idle_cpu_pct)" \
        "$(awk -v a="$(v rss1_kib)" -v b="$(v rss_idle_kib)" -v n="$RUNS" 'BEGIN {printf "%.0f", (b - a) / (n - 1)}')" \
        "$(awk -v a="$(v rss1_kib)" -v b="$(v rss_slept_kib)" -v n="$RUNS" 'BEGIN {printf "%.1f", (b - a) / (n - 1)}')" \
        "$(awk -v b="$(v out_bytes)" -v n="$RUNS" 'BEGIN {printf "%.0f", b / n}')" \
        "$(v busy_cpu_pct)" "$(v turns_per_run_s)" \
        "$(awk -v b="$(v rss_busy_kib)" 'BEGIN {printf "%.1f", b / 1024}')" \
        "$(awk -v b="$(v rss1_kib)" 'BEGIN {printf "%.1f", b / 1024}')" "$(v threads1)->$(v threads_idle)->$(v threads_slept)" "$(v load1)"
done
grep '^fill ' "$RES" | while read -r line; do
    v() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
    echo "full: $(v side): $RUNS runs x $(v bytes_each) bytes in $(v secs) s; RSS $(awk -v a="$(v rss0_kib)" -v b="$(v rss_full_kib)" \
        -v n="$RUNS" 'BEGIN {printf "%.1f MiB -> %.1f MiB, %.0f KiB per run", a / 1024, b / 1024, (b - a) / n}') (load1 $(v load1))"
done
fi
