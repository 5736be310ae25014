"""The `myacl` library with its C++ Meta kernels loaded too (csrc/meta.cpp), as vllm-ascend
loads its meta registrations beside its kernels."""

from myacl import build_and_load

META = build_and_load("myacl_meta", "meta.cpp")
