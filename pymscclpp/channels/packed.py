"""Sums of two 16-bit float lanes held in u32 words, one instruction per word on GPUs (``add.rn.f16x2``, and for
bfloat16 ``fma.rn.bf16x2`` by one from compute capability 8.0), each lane rounded once to nearest even: what
a reduction does per word, where widening to float32 and rounding back by integer arithmetic costs some
twenty instructions. The simulator runs pure-Python twins of the same arithmetic (NaN lanes: 0x7FFF).
"""

from __future__ import annotations

import numpy as np

from ..runtime.backend import IS_SIM

__all__ = ["add_bf16x2", "add_f16x2", "has_bf16x2"]

_NAN = 0x7FFF  # the canonical NaN of both formats, as the packed instructions produce it


if IS_SIM:
    def _lanes(w) -> tuple[int, int]:
        return int(w) & 0xFFFF, int(w) >> 16 & 0xFFFF

    def _bf16_to_f32(bits: int) -> np.float32:
        return np.array(bits << 16, np.uint32).view(np.float32)[()]

    def _f32_to_bf16(x: np.float32) -> int:
        u = int(np.array(x, np.float32).view(np.uint32)[()])
        if u & 0x7FFFFFFF > 0x7F800000:
            return _NAN
        return (u + 0x7FFF + (u >> 16 & 1)) >> 16 & 0xFFFF

    def add_bf16x2(a, b):
        """Lane-wise bfloat16 sum of u32 words ``a`` and ``b`` (exact in float32, then rounded once)."""
        (al, ah), (bl, bh) = _lanes(a), _lanes(b)
        lo = _f32_to_bf16(_bf16_to_f32(al) + _bf16_to_f32(bl))
        hi = _f32_to_bf16(_bf16_to_f32(ah) + _bf16_to_f32(bh))
        return np.uint32(lo | hi << 16)

    def _f16_sum(x: int, y: int) -> int:
        with np.errstate(over="ignore"):
            s = np.float16(np.float32(np.array(x, np.uint16).view(np.float16)) +
                           np.float32(np.array(y, np.uint16).view(np.float16)))
        return _NAN if np.isnan(s) else int(np.array(s, np.float16).view(np.uint16)[()])

    def add_f16x2(a, b):
        """Lane-wise float16 sum of u32 words ``a`` and ``b`` (exact in float32, then rounded once)."""
        (al, ah), (bl, bh) = _lanes(a), _lanes(b)
        return np.uint32(_f16_sum(al, bl) | _f16_sum(ah, bh) << 16)

    def has_bf16x2():
        """Whether the device adds bfloat16 pairs in one instruction (the simulator models one that does)."""
        return True

else:
    from llvmlite import ir
    from numba import cuda, types
    from numba.cuda.extending import intrinsic

    _U32 = ir.IntType(32)

    def _packed(text: str):
        @intrinsic
        def impl(typingctx, a, b):
            def codegen(context, builder, sig, args):
                x, y = (context.cast(builder, v, t, types.uint32) for v, t in zip(args, sig.args))
                asm = ir.InlineAsm(ir.FunctionType(_U32, [_U32, _U32]), text, "=r,r,r")
                return builder.call(asm, [x, y])
            return types.uint32(a, b), codegen
        return impl

    add_f16x2 = _packed("add.rn.f16x2 $0, $1, $2;")
    add_bf16x2 = _packed("{ .reg .b32 one; mov.b32 one, 0x3F803F80; fma.rn.bf16x2 $0, $1, one, $2; }")

    @intrinsic
    def has_bf16x2(typingctx):
        """Whether the device the kernel is built for adds bfloat16 pairs in one instruction (a constant, so the
        branch that does not apply compiles away)."""
        def codegen(context, builder, sig, args):
            try:
                native = cuda.get_current_device().compute_capability >= (8, 0)
            except cuda.CudaSupportError:  # built with no device (``cuda.compile_ptx``): the portable path
                native = False
            return ir.Constant(ir.IntType(1), native)
        return types.boolean(), codegen
