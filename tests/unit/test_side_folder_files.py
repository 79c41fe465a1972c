"""What the root side reads from, writes into and leaves of a folder a pull request's side could write (files.py):
no link followed, no file written through, nothing but plain folders and files left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from canary_action.files import FileRefusedError, remove_unsafe, tail_inside, write_new_inside


def test_a_file_written_where_a_side_planted_a_link_replaces_the_link_and_leaves_its_target(tmp_path: Path) -> None:
    """The head side's setup ran before the coordinator wrote side.json into the head's folder: a link there made
    root overwrite any host file with the side's JSON."""
    host = tmp_path / "host-secret"
    host.write_text("root only\n", encoding="utf-8")
    host.chmod(0o600)
    side = tmp_path / "head"
    side.mkdir()
    (side / "side.json").symlink_to(host)

    write_new_inside(side, "side.json", b'{"run_id": "x"}')

    assert host.read_text(encoding="utf-8") == "root only\n"
    assert not (side / "side.json").is_symlink()
    assert (side / "side.json").read_bytes() == b'{"run_id": "x"}'


def test_a_log_behind_a_link_is_not_read(tmp_path: Path) -> None:
    """The coordinator read the head's error.log through a link at /proc/self/environ: its environment, a token in
    it, became the error text it published."""
    side = tmp_path / "head"
    side.mkdir()
    secret = tmp_path / "environ"
    secret.write_text("INPUT_GITHUB-TOKEN=ghs_secret\n", encoding="utf-8")
    (side / "error.log").symlink_to(secret)
    with pytest.raises(OSError, match="Too many levels of symbolic links"):  # ELOOP: O_NOFOLLOW on the last part
        tail_inside(side, ["error.log"], size=100)
    (side / "error.log").unlink()
    (side / "error.log").write_text("Traceback\n" + "x" * 50_000 + "\nValueError: last\n", encoding="utf-8")
    assert tail_inside(side, ["error.log"], size=100).decode().endswith("ValueError: last\n")
    os.mkfifo(side / "fifo.log")
    with pytest.raises(FileRefusedError, match="named pipe"):
        tail_inside(side, ["fifo.log"], size=100)


def test_links_special_files_and_hard_links_are_removed_and_said_plain_files_stay(tmp_path: Path) -> None:
    """actions/upload-artifact follows links on the host as the runner's user: a link the head left in its run
    folder put host files in the artifact. A hard link makes a host file look like the side's own."""
    out = tmp_path / "out"
    (out / "head" / "checkpoints").mkdir(parents=True)
    (out / "head" / "metrics.json").write_text("{}", encoding="utf-8")
    (out / "head" / "checkpoints" / "weights.bin").write_bytes(b"w")
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret").write_text("s", encoding="utf-8")
    (out / "head" / "creds").symlink_to(outside / "deep" / "secret")
    (out / "head" / "dir-link").symlink_to(outside)
    (out / "head" / "checkpoints" / "dangling").symlink_to(tmp_path / "nothing")
    os.mkfifo(out / "head" / "pipe")
    os.link(outside / "deep" / "secret", out / "head" / "hard")

    removed = remove_unsafe(out)

    assert removed == [
        "head/checkpoints/dangling (a link)",
        "head/creds (a link)",
        "head/dir-link (a link)",
        "head/hard (a file of 2 hard links)",
        "head/pipe (a named pipe (FIFO))",
    ]
    kept = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert kept == ["head", "head/checkpoints", "head/checkpoints/weights.bin", "head/metrics.json"]
    assert (outside / "deep" / "secret").read_text(encoding="utf-8") == "s"  # nothing behind a link touched
    assert remove_unsafe(out) == []
    assert remove_unsafe(out / "head" / "metrics.json") == []  # not a folder: nothing to clear


def test_a_folder_too_wide_or_deep_to_sweep_is_removed_whole_not_left_with_its_links(tmp_path: Path) -> None:
    """The sweep held a descriptor per folder found: 1,100 folders each with a link exhausted a 1,024-descriptor limit,
    it raised, and every link stayed for the upload. Now it holds one per level of depth, and fails closed."""
    import resource

    out = tmp_path / "out"
    for i in range(300):
        (out / "wide" / f"d{i}").mkdir(parents=True)
        (out / "wide" / f"d{i}" / "creds").symlink_to("/etc/hostname")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))  # far fewer descriptors than folders
    try:
        removed = remove_unsafe(out)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(removed) == 300
    assert [p for p in out.rglob("*") if p.is_symlink()] == []

    deep = tmp_path / "deep"
    level = deep
    for _ in range(200):  # deeper than the descriptors allow
        level = level / "d"
    level.mkdir(parents=True)
    (level / "creds").symlink_to("/etc/hostname")
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    try:
        removed = remove_unsafe(deep)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert removed[0].startswith("all of it (OSError")
    assert not deep.exists()


def test_an_output_folder_replaced_by_a_link_during_the_run_is_unlinked_before_the_upload(tmp_path: Path) -> None:
    """A training of root's (a single run in the action) replaced canary-output by a link to the runner's home: the
    output folder was checked before training only, and the upload step followed the link."""
    import io

    from canary_action.github.action import _hand_back
    from canary_action.github.commands import Log

    workspace, home = tmp_path / "workspace", tmp_path / "runner-home"
    workspace.mkdir()
    home.mkdir()
    (home / ".credentials").write_text("secret", encoding="utf-8")
    (workspace / "canary-output").symlink_to(home)
    out = io.StringIO()

    _hand_back(workspace / "canary-output", workspace, Log(out))

    assert not (workspace / "canary-output").exists()
    assert (home / ".credentials").read_text(encoding="utf-8") == "secret"
    assert "had become a link" in out.getvalue()
