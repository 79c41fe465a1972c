"""A command's own temporary folder: every temporary folder the command makes (a base commit's checkout, downloaded
baselines, a child's scratch, each 0700) goes in it, and it is removed when the command ends, whatever ended it.

    with own_temporary_folder():
        ...  # tempfile.mkdtemp() and the TMPDIR children inherit are inside a 0700 folder of this process

Before, each made its own folder in the shared temporary folder and most were never removed: after one run of the test
suite and about 40 pairs, /tmp held 145 of them. The folder is also the coordinator's TMPDIR and compile caches
(TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR): nothing another user can write is on its paths (a head side's planted
inductor module in the shared /tmp was loaded by root). A SIGKILL leaves it behind, as it leaves everything.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final

PREFIX: Final = "rlhf-canary-"
#: What points a process at its temporary folder and caches (environment.private_temporary gives a child its own).
_VARIABLES: Final = ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextlib.contextmanager
def own_temporary_folder() -> Iterator[Path]:
    """This process's temporary folder (0711) for the block's life, then removed; what tempfile and the three
    variables said before comes back."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    # Searchable, not listable, by others: a lockstep head side of a user of its own reaches its own scratch in here
    # (by a name it is given) without CAP_DAC_READ_SEARCH, which Docker does not grant; it cannot list the others.
    folder.chmod(0o711)
    saved_dir, saved_env = tempfile.tempdir, {name: os.environ.get(name) for name in _VARIABLES}
    places = {"TMPDIR": folder, "TORCHINDUCTOR_CACHE_DIR": folder / "inductor", "TRITON_CACHE_DIR": folder / "triton"}
    for place in places.values():
        place.mkdir(mode=0o700, exist_ok=True)
    tempfile.tempdir = str(folder)
    os.environ.update({name: str(place) for name, place in places.items()})
    try:
        yield folder
    finally:
        tempfile.tempdir = saved_dir
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)
