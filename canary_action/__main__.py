"""`python -m canary_action`: the `canary` command, for environments without the console script on PATH."""

from canary_action.cli import main

if __name__ == "__main__":
    main()
