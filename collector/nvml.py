"""Background sampling: NVML (utilisation, memory, power, clocks) and the host process's CPU time.

On a host without a GPU the NVML part records why it is unmeasured ("NVML library not found" or the
NVML error text), never zeros. Sampling runs in a daemon thread at a fixed interval and costs a few
microseconds per sample.
"""
from __future__ import annotations

import os
import threading
import time

UNMEASURED = "unmeasured: "


def nvml_open():
    """(pynvml module, device handles) or (None, reason) when NVML cannot be used."""
    try:
        import pynvml
    except ImportError:
        return None, UNMEASURED + "nvidia-ml-py not installed"
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except pynvml.NVMLError as exc:
        if isinstance(exc, getattr(pynvml, "NVMLError_LibraryNotFound", ())):
            return None, UNMEASURED + "NVML library not found"
        return None, UNMEASURED + f"NVML error: {exc}"
    if not handles:
        return None, UNMEASURED + "NVML found no GPU"
    return (pynvml, handles), None


def nvml_sample(nvml, handles) -> list[tuple]:
    """One sample per device: (util %, memory used bytes, power W, SM clock MHz, memory clock MHz)."""
    out = []
    for h in handles:
        util = nvml.nvmlDeviceGetUtilizationRates(h)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        power = nvml.nvmlDeviceGetPowerUsage(h) / 1000.0
        sm = nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)
        mclock = nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)
        out.append((util.gpu, mem.used, power, sm, mclock))
    return out


class Sampler:
    """Samples NVML and host CPU time every ``interval`` seconds between start() and stop()."""

    def __init__(self, interval: float = 0.1, nvml: bool = True):
        self.interval = interval
        self.gpu: list[list[tuple]] = []
        self.host: list[tuple[float, float]] = []     # (wall, process CPU seconds)
        self.reason: str | None = None
        self.names: list[str] = []
        self._handle = None
        if nvml:
            self._handle, self.reason = nvml_open()
        else:
            self.reason = UNMEASURED + "NVML sampling switched off"
        if self._handle:
            module, handles = self._handle
            self.names = [_text(module.nvmlDeviceGetName(h)) for h in handles]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="costaudit-sampler", daemon=True)

    def start(self) -> "Sampler":
        """Start the sampling thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = os.times()
            self.host.append((time.perf_counter(), t.user + t.system))
            if self._handle:
                try:
                    self.gpu.append(nvml_sample(*self._handle))
                except Exception as exc:   # a device that stops answering: say so, keep what we have
                    self.reason = UNMEASURED + f"NVML sampling failed: {exc}"
                    self._handle = None
            self._stop.wait(self.interval)

    def summary(self) -> dict:
        """NVML per device (mean / max) or the unmeasured reason, and host CPU utilisation."""
        return {"nvml": self._gpu_summary(), "host_cpu": self._host_summary(),
                "interval_s": self.interval}

    def _gpu_summary(self) -> dict:
        if not self.gpu:
            return {"measured": False, "reason": self.reason or UNMEASURED + "no NVML samples"}
        devices = []
        for d, name in enumerate(self.names):
            rows = [s[d] for s in self.gpu if d < len(s)]
            cols = list(zip(*rows))
            devices.append({
                "index": d, "name": name, "samples": len(rows),
                "utilisation_pct": _mean_max(cols[0]), "memory_used_bytes": _mean_max(cols[1]),
                "power_w": _mean_max(cols[2]), "sm_clock_mhz": _mean_max(cols[3]),
                "memory_clock_mhz": _mean_max(cols[4])})
        return {"measured": True, "reason": self.reason, "devices": devices}

    def _host_summary(self) -> dict:
        if len(self.host) < 2:
            return {"measured": False, "reason": UNMEASURED + "fewer than two host samples"}
        (w0, c0), (w1, c1) = self.host[0], self.host[-1]
        wall = max(w1 - w0, 1e-9)
        return {"measured": True, "process_cpu_s": c1 - c0, "wall_s": wall,
                "cpu_cores_busy": (c1 - c0) / wall}


def _mean_max(values) -> dict:
    """{"mean", "max"} of a column of samples."""
    values = [float(v) for v in values]
    return {"mean": sum(values) / len(values), "max": max(values)}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
