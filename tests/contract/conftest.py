"""The `fake_github` fixture: a fake GitHub that fails the test when anything broke GitHub's API contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from tests.contract.fake_github import FakeGitHub
from tests.contract.test_action_e2e import Runner


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


@pytest.fixture
def runner(fake_github: FakeGitHub, tmp_path: Path) -> Runner:
    """The action as the runner calls it (test_action_e2e.Runner), against `fake_github`."""
    return Runner(fake_github, tmp_path)
