"""check-meta --lint: find meta impls that use concrete sizes. `size()`, `numel()` or
`at::empty({...})` in a C++ Meta kernel, and `int(t.shape[i])`, `.item()` or `.tolist()` in
a Python fake, turn symbolic dims into constants and break dynamic-shape tracing
(vllm-ascend rewrote its meta kernels for this and added a pre-commit lint). A line with a
`symbolic-meta-ok:` comment (giving the reason) is exempt. No existing linter knows which
functions are meta impls, so this one is written here."""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from pathlib import Path

ESCAPE = "symbolic-meta-ok:"

CPP_RULES = (
    (re.compile(r"\.size\s*\("), "size()", "use sym_size(i): size(i) specializes the dim"),
    (re.compile(r"\.numel\s*\("), "numel()", "use sym_numel()"),
    (re.compile(r"\.sizes\s*\(\s*\)"), "sizes()", "use sym_sizes() (c10::SymDimVector)"),
    (re.compile(r"at::empty\s*\(\s*\{"), "at::empty({...})",
     "use at::empty_symint(sym sizes, options)"),
    (re.compile(r"std::vector\s*<\s*int64_t\s*>"), "std::vector<int64_t>",
     "hold shapes in c10::SymDimVector"),
)
_META_BLOCK = re.compile(r"TORCH_LIBRARY_IMPL\s*\(\s*\w+\s*,\s*Meta\s*,\s*\w+\s*\)\s*\{(.*?)\n\}",
                         re.DOTALL)
_IMPL_FN = re.compile(r"m\.impl\s*\([^,]+,\s*(?:TORCH_FN\s*\()?\s*&?([\w:]+)")


@dataclass
class Finding:
    file: str
    line: int
    rule: str
    code: str
    hint: str

    def row(self) -> dict:
        return asdict(self)


def _sources(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".cpp", ".cc", ".h", ".py")
                            and "build" not in p.parts)
        elif path.exists():
            files.append(path)
    return files


def _meta_function_names(cpp_files: list[Path]) -> set[str]:
    """Functions registered for the Meta key anywhere in the sources (unqualified)."""
    names = set()
    for path in cpp_files:
        for block in _META_BLOCK.findall(path.read_text(errors="replace")):
            names |= {fn.split("::")[-1] for fn in _IMPL_FN.findall(block)}
    return names


def _function_bodies(text: str, names: set[str]) -> list[tuple[int, int]]:
    """(start, end) character spans of the bodies of C++ functions called `names`."""
    spans = []
    for name in names:
        for match in re.finditer(rf"\b{re.escape(name)}\s*\([^;{{]*\)\s*(?:const\s*)?\{{", text):
            depth, i = 1, match.end()
            while depth and i < len(text):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            spans.append((match.end(), i))
    return spans


def _lint_cpp(path: Path, meta_names: set[str]) -> list[Finding]:
    text = path.read_text(errors="replace")
    findings = []
    lines = text.splitlines()
    for start, end in _function_bodies(text, meta_names):
        first = text.count("\n", 0, start)
        last = text.count("\n", 0, end)
        for n in range(first, last + 1):
            code = lines[n]
            if ESCAPE in code or (n and ESCAPE in lines[n - 1]):
                continue
            stripped = code.split("//", 1)[0]
            for pattern, rule, hint in CPP_RULES:
                if pattern.search(stripped):
                    findings.append(Finding(str(path), n + 1, rule, code.strip(), hint))
    return findings


def _is_fake_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr in ("register_fake", "impl_abstract")


def _lint_python(path: Path) -> list[Finding]:
    text = path.read_text(errors="replace")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines()
    findings = []
    for fn in ast.walk(tree):
        if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                and any(_is_fake_decorator(d) for d in fn.decorator_list)):
            continue
        for node in ast.walk(fn):
            rule = hint = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("item", "tolist") and not node.args:
                rule = f".{node.func.attr}()"
                hint = ("data-dependent: use torch.library.get_ctx().new_dynamic_size() for an "
                        "output size that depends on values")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "int" and node.args \
                    and re.search(r"\.(shape|size\(|numel\()", ast.unparse(node.args[0])):
                rule = "int(size)"
                hint = "keep sizes symbolic: use the SymInt itself, not int()"
            if rule and ESCAPE not in lines[node.lineno - 1]:
                findings.append(Finding(str(path), node.lineno, rule,
                                        lines[node.lineno - 1].strip(), hint or ""))
    return findings


def lint(paths: list[Path]) -> list[Finding]:
    """Every concrete-size use in the meta impls under `paths`, sorted by file and line."""
    files = _sources(paths)
    cpp = [f for f in files if f.suffix != ".py"]
    meta_names = _meta_function_names(cpp)
    findings = [f for path in cpp for f in _lint_cpp(path, meta_names)]
    findings += [f for path in files if path.suffix == ".py" for f in _lint_python(path)]
    return sorted(findings, key=lambda f: (f.file, f.line))
