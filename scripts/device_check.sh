#!/usr/bin/env bash
# One prepared run of aclcap's device path for a lent GPU machine (the `device` tool): that
# machine runs Python 3.12 with torch 2.11.0+cu130 and has no network. It installs the wheels
# carried in .whl/ (scripts/fetch_device_wheels.sh, run beforehand where pip has a network)
# and aclcap itself, offline, checks aclcap's requirements against what is installed, then
# builds, runs check-meta, captures tiny_llama at 1,2,4,8 and benches it, counts the kernels
# a graph replay launches, and prints short tables last.
#
#   bash scripts/device_check.sh [--device cuda|cpu] [OUT_DIR]
#
# --device cpu is the rehearsal on a machine without a GPU: the same steps end to end (the
# kernel count needs a device graph and is skipped), run with PYTHON set to a Python 3.12
# with torch 2.11 (scripts/compat_check.sh 2.11.0 makes one). Every JSON document and the log
# (device_check.log) land in OUT_DIR (default $OUT, else /tmp/aclcap-device): 8 files at most,
# what the device tool brings back. ACLCAP_DEVICE_BUDGET_S (default 420 on cuda, 3600 on cpu)
# caps the whole run: each step gets the seconds left, so one hang cannot spend the device
# time of a rerun.
set -uo pipefail
cd "$(dirname "$0")/.."
device=cuda
if [ "${1:-}" = "--device" ]; then
  device="${2:-}"
  shift 2 || true
fi
case "$device" in
  cuda | cpu) ;;
  *) echo "error: --device '$device' is not cuda or cpu (cpu is the rehearsal)" >&2; exit 2 ;;
esac
shopt -s nullglob
wheel_dir="${ACLCAP_DEVICE_WHEELS:-.whl}"
wheels=("$wheel_dir"/*.whl)
if [ ${#wheels[@]} -eq 0 ]; then
  echo "error: no wheels in $wheel_dir: run scripts/fetch_device_wheels.sh where pip has a network, then carry .whl" >&2
  exit 2
fi
out="${1:-${OUT:-/tmp/aclcap-device}}"
mkdir -p "$out" || exit 2
exec > >(tee "$out/device_check.log") 2>&1
tee_pid=$!
# The log is whole before the script returns (the device tool collects $OUT right after).
trap 'exec >&- 2>&-; wait "$tee_pid"' EXIT
export PYTHONUNBUFFERED=1 COLUMNS=160
py="${PYTHON:-python3}"
# 420 s on the GPU leaves a rerun inside the device tool's 15 minutes; the cpu rehearsal on a
# small shared machine takes longer (745 s on 2 loaded cores) and spends no device time.
budget="${ACLCAP_DEVICE_BUDGET_S:-$([ "$device" = cuda ] && echo 420 || echo 3600)}"
deadline=$((SECONDS + budget))

# Installed into a folder put on PYTHONPATH, not a venv: the image's python3 is itself a venv
# (/opt/torch/.venv), and a venv made from one sees the base interpreter's packages, not its
# torch. The carried wheels shadow nothing but what they are.
work="${ACLCAP_DEVICE_WORK:-/tmp/aclcap-device-work}"
site="$work/site"
rm -rf "$work"
mkdir -p "$work/src"
echo "== install ${#wheels[@]} carried wheels and aclcap, offline, into $site"
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
  "${wheels[@]}" || exit 2
export PYTHONPATH="$site"
# aclcap from a copy of its sources: setuptools builds in the source tree, and its build/
# folder would mix with aclcap's own build/.
cp -r pyproject.toml README.md aclcap aclcap_ops "$work/src/" || exit 2
"$py" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
  --target "$site" "$work/src" || exit 2
bin="$site/bin"
# --no-deps installed aclcap unchecked: hold every requirement to what this python has, so a
# missing package or an older torch is one line now, not a failure minutes in.
"$py" scripts/device_requirements.py "$site" || exit 2
# Builds and compile caches in the work folder: a rerun starts as cold as the first run.
export ACLCAP_BUILD_DIR="$work/build" ACLCAP_CACHE_DIR="$work/aoti" \
  TORCHINDUCTOR_CACHE_DIR="$work/inductor"
"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available() and torch.cuda.get_device_name())"
if [ "$device" = cuda ] && ! "$py" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  echo "error: no CUDA device here: run with --device cpu for the rehearsal" >&2
  exit 2
fi

status=0
step() {
  local left=$((deadline - SECONDS)) t0=$SECONDS rc
  if [ "$left" -le 0 ]; then
    echo "== $1 $2 ...: skipped, the ${budget} s budget is spent"
    status=1
    return
  fi
  echo "== $*"
  timeout "$left" "$@"
  rc=$?
  echo "   (exit $rc, $((SECONDS - t0)) s)"
  [ "$rc" -eq 0 ] || status=1
}
step "$bin/aclcap" build --json "$out/build.json"
step "$bin/aclcap" check-meta --device "$device" --json "$out/check-meta.json"
step "$bin/aclcap" capture examples/tiny_llama.py --device "$device" --shapes 1,2,4,8 --pad \
  --json "$out/capture.json"
step "$bin/aclcap" bench examples/tiny_llama.py --device "$device" --shapes 1,2,4,8 --rounds 5 \
  --max-time 10 --json "$out/bench.json"
# Host values on the device: a graph freezes the host list (exit 1 is the expected verdict),
# the same lengths as a tensor replay live (exit 0).
echo "== aclcap capture examples/host_seq_lens.py (expect exit 1: seq_lens frozen)"
timeout $((deadline - SECONDS > 0 ? deadline - SECONDS : 1)) "$bin/aclcap" capture \
  examples/host_seq_lens.py --device "$device" --shapes 2,4 --json "$out/capture-host.json"
rc=$?
echo "   (exit $rc)"
[ "$rc" -eq 1 ] || status=1
step "$bin/aclcap" capture examples/tensor_seq_lens.py --device "$device" --shapes 2,4 \
  --json "$out/capture-tensor-lens.json"
ngpu=0
[ "$device" = cuda ] && ngpu=$("$py" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${ngpu:-0}" -gt 1 ]; then
  step "$bin/aclcap" capture examples/tp_llama.py --device cuda --nproc 2 --shapes 1,2,4,8 --pad \
    --json "$out/capture-tp.json"
  step "$bin/aclcap" bench examples/tp_llama.py --device cuda --nproc 2 --shapes 1,8 --rounds 5 \
    --max-time 10 --json "$out/bench-tp.json"
else
  echo "== tensor parallel (examples/tp_llama.py --nproc 2): skipped, $device has ${ngpu:-0} GPU(s)"
fi
if [ "$device" = cuda ]; then
  echo "== kernels per graph replay: eager kernels vs the compiled step, both captured by aclcap"
  step "$py" scripts/graph_kernels.py examples/tiny_llama.py 8 cuda --json "$out/kernels.json"
else
  echo "== kernels per graph replay: skipped on cpu, which has no device graph to count in" \
       "(bench's launches/step: eager's kernels against the AOTI artifact's one call)"
fi
echo "== summary (exit status $status, $SECONDS s of the ${budget} s budget)"
"$py" - "$out" <<'PY'
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
                            "max_abs_err", "step_median_us", "host_us", "device_us", "launches",
                            "speedup_vs_eager", "status") if k in r]
        print("  " + "  ".join(f"{k}={r[k]:.4g}" if isinstance(r[k], float) else f"{k}={r[k]}"
                               for k in keys))
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
