#!/usr/bin/env python3
"""A screenshot of the PR comment as users see it: the comment's markdown rendered to HTML and drawn by
headless Chromium, Mermaid charts included. A documentation tool (docs/report.md shows its picture); CI does
not run it.

    .venv/bin/python scripts/render_comment.py             # a synthetic failing run -> docs/images/pr-comment.png
    .venv/bin/python scripts/render_comment.py --current run/metrics.json --baseline baselines/    # real runs
    .venv/bin/python scripts/render_comment.py --open-details --out /tmp/expanded.png      # <details> opened

What it does:

1. builds a CompareResult: with --current/--baseline it compares real metrics.json files (as `canary compare`
   does); without, synthetic runs from tests/factories.make_metrics: five baselines, and a current run about
   30 % slower with a torch bump, a config change and a slower profiled op, so that the verdict, suspects,
   charts and the env/config/op diffs all show;
2. renders the PR comment (`render(result, "comment", Links(...))`) and turns its markdown into HTML with
   markdown-it-py the way GitHub's GFM does (CommonMark + tables + strikethrough, raw HTML kept);
3. wraps it in a page with a small stylesheet of our own that looks like a GitHub comment, and draws each
   ```mermaid block with Mermaid's own library (dist/mermaid.min.js: --mermaid PATH, else $MERMAID_JS, else
   `npm pack mermaid@11` into a temporary directory outside the repository; GitHub runs a Mermaid of its own
   choosing, so the charts here are close to, not exactly, what GitHub draws);
4. runs headless Chromium twice: once with --dump-dom to learn the drawn page's height, once to take the
   screenshot at exactly that height. The HTML stays in a temporary directory (--html to choose where).

Needs: Debian's `chromium` (plus fonts-noto-color-emoji and fonts-dejavu-core for the emoji and block
characters), npm (unless --mermaid is given), and this repository's virtualenv with markdown-it-py (there
through rich; else `pip install markdown-it-py`) and the tests package for the synthetic runs. Every command it
runs is printed.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the canary_action package and tests.factories, without installing

from markdown_it import MarkdownIt  # noqa: E402
from markdown_it.renderer import RendererHTML  # noqa: E402
from markdown_it.token import Token  # noqa: E402
from markdown_it.utils import EnvType, OptionsDict  # noqa: E402

from canary_action.compare.result import CompareResult  # noqa: E402
from canary_action.report.render import render  # noqa: E402
from canary_action.report.view import Links  # noqa: E402

LINKS = Links(
    workflow_run="https://github.com/example-org/example-trainer/actions/runs/1234567890",
    artifacts="https://github.com/example-org/example-trainer/actions/runs/1234567890#artifacts",
    baseline_run="https://github.com/example-org/example-trainer/actions/runs/1234500000",
    artifact_name="rlhf-canary-sft-smoke",
)
WIDTH = 980  # the browser window; the comment box inside is GitHub's conversation column, about 900 px

CSS = """
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 40px; background: #fff; color: #1f2328;
  font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif,
    "Apple Color Emoji", "Segoe UI Emoji", "Noto Color Emoji";
  font-size: 14px; line-height: 1.5; }
