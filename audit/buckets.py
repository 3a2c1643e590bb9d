"""The four buckets every amount in scope goes to, in the order audit.json and the report list them.

Kept in a module of its own (no imports) so that the attribution stage, the audit.json writer and
the reporters share one definition without the reporters loading the stages.
"""

BUCKETS = ("model_compute", "serving_path", "platform_overhead", "unattributed")


#: the parts no service owns that services share by the allocation key (METHOD §4)
SHARED_PARTS = {("serving_path", "serving_compute"), ("serving_path", "serving_network"),
                ("platform_overhead", "egress"), ("platform_overhead", "observability"),
                ("platform_overhead", "orchestration"), ("platform_overhead", "commitment_unused"),
                ("platform_overhead", "unallocated")}
#: the parts that are billing lines (a class's charges), unmatched ones included
LINE_PARTS = {name for _, name in SHARED_PARTS if name != "unallocated"} | {"unmatched_line"}
#: the part a non-GPU class's charges go to whole, as (bucket, part name)
CLASS_PARTS = {
    "serving_compute": ("serving_path", "serving_compute"),
    "serving_network": ("serving_path", "serving_network"),
    "egress": ("platform_overhead", "egress"),
    "observability": ("platform_overhead", "observability"),
    "orchestration": ("platform_overhead", "orchestration"),
    "commitment_unused": ("platform_overhead", "commitment_unused"),
    "unmatched": ("unattributed", "unmatched_line"),
}
