"""Tests for rlhf-canary. A package, so that tests import shared helpers as `tests.factories`."""
