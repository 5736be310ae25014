"""check-meta --synthesize where the fault is the kernel's (tests/fixtures/synth_faults.py):
a kernel whose two eager runs on the same inputs differ for one input dtype (bitsandbytes'
dequantize_blockwise with a bfloat16 `code`) keeps its correct fake, registered, and the
report names the fault and the dtype that triggers it; ops torch makes the fake of from
their tag (torch.Tag.out, torch.Tag.inplace) are never synthesized, torch's fake is checked
against the kernel like any fake, and a fake of one's own on such an op is flagged."""

from __future__ import annotations

import pytest
import torch

from aclcap.meta.observe import observe, observed_inputs
from aclcap.meta.sample_inputs import SampleInput
from aclcap.meta.synthesize.faults import (
    FaultyCall,
    difference,
    input_class,
    observe_twice,
    without_faults,
)
from aclcap.meta.synthesize.pipeline import Synthesis
from aclcap.meta.synthesize.rules import OpRule
from tests.test_synthesize import _synthesis, compare_answers, synthesize_fixture

NS = "aclcap_synthfaults::"
TAGGED = [NS + "pad.out", NS + "scale.out", NS + "scale_.default"]


@pytest.fixture(scope="module")
def faults_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthfaults")
    stubs = out / "stubs.py"
    return (*synthesize_fixture(out, "synth_faults", "--emit-stubs", str(stubs)), stubs)


def _rows(doc: dict) -> dict[str, dict]:
    return {r["op"]: r for r in doc["results"]}


def test_a_kernel_fault_keeps_the_correct_fake_registered_and_names_the_dtype(faults_run):
    run, doc, py, _ = faults_run
    s = _synthesis(doc)[NS + "dequant.default"]
    assert s["status"] == "verified", s["verdict"]
    assert s["rule"] == ["out 0: [*a.shape], dtype of scale, contiguous"]
    [finding] = s["kernel_findings"]
    assert finding.startswith("two eager runs on the same inputs differ when `code` is "
                              "bfloat16 or float16 (")
    assert "output 0's values differ)" in finding
    assert _synthesis(doc)[NS + "scale_rows.default"]["kernel_findings"] == []
    assert f"    KERNEL FINDING: {finding}" in run.stdout.splitlines()
    source = py.read_text()
    assert '@torch.library.register_fake("aclcap_synthfaults::dequant")' in source
    assert "KERNEL FINDING: two eager runs" in source
    # The kernel is broken: the run fails, and its last line says why.
    assert run.code == 1
    assert "1 op(s) whose kernel gives two eager runs on the same inputs differently" in \
        " ".join(run.stdout.split())


def test_the_fakes_equal_their_answer_keys_and_only_the_kernel_differs_from_compile(
        faults_run):
    _, _, py, _ = faults_run
    compared = compare_answers("synth_faults", str(py))
    assert compared["checked"] == {NS + "dequant.default": 2, NS + "scale_rows.default": 2}
    # bitsandbytes' users' line, where it belongs: the kernel's garbage under a bfloat16 code
    assert compared["mismatches"] == [
        f"{NS}dequant.default at [(5, 8), (256,), (5, 1)]: torch.compile result 0 (outputs, "
        "then inputs) differs from eager"]


def test_tagged_ops_are_left_to_torch_whose_fake_is_checked_like_any(faults_run):
    run, doc, py, stubs = faults_run
    assert set(_synthesis(doc)) == {NS + "dequant.default", NS + "scale_rows.default"}
    assert doc["synthesis"]["left_to_torch"] == TAGGED
    assert "3 op(s) not synthesized, torch generates their fake from their tag" in run.stdout
    for name in ("pad.out", "scale.out", "scale_"):
        assert f'register_fake("aclcap_synthfaults::{name}")' not in py.read_text() + \
            stubs.read_text()
    rows = _rows(doc)
    assert rows[NS + "scale.out"]["status"] == "pass"
    assert rows[NS + "scale.out"]["sample_count"] == 2
    # the meta device has no generated kernel: a note, not advice to register a fake
    assert [f["severity"] for f in rows[NS + "scale.out"]["findings"]] == ["note"]
    assert rows[NS + "scale.out"]["meta_source"] == (
        "none; torch generates its fake (torch.Tag.out: returns its out= arguments)")
    # pad.out resizes its `out`: torch's generated fake returns it as given, and is caught
    messages = [f["message"] for f in rows[NS + "pad.out"]["findings"]]
    assert rows[NS + "pad.out"]["status"] == "fail"
    assert "fake impl output 0: shape [6] dtype torch.float32 strides [1], but the kernel " \
        "gives shape [8] dtype torch.float32 strides [1]" in messages


