"""``loci mcp``: Loci's memory tools over MCP on stdio, for desktop clients (Claude
Desktop, Claude Code, Cursor) that start the server as a subprocess.

The scope is fixed for the life of the process: ``--user``, ``--agent``, ``--store``
and ``--workspace`` (or the settings) pick it. stdout carries the protocol, so
nothing else may print there.
"""

from __future__ import annotations

import click

from loci import ConfigError, Scope, load_settings
from loci.cli.app import cli, global_option


@cli.command()
@click.option("--store", metavar="URL", help="Store URL (default from settings).")
@click.option("--user", metavar="USER", help="Tenant (user) whose data the tools use.")
@click.option("--agent", metavar="AGENT", help="Agent within the user.")
@click.option("--workspace", metavar="DIR", help="Workspace directory for files.")
def mcp(store: str | None, user: str | None, agent: str | None,
        workspace: str | None) -> None:
    """Serve the memory tools over MCP on stdin/stdout (memory_search, memory_read,
    memory_write, search_conversation, search_knowledge, read_document, state_get,
    state_set). HTTP clients use `loci serve` and its /mcp endpoint instead."""
    import anyio

    from loci.server.hub import Hub, Principal
    try:
        from loci.server.mcp import build_mcp
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        from loci.server.app import MCP_MISSING
        raise ConfigError(MCP_MISSING) from exc

    settings = load_settings(store=global_option("store", store),
                             user=global_option("user", user),
                             agent=global_option("agent", agent),
                             workspace=global_option("workspace", workspace))
    hub = Hub(settings)
    try:
        server = build_mcp(hub, Principal(Scope(hub.base.scope.tenant, hub.base.scope.agent)))
        anyio.run(server.run_stdio_async)
    finally:
        hub.close()
