"""Host values in a captured step (ints, floats, lists beside tensors): accepted, padded,
every value a graph freezes named with its op, argument and line, staleness proven on a
second draw, and a value consumed only by a splitting op told apart as live."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aclcap.errors import UsageError
from tests.conftest import ROOT, aclcap

MODELS = ROOT / "tests" / "models"
HOST_LIST = ROOT / "examples" / "host_seq_lens.py"
TENSOR_LIST = ROOT / "examples" / "tensor_seq_lens.py"
FROZEN_KEYS = {"size", "op", "arg", "file", "line", "code", "source", "captured", "this_step",
               "changes_result", "frozen"}


def _spec(path):
    from aclcap.loading.model_file import load_model_file

    return load_model_file(path)


def test_make_inputs_takes_host_values_and_names_a_bad_element(tmp_path):
    from aclcap.loading.model_file import make_step_inputs, size_dims

    spec = _spec(HOST_LIST)
    args = make_step_inputs(spec, 3, "cpu", torch.float32)
    assert isinstance(args[3], list) and len(args[3]) == 3
    assert size_dims(spec, "cpu", torch.float32)[3] == [0]  # the list's length is the size
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef build_model(d, t): return torch.nn.Identity()\n"
                   "def make_inputs(s, d, t): return torch.ones(s), {'seq_lens': [1]}\n")
    with pytest.raises(UsageError, match=r"element 1 is a dict: return tensors, or host values"):
        make_step_inputs(_spec(bad), 2, "cpu", torch.float32)


def test_padding_repeats_the_last_entry_of_a_host_list():
    from aclcap.graph.padding import pad_to, unpad

    args = (torch.arange(3.0)[:, None], [5, 6, 7], 0.5)
    padded = pad_to(args, [[0], [0], []], 3, 5)
    assert padded[1] == [5, 6, 7, 7, 7] and padded[2] == 0.5
    assert padded[0][:, 0].tolist() == [0, 1, 2, 2, 2]
    assert unpad(padded, [[0], [0], []], 3)[1] == [5, 6, 7]


class _Scaled(torch.nn.Module):
    def forward(self, x, scale, lengths):
        return torch.ops.aten.mul.Scalar(x, scale) + torch.tensor(lengths)[:, None]


def test_frozen_argument_named_with_capture_and_step_values():
    from aclcap.capture.frozen import HostValues

    model, here = _Scaled(), ROOT / "tests" / "test_host_values.py"
    draw = [(torch.ones(2, 3), s, [1, 2]) for s in (2.0, 3.0, 4.0)]
    host = HostValues(model, here, draw[0])
    found = host.at_size(2, draw[0], draw[1:], [False, True])
    mul = next(f for f in found if f.op == "aten::mul")
    assert (mul.arg, mul.captured, mul.this_step, mul.source) == ("other", 2.0, 3.0,
                                                                  "input scale")
    line = _Scaled.forward.__code__.co_firstlineno + 1  # the line of the mul call
    assert mul.changes_result and mul.frozen and mul.line == line
    same = next(f for f in found if f.op == "torch.tensor")
    assert same.captured == same.this_step == [1, 2] and not same.changes_result
    assert host.constants() == {"lengths": [1, 2]}  # the note: the same in every draw


def test_host_read_found_and_a_kernels_own_read_is_not():
    from aclcap.capture.host_uses import record_step

    spec = _spec(MODELS / "host_read.py")
    model = spec.build_model(torch.device("cpu"), torch.float32)
    (read,) = record_step(model, spec.make_inputs(4, "cpu", torch.float32), spec.path).reads
    assert (read.what, read.site.line, read.site.code) == ("tolist()", 9,
                                                           "sizes = lengths.tolist()")
    tensor = _spec(TENSOR_LIST)  # its kernel reads the lengths tensor: inside the op
    model = tensor.build_model(torch.device("cpu"), torch.float32)
    assert not record_step(model, tensor.make_inputs(2, "cpu", torch.float32),
                           tensor.path).reads


def test_host_read_fails_full_capture_with_the_fix(tmp_path):
    run = aclcap("capture", str(MODELS / "host_read.py"), "--shapes", "2,4", "--json", "-")
    assert run.code == 1
    doc = run.json()
    reason = doc["results"][0]["reasons"][0]
    assert reason.startswith("reads tensor data on the host (tolist()) at host_read.py:9")
    assert "cannot live in a graph" in reason and "take it as a Tensor argument" in reason
    site = {"file": str(MODELS / "host_read.py"), "line": 9, "code": "sizes = lengths.tolist()"}
    assert doc["host_reads"] == [{"what": "tolist()", **site, "made_at": site}]


def test_a_library_read_the_compiled_step_skips_is_no_finding():
    """transformers' mask helpers read a mask on the host only when not compiling: the eager
    step makes the read, the traced one never does, and only the traced one decides."""
    run = aclcap("capture", str(MODELS / "library_reads" / "read_eager_only.py"),
                 "--shapes", "2,4", "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    doc = run.json()
    assert doc["host_reads"] == [] and doc["trace"]["graph_breaks"] == []
    assert all(r["status"] == "pass" for r in doc["results"])


def test_a_library_read_the_compiled_step_makes_names_the_library_line_and_the_model_line():
    run = aclcap("capture", str(MODELS / "library_reads" / "read_always.py"),
                 "--shapes", "2,4", "--json", "-")
    assert run.code == 1
    doc = run.json()
    reason = doc["results"][0]["reasons"][0]
    assert reason.startswith("the step branches on a tensor's values at masks.py:15 "
                             "(`if mask.all():`), through read_always.py:9"), reason
    (read,) = doc["host_reads"]
    assert (read["line"], read["made_at"]["line"]) == (9, 15)
    assert read["made_at"]["file"].endswith("masks.py")


def test_host_list_example_frozen_in_full_mode_live_in_piecewise():
    full = aclcap("capture", str(HOST_LIST), "--shapes", "2", "--json", "-")
    assert full.code == 1
    doc = full.json()
    (frozen,) = doc["frozen_values"]
    assert set(frozen) == FROZEN_KEYS
    assert (frozen["op"], frozen["arg"], frozen["source"]) == (
        "aclcap_example::attention_host_lens", "seq_lens", "input seq_lens")
    assert frozen["file"].endswith("decode_math.py") and frozen["frozen"]
    assert frozen["changes_result"] and frozen["captured"] != frozen["this_step"]
    reason = doc["results"][0]["reasons"][0]
    assert reason.startswith("frozen at capture: aclcap_example::attention_host_lens(seq_lens)"
                             f" at decode_math.py:{frozen['line']}, from input seq_lens: "
                             f"captured {frozen['captured']}")

    piecewise = aclcap("capture", str(HOST_LIST), "--shapes", "2,4", "--pad",
                       "--graph-mode", "piecewise", "--json", "-")
    assert piecewise.code == 0, piecewise.stdout
    doc = piecewise.json()
    assert [(r["size"], r["padded_to"], r["status"]) for r in doc["results"]] == [
        (2, None, "pass"), (3, 4, "pass"), (4, None, "pass")]
    assert doc["frozen_values"] and not any(f["frozen"] for f in doc["frozen_values"])
    assert "live: its op runs eagerly between graph pieces" in " ".join(piecewise.stderr.split())


def test_tensor_lengths_pass_both_modes():
    for mode in ("full", "piecewise"):
        run = aclcap("capture", str(TENSOR_LIST), "--shapes", "2,4", "--graph-mode", mode,
                     "--json", "-")
        assert run.code == 0, run.stdout
        assert run.json()["frozen_values"] == []


def test_a_random_bool_that_changes_the_result_fails_on_every_run():
    """A per-step bool drawn at random: each replay's draw is chosen to flip it, and the
    draws are seeded, so the verdict is the same on every run (it flipped between 0 and 1
    while a second draw equalled the first half the time)."""
    runs = [aclcap("capture", str(MODELS / "host_bool_bias.py"), "--shapes", "2", "--json", "-")
            for _ in range(3)]
    assert [r.code for r in runs] == [1, 1, 1]
    docs = [r.json() for r in runs]
    # The same draws every run (the weights are the model file's own, unseeded).
    assert all(d["results"][0]["reasons"][0] == docs[0]["results"][0]["reasons"][0]
               for d in docs)
    (frozen,) = docs[0]["frozen_values"]
    assert frozen["arg"] == "add_bias" and frozen["changes_result"]
    assert frozen["captured"] is not frozen["this_step"]
    assert docs[0]["host_constants"] == {}


def test_only_the_host_values_that_change_the_result_are_blamed():
    run = aclcap("capture", str(MODELS / "host_four_values.py"), "--shapes", "2", "--json", "-")
    assert run.code == 1
    blamed = {f["arg"]: f["changes_result"] for f in run.json()["frozen_values"]}
    assert blamed == {"seq_lens": True, "temperature": True, "max_seq_len": False,
                      "num_splits": False}
    reasons = run.json()["results"][0]["reasons"]
    assert [r.split(" at host_four")[0] for r in reasons if r.startswith("frozen at")] == [
        "frozen at capture: host_four::attend(seq_lens)",
        "frozen at capture: host_four::attend(temperature)"]


def test_a_draw_is_chosen_to_change_every_host_value_or_says_which_it_could_not():
    from aclcap.capture.fresh import VARY_TRIES, varied_draw

    draws = iter([(0, True, 5), (0, False, 5), (0, False, 6)])
    args, same = varied_draw(lambda: next(draws), (0, True, 5), [1, 2])
    assert args == (0, False, 6) and same == []
    calls = []
    args, same = varied_draw(lambda: calls.append(1) or (0, True, 5), (0, True, 5), [1, 2])
    assert same == [1, 2] and len(calls) == VARY_TRIES


def test_a_forward_context_set_by_make_inputs_is_named_as_the_frozen_cause():
    """Issue 44: metadata set on a module-level object (vLLM's forward context) gave rows
    `output 0 differs from eager` and no host-values section; with every size drawn before
    any ran, the step even read one size's metadata beside another's tensors (exit 3)."""
    run = aclcap("capture", str(MODELS / "forward_context.py"), "--shapes", "4", "--json", "-")
    assert run.code == 1, run.stdout + run.stderr
    (frozen,) = run.json()["frozen_values"]
    assert frozen["arg"] == "seq_lens" and frozen["changes_result"] and frozen["frozen"]
    assert frozen["source"] == "CONTEXT.seq_lens, set by make_inputs outside its inputs"
    assert run.json()["results"][0]["reasons"][0].startswith(
        "frozen at capture: fctx::attend(seq_lens) at forward_context.py:")
    sizes = aclcap("capture", str(MODELS / "forward_context.py"), "--shapes", "2,4")
    assert sizes.code == 1 and "internal error" not in sizes.stdout + sizes.stderr


def test_an_aten_ops_own_internal_sizes_are_not_host_values():
    """Issue 44: einsum's internal `aten::view(size)` was listed among frozen values. The ops
    a torch function runs when given no host value are its own; a reshape by a host int
    stays the step's."""
    from aclcap.capture.host_uses import record_step

    class Step(torch.nn.Module):
        def forward(self, x, w, n):
            return torch.einsum("bij,bjk->bik", x, w).reshape(n, -1) * 2

    record = record_step(Step(), (torch.randn(2, 3, 4), torch.randn(2, 4, 5), 6), None)
    assert [(c.op, c.args) for c in record.calls] == [
        ("aten::view", {"size": [6, -1]}), ("aten::mul", {"other": 2})]


class _EveryArgType(torch.nn.Module):
    """Ops that take a list (`view`), an int (`narrow`), a bool (`keepdim`) and a float
    (`mul`) argument beside a host input of any type, fed to the op of its own type."""

    def forward(self, x, value):
        h = x.view(-1, 2, 2).sum(-1, keepdim=True).narrow(0, 0, 1).reshape(1, 2)
        if isinstance(value, bool):
            return h.sum(-1, keepdim=value)
        if isinstance(value, int):
            return h.narrow(1, 0, 1 + value % 2)
        if isinstance(value, float):
            return torch.ops.aten.mul.Scalar(h, value)
        return h * torch.tensor(value, dtype=torch.float32).sum()


_SCALAR = st.one_of(st.booleans(), st.integers(-3, 3),
                    st.floats(-4, 4, width=32).filter(lambda f: f != 0))
_HOST = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=3), st.tuples(_SCALAR, _SCALAR))


