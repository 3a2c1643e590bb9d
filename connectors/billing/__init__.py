"""Billing connectors: invoices into FOCUS-shaped lines (table ``lines``, schemas.billing).

FOCUS files (``focus``), AWS CUR files and exports (``cur``), CUR tables in Athena (``athena``),
the GCP billing export in BigQuery or as files (``gcp_billing``), Azure cost exports (``azure``);
the SQL they share, the quick totals behind ``costaudit billing`` (``totals``) and the GPU
catalogue (``catalogue``: which instance types and meters bill GPU time).
"""
