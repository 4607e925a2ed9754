#!/usr/bin/env bash
# Wall time of `make demo`'s two steps (pipeline-demo: generate -> Spark ingest -> snapshot ->
# I-Scheduler; compare --schedulers all --report) for the demo before issue 17 (diamond-30 on
# heterogeneous-10) and now (Fischer's Payload on fischer-11), alternately, ROUNDS times, so
# that both see the same machine load. Usage: bash benchmarks/demo_time.sh [ROUNDS] [DIR]
set -euo pipefail
ROUNDS=${1:-2}
DIR=${2:-out/demo-time}
BIN=.venv/bin
run() {  # label workload cluster
  local out="$DIR/$1" start middle end snapshot nodes
  rm -rf "$out" && mkdir -p "$out"
  start=$(date +%s.%N)
  $BIN/streamsched pipeline-demo --workload "$2" --cluster "$3" --scheduler i-scheduler --out "$out" --json \
    > "$out/pipeline.json" 2>/dev/null
  middle=$(date +%s.%N)
  snapshot=$($BIN/python -c "import json; print(json.load(open('$out/pipeline.json'))['snapshot'])")
  nodes=$3; [ -f "$out/cluster.json" ] && nodes="$out/cluster.json"
  $BIN/streamsched compare --graph "$snapshot" --cluster "$nodes" --schedulers all --report "$out/report.html" \
    > "$out/compare.txt" 2>&1
  end=$(date +%s.%N)
  $BIN/python -c "print(f'$1: pipeline-demo {$middle - $start:.0f} s, compare + report {$end - $middle:.0f} s, \
total {$end - $start:.0f} s; load average {open(\"/proc/loadavg\").read().split()[0]}')"
}
for _ in $(seq "$ROUNDS"); do
  run before-diamond-30 diamond-30 heterogeneous-10
  run now-fischer-payload-10 fischer-payload-10 fischer-11
done
