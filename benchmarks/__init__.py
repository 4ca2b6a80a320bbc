"""Benchmarks: run as scripts (python benchmarks/op_overhead.py)."""
