"""The container's ENTRYPOINT: hands the runner's environment to the package, and its exit code back.

No logic here (DESIGN.md), only the process's hardening: canary_action/github/inputs.py reads INPUT_* and
GITHUB_*, action.py does the rest, so a test can run exactly what the runner runs (tests/contract/).
"""

import os
import sys

from canary_action.github.action import main
from canary_action.train.launch.environment import seal_process

if __name__ == "__main__":
    seal_process()  # first: the token in this process's environment is then out of its children's reach
    sys.exit(main(os.environ))
