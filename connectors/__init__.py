"""Connectors: each reads one source and returns DataFrames at the audit grain."""
