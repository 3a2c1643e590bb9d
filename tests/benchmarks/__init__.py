"""Tests of the benchmark tools (benchmarks/)."""
