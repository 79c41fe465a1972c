"""Shared pytest setup.

Its presence (with tests/__init__.py) makes pytest put the repository root on sys.path, so that any test
can `from tests.factories import make_metrics` however pytest is started.
"""

from hypothesis import settings

# Property tests run on shared, loaded machines: hypothesis's default 200 ms deadline per example failed them
# there (DeadlineExceeded, then "Flaky") for no fault of the code. The examples are drawn from a fixed seed, so
# that a failure in CI is the same failure on a laptop; `--hypothesis-profile=default` explores anew by hand.
settings.register_profile("canary", deadline=None, derandomize=True, database=None, print_blob=True)
settings.load_profile("canary")
