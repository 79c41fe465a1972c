"""`python -I -m canary_action.evaluate --job JOB.json`: the evaluator process (process.py)."""

import sys

from canary_action.evaluate.process import main

sys.exit(main())
