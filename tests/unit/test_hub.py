"""The Hub rule (train/hub.py): what the cache has loads, what it lacks needs a Hub that answers, and offline mode
forbids asking. The rule is tested apart from the machine; the cache lookup on a cache laid out as huggingface_hub
lays it out; the probe on local sockets (a closed port, a server that answers 404)."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from canary_action.errors import ConfigError
from canary_action.train.hub import HubName, decide, in_cache, on_hub, probe

MODEL = HubName("EleutherAI/pythia-70m", "model", None, "model_name")
TOKENIZER = HubName("EleutherAI/pythia-70m", "tokenizer", None, "model_name")
DATA = HubName("Anthropic/hh-rlhf", "dataset", None, "dataset_name")
SHA = "0123456789abcdef0123456789abcdef01234567"


class Hub:
    """A fake `reach`: records what it was asked about and answers as told."""

    def __init__(self, why: str | None) -> None:
        self.why = why
        self.asked: list[list[str]] = []

    def __call__(self, missing: Sequence[HubName]) -> str | None:
        self.asked.append([n.name for n in missing])
        return self.why


def rule(
    names: list[HubName],
    *,
    cached: set[str],
    hub: Hub,
    offline: bool = False,
    ask_when_cached: bool = False,
) -> str | None:
    return decide(
        names,
        cached=lambda n: n.name in cached,
        offline=lambda _: offline,
        reach=hub,
        cache=Path("/cache/hub"),
        ask_when_cached=ask_when_cached,
    )


def test_what_the_cache_has_loads_without_asking_the_hub() -> None:
    hub = Hub("unreachable")
    assert rule([MODEL, TOKENIZER, DATA], cached={MODEL.name, DATA.name}, hub=hub) is None
    assert hub.asked == []


def test_what_the_cache_lacks_loads_when_the_hub_answers() -> None:
    hub = Hub(None)
    assert rule([MODEL, DATA], cached={DATA.name}, hub=hub) is None
    assert hub.asked == [[MODEL.name]]  # once, with what is missing


def test_what_the_cache_lacks_and_the_hub_cannot_send_is_refused_with_the_offline_ways() -> None:
    hub = Hub("ConnectError: [Errno -2] Name or service not known")
    with pytest.raises(ConfigError) as refused:
        rule([MODEL, TOKENIZER, DATA], cached=set(), hub=hub)
    error = refused.value
    assert error.render().startswith("model or data unavailable: the Hugging Face Hub cannot be reached")
    assert "cannot be reached (ConnectError: [Errno -2] Name or service not known)" in error.message
    assert error.errors == [
        "model_name EleutherAI/pythia-70m (model repository)",
        "dataset_name Anthropic/hh-rlhf (dataset)",
    ]
    for way in ("builtin:pythia-70m", "builtin:preference", "HF_HUB_OFFLINE=1", "hf download EleutherAI/pythia-70m"):
        assert way in error.fix


def test_offline_mode_refuses_what_the_cache_lacks_without_asking_the_hub() -> None:
    hub = Hub(None)
    with pytest.raises(ConfigError, match=r"offline mode \(HF_HUB_OFFLINE\) is on") as refused:
        rule([MODEL, DATA], cached={MODEL.name}, hub=hub, offline=True)
    assert refused.value.errors == ["dataset_name Anthropic/hh-rlhf (dataset)"]
    assert "builtin:preference" in refused.value.fix
    assert "builtin:pythia-70m" not in refused.value.fix  # only the ways for what is missing
    assert hub.asked == []


def test_before_the_imports_a_cached_run_learns_the_hub_is_gone_and_loads_offline() -> None:
    gone = Hub("ConnectError: refused")
    assert rule([MODEL], cached={MODEL.name}, hub=gone, ask_when_cached=True) == "ConnectError: refused"
    assert gone.asked == [[]]
    here = Hub(None)
    assert rule([MODEL], cached={MODEL.name}, hub=here, ask_when_cached=True) is None
    already = Hub("refused")
    assert rule([MODEL], cached={MODEL.name}, hub=already, offline=True, ask_when_cached=True) is None
    assert already.asked == []  # offline already: nothing to ask


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("EleutherAI/pythia-70m", "model", True),
        ("gpt2", "model", True),
        ("Anthropic/hh-rlhf", "dataset", True),
        ("builtin:tiny-llama", "model", False),
        ("./models/pythia", "model", False),  # a path (that does not exist), not an id
        ("/abs/models/pythia", "model", False),
        ("a/b/c", "model", False),
        ("foo--bar", "model", False),
        ("data/prefs.jsonl", "dataset", False),  # datasets reads it as a local file
    ],
)
def test_which_names_are_hub_ids(name: str, kind: str, expected: bool) -> None:
    assert on_hub(name, kind) is expected  # type: ignore[arg-type]


def test_a_directory_on_disk_is_not_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "model").mkdir(parents=True)
    assert not on_hub("org/model", "model")


def _cached_repo(cache: Path, folder: str, files: dict[str, str], ref: str = "main") -> None:
    """A repository as huggingface_hub caches it: refs/<ref> holds the commit, snapshots/<commit>/ the files."""
    (cache / folder / "refs").mkdir(parents=True)
    (cache / folder / "refs" / ref).write_text(SHA)
    snapshot = cache / folder / "snapshots" / SHA
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text)


def test_the_cache_lookup_reads_huggingface_hubs_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    _cached_repo(tmp_path, "models--EleutherAI--pythia-70m", {"config.json": "{}"})
    assert in_cache(MODEL, tmp_path)
    assert in_cache(HubName(MODEL.name, "model", SHA), tmp_path)  # a commit, by its snapshot
    assert not in_cache(HubName(MODEL.name, "model", "v2"), tmp_path)  # a revision never downloaded
    assert not in_cache(TOKENIZER, tmp_path)  # the model's files only
    assert not in_cache(HubName("EleutherAI/pythia-160m", "model"), tmp_path)
    assert not in_cache(DATA, tmp_path)
    _cached_repo(tmp_path, "datasets--Anthropic--hh-rlhf", {"README.md": ""})
    assert in_cache(DATA, tmp_path)


def test_a_dataset_prepared_by_datasets_counts_as_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    (tmp_path / "datasets" / "Anthropic___hh-rlhf" / "default").mkdir(parents=True)
    assert in_cache(DATA, tmp_path / "hub")


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """require() probes only out of offline mode; the test machine's HF_HUB_OFFLINE must not answer for the Hub."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.mark.usefixtures("online")
def test_the_probe_says_why_a_closed_port_cannot_be_reached() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: connecting is refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    why = probe(f"http://127.0.0.1:{port}", 5.0)
    assert why is not None
    assert "refused" in why.lower()


@pytest.mark.usefixtures("online")
def test_any_http_answer_counts_as_reachable(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/").respond_with_data("no", status=404)
    assert probe(httpserver.url_for("/"), 5.0) is None
