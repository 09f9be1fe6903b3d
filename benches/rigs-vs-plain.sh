#!/usr/bin/env bash
# Rigs against the plain engines (issue 15). A benchmark, not a test: it prints figures and
# asserts nothing.
#
#   benches/rigs-vs-plain.sh              # REPS=3 each
#   REPS=5 ONLY=vm benches/rigs-vs-plain.sh   # or ONLY=namespace
#
# For each backend, in the same run and alternating order:
#   rig   `proctor rig open --backend B --json` (returns once the guest agent said hello), then
#         `proctor rig exec RIG -- true`: time to a shell; `rig show --json`'s resident_bytes;
#         `rig close`.
#   plain vm: `qemu-system-x86_64` started by hand on the same image (a qcow2 overlay, TCG, the
#         same -m), time until the guest init's PROCTOR-READY marker on its serial line, and its
#         VmRSS then. namespace: `bwrap` on the image's root running `true` (time), and the
#         resident memory of a `bwrap … sleep` (bwrap and its children).
# The image: the home's own (built with `proctor rig image build` if there is none), or
# IMAGE=<folder of a built image> (hard-linked in: the tests' cache under
# ~/.cache/proctor-ci/rig-image/ works).
set -euo pipefail

REPS=${REPS:-3}
ONLY=${ONLY:-all}
MEM=${MEM:-256}

cd "$(dirname "$0")/.."
cargo build --release --quiet --bin proctor
P=$PWD/target/release/proctor
T=$(mktemp -d /tmp/prXXXX)
H=$T/h

cleanup() {
    set +e
    trap - EXIT INT TERM
    [ -n "${QPID:-}" ] && kill "$QPID" 2>/dev/null
    [ -S "$H/run/server.sock" ] && "$P" --home "$H" server stop >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
tree_rss_kb() { # a process and its descendants
    local total=0 p
    for p in $1 $(pgrep -P "$1" 2>/dev/null); do
        total=$((total + $(rss_kb "$p")))
        for c in $(pgrep -P "$p" 2>/dev/null); do total=$((total + $(rss_kb "$c"))); done
    done
    echo "$total"
}
json_field() { python3 -c "import json,sys; v=json.load(sys.stdin); print(v$1)"; }

mkdir -p "$H" && chmod 700 "$H"
if [ -n "${IMAGE:-}" ]; then
    mkdir -p "$H/data/rigs/images" && chmod -R 700 "$H/data"
    cp -al "$IMAGE" "$H/data/rigs/images/$(basename "$IMAGE")"
    basename "$IMAGE" >"$H/data/rigs/images/current"
else
    "$P" --home "$H" rig image build >/dev/null
fi
IMG="$H/data/rigs/images/$(cat "$H/data/rigs/images/current")"
"$P" --home "$H" serve >/dev/null

declare -A SUM_T SUM_M N
add() { SUM_T[$1]=$((${SUM_T[$1]:-0} + $2)); SUM_M[$1]=$((${SUM_M[$1]:-0} + $3)); N[$1]=$((${N[$1]:-0} + 1)); }

rig_once() { # backend
    local t0 id t1 rss
    t0=$(now_ms)
    id=$("$P" --home "$H" rig open --backend "$1" --ttl 10m --json 2>/dev/null | json_field "['id']")
    "$P" --home "$H" rig exec "$id" -- true >/dev/null
    t1=$(now_ms)
    rss=$("$P" --home "$H" rig show "$id" --json | json_field "['resident_bytes'] or 0")
    if [ "$1" = vm ] && [ -z "${TSC_ARGS:-}" ]; then
        # The plain QEMU gets the same clock hint the rig's launch measured and passed.
        TSC_ARGS=$(pgrep -af "proctor-$id" | grep -o 'tsc_early_khz=[0-9]* tsc=reliable' | head -1 || true)
    fi
    "$P" --home "$H" rig close "$id" >/dev/null
    add "rig $1" $((t1 - t0)) $((rss / 1024))
}

plain_vm_once() {
    local ov=$T/ov.qcow2 log=$T/serial.log t0 t1 rss
    rm -f "$ov" "$log"
    qemu-img create -q -f qcow2 -F raw -b "$IMG/base.img" "$ov"
    t0=$(now_ms)
    qemu-system-x86_64 -M microvm,acpi=on -accel tcg -m "$MEM" -smp 1 -nodefaults \
        -no-user-config -nographic -no-reboot -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd" \
        -append "console=ttyS0 root=/dev/vda rw init=/sbin/proctor-init quiet panic=1 proctor.id=plain ${TSC_ARGS:-}" \
        -drive "id=root,file=$ov,format=qcow2,if=none" -device virtio-blk-device,drive=root \
        -nic none -serial "file:$log" </dev/null >/dev/null 2>&1 &
    QPID=$!
    local give_up=$(($(now_ms) + 300000))
    until grep -q PROCTOR-READY "$log" 2>/dev/null; do
        [ "$(now_ms)" -lt "$give_up" ] || { echo "plain qemu: no ready marker in 300 s" >&2; break; }
        sleep 0.02
    done
    t1=$(now_ms)
    rss=$(rss_kb "$QPID")
    kill "$QPID"; wait "$QPID" 2>/dev/null || true
    QPID=
    add "plain qemu" $((t1 - t0)) "$rss"
}

BW=(bwrap --unshare-all --die-with-parent --ro-bind "$IMG/root" / --proc /proc --dev /dev --tmpfs /tmp)
plain_ns_once() {
    local t0 t1 pid rss
    t0=$(now_ms)
    "${BW[@]}" /bin/true
    t1=$(now_ms)
    "${BW[@]}" /bin/sleep 5 &
    pid=$!
    sleep 0.5
    rss=$(tree_rss_kb "$pid")
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
    add "plain bwrap" $((t1 - t0)) "$rss"
}

for i in $(seq "$REPS"); do
    if [ "$ONLY" = all ] || [ "$ONLY" = vm ]; then
        if [ $((i % 2)) = 1 ]; then rig_once vm; plain_vm_once; else plain_vm_once; rig_once vm; fi
    fi
    if [ "$ONLY" = all ] || [ "$ONLY" = namespace ]; then
        if [ $((i % 2)) = 1 ]; then rig_once namespace; plain_ns_once; else plain_ns_once; rig_once namespace; fi
    fi
done

printf '%-16s %6s %14s %14s\n' "engine" "reps" "to shell (ms)" "resident (MiB)"
for k in "rig vm" "plain qemu" "rig namespace" "plain bwrap"; do
    [ -n "${N[$k]:-}" ] || continue
    printf '%-16s %6d %14d %14d\n' "$k" "${N[$k]}" $((SUM_T[$k] / N[$k])) $((SUM_M[$k] / N[$k] / 1024))
done
