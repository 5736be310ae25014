"""check-meta: ops from the dispatcher, their meta impls checked against real kernels."""
