"""GitHub's OpenAPI description as a contract: is this request, or this response, one GitHub would accept or send?

The fake GitHub checks every request it receives and every response it sends with this module, so neither our
client nor the fake can drift from the real API's shapes. A small checker of our own rather than an OpenAPI
library: we need only path-template lookup, query strings read the way GitHub reads them ("5" is an integer),
and violations short enough to read in a test failure. Schemas are OpenAPI 3.0; they become JSON Schema 2020-12
once (`nullable` -> a null type, OpenAPI-only keywords dropped) and `$ref`s resolve against the whole document
through a `referencing` registry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012

SPEC_PATH: Final = Path(__file__).resolve().parents[1] / "fixtures" / "openapi" / "api.github.com.subset.json"
_BASE: Final = "urn:github-openapi"
_OPENAPI_ONLY: Final = frozenset(
    {"nullable", "discriminator", "example", "examples", "xml", "externalDocs", "deprecated", "readOnly", "writeOnly"}
)
_MESSAGE_CHARS: Final = 300  # a response that misses one field would otherwise print all of itself
_FORMATS: Final = FormatChecker(formats=())


@_FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """RFC 3339, as GitHub writes and expects it: a date, a time and a zone (`Z` included)."""
    return not isinstance(value, str) or ("T" in value and datetime.fromisoformat(value).tzinfo is not None)


def json_schema(schema: Any) -> Any:
    """One OpenAPI 3.0 schema object as JSON Schema 2020-12 (3.1 schemas pass through unchanged)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _OPENAPI_ONLY or key.startswith("x-"):
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            out[key] = [json_schema(sub) for sub in value]
        elif key in ("items", "additionalProperties", "not", "contains"):
            out[key] = json_schema(value)
        else:
            out[key] = value
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        # 3.0's boolean flag; 2020-12 wants the bound itself
        if isinstance(out.get(exclusive), bool) and out.pop(exclusive) and bound in out:
            out[exclusive] = out.pop(bound)
    if schema.get("nullable") is not True:
        return out
    if isinstance(out.get("type"), str):
        enum = out.get("enum")
        return {**out, "type": [out["type"], "null"], **({"enum": [*enum, None]} if enum else {})}
    return {"anyOf": [{"type": "null"}, out]}


def _convert(node: Any) -> Any:
    """The document with every schema object converted; the OpenAPI structure around them is kept as is."""
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key == "schema":
            converted[key] = json_schema(value)
        elif key == "schemas" and isinstance(value, dict):
            converted[key] = {name: json_schema(schema) for name, schema in value.items()}
        else:
            converted[key] = _convert(value)
    return converted


@dataclass(frozen=True)
class Operation:
    """One operation of the description, its `$ref`s to parameters and responses already followed."""

    method: str
    template: str
    operation_id: str
    docs_url: str
    pointer: str  # where the operation lies in the document, for schema look-ups
    parameters: tuple[tuple[dict[str, Any], str], ...]  # (parameter object, its pointer)


