"""Profile connectors: kernel traces into per-event columns and summaries (schemas.profile).

``stream`` / ``columns`` / ``events`` parse Kineto (Chrome trace) JSON into columns without a
Python object per event; ``kineto``, ``nsys`` (Nsight Systems SQLite) and ``bundle`` (the
collector's profile bundles) are the readers; ``categories`` names kernels' categories. The
analyses over parsed traces live in ``audit.trace``.
"""
