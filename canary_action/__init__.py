"""rlhf-canary: a regression gate for RLHF and fine-tuning pipelines."""

import os
import sys
from importlib.metadata import PackageNotFoundError, version

# A canary child process (train/launch/environment.py) runs with PYTHONSAFEPATH and finds the team's code tree
# here: appended, so that the standard library and the installed packages come first, whatever folders the
# tree (a pull request) holds.
_tree = os.environ.get("CANARY_CODE_TREE")
if _tree and _tree not in sys.path:
    sys.path.append(_tree)

try:
    __version__ = version("rlhf-canary")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