def test_a_fake_of_ones_own_on_a_tagged_op_is_flagged(faults_run):
    _, doc, _, _ = faults_run
    row = _rows(doc)[NS + "scale_.default"]
    assert row["status"] == "pass"
    assert {"severity": "warning", "message": (
        "registers a fake of its own, but torch generates this op's fake (torch.Tag.inplace: "
        "returns its first argument): the registered one replaces torch's (torch warns it is "
        "unnecessary on a torch.library.custom_op); drop it")} in row["findings"]


@pytest.fixture(scope="module")
def dequant():
    from tests.fixtures import synth_faults  # noqa: F401  (registers the ops)

    return torch.ops.aclcap_synthfaults.dequant.default


def _dequant_sample(code_dtype: torch.dtype) -> SampleInput:
    a = torch.randint(0, 256, (4, 64), dtype=torch.uint8)
    return SampleInput((a, torch.linspace(-1, 1, 256, dtype=code_dtype), torch.rand(4, 1)))


def test_the_verifying_worker_leaves_out_calls_whose_eager_runs_differ(dequant):
    clean, faulty = _dequant_sample(torch.float32), _dequant_sample(torch.bfloat16)
    kept, findings = without_faults(dequant, [clean, faulty])
    assert kept == [clean]
    assert len(findings) == 1 and findings[0].startswith(
        "two eager runs on the same inputs differ when `code` is bfloat16 (1 call(s), e.g. "
        "output 0's values differ)")
    assert findings[0].endswith("those calls are left out of verification")


_abort_lib = torch.library.Library("aclcap_synthabort", "DEF")
_abort_lib.define("rows(Tensor x) -> Tensor")


def _rows_kernel(x: torch.Tensor) -> torch.Tensor:
    """Aborts the process on 3 rows, as a kernel that wrote past what it owns dies later."""
    if x.shape[0] == 3:
        import os

        os.abort()
    return x * 2


_abort_lib.impl("rows", _rows_kernel, "CPU")


def test_an_isolated_verification_leaves_a_crashing_call_out_and_goes_on():
    """A verifying worker that ran a heap-corrupting call aborted on a later check, and a
    right fake read as "verification FAILED: crashed" (fbgemm's permute_1D_sparse_data):
    for an op that crashed while observed, each call runs twice in a child of its own."""
    op = torch.ops.aclcap_synthabort.rows.default
    clean, crashing = SampleInput((torch.ones(2, 4),)), SampleInput((torch.ones(3, 4),))
    kept, findings = without_faults(op, [clean, crashing, clean], isolate=True)
    assert kept == [clean, clean]
    assert len(findings) == 1 and "(1 call(s), e.g. crashed (signal 6: SIGABRT))" in \
        findings[0], findings


def test_calls_nothing_tells_apart_are_named_by_what_changed(dequant):
    run, differs = observe_twice(dequant, _dequant_sample(torch.bfloat16))
    assert differs == "output 0's values differ"
    faulty = [FaultyCall(run.call, f"variation {i}", differs) for i in range(5)]
    assert input_class(faulty, [run.call]) == (
        "on variation 0; variation 1; variation 2 and 2 more")


