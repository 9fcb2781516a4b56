"""The dashboard at ``/``: plain HTML, CSS and an ES module shipped in the package
(``static/``), served as files. No CDN and no build step: what is in the wheel is what
the browser runs, and it talks to the server only through the REST API under ``/api``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).with_name("static")

#: Defence in depth behind the rule that data only ever reaches the DOM as text: the
#: page may run its own script and nothing else, and may only call its own server.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The files are small and change with the package: always revalidate (ETag).
    "Cache-Control": "no-cache",
}


class DashboardFiles(StaticFiles):
    """Static files with the security headers above on every answer."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def mount_dashboard(app: FastAPI) -> None:
    """Serve the dashboard at ``/``. A mount at ``/`` matches every path, so call this
    after every other route is added, or it would shadow them."""
    app.mount("/", DashboardFiles(directory=STATIC_DIR, html=True), name="dashboard")
