"""Tests of the schemas package: the table models and the modules every layer shares."""
