"""Models, tokenizers and datasets named by Hub id: in the local cache, or the Hub reachable, or exit 2 at once.

Without this check a machine that cannot reach the Hub spends minutes in huggingface_hub's retries (five per
file, 1 + 2 + 4 + 8 + 8 s apart: 23 s a file) and ends with a traceback. Before anything is loaded, each Hub
name is looked up in the Hugging Face cache. What the cache lacks must come from the Hub: under HF_HUB_OFFLINE
that is refused at once, otherwise the Hub is asked once per process (one request, with huggingface_hub's own
metadata timeout, HF_HUB_ETAG_TIMEOUT, 10 s by default) and a Hub that does not answer is refused too. A Hub that
answers, whatever it answers, leaves loading as it is (a gated or missing repository is the library's to
explain). Before the heavy imports, a run whose names are all cached also asks, unless the user set offline mode
either way: when the Hub does not answer, offline mode is switched on, and said (notices), rather than letting
each cached file go through its retries first.

No torch and no transformers here: `canary run` calls this before the heavy imports (precheck.py), and the
loaders call it again before each Hub load (setup.py, data.py) for what a custom factory loads itself.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from canary_action.errors import DOCS, ModelUnavailableError
from canary_action.train.builtin import catalog

Kind = Literal["model", "tokenizer", "dataset"]

#: What `datasets` reads as a local file rather than a Hub id (data.py loads these by format).
LOCAL_DATA_FORMATS: Final = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
#: A Hub repository id as huggingface_hub validates it (its REPO_ID_REGEX; "--" and ".." are refused apart).
#: Anything else that is not on disk is a path that does not exist.
_REPO_ID: Final = re.compile(r"^(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b$", re.ASCII)
#: The file whose presence in the cache says a repository of this kind was downloaded (transformers reads it
#: first); huggingface_hub also records files a repository lacks, which counts as known too.
_MARKER: Final[dict[Kind, str]] = {"model": "config.json", "tokenizer": "tokenizer_config.json"}
_TRUE: Final = {"1", "ON", "YES", "TRUE"}
#: The variables huggingface_hub reads for offline mode (the second is transformers' older name).
_OFFLINE_VARIABLES: Final = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
#: The docs' section on running without the Hub.
OFFLINE_DOCS: Final = DOCS.replace("#readme", "/blob/main/docs/configs.md#without-the-hugging-face-hub")


@dataclass(frozen=True)
class HubName:
    """A name a run loads, with the revision it loads and, for messages, the config key that names it."""

    name: str
    kind: Kind
    revision: str | None = None
    key: str | None = None

    def __str__(self) -> str:
        return f"{self.key or self.kind} {self.name}"


def on_hub(name: str, kind: Kind) -> bool:
    """Whether transformers or datasets would look `name` up on the Hub: not builtin, not on disk, not a data file."""
    if catalog.split(name) is not None or Path(name).exists():
        return False
    if kind == "dataset" and Path(name).suffix in LOCAL_DATA_FORMATS:
        return False
    return _REPO_ID.match(name) is not None and ".." not in name and "--" not in name and not name.endswith(".git")


def require(
    names: Sequence[HubName], *, announce: Callable[[str], None] | None = None, before_imports: bool = False
) -> list[str]:
    """Return when every Hub name in `names` can load; raise ConfigError (exit 2) when one cannot.

    `before_imports` (precheck.py, before transformers and datasets are imported): when the cache has everything
    but the Hub does not answer, switch offline mode on for the run, so that loading takes the cached files at
    once instead of retrying each one for 23 s first; the returned notices say so. `announce` hears a line
    before the Hub is asked (up to HF_HUB_ETAG_TIMEOUT seconds of waiting).
    """
    from huggingface_hub import constants

    wanted = [n for n in names if on_hub(n.name, n.kind)]
    if not wanted:
        return []
    datasets_offline = os.environ.get("HF_DATASETS_OFFLINE")

    def offline(item: HubName) -> bool:  # datasets has a switch of its own that overrides the Hub's
        if item.kind == "dataset" and datasets_offline is not None:
            return datasets_offline.upper() in _TRUE
        return bool(constants.HF_HUB_OFFLINE)

    def reach(missing: Sequence[HubName]) -> str | None:
        if announce is not None and missing:  # (a Hub that answers at all answers within a second)
            listed = ", ".join(dict.fromkeys(str(n) for n in missing))
            announce(f"not in the Hugging Face cache: {listed}; asking the Hub ({constants.ENDPOINT})")
        return probe(constants.ENDPOINT, float(constants.HF_HUB_ETAG_TIMEOUT))

    cache = Path(constants.HF_HUB_CACHE)
    # Offline mode is ours to switch on only where the user left it unset: HF_HUB_OFFLINE=0 is theirs to keep.
    ours = before_imports and not any(v in os.environ for v in (*_OFFLINE_VARIABLES, "HF_DATASETS_OFFLINE"))
    why = decide(wanted, cached=in_cache, offline=offline, reach=reach, cache=cache, ask_when_cached=ours)
    if why is None:
        return []
    _go_offline()
    listed = ", ".join(dict.fromkeys(n.name for n in wanted))
    return [
        f"the Hugging Face Hub cannot be reached ({why}): loading {listed} from the cache ({cache}) in offline "
        "mode, as HF_HUB_OFFLINE=1 does, instead of retrying each file (set it yourself to skip this check)"
    ]


def decide(
    names: Sequence[HubName],
    *,
    cached: Callable[[HubName], bool],
    offline: Callable[[HubName], bool],
    reach: Callable[[Sequence[HubName]], str | None],
    cache: Path,
    ask_when_cached: bool = False,
) -> str | None:
    """The rule, apart from the machine: what the cache lacks must come from the Hub, and the Hub must answer.

    `reach` is asked (with what is missing) when something is missing and offline mode does not already forbid
    the Hub, and, with `ask_when_cached`, when nothing is missing but offline mode is off. It returns None when
    the Hub answered, otherwise why it could not be reached. Returns that reason when the cache has everything
    and the Hub cannot be reached (the caller then loads offline), None when loading can go on as it is.
    """
    missing = [n for n in names if not cached(n)]
    forbidden = [n for n in missing if offline(n)]
    if forbidden:
        raise ModelUnavailableError(
            f"offline mode (HF_HUB_OFFLINE) is on and the Hugging Face cache ({cache}) does not have what the "
            "config names:",
            errors=_listed(forbidden),
            fix=offline_fix(forbidden),
            docs=OFFLINE_DOCS,
        )
    if not missing and (not ask_when_cached or all(offline(n) for n in names)):
        return None
    why = reach(missing)
    if why is not None and missing:
        raise ModelUnavailableError(
            f"the Hugging Face Hub cannot be reached ({why}) and the Hugging Face cache ({cache}) does not have "
            "what the config names:",
            errors=_listed(missing),
            fix=offline_fix(missing),
            docs=OFFLINE_DOCS,
        )
    return why


def _go_offline() -> None:
    """Offline mode from here on: in the environment, for the processes a run starts (ranks) and for libraries
    not imported yet; and in huggingface_hub's constant, read when it was imported (just now, by this module),
    which transformers and huggingface_hub consult at each download."""
    from huggingface_hub import constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True


def offline_fix(missing: Sequence[HubName]) -> str:
    """The ways to run without the Hub: the builtins in the names' place, or the cache filled beforehand."""
    ways = []
    if any(n.kind != "dataset" for n in missing):
        ways.append(f"model_name: {_either(catalog.MODELS)}")
    if any(n.kind == "dataset" for n in missing):
        ways.append(f"dataset_name: {_either(catalog.DATASETS)}")
    downloads = []
    for repo in dict.fromkeys(n.name for n in missing if n.kind != "dataset"):
        downloads.append(f"`hf download {repo}`")
    for repo in dict.fromkeys(n.name for n in missing if n.kind == "dataset"):
        downloads.append(f"`python -c \"import datasets; datasets.load_dataset('{repo}')\"`")
    return (
        f"run offline on the builtin assets (random weights of the real shapes, synthetic data): "
        f"{'; '.join(ways)} (configs/tiny/ has ready configs); or fill the cache on a machine that reaches the "
        f"Hub ({', '.join(downloads)}; HF_HOME says where the cache is) and run with HF_HUB_OFFLINE=1, which "
        "loads from the cache without asking the Hub"
    )


