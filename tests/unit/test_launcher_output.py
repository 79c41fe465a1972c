"""The launcher's output (every rank's lines) reaches stderr, also where stderr has no file descriptor: a Jupyter
kernel's stream, where `api.run` of a multi-process config used to fail with `UnsupportedOperation: fileno`."""

from __future__ import annotations

import io
import sys

import pytest

from canary_action.train.launch import ranks

SPEAKS = [sys.executable, "-c", "import sys; print('from stdout'); print('from stderr', file=sys.stderr); sys.exit(3)"]


class NoDescriptor(io.StringIO):
    """Like ipykernel's OutStream: text goes in, fileno() raises."""

    def fileno(self) -> int:
        raise io.UnsupportedOperation("fileno")


def test_a_stderr_without_a_descriptor_gets_the_launchers_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = NoDescriptor()
    monkeypatch.setattr(sys, "stderr", stream)
    code = ranks._run_launcher(SPEAKS, limit_s=60)
    assert code == 3
    assert "from stdout" in stream.getvalue()
    assert "from stderr" in stream.getvalue()


def test_a_real_stderr_is_handed_to_the_launcher(capfd: pytest.CaptureFixture[str]) -> None:
    code = ranks._run_launcher(SPEAKS, limit_s=60)
    captured = capfd.readouterr()
    assert code == 3
    assert "from stdout" in captured.err  # the ranks' stdout goes to stderr: stdout is `canary run`'s summary
    assert "from stderr" in captured.err
    assert captured.out == ""
