"""Benchmarks: ``python -m tools.bench SCENARIO [--quick] [--json FILE]``."""
