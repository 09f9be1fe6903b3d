#!/usr/bin/env bash
# A request over ssh (`proctor --host`) against the same request on the local socket (issue 19
# §1). A benchmark, not a test: it prints figures and asserts nothing. Results and their
# meaning: docs/performance.md, "Remote hosts over ssh".
#
#   P=target/release/proctor benches/remote-vs-local.sh
#   N=50 benches/remote-vs-local.sh
#
# A private sshd on 127.0.0.1 (own host key and authorized key, UsePAM no, as tests/remote.rs)
# and two homes: L (the client's, with config/hosts.toml naming host `box`) and R (the
# "remote" one, reached through ssh … proctor system dial-stdio). Each side runs
# `proctor server status --json` N times after 3 warm-ups (the server already up; over ssh the
# control master already open) and prints the mean and median wall time per command.
#   local   proctor --home R server status        (its Unix socket)
#   remote  proctor --home L --host box server status  (ssh channel + dial-stdio + the same)
# Both are whole processes (start, probe, request): the difference is what the link adds.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-30}
P=${P:-target/debug/proctor}
P=$(realpath "$P")
T=$(mktemp -d /tmp/prbXXXX)
cleanup() {
  "$P" --home "$T/R" server stop >/dev/null 2>&1 || true
  [ -f "$T/sshd.pid" ] && kill "$(cat "$T/sshd.pid")" 2>/dev/null || true
  ssh -F "$T/ssh_config" -o ControlPath="${XDG_RUNTIME_DIR:-/tmp/proctor-ssh-$(id -u)}"/%C -O exit -p "$PORT" 127.0.0.1 >/dev/null 2>&1 || true
  rm -rf "$T"
}
trap cleanup EXIT
mkdir -m 700 "$T/L" "$T/L/config" "$T/R"
ssh-keygen -q -t ed25519 -N '' -f "$T/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$T/key"
cp "$T/key.pub" "$T/authorized_keys"
mkdir -p /run/sshd
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$T/sshd_config" <<EOC
Port $PORT
ListenAddress 127.0.0.1
HostKey $T/hostkey
PidFile $T/sshd.pid
UsePAM no
StrictModes no
AuthorizedKeysFile $T/authorized_keys
PasswordAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
EOC
/usr/sbin/sshd -f "$T/sshd_config"
cat > "$T/ssh_config" <<EOC
Host *
  IdentityFile $T/key
  IdentitiesOnly yes
  User $(id -un)
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOC
printf '#!/bin/sh\nexec env PROCTOR_HOME=%s %s "$@"\n' "$T/R" "$P" > "$T/rproctor"
chmod 700 "$T/rproctor"
cat > "$T/L/config/hosts.toml" <<EOC
[hosts.box]
url = "ssh://127.0.0.1:$PORT"
proctor = "$T/rproctor"
ssh_args = ["-F", "$T/ssh_config"]
EOC
chmod 600 "$T/L/config/hosts.toml"
sleep 0.5
"$P" --home "$T/R" serve >/dev/null
measure() { # label, command...
  local label=$1; shift
  for _ in 1 2 3; do "$@" >/dev/null; done
  local times=()
  for _ in $(seq "$N"); do
    local a b
    a=$(date +%s%N); "$@" >/dev/null; b=$(date +%s%N)
    times+=($(( (b - a) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v l="$label" -v n="$N" \
    '{t[NR]=$1; s+=$1} END {printf "%-7s n=%d mean %.1f ms  median %.1f ms  min %.1f ms  max %.1f ms\n", l, n, s/n/1000, t[int((n+1)/2)]/1000, t[1]/1000, t[n]/1000}'
}
echo "proctor: $P; load: $(cut -d' ' -f1-3 /proc/loadavg)"
measure local "$P" --home "$T/R" server status --json
measure remote "$P" --home "$T/L" --host box server status --json
CP="${XDG_RUNTIME_DIR:-/tmp/proctor-ssh-$(id -u)}/%C"
SSHM=(ssh -o BatchMode=yes -o ControlMaster=auto -o ControlPath="$CP" -o ControlPersist=60 -F "$T/ssh_config" -p "$PORT" -- 127.0.0.1)
# What the link's parts cost: a bare channel through the control master, and the token read.
measure channel "${SSHM[@]}" true
measure token "${SSHM[@]}" "$T/rproctor" system owner-token
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
