"""Connectors: each reads one source and returns DataFrames at the audit grain.

``base`` (the Connector contract: locate, fetch, validate, provenance, retries), ``registry``
(format name → class), ``errors``, ``objectstore`` (S3), and one subpackage per kind of source:
``billing`` (invoices), ``telemetry`` (metrics, scheduler usage, request logs), ``profiles``
(kernel traces and collector bundles). Connectors import ``schemas`` and each other, never
``audit`` or ``collector``.
"""
