#!/usr/bin/env bash
# aclcap's smoke subset on another torch: build, check-meta of the bundled ops, capture of
# examples/tiny_llama.py at 1,2 and the device protocol test, then one table (the "tested
# with" rows of docs/devices.md come from it).
#
#   scripts/compat_check.sh VERSION     a venv under Python 3.12 (the GPU image's) with torch==VERSION
#                                       from the registry, e.g. 2.11.0 or 2.15.0
#   scripts/compat_check.sh --venv DIR  an existing venv and its own torch (e.g. .venv of `make`)
#
# The registry's torch wheels are CUDA builds: they run on a CPU, but with their nvidia-* wheels
# they are several GB, so this runs by hand only, never in CI or make. The venv lives outside
# the repo, in $ACLCAP_COMPAT_DIR (default ~/.cache/aclcap-compat/py3.12-torchVERSION), and is
# kept for reruns: delete the folder to throw it away. $PYTHON picks the interpreter
# (default python3.12). Builds and the AOTI cache go to the venv's folder, never to build/.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
usage="usage: scripts/compat_check.sh VERSION | --venv DIR"
[ $# -ge 1 ] || { echo "error: $usage" >&2; exit 2; }

if [ "$1" = "--venv" ]; then
  [ $# -eq 2 ] || { echo "error: $usage" >&2; exit 2; }
  venv="$(cd "$2" 2>/dev/null && pwd)" || { echo "error: no venv at $2" >&2; exit 2; }
  [ -x "$venv/bin/python" ] || { echo "error: $2 has no bin/python: pass a venv" >&2; exit 2; }
  work="$(mktemp -d -t aclcap-compat.XXXXXX)"
else
  version="$1"
  [[ "$version" =~ ^2\.[0-9]+\.[0-9]+$ ]] || {
    echo "error: '$version' is not a torch release: pass e.g. 2.11.0" >&2; exit 2; }
  py="${PYTHON:-python3.12}"
  command -v "$py" >/dev/null || {
    echo "error: $py not found: install Python 3.12 or set PYTHON=/path/to/python3.12" >&2; exit 2; }
  venv="${ACLCAP_COMPAT_DIR:-$HOME/.cache/aclcap-compat}/py3.12-torch$version"
  work="$venv/aclcap-work"
  have="$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  # A pip config (a constraint file, a local index) must not swap in another torch than
  # the one asked for: it is ignored here; PIP_* variables still apply.
  export PIP_CONFIG_FILE=/dev/null
  if [ "${have%%+*}" != "$version" ]; then
    echo "== venv $venv: torch==$version from the registry (several GB, minutes)"
    rm -rf "$venv"
    "$py" -m venv "$venv" || exit 2
    "$venv/bin/pip" install -q "torch==$version" || exit 2
  fi
  if [ ! -x "$venv/bin/aclcap" ]; then
    # aclcap's own dependencies as pyproject states them: this also proves its torch range
    # accepts this torch (pip would otherwise refuse the install or replace the torch).
    "$venv/bin/pip" install -q -e "$repo" pytest || exit 2
  fi
fi
mkdir -p "$work"
rm -f "$work"/*.json "$work"/*.log  # a step that writes nothing must not show the last run's
bin="$venv/bin"
# The worktree's code wins over any aclcap the venv has installed (`make`'s points elsewhere).
export PYTHONPATH="$repo" PYTHONUNBUFFERED=1 COLUMNS=120
export ACLCAP_BUILD_DIR="$work/build" TORCHINDUCTOR_CACHE_DIR="$work/inductor"
ACLCAP_CACHE_DIR="$(mktemp -d -t aclcap-compat-cache.XXXXXX)"  # capture compiles afresh
export ACLCAP_CACHE_DIR
trap 'rm -rf "$ACLCAP_CACHE_DIR"' EXIT
cd "$repo" || exit 2
torch_v="$("$bin/python" -c 'import torch; print(torch.__version__)')" || {
  echo "error: $bin/python cannot import torch" >&2; exit 2; }
python_v="$("$bin/python" -c 'import platform; print(platform.python_version())')"
echo "== torch $torch_v, Python $python_v ($venv); logs in $work"

# detail KIND NAME: what the step's JSON (or pytest's last line) says, in one cell.
detail() {
  "$bin/python" - "$1" "$work" "$2" <<'PY' 2>/dev/null || echo "(no result)"
import json, pathlib, sys
kind, work, name = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
if kind == "pytest":
    lines = (work / f"{name}.log").read_text().strip().splitlines()
    print(lines[-1].strip("= ") if lines else "(no output)")
    raise SystemExit
rows = json.loads((work / f"{kind}.json").read_text())["results"]
if kind == "build":
    print(", ".join(f"{r['name']} {r['status']}" for r in rows))
elif kind == "check-meta":
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"{len(rows)} ops: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
else:
    err = lambda r: f"{r['max_abs_err']:.1e}" if r.get("max_abs_err") is not None else "-"
    print(", ".join(f"size {r['size']} {r['mechanism']} {r['status']} (max abs err {err(r)})"
                    for r in rows))
PY
}

rows=()
status=0
# step NAME DETAIL_KIND CMD...: run CMD with its output in $work/NAME.log, one table row.
step() {
  local name="$1" kind="$2"; shift 2
  local t0 rc secs detail
  echo "== $name"
  t0=$(date +%s%N)
  timeout 1800 "$@" >"$work/$name.log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000 ))
  detail="$(detail "$kind" "$name")"
  if [ "$rc" -ne 0 ]; then
    status=1
    tail -n 15 "$work/$name.log" | sed 's/^/   | /'
  fi
  rows+=("$(printf '| %-15s | %-6s | %8s | %s |' "$name" \
    "$([ "$rc" -eq 0 ] && echo pass || echo "FAIL ($rc)")" "$((secs / 1000)).$((secs % 1000 / 100))" "$detail")")
}

step build build "$bin/aclcap" build --json "$work/build.json"
step check-meta check-meta "$bin/aclcap" check-meta --json "$work/check-meta.json"
step capture capture "$bin/aclcap" capture examples/tiny_llama.py --shapes 1,2 --json "$work/capture.json"
step device-protocol pytest "$bin/python" -m pytest tests/test_device_protocol.py -q -p no:cacheprovider

echo
echo "aclcap smoke subset: torch $torch_v, Python $python_v, $(date -u +%Y-%m-%d)"
echo "| step            | result | time (s) | detail |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
exit $status
