"""check-meta --synthesize: meta impls inferred from real calls of the kernel, emitted as
Python and C++, and verified on calls the inference never saw."""
