"""The lint's rules: each one's name, stable id, one-line description and fix. Apart from
meta/lint.py (which needs tree-sitter), and in the bottom layer, so that findings
(status.py) and reports read ids cheaply without importing meta/."""

from __future__ import annotations

_DATA_DEPENDENT = ("data-dependent: use torch.library.get_ctx().new_dynamic_size() for an "
                   "output size that depends on values")
HINTS = {
    "size()": "use sym_size(i): size(i) specializes the dim",
    "sizes()": "use sym_sizes(): sizes() specializes every dim",
    "numel()": "use sym_numel(): numel() specializes the element count",
    "at::empty({...})": "use at::empty_symint(c10::SymDimVector{...}, options): a braced list "
                        "of sizes is int64_t",
    "empty_symint({...})": "spell the sizes c10::SymDimVector{...}: a bare braced list can "
                           "pick the int64_t overload",
    "std::vector<int64_t>": "hold shapes in c10::SymDimVector",
    "SmallVector<int64_t>": "hold shapes in c10::SymDimVector (SmallVector<c10::SymInt, N>)",
    ".item()": _DATA_DEPENDENT,
    ".tolist()": _DATA_DEPENDENT,
    "int(size)": "keep sizes symbolic: use the SymInt itself, not int()",
}
# Stable rule ids (docs/check-meta.md: lint rules), the code SARIF, GitHub annotations and the text
# format print: a rule's name may be reworded, its id never changes. 1xx: C++, 2xx: Python.
RULE_IDS = {
    "size()": "ACL101",
    "sizes()": "ACL102",
    "numel()": "ACL103",
    "at::empty({...})": "ACL104",
    "empty_symint({...})": "ACL105",
    "std::vector<int64_t>": "ACL106",
    "SmallVector<int64_t>": "ACL107",
    ".item()": "ACL201",
    ".tolist()": "ACL202",
    "int(size)": "ACL203",
}

# What each rule finds, in a line: SARIF's shortDescription and docs/check-meta.md's rule table.
SUMMARIES = {
    "size()": "a meta impl reads a dim as an int64_t with size(i)",
    "sizes()": "a meta impl reads every dim as int64_t with sizes()",
    "numel()": "a meta impl reads the element count as an int64_t with numel()",
    "at::empty({...})": "a factory gets a braced list of int64_t sizes",
    "empty_symint({...})": "an empty_symint with an int64_t overload gets a bare braced list",
    "std::vector<int64_t>": "a meta impl holds a shape in std::vector<int64_t>",
    "SmallVector<int64_t>": "a meta impl holds a shape in SmallVector<int64_t>",
    ".item()": "a fake impl reads a tensor's value with .item()",
    ".tolist()": "a fake impl reads a tensor's values with .tolist()",
    "int(size)": "a fake impl turns a symbolic size into a Python int",
}
