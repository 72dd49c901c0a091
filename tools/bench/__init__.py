# SPDX-License-Identifier: Apache-2.0
"""Benchmarks: ``python -m tools.bench SCENARIO [--quick] [--json FILE]``."""
