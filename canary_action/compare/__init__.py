"""Comparison: a run against its baselines — statistics, checks, comparability, suspects, the verdict."""
