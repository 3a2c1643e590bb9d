#!/usr/bin/env bash
# The collector's CUDA paths on a GPU machine, in under 5 minutes (CI has no GPU).
#   bash benchmarks/gpu_check.sh [OUT]      (from the repository root; PYTHON picks the interpreter)
# Needs torch with CUDA, nvidia-ml-py, numpy, pandas, pandera, msgspec, rich. Prints PASS / FAIL per
# check and a SUMMARY; exits non-zero when any check fails.
set -u -o pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${1:-${OUT:-out}/gpu_check}"
mkdir -p "$OUT"
status=0
echo "== environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: not found"
"$PY" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" || status=1
echo "== collector CUDA paths (python benchmarks/gpu_check.py)"
timeout 180 "$PY" benchmarks/gpu_check.py "$OUT/bundle" 2>&1 | grep -v '^USDT' || status=1
echo "== sampling overhead on the GPU (python -m benchmarks.collector_overhead)"
if timeout 90 "$PY" -m benchmarks.collector_overhead --device cuda:0 --repeats 9 --requests 1000 \
      > "$OUT/overhead.json" 2> "$OUT/overhead.err"; then
  cat "$OUT/overhead.json"
  grep -q '"sampling_within_target": true' "$OUT/overhead.json" && echo "PASS overhead" || echo "WARN overhead above 2 % (see interval)"
else
  echo "FAIL overhead (see $OUT/overhead.err)"; tail -5 "$OUT/overhead.err"; status=1
fi
if "$PY" -c "import pytest" 2>/dev/null; then
  echo "== CPU tests of the collector on this machine"
  timeout 120 "$PY" -m pytest -p no:cacheprovider -q tests/collector/test_collector.py 2>&1 | tail -3 || status=1
fi
[ "$status" = 0 ] && echo "GPU CHECK: PASS" || echo "GPU CHECK: FAIL"
exit "$status"
