"""Telemetry and scheduler connectors: GPU activity, pods, requests and traffic per interval.

OpenMetrics text files, a live Prometheus-API endpoint and ``query_range`` dumps (DCGM,
kube-state-metrics, vLLM / Triton / TGI), nvidia-smi and ``dcgmi dmon`` logs, Slurm ``sacct``,
OpenCost allocations and access logs; the text parser, interval grid and table builders they
share are public modules of this package.
"""
