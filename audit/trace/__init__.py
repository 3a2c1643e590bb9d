"""Analyzers over parsed traces (as HTA keeps analyzers apart from parsing).

``breakdown`` (busy / idle per device and stream, categories, the HTA-compatible figures),
``callpath`` (call paths and folded stacks), ``profile_view`` and ``intensity`` (one rank's view
for the findings), ``idle`` (every GPU idle gap classified and attributed to a host call path, the
idle flame graph), ``findings*`` (kernel-level findings), ``analyse`` (the document behind
``costaudit trace`` and the audit's kernel evidence).
"""
