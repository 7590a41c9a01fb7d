#!/usr/bin/env bash
# The agents part's parser benchmark (docs/benchmarks.md, section "agents").
#
#   bash docs/bench-agents.sh [SIZE]      SIZE defaults to 1GiB
#
# Generates a synthetic Claude Code stream-json transcript of SIZE (shaped
# like the real ones in goal/agent/testdata/transcripts; written to a temp
# folder, never committed), then parses it three times with goalrun's Claude
# parser (goal/agent/internal/parsebench: 256 KiB reads through
# agent.LineWriter, as a step's stdout arrives) and with `jq -c .type`, and
# prints wall and CPU throughput and peak resident memory for both. A
# second, smaller transcript with a 12 MiB tool output every 50 rounds (lines
# over agent.MaxLineBytes) shows the parser's memory stays flat.
set -euo pipefail
size=${1:-1GiB}
cd "$(dirname "$0")/.."
dir=$(mktemp -d "${TMPDIR:-/tmp}/goalrun-bench-agents.XXXXXX")
trap 'rm -rf "$dir"' EXIT
command -v jq >/dev/null || { echo "jq is required (apt-get install jq)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is required (apt-get install time)" >&2; exit 1; }

go build -o "$dir/parsebench" ./goal/agent/internal/parsebench
"$dir/parsebench" gen "$size" "$dir/transcript.jsonl"
"$dir/parsebench" gen 256MiB "$dir/huge-lines.jsonl" 50
cat "$dir/transcript.jsonl" "$dir/huge-lines.jsonl" >/dev/null # page cache warm for both tools

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "versions: $(go version | cut -d' ' -f3), $(jq --version)"
for i in 1 2 3; do
  echo "goalrun: $("$dir/parsebench" parse "$dir/transcript.jsonl")"
  /usr/bin/time -f "jq:      wall=%es user=%Us sys=%Ss peak_rss_kib=%M" jq -c .type "$dir/transcript.jsonl" >/dev/null
done
echo "goalrun, lines over 8 MiB: $("$dir/parsebench" parse "$dir/huge-lines.jsonl")"
echo "goalrun, 64 MiB: $("$dir/parsebench" gen 64MiB "$dir/small.jsonl" >/dev/null && "$dir/parsebench" parse "$dir/small.jsonl")"
