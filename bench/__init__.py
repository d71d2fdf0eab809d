"""Benchmarks of the service against bare baselines; see bench/README.md."""
