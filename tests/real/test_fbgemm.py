"""FBGEMM_GPU-CPU 1.8.0, the pinned release of the `real` extra (torchrec's op library, a
TORCH_LIBRARY library with C++ and Python metas), as a real op library: its own metas
judged against its CPU kernels, and its sparse and quantize ops re-defined without metas,
synthesized from a recommendation step, and compared with the kernels and fbgemm's metas
on calls the step never made."""

from __future__ import annotations

import pytest

from tests.conftest import aclcap
from tests.real.synth_compare import MODELS, synthesize_and_compare

pytest.importorskip("fbgemm_gpu", reason="fbgemm-gpu-cpu is the corpus's (make corpus)")

FB = "fbgemm::"


def test_fbgemms_8bit_rowwise_metas_pad_rows_the_cpu_kernel_does_not():
    """A real finding in fbgemm-gpu-cpu 1.8.0: the metas of the fused 8-bit rowwise pair
    pad a row to 4 bytes ([R, 16] for 7 floats), as its CUDA kernel does; its CPU kernel
    gives [R, 15] and back [R, 7]. Under torch.compile on CPU the graph's buffers are the
    wrong size."""
    run = aclcap("check-meta", "--samples-from", str(MODELS / "fbgemm_rowwise_step.py"),
                 "--namespace", "fbgemm", "--json", "-")
    rows = {r["op"].removeprefix(FB): r for r in run.json()["results"]}
    assert {op for op, r in rows.items() if r["status"] == "fail"} == {
        "FloatToFused8BitRowwiseQuantized.default", "Fused8BitRowwiseQuantizedToFloat.default"}
    assert "fake impl output 0: shape [1, 16] dtype torch.uint8 strides [16, 1], but the " \
        "kernel gives shape [1, 15]" in rows["FloatToFused8BitRowwiseQuantized.default"][
            "reasons"][0]
    assert "fake impl output 0: shape [1, 8] dtype torch.float32 strides [8, 1], but the " \
        "kernel gives shape [1, 7]" in rows["Fused8BitRowwiseQuantizedToFloat.default"][
            "reasons"][0]
    assert run.code == 1


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    return synthesize_and_compare(
        tmp_path_factory.mktemp("fbgemm_synth"), "fbgemm_nofake",
        ["--samples-from", str(MODELS / "fbgemm_recsys_step.py")], "fbgemm_fake_compare.py")


@pytest.mark.slow  # the synthesis: about 25 s on 2 cores
def test_every_synthesized_fake_equals_the_cpu_kernel_on_unseen_calls(synthesized):
    """Bit rates 2 to 8 (`-(-C // (8 // bits)) + 4` bytes, `(C - 4) * (8 // bits)` back),
    int64 lengths (the cumsums follow their input's dtype), other heads (`(B * H * D) //
    (B * H)` columns): equal to the kernel on every call, and to fbgemm's metas but where
    those pad 8-bit rows; with weights given, which the step never passed, the permute's
    fake refuses the call rather than say None."""
    _, synthesis, compared = synthesized
    for op, report in compared.items():
        for call in report["calls"]:
            if op == "permute_1D_sparse_data" and call["call"] == "weights given":
                assert call["synthesized"].startswith("error: RuntimeError: weights given: "
                                                      "this fake saw no call with it"), call
                continue
            assert call["synthesized"] == call["kernel"], (op, call)
            if op != "Fused8BitRowwiseQuantizedToFloat":  # 7 floats: fbgemm's meta pads
                assert call["maintainers"] == call["kernel"], (op, call)
    assert all(s["status"] in ("verified", "failed") for s in synthesis.values()), synthesis


@pytest.mark.slow
def test_only_calls_a_kernel_misbehaves_on_hold_a_fake_back(synthesized):
    run, synthesis, compared = synthesized
    held = {op for op, r in compared.items() if r["held_back"]}
    for op in held:
        verdict = synthesis[op]["verdict"]
        assert "crashed" in verdict or "different in eager-mode" in verdict, (op, verdict)
    assert len(held) <= 2, {op: synthesis[op]["verdict"] for op in held}
    assert run.code == 1  # 13 missing metas
