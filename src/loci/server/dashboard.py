"""The dashboard at ``/``: plain HTML, CSS and an ES module shipped in the package
(``static/``), served as files. No CDN and no build step: what is in the wheel is what
the browser runs, and it talks to the server only through the REST API under ``/api``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
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


#: Swagger UI and ReDoc, shipped in a package (``fastapi-offline``), so /docs works
#: offline: FastAPI's own pages load them from a CDN.
DOCS_ASSETS = "/docs-assets"


def mount_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their scripts served from here."""
    assets = resources.files("fastapi_offline") / "static"
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")
    openapi = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi, title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png")

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi, title=f"{app.title} API",
                              redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
                              with_google_fonts=False)