def test_a_fault_on_some_runs_only_still_names_its_dtype_with_the_count(dequant):
    """What lies past a buffer may be the same twice: bitsandbytes' quantize_blockwise left
    one of five bfloat16-code calls clean in a run. The class holds most of them."""
    def call(code_dtype: torch.dtype):
        sample = _dequant_sample(code_dtype)
        return observed_inputs(dequant, sample.args, sample.kwargs)

    faulty = [FaultyCall(call(torch.bfloat16), f"variation {i}", "x") for i in range(2)]
    clean = [*(call(torch.float32) for _ in range(3)), call(torch.bfloat16)]
    assert input_class(faulty, clean) == "when `code` is bfloat16 (2 of 3 such calls)"
    assert input_class(faulty, [*clean, call(torch.bfloat16)]).startswith("on variation 0")


def test_random_draws_and_rounding_are_no_kernel_finding():
    x = torch.randn(64)
    assert observe_twice(torch.ops.aten.rand_like.default, SampleInput((x,)))[1] == ""
    mul = torch.ops.aten.mul.Tensor
    run = observe(mul, (x, x))
    assert difference(mul, run, observe(mul, (x * (1 + 1e-7), x))) == ""
    assert difference(mul, run, observe(mul, (x + 1, x))) == "output 0's values differ"


def test_no_held_out_call_left_is_said_not_verified():
    rule = OpRule("ns::op.default", "op(Tensor x) -> Tensor", [])
    s = Synthesis("ns::op.default", rule, unseen_keys=["k"], verified={"python": ""},
                  unverified="no held-out call was left whose two eager runs agree")
    assert not s.ok
    assert s.verdict() == ("synthesized, NOT verified: no held-out call was left whose two "
                           "eager runs agree")
    assert s.to_dict()["status"] == "not_verified"


def test_a_fault_only_on_calls_aclcap_varied_warns_and_fails_nothing():
    """vLLM's rms_norm with its hidden size grown without its weight reads the weight past
    its end: a call outside the op's contract that aclcap made, not the library's fault as
    callers call it. Only a fault on a sample as given fails the run."""
    from aclcap.meta.observe import DECLARED, VARIATION, ObservedCall
    from aclcap.meta.synthesize.faults import FaultyCall
    from aclcap.meta.synthesize.observation import Observation

    def call(phase: str) -> ObservedCall:
        return ObservedCall("ns::op.default", (), (), phase=phase)

    varied = Observation(calls=[call(DECLARED)],
                         faulty=[FaultyCall(call(VARIATION), "x dim 1: 64 -> 128", "values")])
    assert varied.to_dict()["kernel_findings"] == []
    [warning] = varied.to_dict()["kernel_warnings"]
    assert warning.endswith("only on calls aclcap varied from the samples, which may be "
                            "outside the op's contract")
    given = Observation(calls=[], faulty=[FaultyCall(call(DECLARED), "", "values")])
    assert len(given.to_dict()["kernel_findings"]) == 1
    assert given.to_dict()["kernel_warnings"] == []


def test_a_fault_on_values_aclcap_set_at_the_samples_sizes_only_warns():
    """vLLM's gated delta rule races when every state index is 0 (`every value its least`):
    such a variation has its sample's key (sizes, not values), and was read as the sample
    as given, so the test of a verified fake failed now and then on a kernel finding."""
    from aclcap.meta.observe import DECLARED, VARIATION, ObservedCall
    from aclcap.meta.synthesize.observation import Observation, call_key
    from aclcap.meta.variations import VALUES_LEAST

    sample, varied = (ObservedCall("ns::op.default", (), (), phase=p) for p in (DECLARED,
                                                                             VARIATION))
    raced = Observation(calls=[sample], given={call_key(sample)}, faulty=[
        FaultyCall(varied, f"indices: {VALUES_LEAST}", "values")])
    assert raced.to_dict()["kernel_findings"] == [] and raced.to_dict()["kernel_warnings"]
    same = Observation(calls=[sample], given={call_key(sample)}, faulty=[
        FaultyCall(varied, "x: float32 -> float16", "values")])  # a given call made again
    assert same.to_dict()["kernel_findings"] and same.to_dict()["kernel_warnings"] == []
