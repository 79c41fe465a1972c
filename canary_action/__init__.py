"""rlhf-canary: a regression gate for RLHF and fine-tuning pipelines."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rlhf-canary")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
