"""The `fake_github` fixture: a fake GitHub that fails the test when anything broke GitHub's API contract."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_httpserver import HTTPServer

from tests.contract.fake_github import FakeGitHub


@pytest.fixture
def fake_github(httpserver: HTTPServer) -> Iterator[FakeGitHub]:
    """A FakeGitHub on pytest-httpserver; at teardown, contract violations and errors in the fake fail the test.

    A test that provokes violations on purpose asserts them and then clears `fake.violations`.
    """
    fake = FakeGitHub(httpserver)
    yield fake
    httpserver.check_handler_errors()  # a bug in the fake itself reaches the client only as a 500
    if fake.violations:
        listed = "\n".join(f"  - {violation}" for violation in fake.violations)
        pytest.fail(f"requests or responses outside GitHub's OpenAPI description:\n{listed}", pytrace=False)