class OpenApiSpec:
    """A loaded description: `match` finds the operation for a request, `check_*` list what breaks the contract."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = _convert(document)
        self._registry: Registry[Any] = Registry().with_resource(_BASE, DRAFT202012.create_resource(self.document))
        self._templates = sorted(self.document["paths"], key=lambda t: -len(re.sub(r"\{[^}]*\}", "", t)))
        self._patterns = {template: self._pattern(template) for template in self._templates}

    @classmethod
    def load(cls, path: Path = SPEC_PATH) -> OpenApiSpec:
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | str:
        """The operation and its path parameters, or a violation saying why there is none."""
        for template in self._templates:
            found = self._patterns[template].fullmatch(path)
            if found is None:
                continue
            item = self.document["paths"][template]
            if method.lower() not in item:
                declared = ", ".join(m.upper() for m in item if m != "parameters")
                return f"{method} {path}: {template} has no {method} operation (only {declared})"
            return self._operation(method.lower(), template), found.groupdict()
        return (
            f"{method} {path}: no operation of the vendored GitHub description matches (a real endpoint the action "
            "needs? add it to scripts/vendor_openapi.py)"
        )

    def check_request(
        self, method: str, path: str, query: Mapping[str, str] | None = None, body: Any = None
    ) -> list[str]:
        """Violations of one request: unknown endpoint, undeclared/missing/ill-typed parameters, a bad JSON body."""
        matched = self.match(method, path)
        if isinstance(matched, str):
            return [matched]
        operation, path_params = matched
        prefix = f"{method} {path}: "
        return [prefix + v for v in self._parameters(operation, path_params, dict(query or {}))] + [
            prefix + v for v in self._body(operation, body)
        ]

    def check_body(self, method: str, path: str, body: Any) -> list[str]:
        """The request-body part of check_request alone: what GitHub would answer 422 to."""
        matched = self.match(method, path)
        if isinstance(matched, str):
            return [matched]
        return [f"{method} {path}: {v}" for v in self._body(matched[0], body)]

    def check_response(self, method: str, path: str, status: int, body: Any) -> list[str]:
        """Violations of one JSON response: an undocumented status, or a body off the documented schema."""
        matched = self.match(method, path)
        if isinstance(matched, str):
            return [matched]
        operation = matched[0]
        prefix = f"{method} {path} -> {status}: "
        responses = self._get(operation.pointer + "/responses")
        key = next((k for k in (str(status), f"{str(status)[0]}XX", "default") if k in responses), None)
        if key is None:
            return [prefix + f"not a documented status of {operation.operation_id} ({', '.join(responses)})"]
        response, pointer = self._resolve(responses[key], f"{operation.pointer}/responses/{key}")
        if "application/json" not in response.get("content", {}):
            return [] if body is None else [prefix + "GitHub documents no JSON body for this status"]
        return [prefix + v for v in self._errors(f"{pointer}/content/application~1json/schema", body, "response")]

    def _parameters(self, operation: Operation, path_params: dict[str, str], query: dict[str, str]) -> list[str]:
        declared = {(p["in"], p["name"]): (p, pointer) for p, pointer in operation.parameters}
        names = sorted(name for where, name in declared if where == "query")
        violations = [
            f"query.{name}: not a parameter of {operation.operation_id} (it takes: {', '.join(names) or 'none'})"
            for name in query
            if ("query", name) not in declared
        ]
        for (where, name), (parameter, pointer) in declared.items():
            sent = {"path": path_params, "query": query}.get(where)
            if sent is None:  # headers and cookies: the client's business, not the contract's
                continue
            if name not in sent:
                if parameter.get("required"):
                    violations.append(f"{where}.{name}: required, not sent")
                continue
            candidates = _as_sent(sent[name])
            errors = [self._errors(pointer + "/schema", value, f"{where}.{name}") for value in candidates]
            if all(errors):
                violations.extend(errors[-1])  # the typed reading's complaint says most
        return violations

    def _body(self, operation: Operation, body: Any) -> list[str]:
        operation_object = self._get(operation.pointer)
        if "requestBody" not in operation_object:
            return [] if body is None else [f"body: {operation.operation_id} takes no request body"]
        request_body, pointer = self._resolve(operation_object["requestBody"], operation.pointer + "/requestBody")
        if body is None:
            return ["body: required, not sent"] if request_body.get("required") else []
        if "application/json" not in request_body.get("content", {}):
            return [f"body: {operation.operation_id} takes no JSON body"]
        return self._errors(f"{pointer}/content/application~1json/schema", body, "body")

    def _errors(self, pointer: str, instance: Any, root: str) -> list[str]:
        messages = []
        for error in sorted(self._validator(pointer).iter_errors(instance), key=lambda e: str(list(e.absolute_path))):
            # anyOf/oneOf (the nullable wrapper too): name the branch nearest to fitting, not "valid under none"
            nearest: ValidationError = (best_match(error.context) or error) if error.context else error
            messages.append(f"{_location(root, nearest.absolute_path)}: {_message(nearest)}")
        return messages

    @cache  # noqa: B019 - one spec per session; validators are costly to build and there are few pointers
    def _validator(self, pointer: str) -> Draft202012Validator:
        ref = f"{_BASE}#{quote(pointer, safe='/~')}"
        return Draft202012Validator({"$ref": ref}, registry=self._registry, format_checker=_FORMATS)

    @cache  # noqa: B019 - as above
    def _operation(self, method: str, template: str) -> Operation:
        pointer = f"/paths/{_escape(template)}/{method}"
        item, operation = self.document["paths"][template], self.document["paths"][template][method]
        shared = [(p, f"/paths/{_escape(template)}/parameters/{i}") for i, p in enumerate(item.get("parameters", []))]
        own = [(p, f"{pointer}/parameters/{i}") for i, p in enumerate(operation.get("parameters", []))]
        resolved = {}
        for parameter, where in shared + own:  # an operation's own parameter overrides the path's
            found, found_at = self._resolve(parameter, where)
            resolved[found["in"], found["name"]] = (found, found_at)
        return Operation(
            method.upper(),
            template,
            operation.get("operationId", f"{method.upper()} {template}"),
            operation.get("externalDocs", {}).get("url", "https://docs.github.com/rest"),
            pointer,
            tuple(resolved.values()),
        )

    def _resolve(self, node: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
        while "$ref" in node:
            pointer = node["$ref"].removeprefix("#")
            node = self._get(pointer)
        return node, pointer

    def _get(self, pointer: str) -> Any:
        node: Any = self.document
        for part in pointer.split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def _pattern(self, template: str) -> re.Pattern[str]:
        """`{name}` matches one path segment, or several where GitHub marks the parameter x-multi-segment."""
        multi = {
            p["name"]
            for method, operation in self.document["paths"][template].items()
            if method != "parameters"
            for p, _ in self._operation(method, template).parameters
            if p.get("x-multi-segment")
        }
        parts = re.split(r"\{([^}]+)\}", template)
        regex = "".join(
            re.escape(part) if i % 2 == 0 else f"(?P<{part}>{'.+' if part in multi else '[^/]+'})"
            for i, part in enumerate(parts)
        )
        return re.compile(regex)


def _message(error: ValidationError) -> str:
    """jsonschema's message, with a long offending value (a 51-item list, a whole object) summarised."""
    text, shown = str(error.message), repr(error.instance)
    if len(text) > _MESSAGE_CHARS and shown in text:
        if isinstance(error.instance, list):
            summary = f"[{len(error.instance)} items]"
        elif isinstance(error.instance, dict):
            summary = "{" + ", ".join(map(repr, list(error.instance)[:5])) + ", ...}"
        else:
            summary = shown[:60] + "..."
        text = text.replace(shown, summary)
    return text[:_MESSAGE_CHARS]


def _as_sent(raw: str) -> list[Any]:
    """A query or path value read every way GitHub may read it: as text, and as the number or boolean it spells."""
    readings: list[Any] = [raw]
    if re.fullmatch(r"-?\d+", raw):
        readings.append(int(raw))
    elif re.fullmatch(r"-?\d+\.\d+", raw):
        readings.append(float(raw))
    elif raw in ("true", "false"):
        readings.append(raw == "true")
    return readings


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _location(root: str, path: Iterable[str | int]) -> str:
    return root + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
