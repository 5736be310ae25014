#!/usr/bin/env bash
# One prepared run of aclcap's CUDA path for a lent GPU machine (the `device` tool):
# build, check-meta, capture tiny_llama at 1,2,4,8 and bench it, short tables last.
# Usage: bash scripts/device_check.sh [OUT_DIR]   (JSON documents and the log land in OUT_DIR)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-/tmp/aclcap-device}}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 COLUMNS=160
py=python3
if [ ! -x .venv/bin/aclcap ]; then
  # The GPU machine has its own CUDA torch, typer, rich and ninja and no network: reuse
  # them and install only aclcap itself on top.
  $py -m venv --system-site-packages .venv
  .venv/bin/pip install -q --no-deps --no-build-isolation -e . || exit 2
fi
bin=.venv/bin
$bin/python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available() and torch.cuda.get_device_name())"
status=0
step() { echo "== $*"; "$@" || status=1; }
step $bin/aclcap build --json "$out/build.json"
step $bin/aclcap check-meta --device cuda --json "$out/check-meta.json"
step $bin/aclcap capture examples/tiny_llama.py --device cuda --shapes 1,2,4,8 --pad --json "$out/capture.json"
if $bin/aclcap bench --help >/dev/null 2>&1; then
  step $bin/aclcap bench examples/tiny_llama.py --device cuda --shapes 1,2,4,8 --json "$out/bench.json"
fi
ngpu=$($bin/python -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${ngpu:-0}" -gt 1 ]; then
  step $bin/aclcap capture examples/tp_llama.py --device cuda --nproc 2 --shapes 1,2,4,8 --pad --json "$out/capture-tp.json"
  step $bin/aclcap bench examples/tp_llama.py --device cuda --nproc 2 --shapes 1,8 --json "$out/bench-tp.json"
else
  echo "== tensor parallel (examples/tp_llama.py --nproc 2): skipped, this machine has ${ngpu:-0} GPU(s)"
fi
echo "== kernels per graph replay: eager kernels vs the compiled step, both captured by aclcap"
$bin/python scripts/graph_kernels.py examples/tiny_llama.py 8 cuda > "$out/kernels.json" || status=1
echo "== summary (exit status $status)"
$bin/python - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for name in ("capture", "bench", "capture-tp", "bench-tp"):
    path = out / f"{name}.json"
    if not path.exists():
        continue
    doc = json.loads(path.read_text())
    print(f"{name} on {doc['device']} ({doc['torch']}):")
    for r in doc["results"]:
        keys = [k for k in ("size", "padded_to", "mode", "mechanism", "capture_us", "memory_bytes",
                            "max_abs_err", "step_median_us", "host_us", "device_us",
                            "speedup_vs_eager", "status") if k in r]
        print("  " + "  ".join(f"{k}={r[k]}" for k in keys))
capture = out / "capture.json"
if capture.exists():
    for c in json.loads(capture.read_text())["trace"].get("recompiles", []):
        print(f"  compile at size {c['size']}: {c['kind']} {c['reason'][:100]}")
kernels = out / "kernels.json"
if kernels.exists() and kernels.read_text().strip():
    k = json.loads(kernels.read_text())
    counts = k["kernels_per_replay"]
    print(f"kernels per replay at size {k['size']}: eager backend {counts['eager']}, "
          f"inductor {counts['inductor']} -> compiled code captured: {k['compiled_fewer']}")
PY
exit $status
