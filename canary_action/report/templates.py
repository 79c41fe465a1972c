"""The report templates: ours (top-level templates/, packaged into the wheel as canary_action/templates), and a
team's own folder that overrides any of them (`--templates DIR`, the action's `templates` input).

Every template renders in one hardened sandbox, ours too, so a team's template prints exactly what ours can:
`Md` from the view model (escaped by escape.text), a macro's output, or text that is escaped on the way. A
template may loop, branch, call macros and join pieces with `~`; it may not take text apart (no methods, no
slicing), format it (`%`), or mark it safe (`safe`, `e`, `tojson`… are not there): each of those could turn an
escaped value from a pull request back into markdown. Jinja's sandbox keeps Python's internals out of reach.

A team folder is read whole when it is loaded (files of at most MAX_TEMPLATE_BYTES, UTF-8, no link leading out
of the folder), and every template is compiled then, so that a typo is an error naming the file at once.
"""

from __future__ import annotations

import difflib
import re
import traceback
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import jinja2
import markupsafe
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from canary_action.errors import TemplateError
from canary_action.report.escape import Md, text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from jinja2 import nodes

MAX_TEMPLATE_BYTES: Final = 256 * 1024
OURS_PREFIX: Final = "rlhf-canary"
"""`{% import "rlhf-canary/_parts.md.j2" as ours %}` reaches our template even where the team's folder has one."""
DOCS: Final = "https://github.com/rlhf-canary/rlhf-canary/blob/main/docs/report.md#your-own-templates"
_FIX: Final = (
    "fix the template, or leave the folder out to use rlhf-canary's own (docs/report.md, 'Your own templates')"
)
#: Filters that select, count or order; none makes text out of text, so none can undo escaping.
_FILTERS: Final = (
    "abs", "attr", "batch", "count", "d", "default", "dictsort", "first", "float", "groupby", "int", "items",
    "last", "length", "list", "map", "max", "min", "reject", "rejectattr", "reverse", "round", "select",
    "selectattr", "slice", "sort", "sum", "unique",
)  # fmt: skip


def ours() -> Path:
    """Our templates: inside the installed package (a wheel, the image), or templates/ beside canary_action/
    in a checkout (an editable install). The checkout is recognised by its pyproject.toml, so that a stray
    site-packages/templates of another distribution is never taken for ours."""
    package = Path(__file__).parents[1]
    if (package / "templates" / "pr_comment.md.j2").is_file():
        return package / "templates"
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "templates" / "pr_comment.md.j2").is_file():
        return checkout / "templates"
    raise TemplateError(
        f"rlhf-canary's own report templates are missing (looked in {package / 'templates'} and "
        f"{checkout / 'templates'})",
        fix="reinstall rlhf-canary (pip install --force-reinstall rlhf-canary); in a checkout, restore templates/",
    )


def our_names() -> list[str]:
    return sorted(p.name for p in ours().glob("*.j2"))


@dataclass(frozen=True)
class Templates:
    """A loaded set: ours, with a team's files (when `folder` is set) taking the place of ours by name."""

    env: jinja2.Environment
    folder: Path | None = None
    overrides: tuple[str, ...] = ()

    def render(self, name: str, **context: Any) -> str:
        """Render `name`; a team's template failing is a TemplateError naming the file and line (ours failing
        is a bug, and keeps its traceback)."""
        try:
            return self.env.get_template(name).render(**context)
        except jinja2.TemplateError as e:
            if self.folder is None:
                raise
            raise self._error(e, name) from e

    def _error(self, error: jinja2.TemplateError, name: str) -> TemplateError:
        where = _where(error, self.folder) or f"{name} (rendering)"
        kind = "not allowed in a report template" if isinstance(error, SecurityError) else type(error).__name__
        return TemplateError(f"the team template {where}: {kind}: {error.message or error}", fix=_FIX, docs=DOCS)


@cache
def default_templates() -> Templates:
    """Ours alone: one environment for the process, which caches the compiled templates."""
    return Templates(_environment(jinja2.FileSystemLoader(ours())))


def load_templates(folder: Path | None, *, within: Path | None = None) -> Templates:
    """Ours, overridden by the `*.j2` files of `folder` (None: ours alone). `within`: a folder `folder` must
    lie in (the action's workspace). TemplateError for a folder or file that cannot be used."""
    if folder is None:
        return default_templates()
    files = _read_folder(folder, within)
    mine = our_names()
    for name in files:
        if name not in mine and not name.startswith("_"):
            close = difflib.get_close_matches(name, mine, n=1)
            raise TemplateError(
                f"{folder / name} replaces no template of rlhf-canary's (they are {', '.join(mine)})"
                + (f" — did you mean {close[0]}?" if close else ""),
                fix="name the file after the template it replaces; a file of your own macros starts with _ "
                "(e.g. _team.md.j2)",
                docs=DOCS,
            )
    ours_loader = jinja2.FileSystemLoader(ours())
    loader = jinja2.ChoiceLoader(
        [_FolderLoader(folder, files), ours_loader, jinja2.PrefixLoader({OURS_PREFIX: ours_loader})]
    )
    templates = Templates(_environment(loader), folder, tuple(sorted(files)))
    for name in sorted({*mine, *files}):  # every template now, so that a syntax error names its file at once
        try:
            templates.env.get_template(name)
        except jinja2.TemplateSyntaxError as e:
            raise templates._error(e, name) from e
    return templates


