"""Build the kernels in aclcap_ops/ into loadable op libraries, one target per backend.

torch.utils.cpp_extension and ninja do the compiling and the incremental rebuilds; aclcap
adds a content stamp in front of them so that "nothing changed" is answered without
importing torch or running ninja (that answer must take well under 2 s).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from aclcap.errors import UsageError
from aclcap.status import Status

CPU_LIBRARY_NAME = "aclcap_ops_cpu"
# Flags per torch CPU capability: define CPU_CAPABILITY as torch's own kernels do, so that
# at::vec::Vectorized uses the AVX512/AVX2 specializations instead of the scalar fallback.
# -fopenmp: ATen's at::parallel_for is an inline `#pragma omp parallel`; without the flag
# it silently runs on one thread.
_CAPABILITY_FLAGS = {
    "AVX512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-mavx512f",
               "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-mf16c"],
    "AVX2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c"],
}
_BASE_FLAGS = ["-O3", "-fopenmp"]
# Where the CPU has them (Zen 4, Sapphire Rapids on): one instruction per 32 floats
# rounded to bfloat16, instead of the fourteen of at::vec's emulation that every bfloat16
# kernel pays on each store (vec_utils.h).
_BF16_FLAG = "-mavx512bf16"


def _cpu_flags() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return ""
    flags = re.search(r"^flags\s*:(.*)$", cpuinfo.read_text(), re.MULTILINE)
    return flags.group(1) if flags else ""


def compile_flags() -> list[str]:
    """The C++ flags for this machine's CPU: torch's capability, and AVX512-BF16 on top."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    flags = _BASE_FLAGS + _CAPABILITY_FLAGS.get(capability, [])
    if capability == "AVX512" and "avx512_bf16" in _cpu_flags().split():
        flags.append(_BF16_FLAG)
    return flags


@dataclass
class Target:
    """One backend's build outcome: built, up_to_date, skipped or fail."""

    name: str
    status: Status
    seconds: float = 0.0
    output: str | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class BuildReport:
    build_dir: str
    targets: list[Target] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(t.status != Status.FAIL for t in self.targets)


def ops_dir() -> Path:
    """Where the bundled library's sources are, found without importing anything."""
    spec = importlib.util.find_spec("aclcap_ops")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("the bundled op library 'aclcap_ops' is not installed: run `make build`")
    return Path(next(iter(spec.submodule_search_locations)))


def cache_root() -> Path:
    """$ACLCAP_CACHE_DIR, else the user's cache: what aclcap builds for itself (AOTI
    artifacts, synthesized Meta kernels), never inside its own install tree."""
    return Path(os.environ.get("ACLCAP_CACHE_DIR", Path.home() / ".cache" / "aclcap"))


def default_build_dir() -> Path:
    """$ACLCAP_BUILD_DIR, else build/ of a source checkout, else the user's cache."""
    if env := os.environ.get("ACLCAP_BUILD_DIR"):
        return Path(env)
    root = ops_dir().parent
    if (root / "pyproject.toml").exists() and os.access(root, os.W_OK):
        return root / "build"
    return Path.home() / ".cache" / "aclcap" / "build"


@dataclass(frozen=True)
class CpuVariant:
    """One build of the C++ sources: its folder under the build dir, library name, defines,
    and the sources its defines change (None: all). The others are linked from the default
    build's objects instead of compiled again: the kernels are the long part of a build."""

    subdir: str
    name: str
    defines: tuple[str, ...] = ()
    recompiled: tuple[str, ...] | None = None


DEFAULT_CPU = CpuVariant("cpu", CPU_LIBRARY_NAME)
# The kernels without their C++ Meta registrations (registration.cpp's ACLCAP_NO_META), in
# a folder of their own: the bundled library as one that ships no meta impls, which tests
# of check-meta --synthesize load (aclcap_ops.nometa) to regenerate them.
NO_META_CPU = CpuVariant("cpu-nometa", f"{CPU_LIBRARY_NAME}_nometa", ("-DACLCAP_NO_META",),
                         ("registration.cpp",))


def _cpu_sources(src: Path) -> list[Path]:
    return sorted(src.glob("csrc/*.cpp"))


