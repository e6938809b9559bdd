"""Fixtures shared by every family's tests come from the core's test kit (`tether.testing`, a pytest
plugin: `tether_run`, `no_leftover_processes`); helpers live in tests/support.py."""
