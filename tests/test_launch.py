"""The launcher's prepared cuLaunchKernel call, through a C callback of cuLaunchKernel's own signature (no GPU):
the eleven arguments arrive as the driver would read them, and only the stream changes between calls."""

from __future__ import annotations

import ctypes

from pymscclpp.runtime.launch import prepared_launch

CU_LAUNCH_KERNEL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p)


def test_prepared_launch_passes_cuLaunchKernels_arguments_as_its_c_signature_reads_them():
    seen = []
    driver = CU_LAUNCH_KERNEL(lambda *args: seen.append(args) or 7)
    extra = (ctypes.c_void_p * 5)(1, 2, 3, 4, 0)
    call = prepared_launch(ctypes.cast(driver, ctypes.c_void_p).value, 0xDEAD0000BEEF, 132, 256, 48, None, extra)
    assert call(0x7F00AA55) == 7
    assert call(0) == 7
    head = (0xDEAD0000BEEF, 132, 1, 1, 256, 1, 1, 48)
    assert seen == [head + (0x7F00AA55, None, ctypes.addressof(extra)), head + (None, None, ctypes.addressof(extra))]