def _cpu_key(src: Path, variant: CpuVariant = DEFAULT_CPU) -> str:
    """Hash of everything that changes the CPU library: sources, headers, torch, CPU."""
    h = hashlib.sha256()
    if variant.defines:  # the default build's key stays what it always was
        h.update(json.dumps(variant.defines).encode())
    for path in sorted(src.glob("csrc/*.[ch]*")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(importlib.metadata.version("torch").encode())
    h.update(platform.python_version().encode())
    # The flag tables and the CPU's flags, not compile_flags(): it imports torch, which
    # this up-to-date check must not (it decides whether anything needs doing at all).
    h.update(json.dumps([_BASE_FLAGS, sorted(_CAPABILITY_FLAGS.items()), _BF16_FLAG]).encode())
    h.update(_cpu_flags().encode())
    return h.hexdigest()


def _stamp(out_dir: Path) -> Path:
    return out_dir / "aclcap-stamp.json"


def bundled_fingerprint(build_dir: Path | None = None) -> str:
    """What identifies the built bundled library (its content key), for caches of artifacts
    that call into it; empty when it is not built."""
    stamp = _stamp(Path(build_dir or default_build_dir()) / "cpu")
    return stamp.read_text() if stamp.exists() else ""


def cpu_library_path(build_dir: Path, variant: CpuVariant = DEFAULT_CPU) -> Path:
    return build_dir / variant.subdir / f"{variant.name}.so"


def _cpu_up_to_date(build_dir: Path, key: str, variant: CpuVariant = DEFAULT_CPU) -> bool:
    stamp = _stamp(build_dir / variant.subdir)
    if not (stamp.exists() and cpu_library_path(build_dir, variant).exists()):
        return False
    return json.loads(stamp.read_text()).get("key") == key


def _first_errors(log: str, limit: int = 6) -> str:
    """The compiler's first error lines, so a failed build says what broke in a few lines
    (the shell's `c++: not found` too, where the compiler itself is missing)."""
    missing = r": not found$|: No such file or directory$"
    lines = [ln for ln in log.splitlines()
             if re.search(rf"\berror\b|{missing}", ln.strip(), re.IGNORECASE)]
    lines = [ln for ln in lines if not ln.startswith(("ninja:", "FAILED:"))] or lines
    return "\n".join(lines[:limit]) or log.strip()[-2000:]


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    """Set environment variables for the body (cpp_extension reads MAX_JOBS from there)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def compile_library(name: str, sources: list[Path], out_dir: Path, flags: list[str],
                    verbose: bool = False, objects: list[Path] | None = None) -> Path:
    """Compile C++ sources into `out_dir/name.so` with torch.utils.cpp_extension and ninja
    (incremental); a compile error raises BuildError with the compiler's first error lines.
    The bundled library and the Meta kernels check-meta --synthesize-cpp emits both use it."""
    from torch.utils import cpp_extension

    out_dir.mkdir(parents=True, exist_ok=True)
    # ninja's default runs one compile more than there are CPUs; a torch translation unit
    # is memory-bound enough that the extra one only slows the others (the bundled library
    # on 2 cores: 38 s -> 33 s with one per CPU). A user's MAX_JOBS still wins.
    jobs = os.environ.get("MAX_JOBS") or str(len(os.sched_getaffinity(0)))
    try:
        with _environ(MAX_JOBS=jobs):
            cpp_extension.load(
                name=name,
                sources=[str(p) for p in sources],
                extra_cflags=flags,
                extra_ldflags=[str(o) for o in objects or []],  # linked in, not compiled
                build_directory=str(out_dir),
                is_python_module=False,
                verbose=verbose,
            )
    except RuntimeError as exc:
        raise BuildError(_first_errors(str(exc))) from exc
    return out_dir / f"{name}.so"


def _compile_cpu(src: Path, build_dir: Path, verbose: bool, variant: CpuVariant) -> Path:
    sources, objects = _cpu_sources(src), []
    if variant.recompiled is not None:
        # ninja cannot see the linked objects change: relink it
        cpu_library_path(build_dir, variant).unlink(missing_ok=True)
        base = _cpu_target(src, build_dir, verbose, DEFAULT_CPU)
        if base.status == Status.FAIL:
            raise BuildError(base.reason)
        objects = [build_dir / DEFAULT_CPU.subdir / f"{p.stem}.o" for p in sources
                   if p.name not in variant.recompiled]
        sources = [p for p in sources if p.name in variant.recompiled]
    compile_library(variant.name, sources, build_dir / variant.subdir,
                    compile_flags() + list(variant.defines), verbose, objects)
    return cpu_library_path(build_dir, variant)


def _cpu_target(src: Path, build_dir: Path, verbose: bool, variant: CpuVariant) -> Target:
    """One CPU build, found up to date by its stamp or compiled and stamped."""
    start = time.perf_counter()
    key = _cpu_key(src, variant)
    if _cpu_up_to_date(build_dir, key, variant):
        return Target("cpu", Status.UP_TO_DATE, time.perf_counter() - start,
                      str(cpu_library_path(build_dir, variant)), "up to date")
    try:
        lib = _compile_cpu(src, build_dir, verbose, variant)
    except BuildError as exc:
        return Target("cpu", Status.FAIL, time.perf_counter() - start, None, str(exc))
    _stamp(build_dir / variant.subdir).write_text(json.dumps({"key": key}))
    return Target("cpu", Status.BUILT, time.perf_counter() - start, str(lib))


class BuildError(Exception):
    """A compile or link failure; the message holds the compiler's first error lines."""


# The bundled library has CPU kernels only so far; these say why each device target is
# skipped, most basic cause first, so a user knows what to install.
def _cuda_skip_reason() -> str:
    if shutil.which("nvcc") is None:
        return "no nvcc"
    version = importlib.metadata.version("torch")
    if version.endswith("+cpu"):  # answered without importing torch (a second, on this path)
        return f"torch {version} is a CPU-only build"
    import torch

    if torch.version.cuda is None:
        return f"torch {version} is a CPU-only build"
    return "no CUDA sources in aclcap_ops/csrc/cuda"


def _npu_skip_reason() -> str:
    if not os.environ.get("ASCEND_HOME_PATH"):
        return "CANN not found: ASCEND_HOME_PATH unset"
    if importlib.util.find_spec("torch_npu") is None:
        return "torch_npu not installed (pip install 'aclcap[npu]')"
    return "no Ascend C sources in aclcap_ops/csrc/npu"


def build(
    build_dir: Path | None = None,
    clean: bool = False,
    verbose: bool = False,
    on_target: Callable[[str], None] | None = None,
    src: Path | None = None,
    variant: CpuVariant = DEFAULT_CPU,
) -> BuildReport:
    """Build every backend target of `src` (default: the bundled aclcap_ops/); skipped backends
    carry the reason. `variant` picks the CPU build (NO_META_CPU: without Meta kernels)."""
    src = Path(src) if src is not None else ops_dir()
    if not _cpu_sources(src):
        raise UsageError(f"no C++ sources in {src}/csrc: point --src at an op library folder")
    build_dir = Path(build_dir or default_build_dir())
    if clean and build_dir.exists():
        shutil.rmtree(build_dir)
    report = BuildReport(build_dir=str(build_dir))

    if on_target:
        on_target("cpu")
    report.targets.append(_cpu_target(src, build_dir, verbose, variant))
    for name, why in (("cuda", _cuda_skip_reason()), ("npu", _npu_skip_reason())):
        report.targets.append(Target(name, Status.SKIPPED, 0.0, None, why))
    return report


def ensure_cpu_library(build_dir: Path | None = None, variant: CpuVariant = DEFAULT_CPU
                       ) -> Path:
    """The CPU library's path, building it first if it is stale (aclcap_ops.load())."""
    build_dir = Path(build_dir or default_build_dir())
    if _cpu_up_to_date(build_dir, _cpu_key(ops_dir(), variant), variant):
        return cpu_library_path(build_dir, variant)
    report = build(build_dir, variant=variant)
    cpu = report.targets[0]
    if cpu.status == Status.FAIL:
        raise UsageError(f"building aclcap_ops/ failed: {cpu.reason.splitlines()[0]} "
                         "(run `aclcap build`)")
    return Path(cpu.output or "")
