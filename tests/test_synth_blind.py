"""check-meta --synthesize on the fourth fixture library (tests/fixtures/synth_blind.py):
what a user must be able to trust blind (issue 49). The same command writes the same files
and verdicts in every run; fakes follow a transposed input's layout where the kernel keeps
it; an output that is a view at one size only is a schema defect named with that size,
never verified; a strided window's length and a power are formulas, not data-dependent;
host lengths drawn with Python's random make the same calls in every worker."""

from __future__ import annotations

import pytest

from tests.test_synthesize import _ruff, _synthesis, compare_answers, synthesize_fixture

NS = "aclcap_synthblind::"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same synthesis twice, each in a fresh process: cold, then warm from the first's
    cache (its check-meta results, its built C++)."""
    cache = tmp_path_factory.mktemp("cache")
    made = []
    for name in ("cold", "warm"):
        out = tmp_path_factory.mktemp(name)
        made.append(synthesize_fixture(out, "synth_blind", "--synthesize-cpp",
                                       str(out / "blind.cpp"), "--timeout", "5",
                                       ACLCAP_CACHE_DIR=str(cache)))
    return made


def _rules(doc: dict) -> dict[str, list[str]]:
    return {op.removeprefix(NS).removesuffix(".default"): s["rule"]
            for op, s in _synthesis(doc).items()}


def test_a_cold_and_a_warm_run_write_the_same_files_and_verdicts(runs):
    (_, first, py1), (_, second, py2) = runs
    assert py1.read_bytes() == py2.read_bytes()
    assert py1.with_name("blind.cpp").read_bytes() == py2.with_name("blind.cpp").read_bytes()
    assert {op: s["verdict"] for op, s in _synthesis(first).items()} == \
        {op: s["verdict"] for op, s in _synthesis(second).items()}


def test_every_verified_fake_equals_its_answer_key_layouts_included(runs):
    _, doc, py = runs[0]
    synthesis = _synthesis(doc)
    verified = {op for op, s in synthesis.items() if s["status"] == "verified"}
    assert verified == set(synthesis) - {NS + "split_kv.default"}, \
        {op: s["verdict"] for op, s in synthesis.items()}
    compared = compare_answers("synth_blind", str(py),
                               answers="tests.fixtures.synth_blind_answers")
    assert compared["mismatches"] == []
    assert set(compared["checked"]) == verified
    assert _ruff(py).returncode == 0


def test_size_rules_of_real_kernels_are_formulas(runs):
    rules = _rules(runs[0][1])
    assert "(x.shape[-1] + 2 * padding - w.shape[-1]) // stride + 1" in rules["frame_conv"][0]
    assert "(degree + 1) ** pseudo.shape[-1]" in rules["spline_basis"][0]
    assert rules["host_lens"][0].startswith("out 0: [len(seq_lens), ")
    assert "stride order of x" in rules["trim_frames"][0]  # the None regime's clone


def test_an_alias_at_one_size_is_a_schema_defect_never_verified(runs):
    split = _synthesis(runs[0][1])[NS + "split_kv.default"]
    assert split["status"] != "verified"
    (defect, _) = split["defects"]
    assert defect["message"].startswith("output 0 is a view of `kv` at kv [1, ")
    assert defect["corrected_schema"] == ""  # no schema line says "a view at one size"


def test_the_cpp_meta_kernels_are_exact_where_cpp_can_say_the_rule(runs):
    """A list's length and a strided window in C++; a power with a symbolic exponent (no
    c10::SymInt operation) and an optional argument's regimes stay Python's, said so."""
    _, doc, py = runs[0]
    compared = compare_answers("synth_blind", doc["synthesis"]["cpp_library"],
                               answers="tests.fixtures.synth_blind_answers")
    assert compared["mismatches"] == []
    assert set(compared["checked"]) == {NS + f"{op}.default" for op in (
        "host_lens", "frame_conv", "random_walk")}
    source = py.with_name("blind.cpp").read_text()
    assert "static_cast<int64_t>(seq_lens.size())" in source
    assert "power with a symbolic exponent" in source


def test_a_call_that_hangs_is_named_and_skipped_and_the_op_keeps_the_others(runs):
    walk = _synthesis(runs[0][1])[NS + "random_walk.default"]
    assert walk["status"] == "verified", walk["verdict"]
    # p: 1 -> 0 hangs it once: that change is made no more, on another sample or chained
    # with another (torch-cluster's random_walk hung on 16 such calls, 20 s each, and lost
    # the op)
    assert walk["crashed_calls"] == ["p: 1 -> 0: hung (no answer in 5 s)"], walk


def test_a_custom_op_keeps_its_python_verdict_beside_the_cpp_file(runs):
    """No C++ Meta kernel serves a torch.library.custom_op (torch asks its fake slot): the
    C++ file says so once and has none, and the Python fake is verified and registered."""
    _, doc, py = runs[0]
    gate = _synthesis(doc)[NS + "gelu_gate.default"]
    assert gate["status"] == "verified" and gate["verified"] == {"python": True}, gate
    assert "a torch.library.custom_op: torch asks its own fake slot" in \
        py.with_name("blind.cpp").read_text()
    assert "register_fake(\"aclcap_synthblind::gelu_gate\"" in py.read_text()


def test_check_meta_gives_the_loaded_file_the_verdict_synthesis_gave(runs):
    """A fake synthesis verified passes check-meta once its file is loaded; the one it held
    back (split_kv, an alias at one size) stays without a meta there."""
    from tests.conftest import aclcap_process
    from tests.test_synthesize import FIXTURES

    _, doc, py = runs[0]
    statuses = {op: s["status"] for op, s in _synthesis(doc).items()}
    run = aclcap_process("check-meta", "--lib", str(FIXTURES / "synth_blind.py"), "--lib",
                         str(py), "--json", "-", "--timeout", "5")
    rows = {r["op"]: r["status"] for r in run.json()["results"]}
    for op, status in statuses.items():
        assert (rows[op] == "pass") == (status == "verified"), (op, rows[op], status)


def test_an_op_without_a_fake_says_what_torch_compile_does_at_it():
    """Issue 50 item 10: a torch.library.custom_op with no fake fails the whole trace
    ("RuntimeError when making fake tensor call"); a Library.define op graph-breaks."""
    from tests.conftest import aclcap_process
    from tests.test_synthesize import FIXTURES

    run = aclcap_process("check-meta", "--lib", str(FIXTURES / "synth_blind.py"), "--json", "-")
    said = {r["op"].split("::")[1]: r["findings"][0]["message"] for r in run.json()["results"]}
    assert said["gelu_gate.default"].startswith(
        "no meta impl: torch.compile's trace fails whole at it (a torch.library.custom_op)")
    assert said["split_kv.default"].startswith("no meta impl: torch.compile graph-breaks here")
