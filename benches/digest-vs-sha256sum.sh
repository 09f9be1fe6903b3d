#!/usr/bin/env bash
# Benchmark: `proctor digest` against `find … -type f -print0 | sort -z | xargs -0 sha256sum`
# on the same tree, in one run, with the page cache warm.
#
# Builds the release binary, creates a tree of at least 20,000 files and 1 GiB (a mix of
# small, medium and large files in nested folders) in a temporary folder, warms the page
# cache, checks that both sides hash the same bytes, then times both with hyperfine when it
# is installed (`apt-get install hyperfine`), else with repeated timing in bash (median).
# Prints both times and the ratio (pipeline time / proctor time). Target: >= 1.5.
#
# Usage: benches/digest-vs-sha256sum.sh [RUNS]      (default 10 runs per command)
# Environment: BENCH_DIR=/path to create the tree under (default: $TMPDIR or /tmp);
#              BENCH_TREE=/path to create the tree there once and keep it for later runs.
# Needs: cargo, python3 (to generate the tree quickly), coreutils, findutils.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-10}"
export LC_ALL=C

command -v python3 >/dev/null || { echo "needs python3 to generate the tree" >&2; exit 2; }

echo "==> building release"
cargo build --release --quiet
BIN="$PWD/target/release/proctor"

BASE="$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/proctor-digest-bench.XXXXXX")"
trap 'rm -rf "$BASE"' EXIT
TREE="${BENCH_TREE:-$BASE/tree}"

if [ -d "$TREE" ]; then
  echo "==> reusing the tree in $TREE"
else
  echo "==> creating the tree in $TREE"
python3 - "$TREE" <<'PY'
import os, sys
root = sys.argv[1]
pool = os.urandom(64 << 20)          # 64 MiB of random bytes, sliced into files
def put(rel, size, seed):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    off = (seed * 1_000_003) % (len(pool) - size) if size < len(pool) else 0
    with open(p, "wb") as f:
        if size <= len(pool):
            f.write(pool[off:off + size])
        else:
            left = size
            while left:
                n = min(left, len(pool)); f.write(pool[:n]); left -= n
n = 0
for i in range(19_000):               # small source-like files, 512 B .. 24.5 KiB
    put(f"src/m{i % 40:02d}/p{i % 13:02d}/f{i:05d}.rs", 512 + (i * 7919) % 24576, i); n += 1
for i in range(1_000):                # medium files, 256 KiB
    put(f"assets/a{i % 20:02d}/blob{i:04d}.bin", 256 << 10, i); n += 1
for i in range(26):                   # large files, 24 MiB
    put(f"data/big{i:02d}.dat", 24 << 20, i); n += 1
PY
fi
FILES=$(find "$TREE" -type f | wc -l)
BYTES=$(find "$TREE" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%d", s}')
echo "    $FILES files, $BYTES bytes ($(awk -v b="$BYTES" 'BEGIN{printf "%.2f", b/1073741824}') GiB)"
if [ "$FILES" -lt 20000 ] || [ "$BYTES" -lt 1073741824 ]; then
  echo "tree too small for the benchmark" >&2; exit 1
fi

echo "==> machine"
echo "    cores: $(nproc); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "    sha_ni: $(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no); $(sha256sum --version | head -1)"
echo "    load average before timing: $(cut -d" " -f1-3 /proc/loadavg) (other work on the machine inflates wall times)"

echo "==> warming the page cache"
find "$TREE" -type f -print0 | xargs -0 cat >/dev/null

PROCTOR_CMD="$BIN digest --root $TREE >/dev/null"
PIPE_CMD="cd $TREE && find . -type f -print0 | sort -z | xargs -0 sha256sum >/dev/null"

echo "==> checking that both sides hash the same bytes"
"$BIN" digest --root "$TREE" --manifest "$BASE/manifest.txt" >/dev/null
(cd "$TREE" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$BASE/sums.txt"
python3 - "$BASE/manifest.txt" "$BASE/sums.txt" <<'PY'
import sys
ours = {}
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    path, size, sha = line.rsplit("|", 2)
    ours[path] = sha
theirs = {}
for line in open(sys.argv[2], encoding="utf-8"):
    sha, path = line.rstrip("\n").split("  ", 1)
    theirs[path[2:]] = sha
assert ours == theirs, "proctor and sha256sum disagree"
print(f"    {len(ours)} file hashes agree")
PY

if command -v hyperfine >/dev/null; then
  echo "==> timing with hyperfine ($RUNS runs each, 2 warm-ups)"
  hyperfine --style basic --warmup 2 --runs "$RUNS" --export-json "$BASE/h.json" \
    -n "proctor digest" "$PROCTOR_CMD" \
    -n "find|sort|xargs sha256sum" "$PIPE_CMD"
  read -r T_PROCTOR T_PIPE < <(python3 - "$BASE/h.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(r[0]["median"], r[1]["median"])
PY
)
else
  echo "==> timing in bash ($RUNS runs each after one warm-up; hyperfine not installed)"
  median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
  time_cmd() {
    local cmd="$1" i s e
    bash -c "$cmd"
    for ((i = 0; i < RUNS; i++)); do
      s=$(date +%s%N); bash -c "$cmd"; e=$(date +%s%N)
      echo "$(((e - s) / 1000))"
    done | median | awk '{printf "%.6f", $1/1e6}'
  }
  T_PROCTOR=$(time_cmd "$PROCTOR_CMD")
  T_PIPE=$(time_cmd "$PIPE_CMD")
fi

echo "==> result (median wall time)"
awk -v p="$T_PROCTOR" -v s="$T_PIPE" -v b="$BYTES" 'BEGIN {
  printf "    proctor digest:            %.3f s  (%.0f MiB/s)\n", p, b / 1048576 / p
  printf "    find|sort|xargs sha256sum: %.3f s  (%.0f MiB/s)\n", s, b / 1048576 / s
  printf "    ratio (pipeline / proctor): %.2fx  (target >= 1.5x)\n", s / p
}'
