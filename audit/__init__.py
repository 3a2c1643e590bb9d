"""costaudit: where GPU inference money goes, with evidence and payback."""

__version__ = "0.1.0"


def run_audit(case):
    """Run every stage on a loaded Case and return the AuditResult."""
    from audit.pipeline import run_audit as _run

    return _run(case)
