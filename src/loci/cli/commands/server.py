"""Server commands: ``loci serve`` and API keys (``loci keys create/list/revoke``)."""

from __future__ import annotations

import ipaddress
import os
from typing import Any

import click

from loci.cli.app import cli, json_option, print_json, scoped
from loci.engine import Loci, check_name
from loci.errors import ConfigError
from loci.keys import create_key, revoke_key
from loci.settings import Settings, load_settings


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@cli.command()
@click.option("--host", help="Address to bind (default 127.0.0.1, [server] host).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default 8765).")
@click.option("--store", metavar="URL", help="Store URL (default from settings).")
@click.option("--workspace", metavar="DIR", help="Workspace directory for files.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes (one per core is a good start).")
def serve(host: str | None, port: int | None, store: str | None,
          workspace: str | None, workers: int) -> None:
    """Run the server: REST at /api, MCP at /mcp, the OpenAI-compatible proxy at /v1,
    the dashboard at / and the API docs at /docs.

    Without API keys the server only binds to loopback; create one with
    `loci keys create --user NAME` to serve other hosts.
    """
    import uvicorn

    from loci.server import create_app

    settings = load_settings(store=store, workspace=workspace, server_host=host,
                             server_port=port)
    app = create_app(settings, serving=True)
    hub = app.state.hub
    if not is_loopback(settings.server_host) and not hub.keys_required():
        hub.close()
        raise ConfigError(
            f"refusing to serve {settings.server_host} without API keys: anyone on the "
            "network could read every memory. Create one with `loci keys create --user "
            "NAME`, or bind to 127.0.0.1.")
    mode = "API keys required" if hub.keys_required() else "open (loopback only)"
    click.echo(f"loci: serving {settings.store_url} on http://{settings.server_host}:"
               f"{settings.server_port} ({mode}); docs at /docs", err=True)
    options: dict[str, Any] = {"host": settings.server_host, "port": settings.server_port,
                               "log_level": "warning", "server_header": False}
    if workers == 1:
        uvicorn.run(app, **options)
        return
    hub.close()
    os.environ.update(worker_environment(settings, workers))
    uvicorn.run("loci.server.app:serving_app", factory=True, workers=workers, **options)


def worker_environment(settings: Settings, workers: int) -> dict[str, str]:
    """What each of ``workers`` processes needs in its environment: it builds its own
    app from there, so it must see what the flags chose."""
    env = {"LOCI_STORE": settings.store_url}
    if settings.workspace is not None:
        env["LOCI_WORKSPACE"] = str(settings.workspace)
    if settings.embedding_provider == "local" and not settings.embedding_threads:
        # N processes each running the local model on every core would contend: one
        # query on 2 threads costs ~25% more CPU than on 1 (measured on 2 cores).
        env["LOCI_EMBEDDING_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    return env


@cli.group()
def keys() -> None:
    """API keys for the server, each bound to one user (tenant)."""


@keys.command(name="create")
@click.option("--user", "tenant", required=True, help="The user (tenant) the key serves.")
@click.option("--label", default="", help="A note to recognise the key by.")
@click.option("--store", metavar="URL", help="Store URL (default from settings).")
def keys_create(tenant: str, label: str, store: str | None) -> None:
    """Create a key for USER and print it (it is shown only this once)."""
    with Loci.open(store=store) as loci:
        record, key = create_key(loci.store, check_name("user", tenant), loci.clock(), label)
    click.echo(key)
    click.echo(f"key id {record.id} for user {record.tenant}: store it now, it is not "
               "shown again", err=True)


@keys.command(name="list")
@click.option("--for-user", "tenant", help="Only this user's keys.")
@json_option
@scoped
def keys_list(loci: Loci, tenant: str | None, as_json: bool) -> None:
    """List keys (ids, users, labels; never the secrets)."""
    found = loci.store.list_api_keys(tenant)
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
    """Revoke the key KEY_ID; requests with it are refused from then on."""
    revoke_key(loci.store, key_id)
    click.echo(f"revoked {key_id}")
