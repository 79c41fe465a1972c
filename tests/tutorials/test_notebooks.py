"""The tutorial notebooks (docs/tutorials/): stored without outputs and equal to their sources, and each one
executed top to bottom from a fresh kernel, offline, its assertion cells included (a planted cause that the
notebook says it finds is found).

The kernel is this interpreter: a kernelspec written for the test, first on JUPYTER_PATH, so that an
installed `python3` kernel of another environment cannot stand in. Each notebook runs in its own temporary
folder and finds the checkout through CANARY_REPO.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "docs" / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
#: Per cell: a cell trains a few tiny runs on a 2-core CPU (seconds each), much longer beside CPU hogs.
CELL_TIMEOUT_S = 600


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_tutorials", ROOT / "scripts" / "build_tutorials.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_tutorials_and_the_readme_links_each() -> None:
    names = [p.name for p in NOTEBOOKS]
    expected = ["quickstart", "stability", "profiler", "root-cause", "ci", "lockstep", "bisect", "replay"]
    assert names == [f"{n:02d}-{topic}.ipynb" for n, topic in enumerate(expected, 1)]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in names:
        assert f"(docs/tutorials/{name})" in readme, f"README.md has no line for {name}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(notebook: Path) -> None:
    document = json.loads(notebook.read_text(encoding="utf-8"))
    assert document["metadata"]["kernelspec"]["name"] == "python3"
    for index, cell in enumerate(document["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{notebook.name} cell {index}: outputs are stored"
            assert cell["execution_count"] is None, f"{notebook.name} cell {index}: an execution count is stored"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_equals_its_source(notebook: Path) -> None:
    builder = _builder()
    source = builder.SOURCES / f"{notebook.stem}.py"
    assert source.is_file(), f"{notebook.name} has no source {source.relative_to(ROOT)}"
    assert notebook.read_text(encoding="utf-8") == builder.render(source), (
        f"{notebook.name} differs from {source.relative_to(ROOT)}: run python scripts/build_tutorials.py"
    )


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A python3 kernelspec for this interpreter, first on the path; the variables the notebooks read."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3 (this test's interpreter)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # jupyter_core's own paths (runtime files, config) in the platform's standard folders, without its
    # DeprecationWarning about moving to them; and none of the user's Jupyter config.
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter-config"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    monkeypatch.setenv("CANARY_REPO", str(ROOT))
    # The kernel's inline backend (Agg rendering to PNG outputs): headless, and the figures land in the
    # outputs where the test can see them; plain Agg would draw nothing at plt.show().
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "matplotlib"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.mark.training
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(notebook: Path, kernel_env: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    document = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        document,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(kernel_env)}},  # the kernel's working folder
    )
    started = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as error:  # the failing cell's source and traceback, without the rest
        pytest.fail(f"{notebook.name}: {error}", pytrace=False)
    print(f"{notebook.name}: executed in {time.perf_counter() - started:.0f} s")
    code = [c for c in document.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), "a cell did not run"
    figures = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert figures, f"{notebook.name} drew no figure"
