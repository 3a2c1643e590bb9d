"""costaudit: where GPU inference money goes, with evidence and payback.

The stages run from :func:`audit.pipeline.run_audit`; the command line is :mod:`audit.cli`.
"""

__version__ = "0.1.0"
