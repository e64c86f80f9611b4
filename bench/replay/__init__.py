"""The Philly trace replay behind ``python -m bench.trace_replay`` (see that module)."""
