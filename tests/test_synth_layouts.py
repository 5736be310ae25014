"""check-meta --synthesize on the layouts fixture library (tests/fixtures/synth_layouts.py):
kernels whose output layout or aliasing changes with a regime or a size, on which an
independent trial found synthesis calling wrong fakes verified (issue 58 item 1). Every
tensor is also observed transposed and as a strided slice in each regime a variation opens
(an optional argument left out, a float at zero), so the fake keeps the input's layout
exactly where the kernel does; a kernel that returns views at one token and copies at
others is a schema defect named with the size, and no fake is registered for it."""

from __future__ import annotations

import pytest

from tests.test_synthesize import _synthesis, compare_answers, synthesize_fixture

NS = "aclcap_synthlayout::"


@pytest.fixture(scope="module")
def layouts_run(tmp_path_factory):
    return synthesize_fixture(tmp_path_factory.mktemp("synthlayouts"), "synth_layouts")


def test_fakes_keep_the_input_layout_in_the_regime_the_kernel_does(layouts_run):
    _, doc, py = layouts_run
    synthesis = _synthesis(doc)
    verified = {op for op, s in synthesis.items() if s["status"] == "verified"}
    assert verified == {NS + "keep_or_clip.default", NS + "temp_softmax.default"}, \
        {op: s["verdict"] for op, s in synthesis.items()}
    # transposed and strided inputs in both regimes, and one token: strides and aliasing
    # equal to the kernel's and to the answer key's
    compared = compare_answers("synth_layouts", str(py))
    assert compared["mismatches"] == []
    assert set(compared["checked"]) == verified
    text = py.read_text()
    assert "if limit is not None:\n        return x.new_empty(x.shape)\n    else:\n" \
           "        return torch.empty_like(x)" in text
    assert "if temperature == 0:\n        return torch.empty_like(logits)" in text


def test_an_alias_at_one_token_only_is_a_schema_defect_with_no_fake(layouts_run):
    run, doc, py = layouts_run
    halves = _synthesis(doc)[NS + "halves.default"]
    assert halves["status"] == "not_registered", halves["verdict"]
    assert halves["defects"][0]["message"].startswith("output 0 is a view of `x` at x [1, ")
    text = py.read_text()
    assert '@torch.library.register_fake("aclcap_synthlayout::halves")' not in text
    assert "# NOT REGISTERED" in text.split("def _fake_halves")[0].rsplit("\n\n", 1)[-1]
    assert run.code == 1
