"""Shared pytest setup.

Its presence (with tests/__init__.py) makes pytest put the repository root on sys.path, so that any test
can `from tests.factories import make_metrics` however pytest is started.
"""
