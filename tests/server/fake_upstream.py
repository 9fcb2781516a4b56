"""Helpers of the proxy tests around the fake provider (``loci.testing``, the
``upstream`` fixture of ``tests/conftest.py``): the server proxying to it, a scope's
engine, an OpenAI client, the system text a request sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from openai import OpenAI

from loci import Loci, load_settings
from loci.models import Scope
from loci.server import create_app
from loci.server.hub import Hub, Principal
from loci.testing import FakeProvider, Request

#: The fake provider as the proxy tests' upstream (the ``upstream`` fixture).
Upstream = FakeProvider
UPSTREAM_KEY = "sk-upstream-test"


def proxy_app(home: Path, upstream: FakeProvider, kind: str = "openai", **extra: Any
              ) -> FastAPI:
    """The server with ``kind`` upstream at ``/<kind>/v1`` of the fake provider."""
    settings = load_settings(
        store=f"sqlite:///{home / 'proxy.db'}", proxy_provider=kind,
        proxy_base_url=upstream.base(kind), proxy_api_key=UPSTREAM_KEY,
        **extra)
    return create_app(settings)


def engine(app: FastAPI, tenant: str = "default") -> Loci:
    hub: Hub = app.state.hub
    return hub.engine(Principal(Scope(tenant, "default")))


def client(base: str, key: str = "open") -> OpenAI:
    return OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)


def system_text(request: Request) -> str:
    return "\n".join(m["content"] for m in request["body"]["messages"]
                     if m["role"] == "system")


SESSION = {"X-Loci-Session": "work"}
