"""Print where the kernel cache keeps cubins of some kernels (compile backend: real dispatchers, no GPU):
``name path-or-None`` lines that tests/test_kernel_cache.py checks."""

from __future__ import annotations

import os
import sys
import tempfile

os.environ["PYMSCCLPP_BACKEND"] = "compile"

import pymscclpp  # noqa: E402,F401
from numba import cuda, types  # noqa: E402

from pymscclpp.algos import reduce_kernels as rdk  # noqa: E402
from pymscclpp.runtime import kernel_cache  # noqa: E402

outside = os.path.join(tempfile.mkdtemp(), "user_kernels.py")
with open(outside, "w") as f:
    f.write("from numba import cuda\n\n@cuda.jit\ndef user(a):\n    pass\n")
sys.path.insert(0, os.path.dirname(outside))
import user_kernels  # noqa: E402

ints = (types.int64,) * 3
for name, kernel, argtypes, cc in (("reduce_ll", rdk.reduce_ll, ints, (9, 0)),
                                   ("reduce_ll_again", rdk.reduce_ll, ints, (9, 0)),
                                   ("reduce_ll_other_types", rdk.reduce_ll, (types.int32,) * 3, (9, 0)),
                                   ("reduce_ll_other_gpu", rdk.reduce_ll, ints, (8, 0)),
                                   ("reduce_simple", rdk.reduce_simple, ints, (9, 0)),
                                   ("user", user_kernels.user, ints, (9, 0))):
    print(name, kernel_cache._cubin_path(kernel, argtypes, cc))
print("root", kernel_cache.root())
_ = cuda
