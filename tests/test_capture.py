"""aclcap capture on the cpu backend (AOTInductor), end to end through the CLI; the device
backends run only where their device exists (scripts/device_check.sh on a lent GPU)."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

import aclcap_ops
from aclcap.devices import unavailable_reason
from aclcap.graph.step import tolerance_for
from tests.conftest import ROOT, aclcap, aclcap_process

TINY = str(ROOT / "examples" / "tiny_llama.py")
MODELS = ROOT / "tests" / "models"


def capture(*args: str, **env: str):
    return aclcap("capture", *args, "--json", "-", **env)


@pytest.fixture(scope="module")
def tiny_fp32():
    """The first run compiles (--no-cache: whatever the session's cache holds), the second
    must find the artifact; the tests that capture tiny_llama later find it too."""
    cache = os.environ["ACLCAP_CACHE_DIR"]
    args = (TINY, "--shapes", "1,2,4", "--device", "cpu")
    return capture(*args, "--no-cache"), capture(*args), cache


def test_tiny_llama_float32_matches_eager(tiny_fp32):
    run = tiny_fp32[0]
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["command"] == "capture" and doc["device"] == "cpu"
    assert [r["size"] for r in doc["results"]] == [1, 2, 4]
    artifact_bytes = Path(doc["backend"]["artifact"]).stat().st_size
    for r in doc["results"]:
        assert r["mechanism"] == "aoti" and r["status"] == "pass"
        # on cpu a size's memory is the one artifact all sizes replay, its first run the
        # capture: well under the seconds a compile takes
        assert r["max_abs_err"] < 1e-4 and r["memory_bytes"] == artifact_bytes
        assert 0 < r["capture_us"] < 10e6, r
    trace = doc["trace"]
    assert trace["graph_count"] == 1 and trace["graph_breaks"] == []
    assert set(trace["custom_ops_in_graph"]) == {f"aclcap::{n}" for n in aclcap_ops.OPS}
    assert "mechanism: aoti (AOTInductor" in run.stderr
    phases = doc["phases_s"]  # where the time went, in order; the cold run compiles
    # the trace's Dynamo pass is the compile log: no compile_log phase of its own
    assert list(phases) == ["prepare", "trace", "export", "compile_or_load", "capture",
                            "replay"]
    assert all(s >= 0 for s in phases.values()) and "phases: prepare " in run.stderr
    warm = tiny_fp32[1].json()["phases_s"]  # the artifact from the cache: loaded, not built
    assert warm["compile_or_load"] < phases["compile_or_load"] / 2
    for r in doc["results"]:  # tiny_llama sets LOGITS = True
        assert r["replays"] == 2 and r["token_agreement"] == 1.0 and r["max_logprob_err"] < 1e-3
    first, *again = trace["recompiles"]  # sizes dims marked dynamic: one compile, then 0/1
    assert first["kind"] == "first_compile" and first["size"] == 4
    assert first["dynamic"] == {"input_ids": [0], "positions": [0], "slot_mapping": [0],
                                "block_tables": [0], "seq_lens": [0]}
    assert [(c["size"], c["kind"]) for c in again] == [(1, "0/1_specialization")]
    assert again[0]["file"].endswith("tiny_llama.py")
    # the line named is the model line the guard came from, with its text
    source = Path(again[0]["file"]).read_text().splitlines()[again[0]["line"] - 1]
    assert again[0]["code"] and again[0]["code"] in source
    assert "2 <= input_ids.size()[0]" in again[0]["reason"]
    assert "size 1: recompiled, 0/1 specialization" in run.stderr
    totals = doc["totals"]
    assert totals["capture_order"] == [4, 2, 1]  # largest first
    assert totals["memory_bytes"] == totals["largest_graph_bytes"] == artifact_bytes
    assert totals["capture_us"] == pytest.approx(sum(r["capture_us"] for r in doc["results"]))
    assert totals["memory_over_largest"] == 1.0


def test_a_size_guard_no_range_can_say_gets_the_artifact_whose_guards_hold(tmp_path):
    """`tokens // 2 == 1`: export's range for 4 and 8 is [2, oo], which holds 2 and 3 too;
    an artifact never replays the branch of another size (a false fail before, issue 50)."""
    run = capture(str(MODELS / "size_parity_branch.py"), "--device", "cpu",
                  ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stderr
    doc = run.json()
    assert [(r["size"], r["status"]) for r in doc["results"]] == [
        (s, "pass") for s in (1, 2, 3, 4, 8)]
    assert [a["sizes"] for a in doc["backend"]["artifacts"]] == [[1], [2, 3], [4, 8]]
    again = capture(str(MODELS / "size_parity_branch.py"), "--device", "cpu",
                    ACLCAP_CACHE_DIR=str(tmp_path))  # warm: the ranges from the index
    assert [(r["size"], r["status"]) for r in again.json()["results"]] == [
        (s, "pass") for s in (1, 2, 3, 4, 8)]


def test_a_step_that_pads_its_size_to_chunks_gets_a_static_program_per_size(tmp_path):
    """Chunked linear attention pads its tokens to whole chunks: a dynamic program's shapes
    hold `s % 8` and `// 8`, which cost Inductor's vector codegen minutes on Qwen3-Next
    (issue 59). Few sizes get a static program each, and the line says why; many sizes
    keep one program over their range."""
    run = capture(str(MODELS / "chunked_pad.py"), "--device", "cpu",
                  ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stderr
    doc = run.json()
    assert [(r["size"], r["status"]) for r in doc["results"]] == [
        (1, "pass"), (2, "pass"), (5, "pass")]
    artifacts = doc["backend"]["artifacts"]
    assert [a["sizes"] for a in artifacts] == [[1], [2], [5]]
    assert all("the step's shapes pad the size" in a["why"] for a in artifacts)
    warm = capture(str(MODELS / "chunked_pad.py"), "--device", "cpu",
                   ACLCAP_CACHE_DIR=str(tmp_path)).json()["backend"]["artifacts"]
    assert [(a["cache_hit"], a["why"]) for a in warm] == [(True, a["why"]) for a in artifacts]
    many = capture(str(MODELS / "chunked_pad.py"), "--device", "cpu", "--shapes",
                   "2,3,4,5,6", ACLCAP_CACHE_DIR=str(tmp_path)).json()
    assert [(r["size"], r["status"]) for r in many["results"]] == [
        (s, "pass") for s in (2, 3, 4, 5, 6)]
    assert not any("why" in a for a in many["backend"]["artifacts"])


def test_a_loop_over_the_tokens_is_served_size_by_size_and_ends(tmp_path):
    """A recurrence over the tokens (recurrent_gemma's scan): the program exported at 2
    reads [1, oo] yet holds at 2 only, so 1 was never covered and capture exported it again
    and again (33 minutes and no verdict, issue 50). Each size now gets a program its
    guards hold for, the last one static."""
    run = aclcap_process("capture", str(MODELS / "token_loop.py"), "--device", "cpu", "--pad",
                         "--json", "-", timeout=300, ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stderr
    doc = run.json()
    rows = [r for r in doc["results"] if not r.get("padded_to")]
    assert [(r["size"], r["status"]) for r in rows] == [(s, "pass") for s in (1, 2, 4)]
    # each size's own program may reorder the recurrence's float sums (5.96e-08 at 2, once):
    # within the tolerance the row was judged by, never bit-exact
    atol = tolerance_for(torch.float32, None)["atol"]
    assert all(r["max_abs_err"] <= atol for r in rows), rows
    assert [a["sizes"] for a in doc["backend"]["artifacts"]] == [[1], [2], [4]]


def test_fail_on_recompile_exits_1_naming_the_recompile(tiny_fp32):
    run = capture(TINY, "--shapes", "1,2,4", "--device", "cpu", "--fail-on-recompile",
                  ACLCAP_CACHE_DIR=tiny_fp32[2])
    assert run.code == 1, run.stderr
    assert all(r["status"] == "pass" for r in run.json()["results"])  # only the recompile
    assert "--fail-on-recompile: 1 recompile(s) after the first size" in run.stderr


def test_step_that_branches_on_its_size_gets_one_artifact_per_guard_range(tmp_path):
    run = capture(str(MODELS / "size_branch.py"), "--device", "cpu",
                  ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stderr
    doc = run.json()
    assert [(r["size"], r["status"]) for r in doc["results"]] == [
        (1, "pass"), (2, "pass"), (4, "pass"), (8, "pass")]
    assert [(a["range"], a["sizes"]) for a in doc["backend"]["artifacts"]] == [
        ("1-4", [1, 2, 4]), ("5+", [8])]
    assert all(a["compile_or_load_s"] > 0 for a in doc["backend"]["artifacts"])
    guards = [c for c in doc["trace"]["recompiles"] if c["kind"] == "guard"]
    assert [(g["size"], g["file"].split("/")[-1], g["line"]) for g in guards] == [
        (4, "size_branch.py", 19)]
    said = "2 artifacts: sizes 1-4 (1,2,4), sizes 5+ (8) (guard `if x.shape[0] > 4:` at " \
        "size_branch.py:19)"
    assert said in " ".join(run.stderr.split())
    # warm: the ranges come back from the trace key's index, not from a second export
    again = capture(str(MODELS / "size_branch.py"), "--device", "cpu",
                    ACLCAP_CACHE_DIR=str(tmp_path))
    assert again.code == 0, again.stderr
    assert again.json()["phases_s"]["export"] == 0 < doc["phases_s"]["export"]
    assert [(a["range"], a["sizes"], a["artifact"]) for a in again.json()["backend"][
        "artifacts"]] == [(a["range"], a["sizes"], a["artifact"]) for a in doc["backend"][
            "artifacts"]]
    assert said in " ".join(again.stderr.split())


def test_second_run_hits_the_cache(tiny_fp32):
    first, second = (r.json()["backend"] for r in tiny_fp32[:2])
    assert first["cache_hit"] is False and second["cache_hit"] is True
    assert second["compile_s"] < first["compile_s"]
    assert second["artifact"] == first["artifact"]
    assert "cache hit" in " ".join(tiny_fp32[1].stderr.split())  # wherever a line wraps
    # the traced graphs name the cached artifact: the warm run does not export at all
    phases = [r.json()["phases_s"] for r in tiny_fp32[:2]]
    assert phases[1]["export"] == 0 < phases[0]["export"]


def test_tiny_llama_bfloat16_matches_eager():
    run = capture(TINY, "--shapes", "1,2,4", "--device", "cpu", "--dtype", "bfloat16")
    assert run.code == 0, run.stderr
    assert all(r["status"] == "pass" for r in run.json()["results"])


def test_pad_replays_sizes_between_capture_sizes():
    run = capture(TINY, "--shapes", "1,2,4,8", "--device", "cpu", "--pad")
    assert run.code == 0, run.stderr
    padded = {r["size"]: r["padded_to"] for r in run.json()["results"] if r["padded_to"]}
    assert padded == {3: 4, 5: 8, 6: 8, 7: 8}
    assert all(r["status"] == "pass" for r in run.json()["results"])


def test_graph_break_is_reported_with_its_line():
    run = capture(str(ROOT / "examples" / "graph_break.py"), "--device", "cpu")
    assert run.code == 1
    trace = run.json()["trace"]
    breaks = {(b["file"].split("/")[-1], b["line"]) for b in trace["graph_breaks"]}
    assert ("graph_break.py", 30) in breaks  # the `.item()` branch
    assert any("item()" in b["reason"] for b in trace["graph_breaks"])
    assert trace["custom_ops_outside_graph"] == [  # with the line that calls it
        {"op": "aclcap_example::scale_rows", "reason": "no fake impl",
         "file": str(ROOT / "examples" / "graph_break.py"), "line": 32}]
    assert "aclcap::rms_norm" in trace["custom_ops_in_graph"]


def test_a_break_fails_every_size_as_vllm_s_fullgraph_compile_does():
    """Issue 57: vLLM compiles with fullgraph=True, so a break is never a pass: by default
    every size fails, naming the break, the op outside the graph with its line and the
    commands that write its fake."""
    run = capture(str(ROOT / "examples" / "graph_break.py"), "--device", "cpu", "--shapes",
                  "2", "--graph-mode", "piecewise")
    assert run.code == 1
    (row,) = run.json()["results"]
    text = " ".join(row["reasons"])
    assert row["status"] == "fail" and row["capture_us"] is None  # nothing captured
    assert "graph break at graph_break.py:30 (`if h.sum().item() > 0:" in text
    assert "aclcap_example::scale_rows runs outside any graph, called at graph_break.py:32" \
        in text
    assert "--namespace aclcap_example --synthesize aclcap_example_fakes.py`" in text
    assert "vLLM compiles it with fullgraph=True and would refuse it" in text
    said = " ".join(run.stderr.split())  # the table goes to stderr beside --json -
    assert "the model does not trace as one graph: vLLM (fullgraph=True) would refuse it" in said


def test_wrong_meta_impl_fails_with_named_reason():
    run = capture(str(MODELS / "wrong_meta.py"), "--device", "cpu", "--shapes", "2,4")
    assert run.code == 1
    doc = run.json()
    wrong = doc["trace"]["custom_ops_wrong_meta"]
    assert wrong and wrong[0]["op"] == "aclcap_wrongmeta::first_half"
    assert "shape [2, 64]" in wrong[0]["reason"] and "[2, 32]" in wrong[0]["reason"]
    assert wrong[0]["sizes_wrong"] == [2, 4] and wrong[0]["sizes_right"] == []
    for r in doc["results"]:
        assert r["status"] == "fail"
        assert any("aclcap_wrongmeta::first_half has a wrong meta impl" in x for x in r["reasons"])


def test_bisect_names_the_planted_node():
    run = capture(str(MODELS / "diverging.py"), "--device", "cpu", "--dtype", "bfloat16",
                  "--bisect")
    assert run.code == 1
    bisect = run.json()["bisect"]
    assert bisect["node"] == "sub" and bisect["op"] == "aten.sub.Tensor"
    assert bisect["source"] == "diverging.py:29"
    assert "first diverging node `sub`" in run.stderr
    # aot_eager (tracing) matches eager; inductor's fused code is where it diverges
    assert bisect["backends"]["aot_eager"] == "" and bisect["backends"]["inductor"]
    assert bisect["backend"] == "inductor" and bisect["layer"].startswith("inductor's code")


def test_bisect_blames_the_capture_mechanism_only_when_both_compilers_match_eager():
    """Issue 44: `--bisect` blamed the capture mechanism without compiling the whole step.
    host_seq_lens' graph freezes its seq_lens: torch.compile (which guards on them) does
    not, so both backends match eager and the capture mechanism is rightly named; the
    cause is named by the step's parameter names (the next test)."""
    run = capture(str(ROOT / "examples" / "host_seq_lens.py"), "--shapes", "2", "--bisect")
    assert run.code == 1
    bisect = run.json()["bisect"]
    assert bisect["backends"] == {"aot_eager": "", "inductor": ""}
    assert "comes from the capture mechanism" in bisect["error"]


def test_a_mutated_input_that_differs_is_named_by_its_parameter():
    run = capture(str(MODELS / "frozen_cache_write.py"), "--shapes", "2")
    assert run.code == 1
    reasons = run.json()["results"][0]["reasons"]
    assert any(r.startswith("replay 1: input cache (mutated) differs from eager")
               for r in reasons), reasons


@pytest.mark.parametrize("body,message", [
    ("raise ImportError('no module named flash_attn')\n",
     "failed to import: ImportError: no module named flash_attn"),
    ("def make_inputs(size, device, dtype):\n    return ()\n", "does not define build_model()"),
    ("import torch\ndef build_model(device, dtype):\n    return 3\n"
     "def make_inputs(size, device, dtype):\n    return (torch.ones(size),)\n",
     "build_model returned int, not a torch.nn.Module"),
    ("import torch\ndef build_model(device, dtype):\n    return torch.nn.Identity()\n"
     "def make_inputs(size, device, dtype):\n    return {'x': 1}\n",
     "make_inputs must return a tuple of tensors and host values, got dict"),
    ("import torch\ndef build_model(device, dtype):\n    return torch.nn.Identity()\n"
     "def make_inputs(size, device, dtype):\n    return [1, 2]\n",
     "the step raised TypeError: Identity.forward() takes 2 positional arguments"),
])
def test_broken_model_file_is_one_line_exit_2(tmp_path, body, message):
    model = tmp_path / "model.py"
    model.write_text(body)
    run = aclcap("capture", str(model), "--device", "cpu", "--shapes", "2")
    assert run.code == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(model) in lines[0] and message in lines[0], run.stderr


@pytest.mark.parametrize("device,mechanism", [
    pytest.param(d, m, marks=pytest.mark.skipif(unavailable_reason(d) is not None,
                                                reason=str(unavailable_reason(d))))
    for d, m in (("cuda", "cudagraph"), ("npu", "aclgraph"))])
def test_device_graph_capture_matches_eager(device, mechanism):
    run = capture(TINY, "--shapes", "1,2,4,8", "--device", device)
    assert run.code == 0, run.stderr
    assert {r["mechanism"] for r in run.json()["results"]} == {mechanism}
    totals = run.json()["totals"]
    assert totals["capture_order"] == [8, 4, 2, 1]
    assert totals["memory_over_largest"] <= 1.5  # one shared pool, largest first


@pytest.mark.parametrize("mode", ["full", "piecewise"])
def test_model_that_owns_its_kv_cache_replays_like_eager(mode):
    """A KV cache kept as module buffers and written in forward, with a write position
    that every step advances: the artifact writes the model's own buffers (not a copy baked
    into it), and eager and replay each start from the same state. Bench times it too."""
    model = str(MODELS / "owned_kv_cache.py")
    run = capture(model, "--device", "cpu", "--graph-mode", mode, "--shapes", "2,4")
    assert run.code == 0, run.stdout + run.stderr
    assert all(r["status"] == "pass" for r in run.json()["results"])
    bench = aclcap("bench", model, "--device", "cpu", "--graph-mode", mode, "--shapes", "2",
                   "--modes", "eager,graph", "--rounds", "5", "--min-time", "0",
                   "--max-time", "0", "--json", "-")
    assert bench.code == 0, bench.stdout + bench.stderr
    assert {r["mode"] for r in bench.json()["results"]} == {"eager", "graph"}


def test_cache_follows_the_exported_program_not_the_file(tmp_path):
    model = str(MODELS / "env_outputs.py")
    cache = str(tmp_path / "cache")
    # one output: the session's cache (the program other tests capture, compiled once)
    one = capture(model, "--device", "cpu", ACLCAP_TEST_OUTPUTS="1")
    two = capture(model, "--device", "cpu", ACLCAP_CACHE_DIR=cache, ACLCAP_TEST_OUTPUTS="2")
    again = capture(model, "--device", "cpu", ACLCAP_CACHE_DIR=cache, ACLCAP_TEST_OUTPUTS="2")
    for run in (one, two, again):
        assert run.code == 0, run.stderr
    keys = [Path(run.json()["backend"]["artifact"]).stem.rsplit("-", 1)[1] for run in (one, two)]
    assert keys[0] != keys[1]
    assert two.json()["backend"]["cache_hit"] is False
    assert again.json()["backend"]["cache_hit"] is True
    copy = tmp_path / "renamed_copy.py"  # the same program from another file: no compile
    copy.write_text(Path(model).read_text())
    renamed = capture(str(copy), "--device", "cpu", ACLCAP_CACHE_DIR=cache,
                      ACLCAP_TEST_OUTPUTS="2")
    assert renamed.code == 0, renamed.stderr
    assert renamed.json()["backend"]["cache_hit"] is True
    assert renamed.json()["backend"]["artifact"] == two.json()["backend"]["artifact"]


def _gemm_templates(artifact: str) -> int:
    """Inductor's C++ GEMM template code in an artifact's generated sources."""
    with zipfile.ZipFile(artifact) as package:
        return sum(package.read(name).decode(errors="replace").count("micro_gemm")
                   for name in package.namelist() if name.endswith(".cpp"))


def _autotune_winners(stderr: str) -> dict[str, list[str]]:
    """Inductor's AUTOTUNE tables on stderr: each tuned GEMM's choices, fastest first."""
    tables: dict[str, list[str]] = {}
    rows: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("AUTOTUNE "):
            rows = tables.setdefault(line.split("(")[0].split()[1], [])
        elif line.startswith("  ") and " ms " in line:
            rows.append(line.split()[0])
    return tables


def test_max_autotune_compiles_the_autotuned_gemm_into_the_artifact(tmp_path):
    """Which GEMM wins is a benchmark (on a loaded 2-core machine ATen's can), so the test
    holds the artifact to Inductor's own table: the C++ template was among the choices, and
    the artifact holds the template's code exactly when the template won. --no-cache and a
    fresh Inductor cache, so the GEMM is benchmarked here rather than read from an earlier
    run's autotune cache; the artifact still lands in the session's cache, where bench's
    --max-autotune test loads it."""
    model = str(ROOT / "examples" / "one_linear.py")
    plain = capture(model, "--device", "cpu")
    tuned = aclcap_process("capture", model, "--device", "cpu", "--max-autotune", "--no-cache",
                           "--json", "-", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    for run in (plain, tuned):
        assert run.code == 0, run.stderr
    plain_facts, tuned_facts = plain.json()["backend"], tuned.json()["backend"]
    assert plain_facts["inductor_configs"] == {}
    assert tuned_facts["inductor_configs"]["max_autotune"] is True
    assert Path(tuned_facts["artifact"]).name != Path(plain_facts["artifact"]).name  # own key
    assert _gemm_templates(plain_facts["artifact"]) == 0  # the plain artifact calls ATen's GEMM
    tables = _autotune_winners(tuned.stderr)
    assert tables, tuned.stderr
    for choices in tables.values():
        assert any(name.startswith("cpp_") for name in choices), choices
    template_won = any(choices[0].startswith("cpp_") for choices in tables.values())
    assert (_gemm_templates(tuned_facts["artifact"]) > 0) == template_won, tables
    said = "".join(tuned.stderr.split())  # the mechanism line, wrapped at any space
    assert "tuned(--max-autotune:max_autotune,max_autotune_gemm_backends,freezing)" in said


def test_max_autotune_is_refused_off_cpu():
    from aclcap.errors import UsageError
    from aclcap.graph.options import StepOptions
    from aclcap.graph.step import backend_for

    with pytest.raises(UsageError, match="--compile-backend"):
        backend_for("cuda", StepOptions(max_autotune=True))


def test_corrupt_cached_artifact_is_rebuilt(tmp_path):
    """The session's artifact and size-range index, copied to a cache of the test's own
    with the artifact cut short (others read the session's meanwhile)."""
    model = str(MODELS / "env_outputs.py")
    first = capture(model, "--device", "cpu")
    artifact = Path(first.json()["backend"]["artifact"])
    cache = tmp_path / "cache"
    (cache / "aoti").mkdir(parents=True)
    for index in artifact.parent.glob("env_outputs-*.ranges.json"):
        shutil.copy(index, cache / "aoti" / index.name)
    (cache / "aoti" / artifact.name).write_bytes(artifact.read_bytes()[:100])
    second = capture(model, "--device", "cpu", ACLCAP_CACHE_DIR=str(cache))
    assert second.code == 0, second.stderr
    assert "rebuilt" in second.json()["backend"]["cache_note"]


def test_trace_reads_the_same_graphs_with_or_without_the_compile_log():
    """A device backend's trace compiles the largest size once with a throwaway log; the
    cpu trace is the compile log's own pass over every size. Both read explain's facts
    from the graphs the backend was handed, and only the logged pass keeps the compiles."""
    from aclcap.capture.options import CaptureOptions
    from aclcap.capture.trace import trace_model
    from aclcap.graph.compiles import CompileLog
    from aclcap.graph.step import draw_reproducibly, prepare_step

    step = prepare_step(CaptureOptions(model=str(ROOT / "examples" / "graph_break.py"),
                                       device="cpu"))
    # Seeded draws: which side of the `.item()` branch a draw takes decides the graphs (on
    # these, `h * 2` runs: a graph of its own, then the op without a meta breaks again).
    draw_reproducibly(step)
    inputs = {s: step.inputs(s) for s in (2, 4)}
    alone = trace_model(step.model, inputs, step.spec.path, step.dims)
    log = CompileLog("eager", step.spec.path)
    logged = trace_model(step.model, inputs, step.spec.path, step.dims, log)
    assert alone.graph_count == logged.graph_count == 4
    assert alone.graph_breaks == logged.graph_breaks
    assert [b.line for b in alone.graph_breaks] == [30, 32]
    assert alone.ops_per_graph == logged.ops_per_graph
    assert alone.recompiles == [] and logged.recompiles == log.compiles
    assert [c.size for c in log.compiles][:1] == [4]


@pytest.mark.parametrize("mode", [[], ["--graph-mode", "piecewise"],
                                  ["--cpu-mechanism", "inductor"]],
                         ids=["full", "piecewise", "inductor"])
def test_a_step_that_pins_its_size_is_traced_with_the_size_suggested_and_passes(
        tmp_path, mode):
    """`if x.shape[0] == 8`: a required dynamic size refused it ("Constraints violated ...
    If you're using mark_dynamic", which the user never called), and a helper's eager-only
    host read was blamed instead (issue 50). Traced again with the size suggested, each size
    is compiled where the step's guards put it, in every mode."""
    run = capture(str(MODELS / "size_pinned_eager_read.py"), "--shapes", "2,4,8",
                  "--device", "cpu", *mode, ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 0, run.stdout + run.stderr
    doc = run.json()
    assert [(r["size"], r["status"]) for r in doc["results"]] == [
        (2, "pass"), (4, "pass"), (8, "pass")]
    assert doc["host_reads"] == [] and doc["trace"]["error"] is None
    assert doc["trace"]["size_pinned"]["line"] == 17


def test_the_ops_that_read_the_step_s_context_are_named(tmp_path):
    """Issue 48 item 8: the op whose kernel reads the row order make_inputs set is named
    with what it reads: live on cpu, frozen by a device graph unless kept in buffers."""
    run = aclcap("capture", str(MODELS / "context_reading_op.py"), "--shapes", "1,2",
                 "--device", "cpu", ACLCAP_CACHE_DIR=str(tmp_path), COLUMNS="200")
    assert run.code == 0, run.stdout + run.stderr
    assert "ops that read it: ctxread::gather_rows (reads CONTEXT.order). On cpu an op reads " \
        "it live at every replay; a device graph freezes" in run.stdout
    doc = capture(str(MODELS / "context_reading_op.py"), "--shapes", "1,2", "--device", "cpu",
                  ACLCAP_CACHE_DIR=str(tmp_path)).json()
    assert doc["state_readers"] == {"ctxread::gather_rows": "CONTEXT.order"}


def test_a_data_dependent_size_is_traced_to_the_op_and_line_that_made_it(tmp_path):
    """Issue 50 item 5: a MoE expert loop said only `Eq(u0, 0)` and torch.cond advice. The
    row names `nonzero` and its line; the integer gather beside it is no data's size."""
    doc = capture(str(MODELS / "moe_expert_loop.py"), "--shapes", "1,2,4", "--device", "cpu",
                  ACLCAP_CACHE_DIR=str(tmp_path)).json()
    reasons = doc["results"][0]["reasons"]
    assert all(r["status"] == "fail" for r in doc["results"])
    assert reasons[-1] == ("the data-dependent size comes from an op whose output size "
                           "follows its input's values: aten::nonzero at moe_expert_loop.py:"
                           "19 (`tokens = (chosen == e).nonzero().squeeze(-1)`)"), reasons


def test_a_shared_wrapper_s_callers_are_no_recompile_and_the_size_guard_names_one(tmp_path):
    """Issue 50 item 6: a library wrapper every layer goes through (transformers'
    deprecation wrapper) is compiled again per caller within one step; its caller guards
    (`___check_obj_id(func.__code__)`) were listed as the step's recompiles."""
    doc = capture(str(MODELS / "piecewise_shared_wrapper.py"), "--shapes", "1,2,4",
                  "--device", "cpu", ACLCAP_CACHE_DIR=str(tmp_path)).json()
    compiles = doc["trace"]["recompiles"]
    assert [(c["size"], c["kind"]) for c in compiles] == [
        (4, "first_compile"), (2, "automatic_dynamic"), (1, "0/1_specialization")], compiles
    assert not any("___check" in c["reason"] for c in compiles)


def test_a_replay_that_crashes_the_process_is_one_line_naming_the_phase(tmp_path):
    """Issue 48 item 5: a kernel that segfaults once the compiled graph calls it (eager
    passes) ended the run with a bare segfault and no verdict."""
    run = aclcap_process("capture", str(MODELS / "replay_segfault.py"), "--shapes", "2",
                         "--device", "cpu", ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 1, run.stdout + run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("crashed: aclcap capture died of SIGSEGV while capturing size "
                                "2"), run.stderr
    assert "Segmentation fault" not in run.stderr + run.stdout


def test_a_view_the_schema_hides_at_one_token_is_named_at_that_size(tmp_path):
    """Issue 50 item 9: at one token the op returns a view of its input that its schema
    does not declare; the row said only `output 0 differs` while check-meta knew."""
    doc = capture(str(MODELS / "one_token_view.py"), "--shapes", "1,2", "--device", "cpu",
                  ACLCAP_CACHE_DIR=str(tmp_path)).json()
    assert all(r["status"] == "fail" for r in doc["results"])
    wrong = doc["trace"]["custom_ops_wrong_meta"]
    assert [(w["op"], w["defect"], w["sizes_wrong"], w["sizes_right"]) for w in wrong] == [
        ("onetokenview::split_kv", "schema", [1], [2])]
    assert doc["results"][0]["reasons"][0].startswith(
        "onetokenview::split_kv returns a view its schema does not declare: output 0 is a "
        "view of `kv` at kv [1, 16]")


def test_bisect_runs_on_the_graph_dynamo_traced_where_export_refuses_the_step(tmp_path):
    """Issue 50 item 9: `--bisect` stopped at "cannot bisect: torch.export failed" on a
    step export refuses (a weight reached through `.data`, as vLLM's RMSNorm does)."""
    run = capture(str(MODELS / "diverging_data.py"), "--device", "cpu", "--dtype", "bfloat16",
                  "--bisect", ACLCAP_CACHE_DIR=str(tmp_path))
    assert run.code == 1
    bisect = run.json()["bisect"]
    assert (bisect["op"], bisect["source"]) == ("operator.sub", "diverging.py:29"), bisect
    assert bisect["layer"].startswith("inductor's code")


def test_the_advice_after_a_failed_trace_names_every_library_without_a_fake(tmp_path):
    """Issue 50 item 10: two libraries' ops without fakes; the trace stops at the first and
    the advice named its library only. Issue 57: the advice is the two commands that close
    the loop; pasted as printed (from where capture ran), they write both fakes and capture
    with them."""
    import re
    import shlex

    cache = {"ACLCAP_CACHE_DIR": str(tmp_path / "cache")}
    model = str(MODELS / "two_fakeless_libs.py")
    doc = aclcap_process("capture", model, "--shapes", "2", "--device", "cpu", "--json", "-",
                         cwd=tmp_path, **cache).json()
    reason = doc["results"][0]["reasons"][0]
    synthesize, capture_with = re.findall(r"`(aclcap [^`]+)`", reason)
    assert "--namespace fakelessa --namespace fakelessb" in synthesize, reason
    made = aclcap_process(*shlex.split(synthesize)[1:], "--json", "-", cwd=tmp_path, **cache)
    assert made.code == 1, made.stdout + made.stderr  # both are missing their meta: a finding
    assert {r["op"]: (r["status"], r["synthesis"]["status"]) for r in made.json()["results"]
            } == {"fakelessa::scale.default": ("missing", "verified"),
                  "fakelessb::shift.default": ("missing", "verified")}
    run = aclcap_process(*shlex.split(capture_with)[1:], "--shapes", "2", "--json", "-",
                         cwd=tmp_path, **cache)
    assert run.code == 0, run.stdout + run.stderr
    assert run.json()["trace"]["custom_ops_in_graph"] == ["fakelessa::scale",
                                                          "fakelessb::shift"]
