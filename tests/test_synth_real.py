"""check-meta --synthesize on the second fixture library (tests/fixtures/synth_real.py), one
op per class of real kernel synthesis used to get wrong: a variation that crashes the
kernel, a C++ composite, a by-value C++ signature, another rank, a transposed input or
output, promotion, tied head dims, a ScalarType's itemsize, a sum of products, a step with
no tokens, offsets that must follow the tokens. Each fake, Python and C++, must equal its
answer key (synth_real_answers.py) on calls of kinds no sample had."""

from __future__ import annotations

import re

import pytest

from aclcap.meta.lint import lint
from tests.conftest import ROOT
from tests.test_synthesize import _ruff, _synthesis, compare_answers, synthesize_fixture

NS = "aclcap_synthreal::"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthreal")
    cpp = out / "real_metas.cpp"
    return (*synthesize_fixture(out, "synth_real", "--synthesize-cpp", str(cpp)), cpp)


def test_every_fake_equals_its_answer_key_on_unseen_kinds_of_call(real_run):
    run, doc, py, _ = real_run
    assert run.code == 1, run.stderr  # the library has no metas, and one op is a composite
    synthesis = _synthesis(doc)
    verified = {op for op, s in synthesis.items() if s["status"] == "verified"}
    assert verified == set(synthesis) - {NS + "composite_norm.default"}, \
        {op: s["verdict"] for op, s in synthesis.items()}
    compared = compare_answers("synth_real", str(py))
    assert compared["mismatches"] == []
    assert set(compared["checked"]) == verified
    rules = {op.removeprefix(NS).removesuffix(".default"): s["rule"]
             for op, s in synthesis.items()}
    assert rules["moe_align"] == [
        "out 0: [topk_ids.numel() + num_experts * (block_size - 1)], int32, contiguous"]
    assert rules["attn_decode"] == [
        "out 0: [q.shape[0], q.shape[1], v.shape[-1]], dtype of q, contiguous"]
    assert rules["add_promote"][0].startswith("out 0: [*a.shape], dtype promoted over a, b")
    assert rules["row_max"] == ["out 0: [x.numel() // x.shape[-1]], float32, contiguous"]
    assert rules["norm_any_rank"] == ["out 0: [*x.shape], dtype of x, contiguous"]
    assert rules["double_transposed"] == [
        "out 0: [x.shape[0], x.shape[-1]], dtype of x, dims laid out in order [1, 0]"]
    assert rules["linear_nt"] == ["out 0: [x.shape[0], w.shape[0]], dtype of x, contiguous"]
    assert "storage.itemsize" in rules["pack_storage"][0]
    assert _ruff(py).returncode == 0 and lint([py]) == []


def test_the_cpp_metas_load_beside_a_by_value_kernel_and_equal_the_answers(real_run):
    _, doc, _, cpp = real_run
    library = doc["synthesis"]["cpp_library"]
    assert library and not library.startswith(str(ROOT / "aclcap"))  # never its install tree
    source = cpp.read_text()
    assert "at::Tensor byval_scale_meta(at::Tensor x, double s) {" in source
    assert "const at::Tensor& x" in source  # the other kernels keep their own signatures
    assert all(len(line) <= 100 for line in source.splitlines())
    assert "<ATen/ops/promote_types.h>" in source and "<optional>" not in source
    compared = compare_answers("synth_real", library)
    assert compared["mismatches"] == [] and len(compared["checked"]) == 12
    assert lint([cpp]) == []


def test_a_crashing_call_costs_that_call_alone_and_is_named(real_run):
    _, doc, _, _ = real_run
    s = _synthesis(doc)[NS + "scale_rows.default"]
    assert s["status"] == "verified"
    assert "x dim 0 alone: 4 -> 8: crashed (signal 6: SIGABRT)" in "; ".join(s["crashed_calls"])
    note = next(n for n in s["notes"]
                if re.match(r"\d+ call\(s\) crashed or hung the kernel and were skipped", n))
    # the file names no signal: a corrupted heap ends by SIGSEGV in one run, SIGABRT next
    assert "x dim 0 alone: 4 -> 8: crashed" in note and "signal" not in note


def test_a_cpp_composite_is_written_with_its_fix_never_registered(real_run):
    _, doc, py, cpp = real_run
    s = _synthesis(doc)[NS + "composite_norm.default"]
    assert s["status"] == "not_registered"
    assert 'm.impl("composite_norm", torch::kCPU, &fn)' in s["verdict"]
    text = py.read_text()
    assert "def _fake_composite_norm(x):" in text
    assert '@torch.library.register_fake("aclcap_synthreal::composite_norm")' not in text
    assert '  // m.impl("composite_norm", TORCH_FN(composite_norm_meta));' in cpp.read_text()
