#!/usr/bin/env bash
# The setup part's benchmark (docs/benchmarks.md, section "setup"): check #1
# after a one-line fix on a real multi-package Go project with third-party
# dependencies, against the same `go test` on the host with a warm cache and
# against `docker run --rm` of the same image.
#
#   GOALRUN=/path/to/static/goalrun bash docs/bench-setup.sh [RUNS]
#
# The project is github.com/spf13/viper v1.19.0 (12 packages, 76 modules in
# its build list), fetched through the Go module proxy into a temp folder
# (never committed). A one-line bug is put into internal/encoding/json's
# codec (three spaces of indent instead of two, which its tests and the
# root package's catch); the "agent" is the command that puts the line
# back. Measured, RUNS times each (default 3):
#   host warm         go test ./... on the fixed tree, build and test cache
#                     warm from a run on the broken tree (what a developer
#                     sees: unchanged packages' results come from the cache)
#   host warm -count=1  the same, every test run (build cache only: what a
#                     check that must run the tests does)
#   goalrun check #1  iterations[1].check.seconds of `goalrun run --agent
#                     command --until 'go test ./...'` in bind mode: a fresh
#                     container on a fresh view, the deps volume's build
#                     cache warmed by the setup step from the untouched tree
#   goalrun run 1/2   the whole run (elapsed_seconds), setup and checks of a
#                     first run (deps prepared) and a second run of the same
#                     module graph (the kept deps volume reused); the kept
#                     volume is removed after each pair
#   docker run --rm   the same image, the host's toolchain and module cache
#                     read-only, no network, a fresh build cache: a plain
#                     container per check
# It prints the Engine's storage driver, the machine and its load.
set -euo pipefail
runs=${1:-3}
goalrun=${GOALRUN:?set GOALRUN to a static goalrun (CGO_ENABLED=0 go build -o /tmp/goalrun ./cmd/goalrun)}
export GOTOOLCHAIN=local GOFLAGS=
dir=$(mktemp -d "${TMPDIR:-/tmp}/goalrun-bench-setup.XXXXXX")
trap 'chmod -R u+w "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
src=$(go mod download -json github.com/spf13/viper@v1.19.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
go -C "$src" mod download
goroot=$(go env GOROOT)
# Where the Go proxy answers on this machine, in case it is a private or
# reserved address (a mirror): the egress proxy refuses those unless named.
nets=$(getent ahosts proxy.golang.org | awk '{print $1}' | sort -u | paste -sd, -)
export GOALRUN_EGRESS_ALLOW_NETS="${GOALRUN_EGRESS_ALLOW_NETS:-$nets}"

broken='s/MarshalIndent(v, "", "  ")/MarshalIndent(v, "", "   ")/'
fix="sed -i 's/MarshalIndent(v, \"\", \"   \")/MarshalIndent(v, \"\", \"  \")/' internal/encoding/json/codec.go"
fresh() { # a fresh copy of the broken project, owned by uid 1000 (bind mode)
  rm -rf "$dir/ws"
  cp -r "$src" "$dir/ws"
  chmod -R u+w "$dir/ws"
  sed -i "$broken" "$dir/ws/internal/encoding/json/codec.go"
  chown -R 1000:1000 "$dir/ws" 2>/dev/null || true
}
secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }'; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "GOALRUN_EGRESS_ALLOW_NETS=$GOALRUN_EGRESS_ALLOW_NETS"
echo "engine: $(docker info --format 'Docker {{.ServerVersion}}, storage driver {{.Driver}}')"
echo "versions: $(go version | cut -d' ' -f3), goalrun $("$goalrun" version 2>/dev/null | head -1)"

for i in $(seq "$runs"); do
  fresh
  export GOCACHE="$dir/hostcache"
  rm -rf "$GOCACHE"
  (cd "$dir/ws" && go test ./... >/dev/null 2>&1 || true)           # warm: the broken tree, built and tested
  (cd "$dir/ws" && sh -c "$fix")
  echo "run $i: host warm: $(cd "$dir/ws" && secs go test ./...) s"
  (cd "$dir/ws" && sed -i "$broken" internal/encoding/json/codec.go && go test ./... >/dev/null 2>&1 || true)
  (cd "$dir/ws" && sh -c "$fix")
  echo "run $i: host warm -count=1: $(cd "$dir/ws" && secs go test -count=1 ./...) s"
  unset GOCACHE

  fresh
  (cd "$dir/ws" && "$goalrun" run --json --agent command --agent-bin "$fix" --max-iterations 1 --until 'go test ./...' >"$dir/doc.json" 2>"$dir/events.jsonl") || true
  python3 - "$dir/doc.json" "$i" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
its = d.get("iterations", [])
c0 = its[0]["check"]["seconds"] if its else None
c1 = its[1]["check"]["seconds"] if len(its) > 1 and its[1].get("check") else None
setup = sum(s["seconds"] for s in d.get("setup", []))
print(f"run {sys.argv[2]}: goalrun check #1: {c1} s (check #0 {c0} s, setup {setup:.1f} s, conclusion {d.get('conclusion')}, workspace {d.get('sandbox', {}).get('workspace')}, image {d.get('sandbox', {}).get('image')})")
EOF
  image=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox"]["image"])' "$dir/doc.json")

  # The second run of the same module graph: the kept deps volume is
  # reused (no setup container, no download, no build of the untouched
  # tree). Whole runs are compared, process start to document.
  fresh
  (cd "$dir/ws" && "$goalrun" run --json --agent command --agent-bin "$fix" --max-iterations 1 --until 'go test ./...' >"$dir/doc2.json" 2>"$dir/events2.jsonl") || true
  python3 - "$dir/doc.json" "$dir/doc2.json" "$i" <<'EOF'
import json, sys
for n, f in ((1, sys.argv[1]), (2, sys.argv[2])):
    d = json.load(open(f))
    its = d.get("iterations", [])
    c0 = its[0]["check"]["seconds"] if its else None
    c1 = its[1]["check"]["seconds"] if len(its) > 1 and its[1].get("check") else None
    setup = sum(s["seconds"] for s in d.get("setup", []))
    reused = all(s.get("reused") for s in d.get("setup", [])) and bool(d.get("setup"))
    print(f"run {sys.argv[3]}: goalrun run {n} ({'deps reused' if reused else 'deps prepared'}): whole run {d.get('elapsed_seconds')} s, setup {setup:.1f} s, check #0 {c0} s, check #1 {c1} s, conclusion {d.get('conclusion')}, deps volume {d.get('sandbox', {}).get('setup_deps_volume')}")
EOF
  vol=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox"].get("setup_deps_volume",""))' "$dir/doc.json")
  if [ -n "$vol" ]; then docker volume rm "$vol" "$vol-ready" >/dev/null 2>&1 || true; fi

  fresh
  (cd "$dir/ws" && sh -c "$fix")
  echo "run $i: docker run --rm: $(secs docker run --rm --network none -u 1000:1000 --read-only --tmpfs /tmp:exec \
    -v "$dir/ws":/workspace -w /workspace -v "$goroot":/usr/local/go:ro -v "$(go env GOMODCACHE)":/gomod:ro \
    -e GOMODCACHE=/gomod -e GOCACHE=/tmp/gocache -e GOPROXY=off -e GOTOOLCHAIN=local -e CGO_ENABLED=0 -e HOME=/tmp \
    -e PATH=/usr/local/go/bin:/usr/bin:/bin "$image" go test ./...) s"
done
