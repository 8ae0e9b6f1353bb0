"""cupy.cuda.nccl's constants (nccl.h values) and their pymscclpp dtype and op names."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidUsageError

NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = 0, 1, 2, 3, 4

NCCL_INT8 = NCCL_CHAR = 0
NCCL_UINT8 = 1
NCCL_INT32 = NCCL_INT = 2
NCCL_UINT32 = 3
NCCL_INT64 = 4
NCCL_UINT64 = 5
NCCL_FLOAT16 = NCCL_HALF = 6
NCCL_FLOAT32 = NCCL_FLOAT = 7
NCCL_FLOAT64 = NCCL_DOUBLE = 8
NCCL_BFLOAT16 = 9
NCCL_FLOAT8E4M3 = 10  # not in cupy; NCCL 2.24+
NCCL_FLOAT8E5M2 = 11

DATATYPES = {NCCL_INT8: "int8", NCCL_UINT8: "uint8", NCCL_INT32: "int32", NCCL_UINT32: "uint32",
             NCCL_INT64: "int64", NCCL_UINT64: "uint64", NCCL_FLOAT16: "float16", NCCL_FLOAT32: "float32",
             NCCL_FLOAT64: "float64", NCCL_BFLOAT16: "bfloat16", NCCL_FLOAT8E4M3: "float8_e4m3fn",
             NCCL_FLOAT8E5M2: "float8_e5m2"}
ITEMSIZES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "float16": 2, "float32": 4,
             "float64": 8, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
REDUCE_OPS = {NCCL_SUM: "sum", NCCL_PROD: "prod", NCCL_MAX: "max", NCCL_MIN: "min", NCCL_AVG: "avg"}


def _lookup(table: dict, value, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) not in table:
        known = ", ".join(f"{code} ({name})" for code, name in table.items())
        raise InvalidUsageError(f"unknown {what} {value!r}: expected one of {known}")
    return table[int(value)]


def datatype_name(datatype: int) -> str:
    """The dtype name of an NCCL_* datatype constant."""
    return _lookup(DATATYPES, datatype, "datatype")


def op_name(op: int) -> str:
    """The op name of an NCCL_* reduction op constant."""
    return _lookup(REDUCE_OPS, op, "reduction op")


__all__ = [name for name in dir() if name.startswith("NCCL_")]
