"""Executor tests: generated kernels against the reference interpreter, across rank processes."""
