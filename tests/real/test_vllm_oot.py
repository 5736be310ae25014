"""Issue 57: the loop aclcap exists for, inside vLLM. An out-of-tree op library of the tests'
own (tests/real/models/myacl: C++ TORCH_LIBRARY kernels, Meta kernels in a second file, and
`CustomOp.register_oot` layers replacing vLLM's RMSNorm with its residual in place,
SiluAndMul, and RotaryEmbedding in place returning `()`) is plugged into vLLM's stock llama
by a model file that only imports it. With kernels only, capture fails in both modes naming
every op without a fake with the line that calls it (vLLM's fullgraph=True would refuse the
step); the two commands it prints, pasted as printed, write the fakes (verified in workers
that load what the model file's import loads) and capture with them: every op in the graph,
full and piecewise, cold and warm."""

from __future__ import annotations

import re
import shlex

from tests.real.vllm_env import MODELS, document, require, run, said

require()

MODEL = MODELS / "vllm_llama_myacl.py"
NO_FAKE = ["myacl::rms_norm", "myacl::add_rms_norm", "myacl::swiglu"]
OPS = [*NO_FAKE, "myacl::rope"]  # rope returns (): torch makes it a trivial fake


def _pasted(command: str, *extra: str, cache, cwd) -> dict:
    """Run a command as the advice printed it (with --json - added), from `cwd`."""
    args = shlex.split(command)
    assert args[0] == "aclcap", command
    proc = run(*args[1:], *extra, "--json", "-", cache=cache, cwd=cwd)
    assert proc.returncode in (0, 1), said(proc)
    return document(proc)


def test_kernels_only_fail_naming_every_op_and_the_advice_pasted_closes_the_loop(tmp_path):
    cache = tmp_path / "cache"
    for mode in ("full", "piecewise"):
        proc = run("capture", str(MODEL), "--graph-mode", mode, "--json", "-", cache=cache,
                   cwd=tmp_path)
        assert proc.returncode == 1, said(proc)
        doc = document(proc)
        assert doc["trace"]["graph_breaks"] and doc["backend"].get("artifact") is None
        for row in doc["results"]:  # nothing captured: no piece passes around the breaks
            text = " ".join(row["reasons"])
            assert row["status"] == "fail", row
            for op in NO_FAKE:
                assert f"{op} runs outside any graph, called at layers.py:" in text, text
            assert "vLLM compiles it with fullgraph=True" in text
        advice = next(r for r in doc["results"][0]["reasons"] if "have no fake impl" in r)
        synthesize, capture = re.findall(r"`(aclcap [^`]+)`", advice)
        assert (" --graph-mode piecewise" in capture) == (mode == "piecewise")
    made = _pasted(synthesize, cache=cache, cwd=tmp_path)
    rows = {r["op"]: r["synthesis"] for r in made["results"]}
    assert all(rows[f"{op}.default"]["status"] == "verified" for op in OPS), rows
    fakes = (tmp_path / "myacl_fakes.py").read_text()
    assert "return x.new_empty(x.shape)" in fakes  # rms_norm: what a reviewer would write
    assert "what vllm_llama_myacl.py loads when imported (myacl_kernels.so" in fakes
    for mode in ("full", "piecewise"):
        command = capture if mode == "full" else \
            capture.replace(" --fakes", " --graph-mode piecewise --fakes")
        for _ in ("cold", "warm"):
            doc = _pasted(command, "--shapes", "1,2,4", "--pad", cache=cache, cwd=tmp_path)
            rows = doc["results"]
            assert [(r["size"], r["status"]) for r in rows] == [
                (1, "pass"), (2, "pass"), (3, "pass"), (4, "pass")], rows
            assert all(r["max_abs_err"] <= 1e-4 for r in rows), rows
            trace = doc["trace"]
            assert trace["graph_breaks"] == [] and trace["custom_ops_outside_graph"] == []
            assert set(OPS) <= set(trace["custom_ops_in_graph"]), trace


def test_the_library_s_own_meta_kernels_pass_check_meta(tmp_path):
    """Its C++ Meta kernels (symbolic sizes throughout) checked against the kernels on the
    calls the step makes: the library loaded by the model file's import, found by aclcap."""
    proc = run("check-meta", "--samples-from", str(MODELS / "vllm_llama_myacl_meta.py"),
               "--namespace", "myacl", "--json", "-", cache=tmp_path, timeout=600)
    assert proc.returncode == 0, said(proc)
    rows = {r["op"]: r for r in document(proc)["results"]}
    assert {op: rows[f"{op}.default"]["status"] for op in OPS} == dict.fromkeys(OPS, "pass")
    assert all(rows[f"{op}.default"]["sample_count"] >= 3 for op in OPS), rows
