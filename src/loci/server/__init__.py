"""The Loci server: REST, MCP, the OpenAI-compatible proxy and the dashboard.

``create_app(settings)`` builds the ASGI application; ``loci serve`` runs it.
"""

from loci.server.app import create_app

__all__ = ["create_app"]
