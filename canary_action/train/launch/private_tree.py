"""A lockstep head side's own view of its code tree, when it runs as a user of its own (environment.Identity).

That user may write nothing it was not given, so the tree it was checked out into is read-only to it — and a
pull request's code expects to write beside itself: `pip install .` builds in the tree, a factory's relative
output folder. It gets a view instead: every folder made anew and given to it, every file a hard link to the
original (a copy where the file system refuses a link: another device), symbolic links as they are. It may add,
rename and remove entries in its view; the files themselves stay as read-only to it as they are in the tree, and
nothing it does reaches the tree, the base side's tree or the pair's results.

The view lives in a hidden folder inside the tree (the one place sure to be on its file system: links, not copies),
left out of the view itself, else in the system's temporary folder; the coordinator removes it when the pair ends.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from canary_action.train.launch.environment import Identity


def private_tree(tree: Path, identity: Identity, exclude: Sequence[Path] = ()) -> Path:
    """The view of `tree` for `identity` (see the module); `exclude`: folders left out (the pair's own output)."""
    try:  # inside the tree itself, hidden and left out of the view: the one place sure to be on its file system
        holder = Path(tempfile.mkdtemp(prefix=".rlhf-canary-head-", dir=tree))
    except OSError:
        holder = Path(tempfile.mkdtemp(prefix="rlhf-canary-head-"))
    identity.give(holder)
    view = holder / "tree"
    skipped = {p.resolve() for p in (*exclude, holder)}
    for folder, dirnames, filenames in os.walk(tree):
        source = Path(folder)
        target = view / source.relative_to(tree)
        target.mkdir()
        shutil.copymode(source, target)
        identity.give(target)  # a folder made here, never a link's target
        for name in list(dirnames):
            if (source / name).is_symlink():
                (target / name).symlink_to((source / name).readlink())
                dirnames.remove(name)
            elif (source / name).resolve() in skipped:
                dirnames.remove(name)
        for name in filenames:
            _mirror(source / name, target / name)
    return view


def remove_private_tree(view: Path) -> None:
    shutil.rmtree(view.parent, ignore_errors=True)


def _mirror(source: Path, target: Path) -> None:
    mode = source.lstat().st_mode
    if stat.S_ISLNK(mode):
        target.symlink_to(source.readlink())
    elif stat.S_ISREG(mode):
        try:
            os.link(source, target)
        except OSError:  # another file system, or one without hard links
            shutil.copy2(source, target)
    # sockets, pipes, devices: not code, left out
