"""The history of a canary's trusted runs (docs/history.md): the record (record.py), reading it as untrusted data
(read.py), writing it with its cap (store.py), one entry from a run's output (collect.py), and the static site that
draws it (site.py, charts.py)."""
