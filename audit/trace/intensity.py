"""Arithmetic intensity of a CPU operator from its recorded shapes and dtypes (record_shapes=True).

FLOPs and bytes moved are first-order estimates: a GEMM of [M, K] × [K, N] does 2·M·N·K FLOPs and
moves its three matrices once; any other operator does one FLOP per output element and moves every
tensor argument once (the output taken as large as the largest input). Good enough to tell a
memory-bound operator (a few FLOPs per byte) from a compute-bound one (hundreds).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from math import prod

DTYPE_BYTES = {
    "double": 8, "float": 4, "c10::half": 2, "c10::bfloat16": 2, "half": 2, "bfloat16": 2,
    "long int": 8, "long": 8, "int": 4, "short int": 2, "short": 2, "signed char": 1,
    "unsigned char": 1, "bool": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
    "c10::float8_e4m3fnuz": 1, "c10::float8_e5m2fnuz": 1, "c10::complex<float>": 8,
    "c10::complex<double>": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                      "aten::linear", "aten::_scaled_mm", "aten::addmm_", "aten::mm.out"})


@dataclass(frozen=True)
class Intensity:
    """FLOPs, bytes moved and (GEMMs) the M, N, K of one operator call."""

    flops: float
    bytes: float
    m: int | None = None
    n: int | None = None
    k: int | None = None

    @property
    def per_byte(self) -> float:
        """FLOPs per byte (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0


@lru_cache(maxsize=65536)
def intensity(op: str, dims_text: str, types_text: str) -> Intensity | None:
    """Intensity of ``op`` called with the JSON ``Input Dims`` and ``Input type`` texts."""
    try:
        dims, types = json.loads(dims_text), json.loads(types_text)
    except (ValueError, TypeError):
        return None
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    tensors = [(d, _size(t)) for d, t in zip(dims, types) if _is_shape(d) and _size(t)]
    if not tensors:
        return None
    if op in GEMM_OPS:
        return _gemm(op, tensors)
    out = max(prod(d) for d, _ in tensors)
    moved = sum(prod(d) * size for d, size in tensors) + out * tensors[0][1]
    return Intensity(flops=float(out), bytes=float(moved))


def _is_shape(value) -> bool:
    """Whether an Input Dims entry is one tensor's shape (a non-empty list of ints)."""
    return isinstance(value, list) and bool(value) and all(isinstance(x, int) for x in value)


def _size(dtype) -> int:
    """Bytes per element of a recorded dtype name (0 when not a tensor dtype)."""
    return DTYPE_BYTES.get(str(dtype).lower(), 0) if isinstance(dtype, str) else 0


def _gemm(op: str, tensors: list[tuple[list[int], int]]) -> Intensity | None:
    """2·B·M·N·K FLOPs and the bytes of A, B and C for matrix-multiply operators."""
    if op in ("aten::addmm", "aten::baddbmm", "aten::addmm_") and len(tensors) >= 3:
        tensors = tensors[1:]                    # bias / input added to the product
    if len(tensors) < 2:
        return None
    (a, size), (b, _) = tensors[0], tensors[1]
    if op == "aten::linear":                     # x [..., K] · W[N, K]ᵀ
        if len(b) != 2:
            return None
        batch, m, k, n = 1, prod(a[:-1]), a[-1], b[0]
    elif len(a) >= 2 and len(b) >= 2:
        batch, m, k, n = prod(a[:-2]) or 1, a[-2], a[-1], b[-1]
    else:
        return None
    flops = 2.0 * batch * m * n * k
    moved = float(batch * (m * k + k * n + m * n) * size)
    return Intensity(flops=flops, bytes=moved, m=int(m), n=int(n), k=int(k))
