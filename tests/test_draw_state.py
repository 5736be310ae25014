"""The state make_inputs sets outside its return value (a forward context) is taken with its
draw and put back before a run on that draw, whatever was drawn since."""

from __future__ import annotations

from dataclasses import dataclass, field

from aclcap.draw_state import changes, named, remember, restore, sets_state, snapshot


@dataclass
class Context:
    seq_lens: list[int] = field(default_factory=list)


def test_each_draw_gets_its_own_context_back_and_names_it():
    namespace = {"CONTEXT": Context(), "STEP": 0}

    def draw(lens: list[int], step: int) -> tuple:
        before = snapshot(namespace)
        namespace["CONTEXT"].seq_lens = lens  # an attribute set
        namespace["STEP"] = step  # a global rebound
        args = (len(lens),)
        remember(args, changes(namespace, before))
        return args

    first, second = draw([3, 5], 1), draw([7], 2)
    restore(first)
    assert namespace["CONTEXT"].seq_lens == [3, 5] and namespace["STEP"] == 1
    namespace["CONTEXT"].seq_lens.append(9)  # a step that mutates it spoils no draw
    restore(second)
    restore(first)
    assert namespace["CONTEXT"].seq_lens == [3, 5]
    assert named(first, [3, 5], lambda a, b: a == b) == "CONTEXT.seq_lens"
    assert sets_state(first) and not sets_state((1,))


def test_a_list_changed_in_place_is_state_and_functions_are_not():
    namespace = {"LENS": [1, 2], "helper": len}
    before = snapshot(namespace)
    namespace["LENS"].append(3)
    (change,) = changes(namespace, before)
    assert change.name == "LENS" and change.value == [1, 2, 3]
