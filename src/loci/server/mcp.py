"""Loci's memory tools over MCP (the official ``mcp`` SDK's ``MCPServer``).

Eight tools with the semantics of the :class:`~loci.Loci` methods of the same names:
``memory_search``, ``memory_read``, ``memory_write``, ``search_conversation``,
``search_knowledge``, ``read_document``, ``state_get`` and ``state_set``. A
``LociError`` comes back as a tool error (``is_error``) carrying its message, so the
model can read it and correct itself; nothing crashes the server.

Every call is scoped to one principal:

- over streamable HTTP (``/mcp`` in the server app) :class:`ScopedMCP` authenticates
  each request with the REST rules (``Authorization: Bearer``, ``X-Loci-Agent``,
  ``X-Loci-User`` in open mode), answers 401/403 JSON itself, and stores the principal
  in the ASGI scope, where the tool finds it through the request the SDK attaches to
  the call. A context variable would not do: the SDK runs handlers in tasks of its
  own, which do not inherit the request's context;
- over stdio and in memory there is no request, and the server's ``default``
  principal (from ``loci mcp --user/--agent``) applies.

The HTTP transport is stateless (no MCP session survives a request): Loci servers are
meant to run side by side behind a load balancer, and per-request authentication
means a session id can never carry one tenant's scope to another.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from pydantic_core import to_jsonable_python
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from loci import Loci, LociError, MemoryFiles, SearchFilters, __version__
from loci.server.errors import error_response
from loci.server.hub import Hub, Principal

#: Where :class:`ScopedMCP` leaves the authenticated principal in the ASGI scope.
PRINCIPAL_KEY = "loci.principal"

INSTRUCTIONS = (
    "Loci keeps this user's long-term memory: typed facts (memories), key/value state, "
    "the log of past conversations and a knowledge base of documents. Search first "
    "(memory_search, search_conversation, search_knowledge), then read what you need "
    "in full (memory_read, read_document). Save lasting facts with memory_write (with an "
    "id to correct one), list recent ones with memory_list, delete a wrong one with "
    "memory_forget, and keep small current values with state_set."
)

P = ParamSpec("P")
R = TypeVar("R")

Query = Annotated[str, Field(description="What to look for, in natural language.")]
Offset = Annotated[int, Field(ge=0, description="First character to return (for paging).")]


Tool = Callable[[Callable[..., Any]], Callable[..., Any]]


def _registrar(server: MCPServer, hub: Hub, principal: Callable[[Context], Principal]
               ) -> Tool:
    """A decorator that registers a tool whose call holds its caller's engine
    (``Hub.serving``: an erasure of the caller's user waits for it) and turns Loci's own
    errors into tool errors that keep their message; anything else stays a crash, whose
    text the SDK keeps on the server."""
    def tool(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            ctx = kwargs.get("ctx", args[0] if args else None)
            assert isinstance(ctx, Context)
            try:
                with hub.serving(principal(ctx)):
                    return fn(*args, **kwargs)
            except LociError as exc:
                raise ToolError(str(exc)) from exc
        server.tool()(wrapper)
        return wrapper
    return tool


def _json(value: Any) -> dict[str, Any]:
    """A dataclass result (or ``{"results": [...]}``) as a JSON object."""
    data = to_jsonable_python(value)
    return data if isinstance(data, dict) else {"results": data}


def build_mcp(hub: Hub, default: Principal | None = None) -> MCPServer:
    """The MCP server over ``hub``. Calls that carry no authenticated HTTP request
    (stdio, in memory) act as ``default``; without one they are refused."""
    server: MCPServer = MCPServer(
        name="loci", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def principal(ctx: Context) -> Principal:
        request = ctx.request_context.request
        found = getattr(request, "scope", {}).get(PRINCIPAL_KEY) or default
        if not isinstance(found, Principal):
            raise ToolError("no caller scope: connect through /mcp with an API key")
        return found

    def engine(ctx: Context) -> Loci:
        return hub.engine(principal(ctx))

    tool = _registrar(server, hub, principal)

    @tool
    def memory_search(
        ctx: Context, query: Query,
        limit: Annotated[int, Field(ge=1, le=100, description="Most results to return.")] = 5,
        types: Annotated[list[str] | None, Field(
            description="Only these memory types (sticky, user_preference, ...).")] = None,
        tags: Annotated[list[str] | None, Field(
            description="Only memories with all of these tags.")] = None,
    ) -> dict[str, Any]:
        """Search the user's memories (facts, preferences, project context) by meaning
        and keywords. Returns short summaries with ids and relevance in [0, 1]; read a
        memory in full with memory_read."""
        filters = SearchFilters(types=tuple(types or ()), tags=tuple(tags or ()))
        return _json(engine(ctx).memory_search(query, limit, filters))

    @tool
    def memory_read(
        ctx: Context, id: Annotated[str, Field(description="A memory id from memory_search.")],
        offset: Offset = 0,
        limit: Annotated[int, Field(ge=1, le=100_000, description="Characters to return.")]
        = 1000,
    ) -> dict[str, Any]:
        """Read one memory in full (its markdown with type, tags and dates), page by
        page: when next_offset is not null, call again with offset=next_offset."""
        return _json(engine(ctx).memory_read(id, offset, limit))

    @tool
    def memory_write(
        ctx: Context,
        content: Annotated[str, Field(description="The fact, one self-contained sentence.")],
        type: Annotated[str, Field(description=(
            "sticky (never expires), user_preference (90 days), project_context (30 "
            "days), learned_pattern (30 days) or a custom type."))] = "project_context",
        tags: Annotated[list[str] | None, Field(description="Short labels.")] = None,
        id: Annotated[str | None, Field(description=(
            "Update this memory instead of creating one (its old version is kept)."))]
        = None,
    ) -> dict[str, Any]:
        """Save a lasting fact about the user or the work. Saving a fact that is
        already known refreshes it instead of duplicating it."""
        memory = engine(ctx).memory_write(type, tags or [], content, id=id)
        return _json(memory)

    @tool
    def memory_list(
        ctx: Context,
        type: Annotated[str | None, Field(description="Only this memory type.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most memories.")] = 20,
    ) -> dict[str, Any]:
        """The user's most recent memories (not expired), newest first, with their ids:
        what you know before you search."""
        return _json(engine(ctx).memories(type)[:limit])

    @tool
    def memory_forget(
        ctx: Context,
        id: Annotated[str, Field(description="The id of the memory to delete.")],
        redact_source: Annotated[bool, Field(
            description="Also remove the tag that wrote it from your raw reply in the "
                        "log (when the user wants no trace left).")] = False,
    ) -> dict[str, Any]:
        """Delete a memory that is wrong or that the user asked you to forget, with its
        history. To correct a fact instead, call memory_write with its id."""
        redacted = engine(ctx).forget(id, redact_source=redact_source)
        return {"forgotten": id, "redacted_replies": redacted}

    @tool
    def search_conversation(
        ctx: Context, query: Query,
        session: Annotated[str | None, Field(description="Only this session.")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="Most results.")] = 10,
    ) -> dict[str, Any]:
        """Search past conversations (every session's log, compacted parts included)
        for what was said; results carry the session, time and relevance."""
        hits = engine(ctx).search_conversation(query, session, limit)
        return _json(hits)

    @tool
    def search_knowledge(
        ctx: Context, query: Query,
        path_filter: Annotated[str | None, Field(
            description="Only documents under this folder, e.g. /projects/.")] = None,
        tags: Annotated[list[str] | None, Field(description="Only documents with these tags.")]
        = None,
        top_k: Annotated[int, Field(ge=1, le=100, description="Most results.")] = 5,
    ) -> dict[str, Any]:
        """Search the knowledge base (documents at paths such as /profile/... or
        /projects/x/...). Returns paths, titles, the matching passage and relevance;
        read a document with read_document."""
        found = engine(ctx).search_knowledge(query, path_filter, tags, top_k)
        return _json(found)

    @tool
    def read_document(
        ctx: Context,
        path: Annotated[str, Field(description="A document path from search_knowledge.")],
        offset: Offset = 0,
        limit: Annotated[int, Field(ge=1, le=100_000, description="Characters to return.")]
        = 10_000,
    ) -> dict[str, Any]:
        """Read a knowledge-base document's latest version, page by page: when
        next_offset is not null, call again with offset=next_offset."""
        return _json(engine(ctx).read_document(path, offset, limit))

    @tool
    def state_get(
        ctx: Context, key: Annotated[str, Field(description="The state key.")],
    ) -> dict[str, Any]:
        """Read a key/value state item (current values such as the active project)."""
        return _json(engine(ctx).state_get(key))

    @tool
    def state_set(
        ctx: Context, key: Annotated[str, Field(description="The state key.")],
        value: Annotated[str, Field(description="The new value (replaces the old one).")],
    ) -> dict[str, Any]:
        """Set a key/value state item, overwriting its previous value."""
        return _json(engine(ctx).state_set(key, value))

    _memory_file_tools(tool, engine)
    return server


MemoryPath = Annotated[str, Field(description="A path under /memories, e.g. "
                                               "/memories/notes.md.")]


def _memory_file_tools(tool: Tool, engine: Callable[[Context], Loci]) -> None:
    """The six commands of Anthropic's memory tool as MCP tools, on the same files
    (``knowledge.memory_files``): results and errors in the same words."""

    def files(ctx: Context) -> MemoryFiles:
        return MemoryFiles(engine(ctx).knowledge)

    @tool
    def memories_view(
        ctx: Context, path: MemoryPath = MemoryFiles.ROOT,
        view_range: Annotated[list[int] | None, Field(
            min_length=2, max_length=2, description="[first line, last line or -1].")] = None,
    ) -> str:
        """List a /memories directory (two levels deep) or show a file with line
        numbers; check your memory directory before starting a task."""
        return files(ctx).view(path, view_range)

    @tool
    def memories_create(
        ctx: Context, path: MemoryPath,
        file_text: Annotated[str, Field(description="The whole content of the new file.")],
    ) -> str:
        """Create a new file under /memories (refused if it exists)."""
        return files(ctx).create(path, file_text)

    @tool
    def memories_str_replace(
        ctx: Context, path: MemoryPath,
        old_str: Annotated[str, Field(description="Text that occurs exactly once.")],
        new_str: Annotated[str, Field(description="What replaces it.")],
    ) -> str:
        """Replace text that occurs exactly once in a /memories file."""
        return files(ctx).str_replace(path, old_str, new_str)

    @tool
    def memories_insert(
        ctx: Context, path: MemoryPath,
        insert_line: Annotated[int, Field(ge=0, description="Insert after this line "
                                                            "(0: at the top).")],
        insert_text: Annotated[str, Field(description="The text to insert.")],
    ) -> str:
        """Insert text at a line of a /memories file."""
        return files(ctx).insert(path, insert_line, insert_text)

    @tool
    def memories_delete(ctx: Context, path: MemoryPath) -> str:
        """Delete a /memories file or directory."""
        return files(ctx).delete(path)

    @tool
    def memories_rename(
        ctx: Context, old_path: MemoryPath,
        new_path: Annotated[str, Field(description="Where it goes, under /memories.")],
    ) -> str:
        """Rename or move a /memories file or directory."""
        return files(ctx).rename(old_path, new_path)


class ScopedMCP:
    """The streamable-HTTP app behind Loci's authentication: each request gets the
    principal of its headers, or a 401/403 JSON error like the REST routes."""

    def __init__(self, app: ASGIApp, hub: Hub) -> None:
        self.app, self.hub = app, hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("POST", "OPTIONS"):
            # Stateless: no stream to open or session to end; a GET's event stream
            # would stay open for ever.
            response = error_response(405, "MethodNotAllowed",
                                      "the MCP endpoint is stateless: POST JSON-RPC to it")
            response.headers["Allow"] = "POST"
            await response(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            # The key check reads the store: keep it off the event loop.
            principal = await anyio.to_thread.run_sync(
                self.hub.authenticate, headers.get("authorization"),
                headers.get("x-loci-user"), headers.get("x-loci-agent"))
        except LociError as exc:
            response = error_response(exc.http_status, type(exc).__name__, str(exc))
            await response(scope, receive, send)
            return
        await self.app({**scope, PRINCIPAL_KEY: principal}, receive, send)


def http_app(server: MCPServer, hub: Hub) -> tuple[ScopedMCP, Starlette]:
    """The authenticated ASGI endpoint for ``/mcp``, and the SDK's Starlette app
    (whose session manager must run in the host app's lifespan)."""
    app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True,
        max_request_body_size=hub.settings.server.max_body,
        # The SDK turns on DNS-rebinding protection for loopback hosts only.
        host=hub.settings.server.host)
    return ScopedMCP(app, hub), app
