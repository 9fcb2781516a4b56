"""The MCP tools through the official SDK's real client: in memory, over streamable
HTTP against a uvicorn server, and over stdio against ``python -m loci mcp``."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

import loci
from loci import load_settings
from loci.models import Scope
from loci.server import create_app
from loci.server.hub import Hub, Principal
from loci.server.mcp import build_mcp
from tests.server.conftest import LiveServer, make_key

pytestmark = pytest.mark.anyio
TOOLS = {"memory_search", "memory_read", "memory_write", "search_conversation",
         "search_knowledge", "read_document", "state_get", "state_set", "memory_list",
         "memory_forget", "memories_view",
         "memories_create", "memories_str_replace", "memories_insert", "memories_delete",
         "memories_rename"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def hub(home: Path) -> Iterator[Hub]:
    hub = Hub(load_settings(store=f"sqlite:///{home / 'loci.db'}"))
    yield hub
    hub.close()


@pytest.fixture
def app(home: Path) -> FastAPI:
    return create_app(load_settings(store=f"sqlite:///{home / 'server.db'}"))


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(part, "text", "") for part in result.content)


async def test_every_tool_in_memory(hub: Hub) -> None:
    maya = Principal(Scope("maya", "helper"))
    engine = hub.engine(maya)
    engine.add("work", "user", "The deploy script lives in ops/deploy.sh")
    engine.knowledge.put("/projects/loci/db.md", "# Database\n\nWe chose SQLite first.",
                         tags=["decision"])
    async with Client(build_mcp(hub, maya)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        assert all(tool.description for tool in tools.values())
        assert tools["memory_write"].input_schema["required"] == ["content"]
        assert "ctx" not in tools["memory_search"].input_schema["properties"]

        written = data(await client.call_tool(
            "memory_write", {"content": "Maya lives in Lisbon", "type": "sticky",
                             "tags": ["home"]}))
        assert written["type"] == "sticky" and written["expires_at"] is None
        found = data(await client.call_tool("memory_search", {"query": "where does Maya live"}))
        assert found["results"][0]["id"] == written["id"]
        page = data(await client.call_tool("memory_read", {"id": written["id"], "limit": 2000}))
        assert "Maya lives in Lisbon" in page["content"] and page["next_offset"] is None

        updated = data(await client.call_tool(
            "memory_write", {"content": "Maya lives in Porto", "type": "sticky",
                             "id": written["id"]}))
        assert updated["id"] == written["id"]
        assert engine.memory(written["id"]).content == "Maya lives in Porto"

        said = data(await client.call_tool("search_conversation",
                                           {"query": "deploy script", "session": "work"}))
        assert "ops/deploy.sh" in said["results"][0]["text"]
        docs = data(await client.call_tool("search_knowledge", {"query": "database",
                                                                "path_filter": "/projects/"}))
        assert docs["results"][0]["path"] == "/projects/loci/db.md"
        doc = data(await client.call_tool("read_document", {"path": "/projects/loci/db.md",
                                                            "offset": 2, "limit": 8}))
        assert doc["content"] == "Database" and doc["next_offset"] == 10

        data(await client.call_tool("state_set", {"key": "project", "value": "loci"}))
        assert data(await client.call_tool("state_get", {"key": "project"}))["value"] == "loci"
    # The tools wrote into maya's scope, and nowhere else.
    assert engine.state_get("project").value == "loci"
    assert hub.engine(Principal(Scope("maya", "default"))).memories() == []


async def test_errors_come_back_as_tool_errors(hub: Hub) -> None:
    async with Client(build_mcp(hub, Principal(Scope("maya", "default")))) as client:
        missing = await client.call_tool("memory_read", {"id": "nope"})
        assert "nope" in error_text(missing)
        assert "no state key 'zz'" in error_text(await client.call_tool("state_get",
                                                                          {"key": "zz"}))
        bad_path = await client.call_tool("read_document", {"path": "relative/x.md"})
        assert bad_path.is_error
        bad_limit = await client.call_tool("memory_search", {"query": "x", "limit": 0})
        assert bad_limit.is_error
        # The server is still serving after the errors.
        assert data(await client.call_tool("state_set", {"key": "k", "value": "v"}))["key"] == "k"


async def test_no_scope_without_a_default(hub: Hub) -> None:
    async with Client(build_mcp(hub)) as client:
        result = await client.call_tool("state_get", {"key": "k"})
        assert "API key" in error_text(result)


@asynccontextmanager
async def http_client(base: str, **headers: str) -> AsyncIterator[Client]:
    """The SDK's streamable-HTTP client with ``headers`` on every request (the SDK
    leaves closing a client it was given to its owner)."""
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        yield client


async def test_streamable_http_open_mode(app: FastAPI, live_server: LiveServer) -> None:
    base = live_server(app)
    async with http_client(base, **{"X-Loci-User": "maya"}) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        data(await client.call_tool("memory_write", {"content": "Maya likes tea"}))
    async with http_client(base, **{"X-Loci-User": "tom"}) as client:
        found = data(await client.call_tool("memory_search", {"query": "tea"}))
        assert found["results"] == []
    hub: Hub = app.state.hub
    assert [m.content for m in hub.engine(Principal(Scope("maya", "default"))).memories()] \
        == ["Maya likes tea"]


async def test_streamable_http_keys_isolate_tenants(app: FastAPI,
                                                    live_server: LiveServer) -> None:
    hub: Hub = app.state.hub
    key_a, key_b = make_key(hub, "alice"), make_key(hub, "bob")
    base = live_server(app)
    async with http_client(base, Authorization=f"Bearer {key_a}") as client:
        secret = data(await client.call_tool(
            "memory_write", {"content": "Alice's locker code is 4711", "type": "sticky"}))
        data(await client.call_tool("state_set", {"key": "mood", "value": "calm"}))
    async with http_client(base, Authorization=f"Bearer {key_b}",
                           **{"X-Loci-User": "bob"}) as client:
        found = data(await client.call_tool("memory_search", {"query": "locker code"}))
        assert found["results"] == []
        assert error_text(await client.call_tool("memory_read", {"id": secret["id"]}))
        assert error_text(await client.call_tool("state_get", {"key": "mood"}))
        # Bob cannot overwrite Alice's memory by its id either.
        assert error_text(await client.call_tool(
            "memory_write", {"content": "hacked", "id": secret["id"]}))
    alice = hub.engine(Principal(Scope("alice", "default")))
    assert alice.memory(secret["id"]).content == "Alice's locker code is 4711"


async def test_streamable_http_refuses_missing_and_bad_keys(app: FastAPI,
                                                           live_server: LiveServer) -> None:
    hub: Hub = app.state.hub
    key = make_key(hub, "alice")
    base = live_server(app)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer loci_00000000_wrong"},
                        {"Authorization": f"Bearer {key}", "X-Loci-User": "bob"}):
            response = await http.post(f"{base}/mcp", json=body, headers=headers)
            assert response.status_code in (401, 403)
            assert response.json()["error"]["message"]
    with pytest.raises(Exception):  # noqa: B017 (the SDK wraps the 401 in its own error)
        async with http_client(base) as client:
            await client.list_tools()


async def test_stdio(home: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'stdio.db'}"
    src = str(Path(loci.__file__).resolve().parents[1])
    env = {"PYTHONPATH": src, "LOCI_HOME": str(home), "LOCI_EMBEDDING_PROVIDER": "hash"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "loci", "mcp", "--store", url, "--user", "maya"],
        env=env, cwd=str(tmp_path))
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        saved = data(await client.call_tool("memory_write", {"content": "Maya owns a cat"}))
        found = data(await client.call_tool("memory_search", {"query": "cat"}))
        assert found["results"][0]["id"] == saved["id"]
        assert "no state key" in error_text(await client.call_tool("state_get", {"key": "x"}))
    with loci.Loci.open(store=url, user="maya") as engine:
        assert [m.content for m in engine.memories()] == ["Maya owns a cat"]
    assert json.dumps(saved)  # the result was plain JSON


async def test_the_memory_tool_commands_as_mcp_tools(hub: Hub) -> None:
    maya = Principal(Scope("maya", "helper"))
    async with Client(build_mcp(hub, maya)) as client:
        async def text(tool: str, **arguments: Any) -> str:
            result = await client.call_tool(tool, arguments)
            return " ".join(getattr(part, "text", "") for part in result.content)

        assert await text("memories_create", path="/memories/todo.md",
                          file_text="buy tea\n") == (
            "File created successfully at: /memories/todo.md")
        assert "buy green tea" in await text("memories_str_replace", path="/memories/todo.md",
                                             old_str="buy tea", new_str="buy green tea")
        await text("memories_insert", path="/memories/todo.md", insert_line=0,
                   insert_text="call Rui")
        assert await text("memories_view", path="/memories/todo.md") == (
            "Here's the content of /memories/todo.md with line numbers:\n"
            "     1\tcall Rui\n     2\tbuy green tea\n     3\t")
        await text("memories_rename", old_path="/memories/todo.md",
                   new_path="/memories/done.md")
        listing = await text("memories_view")
        assert listing.endswith("\t/memories/done.md") and "todo" not in listing
        refused = await client.call_tool("memories_create", {"path": "/memories/../x.md",
                                                             "file_text": "x"})
        assert refused.is_error and "would escape /memories" in error_text(refused)
        assert await text("memories_delete", path="/memories/done.md") == (
            "Successfully deleted /memories/done.md")
    assert hub.engine(maya).knowledge.ls("/memories/") == []


async def test_an_agent_manages_its_own_memories(hub: Hub) -> None:
    maya = Principal(Scope("maya", "helper"))
    async with Client(build_mcp(hub, maya)) as client:
        wrong = data(await client.call_tool("memory_write", {
            "content": "Maya lives in Porto", "type": "sticky"}))
        data(await client.call_tool("memory_write", {"content": "Maya drinks tea"}))
        listed = data(await client.call_tool("memory_list", {"limit": 5}))["results"]
        assert [m["content"] for m in listed] == ["Maya drinks tea", "Maya lives in Porto"]
        only = data(await client.call_tool("memory_list", {"type": "sticky"}))["results"]
        assert [m["id"] for m in only] == [wrong["id"]]
        assert data(await client.call_tool("memory_forget", {"id": wrong["id"]})) == {
            "forgotten": wrong["id"], "redacted_replies": 0}
        again = await client.call_tool("memory_forget", {"id": wrong["id"]})
        assert again.is_error and "no memory" in error_text(again)
        assert "loci " not in error_text(again)  # written for the model, not a shell
        missing = await client.call_tool("read_document", {"path": "/nope.md"})
        assert missing.is_error and "`loci" not in error_text(missing)
    assert [m.content for m in hub.engine(maya).memories()] == ["Maya drinks tea"]
