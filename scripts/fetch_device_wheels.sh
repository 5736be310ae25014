#!/usr/bin/env bash
# Download, into .whl/ (git-ignored), the wheels that scripts/device_check.sh installs on the
# lent GPU machine, which has no network: what aclcap needs and that machine's image lacks.
# The image (Python 3.12, torch 2.11.0+cu130) holds torch, typer, rich, ninja, numpy and
# setuptools; it has no tree-sitter and no C++ grammar for it (`check-meta --lint`). Its
# setuptools' version is unknown and aclcap's build needs >= 77, so setuptools travels too.
# Pure-Python or cp312 manylinux x86_64 wheels only, pinned: the versions tested here.
# Usage: bash scripts/fetch_device_wheels.sh   (needs network; run here, before the device call)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.whl
# One version of each: two wheels of a name in the folder stop the offline install.
wheels=("tree-sitter==0.26.1" "tree-sitter-cpp==0.23.4" "setuptools==84.2.1")
rm -rf "$dest"
mkdir -p "$dest"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# The local pip config may cap or redirect packages: the registry's own wheels are wanted.
PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp "${platforms[@]}" -d "$dest" "${wheels[@]}"
ls -l "$dest"
du -sh "$dest"
