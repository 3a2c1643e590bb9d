"""Names of GPU work → categories: our fine ones, the coarse HTA-style ones, and HTA's own rules.

Fine categories: gemm, attention, convolution, normalisation_softmax, elementwise_reduction,
communication (NCCL / RCCL and other collectives such as torch symmetric-memory
``multimem_all_reduce``), other; memcpy_htod / memcpy_dtoh / memcpy_dtod / memcpy_other; memset.
Coarse categories: computation, communication, memory (memcpy and memset).

``hta_kernel_type`` reproduces Holistic Trace Analysis 0.5.0 (hta/utils/utils.py get_kernel_type)
exactly, including its quirks: only ``nccl…Kernel`` names are communication, and names matching
``.*Sync`` or ``.*Memcpy`` anywhere from the start are neither computation nor memory.
"""
from __future__ import annotations

import re
from functools import lru_cache

# Ordered: the first pattern that matches a lower-cased kernel name wins. Communication comes
# first (NCCL names contain "reduce"), attention before GEMM (flash kernels name cutlass types),
# normalisation before convolution (cuDNN batch-norm kernels) and convolution before GEMM
# (implicit-GEMM convolutions).
KERNEL_CATEGORIES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (category, re.compile(pattern)) for category, pattern in (
        ("communication", r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|send_?recv"
                          r"|all_?to_?all|multimem|cross_device_reduce"),
        ("attention", r"flash|fmha|attention|attn|sdpa|\bmha|xformers"),
        ("normalisation_softmax", r"layer_?norm|rms_?norm|softmax|batch_?norm|group_?norm"
                                  r"|instance_?norm|\bbn_(?:fw|bw)|welford|gammabeta|rowwisemoments"),
        ("convolution", r"conv(?!ert|ersion)|cudnn|fprop|dgrad|wgrad|winograd|implicit_?gemm"
                        r"|im2col|col2im|fft2d"),
        ("gemm", r"(?<!fb)gemm|gemv|cutlass(?:_|::kernel|::gemm)|cublas|matmul|wgmma|xmma|bmm|nvjet|cijk_|splitkreduce"
                 r"|triton_(?:mm|tem|bmm)"),
        ("elementwise_reduction", r"elementwise|vectorized|unrolled|reduce|copy|fill|index"
                                  r"|gather|scatter|catarray|triton_(?:poi|red|per)|pointwise"
                                  r"|where|masked|dropout|distribution|multi_tensor_apply"
                                  r"|embedding|pool|sort|scan|cub::|transpose|permute|functor"),
    )
)
MEMCPY_KINDS: tuple[tuple[str, str], ...] = (
    ("htod", "memcpy_htod"), ("dtoh", "memcpy_dtoh"), ("dtod", "memcpy_dtod"), ("ptop", "memcpy_dtod"),
)
COARSE = ("computation", "communication", "memory")

HTA_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")
"""The kernel types HTA's kernel breakdown analyses (include_memory_kernels=True), in its order."""
_PARENS = re.compile(r"[()]")
_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


@lru_cache(maxsize=65536)
def kernel_category(name: str) -> str:
    """The category of a kernel name (gemm, attention, ..., other).

    Only the name and its template arguments are read: a parameter list names argument types
    (``flashinfer::QuantizationSFLayout``, ``cutlass::bfloat16_t``) that say nothing of the kernel.
    """
    lowered = without_parameters(name).lower()
    for category, pattern in KERNEL_CATEGORIES:
        if pattern.search(lowered):
            return category
    return "other"


def without_parameters(name: str) -> str:
    """``name`` less a trailing parenthesised parameter list, when it has one."""
    if not name.endswith(")"):
        return name
    depth = 0
    for paren in reversed(list(_PARENS.finditer(name))):
        depth += 1 if paren.group() == ")" else -1
        if depth == 0:
            return name[:paren.start()] if paren.start() > 0 else name
    return name


@lru_cache(maxsize=1024)
def memcpy_category(name: str) -> str:
    """memcpy_htod / memcpy_dtoh / memcpy_dtod from a name such as 'Memcpy HtoD (Pinned -> Device)'."""
    lowered = name.lower()
    for token, category in MEMCPY_KINDS:
        if token in lowered:
            return category
    return "memcpy_other"


def fine_category(name: str, kind: int) -> str:
    """Fine category of one GPU event by its kind (0 kernel, 1 memcpy, 2 memset) and name."""
    if kind == 1:
        return memcpy_category(name)
    if kind == 2:
        return "memset"
    return kernel_category(name)


def coarse_category(fine: str) -> str:
    """computation / communication / memory of a fine category."""
    if fine == "communication":
        return "communication"
    if fine.startswith("memcpy") or fine == "memset":
        return "memory"
    return "computation"


@lru_cache(maxsize=65536)
def hta_kernel_type(name: str) -> str:
    """HTA 0.5.0's kernel type of a GPU event name: COMMUNICATION, MEMORY, COMPUTATION or OTHER."""
    if _HTA_COMM.match(name):
        return "COMMUNICATION"
    if _HTA_MEMORY.match(name):
        return "MEMORY"
    if not _HTA_NOT_COMPUTE.match(name):
        return "COMPUTATION"
    return "OTHER"
