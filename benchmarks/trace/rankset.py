"""Write a seeded multi-rank Kineto trace set: one Chrome trace per rank, as a data-parallel job's.

Each rank is ``steps`` ProfilerSteps of a small training loop: per step, a Python frame, operators
(aten::mm, aten::add, an NCCL all-reduce, a host-to-device copy), their cudaLaunchKernel /
cudaMemcpyAsync calls with correlation ids, the kernels and copies they launch on two streams,
and a cudaStreamSynchronize with its cuda_sync twin. Ranks start at different times (so HTA's
rules align them on the set's earliest timestamp), carry ``distributedInfo.rank`` and draw their
jitter from ``random.Random(seed + rank)``: the same arguments give the same bytes.

    .venv/bin/python benchmarks/trace/rankset.py OUT_DIR [--ranks 16] [--kernels 3000]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

T0 = 1_762_000_000_000_000.0 / 1000    # epoch-scale microseconds, as real traces have
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
KERNELS_PER_STEP = 6            # kernels per step: two mm, three add, one all-reduce


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args) -> dict:
    """A complete (ph X) event, times rounded to nanoseconds as Kineto writes them."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3),
            "dur": round(dur, 3), "args": args}


def _step(rng: random.Random, step: int, t: float, ids: list[int]) -> tuple[list[dict], float]:
    """The events of one ProfilerStep starting at ``t``; the time it ends."""
    events: list[dict] = []
    start = t
    ops = [("aten::mm", GEMM, 7), ("aten::add", ADD, 7), ("aten::mm", GEMM, 7),
           ("aten::add", ADD, 7), ("nccl:all_reduce", NCCL, 20), ("aten::add", ADD, 7)]
    gpu_free = {7: t, 20: t}
    python_start = t
    t += rng.uniform(2.0, 4.0)
    for op, kernel, stream in ops:
        ids[0] += 1
        external, correlation = ids[0], ids[0] + 1_000_000
        op_dur = rng.uniform(8.0, 20.0)
        events.append(_x("cpu_op", op, t, op_dur, 1, 1, **{"External id": external, "Input Dims": [[512, 512]]}))
        launch = t + rng.uniform(1.0, 3.0)
        events.append(_x("cuda_runtime", "cudaLaunchKernel", launch, rng.uniform(3.0, 6.0), 1, 1,
                         correlation=correlation, **{"External id": external}))
        begin = max(launch + rng.uniform(4.0, 9.0), gpu_free[stream])
        dur = rng.uniform(20.0, 120.0) if kernel != ADD else rng.uniform(2.0, 6.0)
        events.append(_x("kernel", kernel, begin, dur, 0, stream, device=0, stream=stream, correlation=correlation,
                         **{"External id": external, "grid": [132, 1, 1], "block": [128, 1, 1],
                            "est. achieved occupancy %": rng.choice([12, 25, 50, 100])}))
        gpu_free[stream] = begin + dur
        t += op_dur + rng.uniform(0.5, 2.0)
    if step % 4 == 0:                            # an input copy every few steps
        ids[0] += 1
        correlation = ids[0] + 1_000_000
        events.append(_x("cuda_runtime", "cudaMemcpyAsync", t, 5.0, 1, 1, correlation=correlation))
        begin = max(t + 6.0, gpu_free[7])
        events.append(_x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", begin, rng.uniform(10.0, 30.0), 0, 7,
                         device=0, stream=7, correlation=correlation, bytes=4 << 20))
        gpu_free[7] = begin + events[-1]["dur"]
        t += 6.0
    ids[0] += 1
    correlation = ids[0] + 1_000_000
    wait = max(gpu_free.values()) - t + 1.0
    events.append(_x("cuda_runtime", "cudaStreamSynchronize", t, max(wait, 2.0), 1, 1, correlation=correlation))
    events.append(_x("cuda_sync", "Stream Sync", t + 0.5, max(wait - 0.5, 1.0), 0, 7, device=0, stream=7,
                     correlation=correlation))
    t += max(wait, 2.0) + rng.uniform(5.0, 30.0)    # host work between steps: GPU idle
    events.append(_x("python_function", "train.py(42): train_step", python_start, t - python_start - 1.0, 1, 1,
                     **{"Python id": step + 10, "Python parent id": 1}))
    events.append(_x("user_annotation", f"ProfilerStep#{step}", start, t - start, 1, 1))
    return events, t


def rank_doc(rank: int, kernels: int, seed: int = 0) -> dict:
    """The trace object of one rank: at least ``kernels`` kernels."""
    rng = random.Random(seed * 1_000_003 + rank)
    t = T0 + rank * 37.125 + rng.uniform(0.0, 5.0)
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}}]
    ids = [0]
    step = 0
    while step * KERNELS_PER_STEP < kernels:
        step_events, t = _step(rng, step, t, ids)
        events += step_events
        step += 1
    return {"schemaVersion": 1, "traceName": f"rank{rank}", "displayTimeUnit": "ms",
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 0},
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000}],
            "traceEvents": events}


def write_rank_set(directory: Path, ranks: int = 16, kernels: int = 3000, seed: int = 0) -> list[Path]:
    """Write rank_00.json … into ``directory`` (world size ``ranks``); their paths, in rank order."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        doc = rank_doc(rank, kernels, seed)
        doc["distributedInfo"]["world_size"] = ranks
        path = directory / f"rank_{rank:02d}.json"
        path.write_text(json.dumps(doc, separators=(",", ":")))
        paths.append(path)
    return paths


def main(argv: list[str]) -> int:
    """rankset.py OUT_DIR [--ranks N] [--kernels K] [--seed S]"""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--kernels", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    paths = write_rank_set(args.out, args.ranks, args.kernels, args.seed)
    print(f"wrote {len(paths)} ranks to {args.out} ({sum(p.stat().st_size for p in paths) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
