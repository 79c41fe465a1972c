"""The bases of every metrics record: closed (a key this version does not know is an error) and, for the
measurements, finite."""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict
from pydantic.types import FailFast

#: Lists are validated up to their first bad item: a file padded with millions of bad items would otherwise cost
#: an error object each (seconds and gigabytes; metrics/io.py refuses junk keys before validating, docs/benchmarks.md).
FAIL_FAST: Final = FailFast()


class Closed(BaseModel):
    """Closed: a key this version does not know is an error. A new field means a new schema_version."""

    model_config = ConfigDict(extra="forbid")


class Record(Closed):
    """A part of metrics.json: closed, and finite. The series store a non-finite value as null and a summary
    never holds one, so a float field refuses inf and NaN (read_metrics's fast path relies on it)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
