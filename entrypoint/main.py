"""The container's ENTRYPOINT: hands the runner's environment to the package, and its exit code back.

No logic here (DESIGN.md): canary_action/github/inputs.py reads INPUT_* and GITHUB_*, action.py does the
rest, so a test can run exactly what the runner runs (tests/contract/test_action_e2e.py).
"""

import os
import sys

from canary_action.github.action import main

if __name__ == "__main__":
    sys.exit(main(os.environ))
