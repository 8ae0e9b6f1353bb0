"""Per-call tables that travel as kernel arguments (so a CUDA graph captures them), copied once into an array.

numba compiles a tuple read at a runtime index into a branch tree over every element, at every read: a kernel
that reads its table by peer carries that tree many times over (tens of KB of code per read site at 8 ranks).
``store_tuple`` writes every element at its constant index instead, straight-line code; the GPU intrinsic has a
pure-Python twin for the simulator.
"""

from __future__ import annotations

from ..runtime.backend import IS_SIM

if IS_SIM:
    def store_tuple(arr, tup) -> None:
        """``arr[:len(tup)] = tup``."""
        for i, v in enumerate(tup):
            arr[i] = v
else:
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def store_tuple(typingctx, arr, tup):
        """``arr[:len(tup)] = tup``, each element stored at its constant index (no branch tree)."""
        if not (isinstance(arr, types.Array) and isinstance(tup, types.UniTuple) and arr.dtype == tup.dtype):
            raise TypeError(f"store_tuple needs an array and a tuple of its dtype, got {arr} and {tup}")

        def codegen(context, builder, sig, args):
            arr_ty, tup_ty = sig.args
            ary = context.make_array(arr_ty)(context, builder, value=args[0])
            for k in range(tup_ty.count):
                ptr = cgutils.get_item_pointer(context, builder, arr_ty, ary, [context.get_constant(types.intp, k)],
                                               wraparound=False)
                builder.store(builder.extract_value(args[1], k), ptr)
            return context.get_dummy_value()

        return types.void(arr, tup), codegen
