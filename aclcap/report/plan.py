"""`aclcap capture --plan-sizes`: the chosen sizes against vLLM's default list."""

from __future__ import annotations

from rich.console import RenderableType

from aclcap.report.layout import document, line


def render(plan: dict, width: int | None = None) -> list[RenderableType]:
    """Four lines, wrapped by the console at any width."""
    over = len(plan["vllm_default_sizes"]) > plan["budget"]
    return [line(text) for text in (
        f"capture sizes for a budget of {plan['budget']} graphs ({plan['distribution']}): "
        f"{','.join(map(str, plan['sizes']))}",
        f"expected padding waste: {plan['expected_waste']:.2f} tokens per step",
        f"vLLM's default list ({len(plan['vllm_default_sizes'])} sizes"
        + (", over the budget" if over else "") + f"): {plan['vllm_default_waste']:.2f} tokens "
        "per step",
        f"use: --shapes {','.join(map(str, plan['sizes']))}")]


def to_document(plan: dict) -> dict:
    return document("capture --plan-sizes", "any", [plan])
