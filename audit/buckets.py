"""The four buckets every amount in scope goes to, in the order audit.json and the report list them.

Kept in a module of its own (no imports) so that the attribution stage, the audit.json writer and
the reporters share one definition without the reporters loading the stages.
"""

BUCKETS = ("model_compute", "serving_path", "platform_overhead", "unattributed")
