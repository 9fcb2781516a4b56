"""Server commands: ``loci serve`` and API keys (``loci keys create/list/revoke``)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import click

from loci import ConfigError, Loci, load_settings
from loci.cli.app import cli, global_option, json_option, print_json, scoped


@cli.command()
@click.option("--host", help="Address to bind (default 127.0.0.1, [server] host).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default 8765).")
@click.option("--store", metavar="URL", help="Store URL (default from settings).")
@click.option("--workspace", metavar="DIR", help="Workspace directory for files.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes (one per core is a good start).")
@click.option("--upstream", type=click.Choice(["echo"]),
              help="echo: the proxy answers from a local fake model that repeats the "
                   "message (no key, no network): try the proxy, memory and dashboard.")
def serve(host: str | None, port: int | None, store: str | None,
          workspace: str | None, workers: int, upstream: str | None) -> None:
    """Run the server: REST at /api, MCP at /mcp, the OpenAI-compatible proxy at /v1,
    the dashboard at / and the API docs at /docs.

    Without API keys the server only binds to loopback; create one with
    `loci keys create --user NAME` to serve other hosts. The proxy's upstream is
    [proxy] in loci.toml (its key: LOCI_PROXY_API_KEY, else OPENAI_API_KEY or
    ANTHROPIC_API_KEY for the provider's own API), or --upstream echo.
    """
    with ExitStack() as stack:
        echo: dict[str, Any] = {}
        if upstream == "echo":
            from loci.testing import FakeProvider, echo_reply

            fake = stack.enter_context(FakeProvider(reply=echo_reply, keep_requests=False))
            echo = {"proxy_provider": "openai", "proxy_base_url": f"{fake.url}/v1",
                    "proxy_api_key": "echo"}
            click.echo(f"loci: the proxy's upstream is the local echo model ({fake.url})",
                       err=True)
        _serve(host, port, global_option("store", store),
               global_option("workspace", workspace), workers, echo)


def _serve(host: str | None, port: int | None, store: str | None, workspace: str | None,
           workers: int, overrides: dict[str, Any]) -> None:
    import uvicorn

    # The server's modules load only for the commands that serve (a second saved on
    # every other command).
    from loci.server import create_app
    from loci.server.guard import is_loopback
    from loci.server.workers import UVICORN_OPTIONS, Supervisor, listen

    settings = load_settings(store=store, workspace=workspace, server_host=host,
                             server_port=port, **overrides)
    app = create_app(settings, serving=True)
    hub = app.state.hub
    if not is_loopback(settings.server.host) and not hub.has_keys():
        hub.close()
        raise ConfigError(
            f"refusing to serve {settings.server.host} without API keys: anyone on the "
            "network could read every memory. Create one with `loci keys create --user "
            "NAME`, or bind to 127.0.0.1.")
    mode = "API keys required" if hub.keys_required() else "open (loopback only)"
    click.echo(f"loci: serving {settings.store_url} on http://{settings.server.host}:"
               f"{settings.server.port} ({mode}, {workers} process(es)); docs at /docs",
               err=True)
    if workers == 1:
        uvicorn.run(app, host=settings.server.host, port=settings.server.port,
                    **UVICORN_OPTIONS)
        return
    hub.close()
    with listen(settings.server.host, settings.server.port) as sock:
        raise SystemExit(Supervisor(settings, sock, workers).run())


@cli.group()
def keys() -> None:
    """API keys for the server, each bound to one user (tenant)."""


@keys.command(name="create")
@click.option("--user", "tenant", help="The user (tenant) the key serves.")
@click.option("--operator", is_flag=True,
              help="A key that acts for any user named by X-Loci-User (to administer "
                   "the server: erase a user, read anyone's data). Guard it well.")
@click.option("--label", default="", help="A note to recognise the key by.")
@click.option("--store", metavar="URL", help="Store URL (default from settings).")
def keys_create(tenant: str | None, operator: bool, label: str, store: str | None) -> None:
    """Create a key for USER (or an operator key) and print it (shown only this once)."""
    if not operator:
        tenant = global_option("user", tenant)
    if operator == (tenant is not None):
        raise click.UsageError("give either --user NAME or --operator")
    with Loci.open(store=global_option("store", store)) as loci:
        record, key = loci.runtime.create_key(tenant, label)
    click.echo(key)
    whom = "the operator" if operator else f"user {record.tenant}"
    click.echo(f"key id {record.id} for {whom}: store it now, it is not shown again",
               err=True)


@keys.command(name="list")
@click.option("--for-user", "tenant", help="Only this user's keys.")
@json_option
@scoped
def keys_list(loci: Loci, tenant: str | None, as_json: bool) -> None:
    """List keys (ids, users, labels; never the secrets)."""
    found = loci.runtime.api_keys(tenant)
    if as_json:
        print_json(found)
        return
    for key in found:
        state = "revoked" if key.revoked else "active"
        click.echo(f"{key.id}  {key.tenant}  {state}  {key.label}")


@keys.command(name="revoke")
@click.argument("key_id")
@scoped
def keys_revoke(loci: Loci, key_id: str) -> None:
    """Revoke the key KEY_ID (its id, or the whole key); requests with it are refused
    from then on."""
    click.echo(f"revoked {loci.runtime.revoke_key(key_id)}")


@cli.command()
@json_option
@scoped
def status(loci: Loci, as_json: bool) -> None:
    """The store, and the vector index: its model and the rows that wait for their
    vector (writes return before their vectors; the background indexer follows)."""
    index = loci.runtime.index_status()
    if as_json:
        print_json({"store": loci.settings.store_url, "index": index})
        return
    click.echo(f"store: {loci.settings.store_url}")
    if index is None:
        click.echo("vectors: off (embedding provider none)")
        return
    click.echo(f"vectors: {index.model or 'none yet'} ({index.dim or '?'} dimensions)")
    plural = {"event": "events", "memory": "memories", "document": "documents"}
    waiting = ", ".join(f"{count} {plural.get(kind, kind)}"
                        for kind, count in index.unembedded.items())
    click.echo(f"waiting for vectors: {waiting}" + (" (indexing)" if index.indexing else ""))
