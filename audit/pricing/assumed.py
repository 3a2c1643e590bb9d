"""Why an option's saving is the catalogue's fraction (*assumed*) rather than a model (METHOD §7).

A model named in the catalogue (``model = …``) whose evidence the case lacks falls back to the
catalogue fraction with the reason below; an option with no model has the reason of its kind.
"""
from __future__ import annotations

#: model name -> why it is assumed where its evidence is missing (or no model exists yet)
MISSING = {
    "right_size": "no service has a measured serving split to replay (no kernel profile or no GPUs held)",
    "consolidate": "no unallocated GPU lies on nodes of a known instance type with GPUs per instance",
    "autoscale": "no service has a measured serving split to replay, or the option states no policy",
    "commitment": "no billing line shows usage a commitment covered with its list cost (the discount)",
    "batching": "no service's profile is a collector bundle with a batch-size sweep (profile.json sweep) to "
                "set against the servers' running batch (vllm:num_requests_running)",
    "fusion": "needs the memory-bound chains' bytes at the device's memory bandwidth; the kernel findings "
              "are made after the options are priced and carry no bytes",
    "sync_host": ("no service has a kernel profile whose trace could be read to attribute its GPU idle to host "
                  "call paths (sync drain, host compute)"),
    "prefix_cache": ("no service's model compute is split into prefill and decode (vLLM / TGI phase timers or a "
                     "profile with both phases) with a measured prefix-cache hit rate"),
    "generation_cap": ("no service's model compute is split into prefill and decode with a measured distribution of "
                       "generated tokens (vLLM / TGI generation-token histogram)"),
}
#: for an option that names no model
NO_MODEL = "no model of this option on the measured data yet: the catalogue's recoverable fraction"


def reason(model: str | None) -> str:
    """The reason an option is assumed, for its model name (None: the option names no model)."""
    return MISSING.get(model or "", NO_MODEL)
