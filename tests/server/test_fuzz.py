"""A bounded fuzz run over every operation of the OpenAPI schema and every MCP tool:
hostile path, query, body and argument values (lone surrogates, deep nesting, huge
numbers, SQL and FTS syntax, ``../``, wrong JSON types, broken JSON) must never get a 5xx,
a tool crash or a traceback in the log.

Each operation gets ``EXAMPLES`` generated requests; bodies fill the operation's declared
fields (so that most requests get past schema validation into the engine) or are any
JSON at all."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from loci import Scope, load_settings
from loci.server.app import create_app
from loci.server.hub import Hub, Principal
from loci.server.mcp import build_mcp
from tests.server.conftest import LOCAL

#: A failing example's repr may be large; the assertion says what matters.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
EXAMPLES = 50
HOSTILE = ["\ud800", "a\udfffb", "../../etc/passwd", "' OR 1=1 --", 'NEAR("a" "b")', "*",
           "\"", "a" * 5000, "/", "%2F", "\x00", "-1", "0", "1e309", "NaN", "💾" * 60,
           "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "sticky", "/a.md",
           "", " ", "null", "[]", "{}"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2 ** 63),
                    st.floats(allow_nan=False), st.sampled_from(HOSTILE), st.text(max_size=40))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                           max_leaves=20)


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for the whole run, open to every operation (a proxy to nowhere)."""
    home: Path = tmp_path_factory.mktemp("fuzz")
    app = create_app(load_settings(store=f"sqlite:///{home / 'loci.db'}", home=str(home),
                                   embedding_provider="hash", workspace=str(home),
                                   proxy_base_url="http://127.0.0.1:9/v1",
                                   proxy_api_key="sk-none"))
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as c:
        yield c


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    app = create_app(load_settings(store="sqlite:///:memory:", embedding_provider="hash"))
    schema = app.openapi()
    found = []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            found.append((method.upper(), path, {"operation": operation, "schema": schema}))
    return found


def body_fields(operation: dict[str, Any], schema: dict[str, Any]
                ) -> dict[str, dict[str, Any]]:
    """The declared fields of an operation's JSON body, name → field schema."""
    content = operation.get("requestBody", {}).get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
    model = schema.get("components", {}).get("schemas", {}).get(ref.rsplit("/", 1)[-1], {})
    return dict(model.get("properties", {}))


def field_values(field: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of a field's declared type (hostile ones among them), or any JSON."""
    kinds = {option.get("type") for option in field.get("anyOf", [field])}
    strategies: list[st.SearchStrategy[Any]] = []
    if "string" in kinds:
        strategies.append(st.sampled_from(HOSTILE) | st.text(max_size=40))
    if "integer" in kinds or "number" in kinds:
        strategies.append(st.integers(-(2 ** 70), 2 ** 70))
    if "array" in kinds:
        strategies.append(st.lists(st.sampled_from(HOSTILE) | st.text(max_size=10),
                                   max_size=4))
    if "boolean" in kinds:
        strategies.append(st.booleans())
    if "object" in kinds or not strategies:
        strategies.append(JSON_VALUES)
    return st.one_of(strategies)


def encoded(value: str) -> str:
    """``value`` percent-encoded, lone surrogates included (as WTF-8 bytes)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


@st.composite
def requests(draw: st.DrawFn, method: str, path: str, spec: dict[str, Any]
             ) -> tuple[str, str, dict[str, str], bytes | None]:
    operation = spec["operation"]
    url = path
    query: dict[str, str] = {}
    for parameter in operation.get("parameters", []):
        value = draw(st.sampled_from(HOSTILE) | st.text(max_size=20))
        if parameter["in"] == "path":
            url = url.replace("{" + parameter["name"] + "}", encoded(value) or "x")
        elif parameter["in"] == "query" and draw(st.booleans()):
            query[parameter["name"]] = encoded(value)
    if "{" in url:
        url = url.split("{")[0] + "x"
    body: bytes | None = None
    if method in ("POST", "PUT"):
        fields = body_fields(operation, spec["schema"])
        kind = draw(st.sampled_from(["fields"] * 6 + ["any", "deep", "broken"]))
        if kind == "deep":  # written out: json.dumps itself stops at this depth
            levels = draw(st.integers(60, 3000))
            nested = "[" * levels + "1" + "]" * levels
            text = "{" + ", ".join(f'"{n}": {nested}' for n in fields or ["x"]) + "}"
        elif kind == "broken":
            text = '{"broken'
        elif kind == "fields" and fields:
            text = json.dumps({name: draw(field_values(field)) for name, field in
                               fields.items() if draw(st.integers(0, 3))})
        else:
            text = json.dumps(draw(JSON_VALUES))
        body = text.encode("utf-8", "surrogatepass")
    return method, url, query, body


@pytest.mark.parametrize(("method", "path", "spec"), operations(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_no_operation_answers_5xx(fuzz_client: TestClient, method: str, path: str,
                                  spec: dict[str, Any], caplog: pytest.LogCaptureFixture
                                  ) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(requests(method, path, spec))
    def run(request: tuple[str, str, dict[str, str], bytes | None]) -> None:
        verb, url, query, body = request
        headers = {"Content-Type": "application/json", "X-Loci-Session": "fuzz"}
        if query:  # encoded here: a lone surrogate is sent as the bytes a client may send
            url += "?" + "&".join(f"{name}={value}" for name, value in query.items())
        answer = fuzz_client.request(verb, url, content=body, headers=headers)
        upstream_down = path.startswith("/v1/") and answer.status_code == 502
        assert answer.status_code < 500 or upstream_down, (
            verb, url, query, body and body[:300], answer.status_code, answer.text[:300])

    with caplog.at_level(logging.ERROR):
        run()
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()


TOOL_NAMES = ("memory_search", "memory_read", "memory_write", "search_conversation",
              "search_knowledge", "read_document", "state_get", "state_set")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("tool", TOOL_NAMES)
async def test_no_mcp_tool_crashes(tool: str, tmp_path: Path, anyio_backend: str) -> None:
    """Hostile arguments to each MCP tool: a result, a tool error with Loci's message, or
    the SDK's refusal of arguments off the schema; never a crash."""
    hub = Hub(load_settings(store=f"sqlite:///{tmp_path / 'loci.db'}", home=str(tmp_path),
                           embedding_provider="hash", workspace=str(tmp_path)))
    calls: list[dict[str, Any]] = []
    async with Client(build_mcp(hub, Principal(Scope("fuzz", "agent")))) as client:
        schema = {t.name: t.input_schema for t in (await client.list_tools()).tools}[tool]

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.fixed_dictionaries({}, optional={
            name: field_values(field) for name, field in schema["properties"].items()}))
        def collect(arguments: dict[str, Any]) -> None:
            calls.append(arguments)

        collect()
        for arguments in calls:
            result = await client.call_tool(tool, arguments)
            text = " ".join(getattr(part, "text", "") for part in result.content)
            crashed = text.strip() == f"Error executing tool {tool}"  # no message: a crash
            assert not (result.is_error and crashed), (arguments, text)
    hub.close()