.comment { max-width: 900px; border: 1px solid #d1d9e0; border-radius: 6px; }
.comment-header { display: flex; align-items: center; gap: 6px; padding: 8px 16px; background: #f6f8fa;
  border-bottom: 1px solid #d1d9e0; border-radius: 6px 6px 0 0; color: #59636e; }
.comment-header .avatar { width: 20px; height: 20px; border-radius: 4px; background: #2da44e; }
.comment-header b { color: #1f2328; }
.comment-header .badge { border: 1px solid #d1d9e0; border-radius: 2em; padding: 0 7px; font-size: 12px; }
.comment-body { padding: 16px; overflow-wrap: break-word; }
.comment-body > :first-child { margin-top: 0; }
.comment-body > :last-child { margin-bottom: 0; }
h1, h2, h3, h4 { margin: 24px 0 16px; font-weight: 600; line-height: 1.25; }
h3 { font-size: 1.25em; }
h4 { font-size: 1em; }
p, ul, ol, table, details, blockquote, .chart { margin: 0 0 16px; }
ul, ol { padding-left: 2em; }
li + li, li > ul { margin-top: 0.25em; }
li > ul { margin-bottom: 0; }
a { color: #0969da; text-decoration: none; }
code { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "DejaVu Sans Mono", monospace;
  font-size: 85%; padding: 0.2em 0.4em; border-radius: 6px; background: rgba(129, 139, 152, 0.12); }
table { display: block; width: max-content; max-width: 100%; overflow: auto; border-spacing: 0;
  border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 13px; border: 1px solid #d1d9e0; }
th { font-weight: 600; }
tr { background: #fff; border-top: 1px solid #d1d9e0; }
tr:nth-child(2n) { background: #f6f8fa; }
details summary { cursor: pointer; display: list-item; }
details[open] > summary { margin-bottom: 16px; }
blockquote { padding: 0 1em; color: #59636e; border-left: 0.25em solid #d1d9e0; }
sub { font-size: 75%; }
.chart { border: 1px solid #d1d9e0; border-radius: 6px; padding: 8px; text-align: center; }
.chart svg { max-width: 100%; height: auto; }
.mermaid-error { color: #d1242f; white-space: pre-wrap; text-align: left; }
"""

# Mermaid draws every block, then the page records its height for the first Chromium pass (--dump-dom).
SCRIPT = """
mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "default" });
mermaid.run({ querySelector: "pre.mermaid" })
  .catch((error) => {
    const note = document.createElement("pre");
    note.className = "mermaid-error";
    note.textContent = "Mermaid failed: " + error;
    document.querySelector(".comment-body").prepend(note);
  })
  .finally(() => {
    document.body.setAttribute("data-height", String(document.documentElement.scrollHeight));
  });
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "pr-comment.png", help="the PNG")
    parser.add_argument("--current", type=Path, help="a current run's metrics.json (else synthetic runs)")
    parser.add_argument("--baseline", type=Path, action="append", default=[], help="baseline file or directory")
    parser.add_argument("--result", type=Path, help="a saved `canary compare --json` result instead of runs")
    parser.add_argument("--mermaid", type=Path, default=os.environ.get("MERMAID_JS"), help="mermaid.min.js")
    parser.add_argument("--mermaid-version", default="11", help="npm version spec when fetching (default: 11)")
    parser.add_argument("--html", type=Path, help="where to keep the page (default: a temporary directory)")
    parser.add_argument("--open-details", action="store_true", help="expand every <details> block")
    parser.add_argument("--width", type=int, default=WIDTH, help="the browser window's width in CSS pixels")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium", help="the browser binary")
    args = parser.parse_args(argv)

    result = _result(args)
    markdown = render(result, "comment", LINKS)
    work = Path(tempfile.mkdtemp(prefix="canary-comment-"))
    mermaid_js = args.mermaid or _fetch_mermaid(work, args.mermaid_version)
    page = args.html or work / "pr-comment.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(_page(markdown, mermaid_js, open_details=args.open_details), encoding="utf-8")
    (page.with_suffix(".md")).write_text(markdown, encoding="utf-8")
    print(f"# markdown: {page.with_suffix('.md')}  ({len(markdown):,} characters)")
    print(f"# page: {page}  (Mermaid {_mermaid_version(mermaid_js)})")

    height = _measure(args.chromium, page, args.width, work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    _chromium(args.chromium, page, work, f"--screenshot={args.out.resolve()}", f"--window-size={args.width},{height}")
    print(f"# wrote {args.out} ({args.width}x{height}, {args.out.stat().st_size:,} bytes)")
    return 0


def _result(args: argparse.Namespace) -> CompareResult:
    if args.result is not None:
        return CompareResult.model_validate_json(args.result.read_text(encoding="utf-8"))
    if args.current is not None:
        from canary_action.compare.command import run_compare

        if not args.baseline:
            sys.exit("--current needs at least one --baseline")
        return run_compare(args.current, args.baseline)
    return _synthetic()


def _synthetic() -> CompareResult:
    """Five baselines on torch 2.12; the PR's run on torch 2.13 with another attention kernel, ~30 % slower."""
    from canary_action.compare.runs import RunData, from_metrics
    from canary_action.compare.verdict import compare
    from canary_action.config.thresholds import TIERS
    from canary_action.metrics import schema
    from canary_action.metrics.schema import ProfiledOp, ProfilerSummary
    from tests.factories import make_metrics, make_series

    steps = 60
    tokens = make_series(steps)[schema.NUM_TOKENS]  # one dataset and seed: every run sees the same batches

    def profile(mm_ms: float) -> ProfilerSummary:
        ops = [
            ProfiledOp(name="aten::mm", count=500, cpu_self_time_ms=20.0, device_self_time_ms=mm_ms),
            ProfiledOp(name="aten::_flash_attention_forward", count=60, cpu_self_time_ms=4.0,
                       device_self_time_ms=mm_ms / 3),
            ProfiledOp(name="aten::add", count=500, cpu_self_time_ms=5.0, device_self_time_ms=40.0),
        ]  # fmt: skip
        return ProfilerSummary(trace_path="trace.json", start_step=30, end_step=34, cpu_time_total_ms=29.0,
                               device_time_total_ms=sum(o.device_self_time_ms for o in ops), top_ops=ops)  # fmt: skip

    def run(seed: int, *, step_time_s: float, torch: str, attention: str, sha: str, mm_ms: float) -> RunData:
        metrics = make_metrics(
            num_steps=steps,
            step_time_s=step_time_s,
            seed=seed,
            series={schema.NUM_TOKENS: tokens},
            run={"run_id": f"sft-smoke-{sha[:7]}", "git_sha": sha},
            env={"torch": torch},
            workload={"dataset_fingerprint": "d" * 64},
            config={"seed": 0, "attn_implementation": attention},
            profiler=profile(mm_ms),
        )
        return from_metrics(metrics, f"{sha[:7]}/metrics.json")

    shas = ["8c1e47a2b9d3", "51fd02c7e6a4", "e93b6d0a1f25", "2a7c58e4d913", "b04f9e3c7a68"]
    baselines = [
        run(100 + i, step_time_s=0.1, torch="2.12.0+cu128", attention="sdpa", sha=sha, mm_ms=200.0)
        for i, sha in enumerate(shas)
    ]
    current = run(7, step_time_s=0.13, torch="2.13.0+cu128", attention="flash_attention_2",
                  sha="4d5e6f708192a3b4c5d6", mm_ms=325.0)  # fmt: skip
    return compare(current, baselines, TIERS["default"], threshold_sources=["tier default"])


def _page(markdown: str, mermaid_js: Path, *, open_details: bool) -> str:
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.add_render_rule("fence", _fence)
    body = md.render(markdown)
    if open_details:
        body = body.replace("<details>", "<details open>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rlhf-canary PR comment</title>
<style>{CSS}</style></head>
<body>
<div class="comment">
<div class="comment-header"><span class="avatar"></span><b>github-actions</b> <span class="badge">bot</span>
commented 3 minutes ago</div>
<div class="comment-body">
{body}</div>
</div>
<script src="{mermaid_js.resolve().as_uri()}"></script>
<script>{SCRIPT}</script>
</body></html>
"""


def _fetch_mermaid(work: Path, version: str) -> Path:
    """`npm pack mermaid@VERSION` into the temporary directory (never into the repository); unpack its dist/."""
    if shutil.which("npm") is None:
        sys.exit("npm is not installed: install it, or pass --mermaid PATH/TO/mermaid.min.js")
    _run(["npm", "pack", f"mermaid@{version}", "--silent", "--pack-destination", str(work)], cwd=work)
    tarball = next(work.glob("mermaid-*.tgz"))
    _run(["tar", "xzf", str(tarball), "-C", str(work), "package/dist/mermaid.min.js", "package/package.json"])
    return work / "package" / "dist" / "mermaid.min.js"


def _fence(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """```mermaid blocks as GitHub treats them (Mermaid reads the block's text); other fences as usual."""
    token = tokens[idx]
    if token.info.strip() == "mermaid":
        return f'<div class="chart"><pre class="mermaid">{html.escape(token.content)}</pre></div>\n'
    return RendererHTML.fence(self, tokens, idx, options, env)


def _mermaid_version(mermaid_js: Path) -> str:
    manifest = mermaid_js.resolve().parent.parent / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, KeyError, ValueError):
        return "version unknown"


def _measure(chromium: str, page: Path, width: int, work: Path) -> int:
    """The drawn page's height (px): one --dump-dom pass, after Mermaid has run."""
    dom = _chromium(chromium, page, work, "--dump-dom", f"--window-size={width},100", capture=True)
    found = re.search(r'data-height="(\d+)"', dom)
    if not found:
        sys.exit("the page never recorded its height: did Mermaid load? (see the --dump-dom output above)")
    return int(found.group(1))


def _chromium(chromium: str, page: Path, work: Path, *extra: str, capture: bool = False) -> str:
    profile = tempfile.mkdtemp(prefix="chromium-", dir=work)
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        # Without these Chromium phones home, and on a closed network its connections are refused.
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
        "--allow-file-access-from-files",
        "--virtual-time-budget=10000",  # let Mermaid finish drawing before the dump or the screenshot
        *extra, page.resolve().as_uri(),
    ]  # fmt: skip
    return _run(command, capture=capture)


def _run(command: list[str], *, cwd: Path | None = None, capture: bool = False) -> str:
    print("$ " + shlex.join(command), flush=True)
    done = subprocess.run(command, cwd=cwd, check=True, text=True, capture_output=True)
    return done.stdout if capture else ""


if __name__ == "__main__":
    raise SystemExit(main())
