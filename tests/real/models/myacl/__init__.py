"""`myacl`: an out-of-tree op library plugged into vLLM's models as vllm-ascend plugs its
own, for tests/real/test_vllm_oot.py. Importing it builds (once; cached) and loads the C++
kernels (csrc/kernels.cpp: TORCH_LIBRARY schemas and CPU kernels, no Meta kernels), then
registers `CustomOp.register_oot` classes that replace vLLM's RMSNorm (with the residual,
in place), SiluAndMul and RotaryEmbedding (in place, returning `()`) wherever a model asks
for them. `myacl.meta` also loads the library's Meta kernels (csrc/meta.cpp)."""

from __future__ import annotations

from pathlib import Path

from torch.utils import cpp_extension

CSRC = Path(__file__).parent / "csrc"
BUILD = Path(__file__).resolve().parents[4] / "build" / "myacl"


def build_and_load(name: str, source: str) -> str:
    """Compile `source` into `name`.so under build/myacl (ninja skips an unchanged one) and
    load it with torch.ops.load_library: the path torch.ops.loaded_libraries then holds."""
    folder = BUILD / name
    folder.mkdir(parents=True, exist_ok=True)
    cpp_extension.load(name=name, sources=[str(CSRC / source)], build_directory=str(folder),
                       extra_cflags=["-O2"], extra_include_paths=[str(CSRC)],
                       is_python_module=False, verbose=False)
    return str(folder / f"{name}.so")


LIBRARY = build_and_load("myacl_kernels", "kernels.cpp")

from myacl import layers  # noqa: E402,F401  (registers the OOT classes: the ops exist now)
