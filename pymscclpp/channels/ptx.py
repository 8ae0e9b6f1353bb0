"""Memory-ordering and vector-access intrinsics: inline PTX on GPUs, pure-Python twins on the simulator.

numba exposes no acquire/release or ``.sys`` scope, and hoists plain spin loads out of loops;
each intrinsic here is an ``asm volatile`` with a memory clobber so that loops re-load.
Every function takes a 1-D array and an index (element index, or byte offset for vectors),
so that the simulator twin can do the same thing on a NumPy array.
"""

from __future__ import annotations

import time

import numpy as np

from ..runtime.backend import IS_SIM

__all__ = [
    "load_acquire", "load_relaxed", "store_release", "store_relaxed",
    "atomic_add_release", "atomic_add_relaxed", "fence_sys",
    "load_v4", "store_v4", "load_v4_volatile", "store_v4_volatile",
    "load_v2", "store_v2", "load_v2_volatile", "store_v2_volatile", "load_u32", "load_u32_again", "store_u32",
    "store_u16", "u32_as_f32", "f32_as_u32", "f16_to_f32", "f32_to_f16", "globaltimer", "spin_pause", "address_of",
]


if IS_SIM:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray, FakeWithinKernelCUDAArray

    def _np(arr) -> np.ndarray:
        """The NumPy array under a simulator array wrapper."""
        if isinstance(arr, FakeWithinKernelCUDAArray):
            arr = arr._item
        if isinstance(arr, FakeCUDAArray):
            arr = arr._ary
        return arr

    def _words(arr, byte_offset, count):
        raw = _np(arr)
        return raw.view(np.uint8)[byte_offset:byte_offset + 4 * count].view(np.uint32)

    def load_acquire(arr, i):
        """Acquire-ordered, system-scope load of ``arr[i]``."""
        return _np(arr)[i]

    load_relaxed = load_acquire

    def store_release(arr, i, value):
        """Release-ordered, system-scope store to ``arr[i]``."""
        raw = _np(arr)
        raw[i] = value

    store_relaxed = store_release

    def atomic_add_release(arr, i, value):
        """Release-ordered, system-scope add to ``arr[i]`` (one writer per word under the simulator)."""
        raw = _np(arr)
        raw[i] = raw[i] + raw.dtype.type(value)

    atomic_add_relaxed = atomic_add_release

    def fence_sys():
        """A system-scope acq_rel fence (program order already holds in the simulator)."""

    def load_v4(arr, byte_offset):
        """16-byte load of four u32 words at ``byte_offset`` into ``arr``."""
        w = _words(arr, byte_offset, 4)
        return (w[0], w[1], w[2], w[3])

    def load_v4_volatile(arr, byte_offset):
        """16-byte volatile load; reads the flag words (1, 3) before the data words (0, 2)."""
        w = _words(arr, byte_offset, 4)
        f1, f3 = w[1], w[3]
        return (w[0], f1, w[2], f3)

    def store_v4(arr, byte_offset, a, b, c, d):
        """16-byte store of four u32 words."""
        w = _words(arr, byte_offset, 4)
        w[0], w[1], w[2], w[3] = a, b, c, d

    def store_v4_volatile(arr, byte_offset, a, b, c, d):
        """16-byte volatile store; writes the data words (0, 2) before the flag words (1, 3)."""
        w = _words(arr, byte_offset, 4)
        w[0] = a
        w[2] = c
        w[1] = b
        w[3] = d

    def load_u32(arr, byte_offset):
        """4-byte load of one u32 word at a byte offset."""
        return _words(arr, byte_offset, 1)[0]

    def load_u32_again(arr, byte_offset):
        """``load_u32`` of a word another thread loads too (an L1 hit on a GPU, no second trip over the link):
        the simulator's traffic count (``runtime.traffic``) leaves it out."""
        return np.ndarray.__getitem__(_words(arr, byte_offset, 1), 0)

    def store_u32(arr, byte_offset, a):
        """4-byte store of one u32 word at a byte offset."""
        _words(arr, byte_offset, 1)[0] = a

    def store_u16(arr, byte_offset, a):
        """2-byte store of the low 16 bits of ``a`` at a (2-byte aligned) byte offset."""
        _np(arr).view(np.uint8)[byte_offset:byte_offset + 2].view(np.uint16)[0] = np.uint16(int(a) & 0xFFFF)

    def load_v2(arr, byte_offset):
        """8-byte load of two u32 words."""
        w = _words(arr, byte_offset, 2)
        return (w[0], w[1])

    def store_v2(arr, byte_offset, a, b):
        """8-byte store of two u32 words."""
        w = _words(arr, byte_offset, 2)
        w[0], w[1] = a, b

    def load_v2_volatile(arr, byte_offset):
        """8-byte volatile load of two u32 words; flag word (1) read before data word (0)."""
        w = _words(arr, byte_offset, 2)
        f = w[1]
        return (w[0], f)

    def store_v2_volatile(arr, byte_offset, a, b):
        """8-byte volatile store; data word (0) written before flag word (1)."""
        w = _words(arr, byte_offset, 2)
        w[0] = a
        w[1] = b

    def u32_as_f32(w):
        """Reinterpret a u32 as a float32."""
        return np.array(w, np.uint32).view(np.float32)[()]

    def f32_as_u32(x):
        """Reinterpret a float32 as a u32."""
        return np.array(x, np.float32).view(np.uint32)[()]

    def f16_to_f32(h):
        """The float32 value of the float16 whose bits are the low 16 bits of ``h``."""
        return np.float32(np.array(np.uint32(h) & np.uint32(0xFFFF), np.uint16).view(np.float16)[()])

    def f32_to_f16(x):
        """The bits of float32 ``x`` rounded to float16, as a u32 in 0..0xFFFF."""
        return np.uint32(np.array(np.float32(x), np.float16).view(np.uint16)[()])

    def globaltimer():
        """Nanosecond clock shared by all threads."""
        return np.uint64(time.monotonic_ns())

    def spin_pause():
        """Back off inside a spin loop so other simulated threads and processes run."""
        time.sleep(2e-5)

    def address_of(arr, byte_offset):
        """Address of byte ``byte_offset`` of ``arr`` (used for alignment checks)."""
        return np.uint64(_np(arr).ctypes.data + int(byte_offset))

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    _CONSTRAINT = {32: "r", 64: "l"}

    def _element_pointer(context, builder, arr_ty, arr, index):
        ary = context.make_array(arr_ty)(context, builder, value=arr)
        return cgutils.get_item_pointer(context, builder, arr_ty, ary, [index], wraparound=False)

    def _byte_pointer(context, builder, arr_ty, arr, byte_offset, word_ty):
        ary = context.make_array(arr_ty)(context, builder, value=arr)
        base = builder.bitcast(ary.data, ir.IntType(8).as_pointer())
        ptr = builder.gep(base, [byte_offset])
        return builder.bitcast(ptr, word_ty.as_pointer())

    def _check_int_array(name, arr):
        if not (isinstance(arr, types.Array) and isinstance(arr.dtype, types.Integer)
                and arr.dtype.bitwidth in _CONSTRAINT):
            raise TypeError(f"{name} needs a 1-D array of 32- or 64-bit integers, got {arr}")

    def _make_load(name, sem):
        @intrinsic
        def impl(typingctx, arr, index):
            _check_int_array(name, arr)

            def codegen(context, builder, sig, args):
                ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1])
                bits = sig.args[0].dtype.bitwidth
                fnty = ir.FunctionType(ir.IntType(bits), [ptr.type])
                asm = ir.InlineAsm(fnty, f"ld.{sem}.sys.global.b{bits} $0, [$1];",
                                   f"={_CONSTRAINT[bits]},l,~{{memory}}", side_effect=True)
                return builder.call(asm, [ptr])

            return arr.dtype(arr, index), codegen
        impl.__doc__ = f"{sem}-ordered system-scope load of arr[i]."
        return impl

    def _make_store(name, inst):
        @intrinsic
        def impl(typingctx, arr, index, value):
            _check_int_array(name, arr)

            def codegen(context, builder, sig, args):
                arr_ty = sig.args[0]
                ptr = _element_pointer(context, builder, arr_ty, args[0], args[1])
                val = context.cast(builder, args[2], sig.args[2], arr_ty.dtype)
                bits = arr_ty.dtype.bitwidth
                fnty = ir.FunctionType(ir.VoidType(), [ptr.type, val.type])
                asm = ir.InlineAsm(fnty, f"{inst}.b{bits} [$0], $1;" if "add" not in inst
                                   else f"{inst}.u{bits} [$0], $1;",
                                   f"l,{_CONSTRAINT[bits]},~{{memory}}", side_effect=True)
                builder.call(asm, [ptr, val])
                return context.get_dummy_value()

            return types.void(arr, index, value), codegen
        impl.__doc__ = f"{inst} on arr[i]."
        return impl

    load_acquire = _make_load("load_acquire", "acquire")
    load_relaxed = _make_load("load_relaxed", "relaxed")
    store_release = _make_store("store_release", "st.release.sys.global")
    store_relaxed = _make_store("store_relaxed", "st.relaxed.sys.global")
    atomic_add_release = _make_store("atomic_add_release", "red.release.sys.global.add")
    atomic_add_relaxed = _make_store("atomic_add_relaxed", "red.relaxed.sys.global.add")

    def _asm_void(text):
        @intrinsic
        def impl(typingctx):
            def codegen(context, builder, sig, args):
                fnty = ir.FunctionType(ir.VoidType(), [])
                builder.call(ir.InlineAsm(fnty, text, "~{memory}", side_effect=True), [])
                return context.get_dummy_value()
            return types.void(), codegen
        return impl

    fence_sys = _asm_void("fence.acq_rel.sys;")
    spin_pause = _asm_void("")

    @intrinsic
    def globaltimer(typingctx):
        """Nanosecond clock shared by all threads (%globaltimer)."""
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.IntType(64), [])
            asm = ir.InlineAsm(fnty, "mov.u64 $0, %globaltimer;", "=l,~{memory}", side_effect=True)
            return builder.call(asm, [])
        return types.uint64(), codegen

    @intrinsic
    def address_of(typingctx, arr, byte_offset):
        """Address of byte ``byte_offset`` of ``arr``."""
        def codegen(context, builder, sig, args):
            ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], ir.IntType(8))
            return builder.ptrtoint(ptr, ir.IntType(64))
        return types.uint64(arr, byte_offset), codegen

    _U32 = ir.IntType(32)

    def _make_vload(width, volatile):
        qual = "volatile." if volatile else ""
        regs = ", ".join(f"${i}" for i in range(width))
        vec = f"v{width}." if width > 1 else ""
        dst = f"{{{regs}}}" if width > 1 else "$0"

        @intrinsic
        def impl(typingctx, arr, byte_offset):
            ret = types.UniTuple(types.uint32, width)

            def codegen(context, builder, sig, args):
                if not volatile:  # plain vector load: ptxas may schedule it freely
                    vptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1],
                                         ir.VectorType(_U32, width))
                    vec_val = builder.load(vptr, align=4 * width)
                    out = [builder.extract_element(vec_val, ir.Constant(_U32, i)) for i in range(width)]
                    return context.make_tuple(builder, ret, out)
                ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], _U32)
                st = ir.LiteralStructType([_U32] * width)
                fnty = ir.FunctionType(st, [ptr.type])
                cons = ",".join(["=r"] * width) + ",l,~{memory}"
                asm = ir.InlineAsm(fnty, f"ld.{qual}global.{vec}u32 {dst}, [${width}];",
                                   cons, side_effect=True)
                res = builder.call(asm, [ptr])
                out = [builder.extract_value(res, i) for i in range(width)]
                return context.make_tuple(builder, ret, out)

            return ret(arr, byte_offset), codegen
        return impl

    def _vstore_codegen(width, volatile):
        qual = "volatile." if volatile else ""
        regs = ", ".join(f"${i + 1}" for i in range(width))
        vec = f"v{width}." if width > 1 else ""
        src = f"{{{regs}}}" if width > 1 else "$1"

        def codegen(context, builder, sig, args):
            vals = [context.cast(builder, v, t, types.uint32) for v, t in zip(args[2:], sig.args[2:])]
            if not volatile:  # plain (vector) store: ptxas may schedule it freely
                vty = ir.VectorType(_U32, width) if width > 1 else _U32
                vptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], vty)
                if width == 1:
                    builder.store(vals[0], vptr, align=4)
                else:
                    vec_val = ir.Constant(vty, ir.Undefined)
                    for i, v in enumerate(vals):
                        vec_val = builder.insert_element(vec_val, v, ir.Constant(_U32, i))
                    builder.store(vec_val, vptr, align=4 * width)
                return context.get_dummy_value()
            ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], _U32)
            fnty = ir.FunctionType(ir.VoidType(), [ptr.type] + [_U32] * width)
            cons = "l," + ",".join(["r"] * width) + ",~{memory}"
            asm = ir.InlineAsm(fnty, f"st.{qual}global.{vec}u32 [$0], {src};",
                               cons, side_effect=True)
            builder.call(asm, [ptr] + vals)
            return context.get_dummy_value()
        return codegen

    def _make_vstore4(volatile):
        @intrinsic
        def impl(typingctx, arr, byte_offset, a, b, c, d):
            return types.void(arr, byte_offset, a, b, c, d), _vstore_codegen(4, volatile)
        return impl

    def _make_vstore2(volatile):
        @intrinsic
        def impl(typingctx, arr, byte_offset, a, b):
            return types.void(arr, byte_offset, a, b), _vstore_codegen(2, volatile)
        return impl

    @intrinsic
    def store_u32(typingctx, arr, byte_offset, a):
        """4-byte store of one u32 word at a byte offset."""
        return types.void(arr, byte_offset, a), _vstore_codegen(1, False)

    @intrinsic
    def store_u16(typingctx, arr, byte_offset, a):
        """2-byte store of the low 16 bits of ``a`` at a (2-byte aligned) byte offset."""
        def codegen(context, builder, sig, args):
            ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], _I16)
            val = builder.trunc(context.cast(builder, args[2], sig.args[2], types.uint32), _I16)
            builder.store(val, ptr, align=2)
            return context.get_dummy_value()
        return types.void(arr, byte_offset, a), codegen

    @intrinsic
    def load_u32(typingctx, arr, byte_offset):
        """4-byte load of one u32 word at a byte offset."""
        def codegen(context, builder, sig, args):
            ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], _U32)
            return builder.load(ptr, align=4)
        return types.uint32(arr, byte_offset), codegen

    load_u32_again = load_u32  # the same load: only the simulator's traffic count tells them apart

    load_v4 = _make_vload(4, False)
    load_v4_volatile = _make_vload(4, True)
    load_v2 = _make_vload(2, False)
    load_v2_volatile = _make_vload(2, True)
    store_v2 = _make_vstore2(False)
    store_v2_volatile = _make_vstore2(True)
    store_v4 = _make_vstore4(False)
    store_v4_volatile = _make_vstore4(True)

    _F32, _F16, _I16 = ir.FloatType(), ir.HalfType(), ir.IntType(16)

    @intrinsic
    def u32_as_f32(typingctx, w):
        """Reinterpret a u32 as a float32."""
        def codegen(context, builder, sig, args):
            val = context.cast(builder, args[0], sig.args[0], types.uint32)
            return builder.bitcast(val, _F32)
        return types.float32(w), codegen

    @intrinsic
    def f32_as_u32(typingctx, x):
        """Reinterpret a float32 as a u32."""
        def codegen(context, builder, sig, args):
            val = context.cast(builder, args[0], sig.args[0], types.float32)
            return builder.bitcast(val, _U32)
        return types.uint32(x), codegen

    @intrinsic
    def f16_to_f32(typingctx, h):
        """The float32 value of the float16 whose bits are the low 16 bits of ``h``."""
        def codegen(context, builder, sig, args):
            val = context.cast(builder, args[0], sig.args[0], types.uint32)
            return builder.fpext(builder.bitcast(builder.trunc(val, _I16), _F16), _F32)
        return types.float32(h), codegen

    @intrinsic
    def f32_to_f16(typingctx, x):
        """The bits of float32 ``x`` rounded to float16, as a u32 in 0..0xFFFF."""
        def codegen(context, builder, sig, args):
            val = context.cast(builder, args[0], sig.args[0], types.float32)
            return builder.zext(builder.bitcast(builder.fptrunc(val, _F16), _I16), _U32)
        return types.uint32(x), codegen