@settings(max_examples=60, deadline=None)
@given(value=_HOST, other=_HOST)
def test_a_constant_host_value_of_any_type_beside_ops_of_every_argument_type(value, other):
    """Issue 50: a constant float beside an op taking a list (`.view(-1, 4, 4)`) was exit 3
    (`_constant_keys` took `list(0.8)`). Every host type against every argument type: the
    analysis never raises, and a constant float or list is noted where an op takes it."""
    from aclcap.capture.frozen import HostValues
    from aclcap.host_values import carries

    assert carries(value, value) and carries(other, value) == carries(value, other)
    model, here = _EveryArgType(), ROOT / "tests" / "test_host_values.py"
    draws = [(torch.randn(4, 4), value) for _ in range(3)]
    host = HostValues(model, here, draws[0])
    found = host.at_size(4, draws[0], draws[1:], [True, True])
    assert host.constants() == {"value": value}
    held = [f for f in found if f.source == "input value"]
    assert all(carries(f.captured, value) for f in held), found
    if isinstance(value, float) or (isinstance(value, (list, tuple)) and not any(
            isinstance(v, bool) for v in value)):  # torch.tensor turns a bool into a number
        assert held, found


@pytest.mark.parametrize("mode", ["full", "piecewise"])
def test_a_constant_temperature_beside_a_view_passes_with_its_constant_noted(mode):
    """Issue 50: this 20-line step was `internal error: TypeError: 'float' object is not
    iterable` (exit 3) in both modes."""
    run = aclcap("capture", str(MODELS / "constant_temperature.py"), "--graph-mode", mode,
                 "--shapes", "2,4", "--device", "cpu", "--json", "-")
    assert run.code == 0, run.stdout + run.stderr
    doc = run.json()
    assert {f["arg"]: (f["captured"], f["source"]) for f in doc["frozen_values"]} == {
        "other": (0.8, "input temperature")}


def test_a_read_every_layer_makes_at_one_line_is_printed_once_with_its_count():
    """jetmoe printed its experts' `.tolist()` once per layer and size, the same line 4 times."""
    run = aclcap("capture", str(MODELS / "host_read_layers.py"), "--shapes", "2")
    assert run.code == 1
    text = " ".join(run.stdout.split())
    assert text.count("reads tensor data on the host (tolist()) at host_read_layers.py:10 "
                      "(`sizes = lengths.tolist()`) (2 times a step): the traced step breaks "
                      "there") == 1, run.stdout