def _either(names: Iterable[str]) -> str:
    *others, last = [f"builtin:{name}" for name in names]
    return f"{', '.join(others)} or {last}"


def in_cache(item: HubName, cache: Path | None = None) -> bool:
    """Whether the Hugging Face cache knows `item` (at its revision, for models and tokenizers)."""
    from huggingface_hub import constants, try_to_load_from_cache

    hub_cache = cache or Path(constants.HF_HUB_CACHE)
    if item.kind == "dataset":
        return _dataset_in_cache(item.name, hub_cache, _datasets_cache(constants.HF_HOME))
    known = try_to_load_from_cache(item.name, _MARKER[item.kind], cache_dir=hub_cache, revision=item.revision)
    return known is not None  # a path, or the marker of a file the repository is known not to have


def _dataset_in_cache(name: str, hub_cache: Path, datasets_cache: Path) -> bool:
    """The repository's files in the Hub cache, or `datasets`' prepared copy (folder `namespace___name`)."""
    snapshots = hub_cache / f"datasets--{name.replace('/', '--')}" / "snapshots"
    if snapshots.is_dir() and any(snapshots.iterdir()):
        return True
    # datasets names the folder after the builder, snake_cased: compare letters and digits only.
    wanted = _squash(name.replace("/", "___"))
    return datasets_cache.is_dir() and any(_squash(d.name) == wanted for d in datasets_cache.iterdir() if d.is_dir())


def _datasets_cache(hf_home: str) -> Path:
    return Path(os.environ.get("HF_DATASETS_CACHE", Path(hf_home) / "datasets")).expanduser()


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@functools.cache
def probe(endpoint: str, timeout: float) -> str | None:
    """None when `endpoint` answers HTTP at all (any status, an error too); otherwise why it could not be reached.

    One request through huggingface_hub's own client, with the proxies and certificates its downloads use:
    the probe fails where they would, and only there.
    """
    from huggingface_hub import get_session

    try:
        get_session().head(endpoint, timeout=timeout)
    except Exception as error:  # requests (huggingface_hub < 1) or httpx: each client has its own transport errors
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return None


def _listed(names: Sequence[HubName]) -> list[str]:
    """One line per name, a repository named by several keys (model and its tokenizer) once."""
    lines: dict[str, str] = {}
    for n in names:
        lines.setdefault(n.name, f"{n} ({'dataset' if n.kind == 'dataset' else 'model repository'})")
    return list(lines.values())