def _read_folder(folder: Path, within: Path | None) -> dict[str, str]:
    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise TemplateError(f"templates folder {folder} {what}", fix="name a folder of *.j2 files", docs=DOCS)
    root = folder.resolve()
    if within is not None and not root.is_relative_to(within.resolve()):
        raise TemplateError(
            f"templates folder {folder} leads to {root}, outside {within}",
            fix="keep the templates in the repository, in a folder of their own (not a symbolic link out of it)",
            docs=DOCS,
        )
    files: dict[str, str] = {}
    for path in sorted(folder.glob("*.j2")):
        real = path.resolve()
        if real.parent != root:
            raise TemplateError(
                f"{path} is a link to {real}, outside the templates folder",
                fix="copy the file into the folder instead of linking to it",
                docs=DOCS,
            )
        if not real.is_file():
            raise TemplateError(f"{path} is not a file", fix="keep only template files named *.j2", docs=DOCS)
        size = real.stat().st_size
        if size > MAX_TEMPLATE_BYTES:
            raise TemplateError(
                f"{path} is {size:,} bytes; a template may be at most {MAX_TEMPLATE_BYTES:,}",
                fix="keep templates small: the report's content comes from the view model, not the template",
                docs=DOCS,
            )
        raw = real.read_bytes()[: MAX_TEMPLATE_BYTES + 1]  # read once: what was checked is what renders
        try:
            files[path.name] = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TemplateError(
                f"{path} is not UTF-8 text (byte {e.start}: {raw[e.start : e.start + 1]!r})",
                fix="save the template as UTF-8",
                docs=DOCS,
            ) from None
    if not files:
        raise TemplateError(
            f"templates folder {folder} holds no *.j2 file",
            fix=f"put the templates you replace there, named as ours ({', '.join(our_names())})",
            docs=DOCS,
        )
    return files


class _FolderLoader(jinja2.BaseLoader):
    """The team's files as read at load time, under their real paths (so that errors name them)."""

    def __init__(self, folder: Path, files: dict[str, str]) -> None:
        self.folder, self.files = folder, files

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        if template not in self.files:
            raise jinja2.TemplateNotFound(template)
        return self.files[template], str(self.folder / template), lambda: True


def _where(error: jinja2.TemplateError, folder: Path | None) -> str | None:
    """'pr_comment.md.j2 line 3' for the innermost template frame of the error (or its syntax error's place)."""
    if isinstance(error, jinja2.TemplateSyntaxError):
        return f"{error.filename or error.name} line {error.lineno}"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.endswith(".j2")]
    if not frames:
        return None
    inner = frames[-1]
    own = folder is not None and Path(inner.filename).parent == folder
    shown = inner.filename if own else f"rlhf-canary's {Path(inner.filename).name}"
    return f"{shown} line {inner.lineno}"


def _finalize(value: object) -> str:
    if isinstance(value, jinja2.Undefined):  # a misspelt field: StrictUndefined's own error names it
        str(value)
    if isinstance(value, Md | markupsafe.Markup):  # Markup: a macro's output, already rendered from safe parts
        return value
    if isinstance(value, bool) or value is None:
        raise SecurityError(f"a template printed {value!r}: test it with `if`, do not print it")
    if isinstance(value, int | str):
        return text(value)
    raise SecurityError(f"a template printed a {type(value).__name__}: format it in the view model")


_EDGES: Final = re.compile(r"\A(\s*)(.*?)(\s*)\Z", re.DOTALL)


def _escaped_piece(value: object) -> str:
    if isinstance(value, Md | markupsafe.Markup):
        return value
    lead, middle, trail = _EDGES.fullmatch(str(value)).groups()  # type: ignore[union-attr]  # always matches
    return (" " if lead else "") + text(middle, 100_000) + (" " if trail and middle else "")


def text_join(pieces: Iterable[object], separator: object = "") -> str:
    """`a ~ b` and `|join`: when any piece is markdown (Md, a macro's output), the others are escaped like a
    printed value and the whole is markdown; otherwise plain text (escaped when printed). Jinja's own
    concatenation would HTML-escape the plain pieces only, and so pass a pull request's `|` or `*` through."""
    parts = [p if isinstance(p, str) else str(p) for p in pieces]
    if not any(isinstance(p, Md | markupsafe.Markup) for p in [*parts, separator]):
        return str(separator).join(parts)
    return markupsafe.Markup(_escaped_piece(separator).join(_escaped_piece(p) for p in parts))


class _CodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:  # noqa: N802 - named after the node class
        self.write("environment.text_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Sandbox(SandboxedEnvironment):
    code_generator_class = _CodeGenerator
    intercepted_binops = frozenset({"+", "%"})
    text_join = staticmethod(text_join)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if isinstance(obj, str):  # `.replace()`, `.strip()`…: text is printed whole, never reworked
            return False
        return super().is_safe_attribute(obj, attr, value)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, str):
            raise SecurityError("a template may not index text (format it in the view model)")
        return super().getitem(obj, argument)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if isinstance(left, str) or isinstance(right, str):
            if operator == "+":
                return text_join((left, right))
            raise SecurityError(f"a template may not apply {operator!r} to text (join pieces with ~)")
        return super().call_binop(context, operator, left, right)


def _environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    env = _Sandbox(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        # Autoescape on, so that macro output is Markup and passes; _finalize has already turned every other value
        # into markdown-escaped Md (which declares __html__), so HTML escaping itself never applies.
        autoescape=True,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters = {name: env.filters[name] for name in _FILTERS}
    env.filters["join"] = lambda pieces, separator="": text_join(pieces, separator)
    env.globals = {name: env.globals[name] for name in ("range", "dict", "namespace", "cycler", "joiner")}
    return env
