"""The profiling collector: drives representative traffic at a target and writes a profile bundle.

``traffic`` (arrival schedules and request sets), ``drive`` (the load loop), ``http_target`` and
``inprocess`` (the two kinds of target), ``trace_file`` and ``replay`` (reading and replaying an
Azure LLM trace), ``nvml`` (GPU sampling), ``stats`` (latency, goodput, the net-gain comparison),
``latency`` (TTFT / TPOT / ITL / E2EL, request goodput, late sends), ``repeat`` (t-intervals over
repeated runs), ``profile`` (the collection session that writes ``profile.json`` and the
trace), ``demo`` (a small in-process model to try it on). It writes only what the
``profile_bundle`` connector reads, imports nothing of ours but ``schemas``, and is the only place
torch and pynvml are imported.
"""
