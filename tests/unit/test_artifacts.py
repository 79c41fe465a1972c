"""Unpacking an untrusted artifact zip: what a canary wrote comes out; traversal, links, bombs and floods do not."""

from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from canary_action.errors import BaselineError
from canary_action.github.artifacts import extract_artifact


def archive(*entries: tuple[str, bytes], link: str | None = None) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    buffer.seek(0)
    return buffer


def corrupted(*, deflate_stream: bool = False, method: int | None = None) -> io.BytesIO:
    """A zip whose second entry's data does not inflate, or names a compression method zipfile lacks."""
    raw = bytearray(archive(("ok.json", b"{}"), ("m.json", b"x" * 1000)).getvalue())
    local = raw.index(b"PK\x03\x04", 1)  # the second entry's local header
    if deflate_stream:
        start = local + 30 + len("m.json")
        raw[start : start + 6] = bytes(b ^ 0xFF for b in raw[start : start + 6])
    if method is not None:
        raw[local + 8] = method
        central = raw.rindex(b"PK\x01\x02")  # the last central directory record: the second entry's
        raw[central + 10] = method
    return io.BytesIO(bytes(raw))


def understated(n: int) -> io.BytesIO:
    """A zip of n entries whose end record declares one: zipfile still reads and parses its whole directory."""
    raw = bytearray(archive(*((f"d/{i:07d}.json", b"") for i in range(n))).getvalue())
    end = raw.rindex(b"PK\x05\x06")
    raw[end + 8 : end + 12] = (1).to_bytes(2, "little") * 2  # entries on this disk, entries in all
    return io.BytesIO(bytes(raw))


def test_a_canary_artifact_comes_out_whole(tmp_path: Path) -> None:
    files = extract_artifact(archive(("run-1/metrics.json", b"{}"), ("run-1/error.log", b"x")), tmp_path / "out")
    assert [p.relative_to(tmp_path / "out").as_posix() for p in files] == ["run-1/metrics.json", "run-1/error.log"]
    assert (tmp_path / "out" / "run-1" / "metrics.json").read_bytes() == b"{}"


@pytest.mark.parametrize(
    ("zipped", "said"),
    [
        (lambda: archive(("../evil.json", b"{}")), "points outside its folder"),
        (lambda: archive(("/etc/cron.d/evil", b"{}")), "points outside its folder"),
        (lambda: archive(("a/../../evil", b"{}")), "points outside its folder"),
        (lambda: archive(("C:/evil", b"{}")), "points outside its folder"),
        (lambda: archive(("ok.json", b"{}"), link="metrics.json"), "symbolic link"),
        (lambda: archive(*((f"f{i}.json", b"{}") for i in range(12))), "more than 10"),
        (lambda: archive(("bomb.json", b"0" * 5000)), "inflates past 4,096 bytes a file"),
        (lambda: archive(("a.json", b"0" * 3000), ("b.json", b"0" * 3000)), "inflates past 5,000 in all"),
        (lambda: io.BytesIO(b"not a zip at all"), "not a valid zip"),
        # Names no file system takes: refused before anything is written, so the first entry is not left behind.
        (lambda: archive(("a", b"{}"), ("a/metrics.json", b"{}")), "uses 'a' as a file and as a folder"),
        (lambda: archive(("a/metrics.json", b"{}"), ("a", b"{}")), "uses 'a' as a file and as a folder"),
        (lambda: archive(("ok.json", b"{}"), ("x" * 300, b"{}")), "name too long"),
        (lambda: archive(("ok.json", b"{}"), ("/".join(["d" * 200] * 6), b"{}")), "name too long"),
        (lambda: archive(("a/b.json", b"{}"), ("a//b.json", b"{}")), "names 'a//b.json' twice"),
        (lambda: corrupted(deflate_stream=True), "does not inflate"),
        (lambda: corrupted(method=99), "cannot be read"),
        # Costs bounded before zipfile or the folder check pays them: depth, and entries folders included.
        (lambda: archive(("/".join(["d"] * 33) + "/m.json", b"{}")), "nested over 32 folders deep"),
        (lambda: archive(*((f"d{i}/", b"") for i in range(45))), "declares 45 entries"),
        (lambda: understated(2000), "list of entries takes"),  # declares 1: its directory's size gives it away
    ],
)
def test_a_hostile_artifact_is_refused_and_nothing_is_left(
    tmp_path: Path, zipped: Callable[[], IO[bytes]], said: str
) -> None:
    out = tmp_path / "out"
    with pytest.raises(BaselineError, match=said) as caught:
        extract_artifact(zipped(), out, max_files=10, max_file_bytes=4096, max_total_bytes=5000)
    assert caught.value.fix
    assert list(out.iterdir()) == []
    assert not (tmp_path / "evil.json").exists()


def test_no_byte_flip_of_an_artifact_escapes_as_anything_but_a_refusal(tmp_path: Path) -> None:
    """4,000 random 1-6 byte flips of a canary's artifact: each is extracted or refused (BaselineError), never
    another exception (NotImplementedError, UnicodeDecodeError, ValueError, struct.error ... made 225 of 4,000
    end report mode as an unexpected error, with no check run: a pull request could make its report vanish)."""
    import random

    from tests.factories import make_metrics

    metrics = make_metrics(num_steps=20).model_dump_json().encode()
    valid = archive(("pair/head/metrics.json", metrics), ("pair/base/metrics.json", metrics),
                    ("pair/pair.json", b'{"pair_id": "p"}')).getvalue()  # fmt: skip
    rng = random.Random(0)
    refused = 0
    for attempt in range(4000):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        out = tmp_path / str(attempt)
        try:
            extract_artifact(io.BytesIO(bytes(data)), out)
        except BaselineError:
            refused += 1
            assert not any(out.iterdir()), "a refusal leaves nothing behind"
    assert 0 < refused < 4000


def test_captured_steps_are_skipped_whatever_their_size(tmp_path: Path) -> None:
    """A run's captures/ (for `canary replay` by hand) never count against the caps that keep a verdict's artifact
    readable, and are not written: the report side has no use for them."""
    big = b"\0" * 5000
    zipped = archive(("run/metrics.json", b"{}"), ("run/captures/step-000002-rank0/batch-0.safetensors", big),
                     ("run/captures/config.json", big))  # fmt: skip
    written = extract_artifact(zipped, tmp_path / "out", max_total_bytes=1000, max_file_bytes=1000)
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == ["run/metrics.json"]
    with pytest.raises(BaselineError, match="inflates past"):  # the same bytes anywhere else still count
        extract_artifact(archive(("run/metrics.json", big)), tmp_path / "again", max_total_bytes=1000)
