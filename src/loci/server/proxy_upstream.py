"""What the proxy does with the upstream's parameters: the request fields it handles
itself, and the provider's context edits it lets the upstream apply. The upstream
itself is the runtime's (``loci.upstreams``, ``Runtime.upstream``).
"""

from __future__ import annotations

from typing import Any

from loci import Settings
from loci.apis.wire import mapping

#: Request fields the proxy handles itself instead of forwarding.
OWN_FIELDS = frozenset({"model", "messages", "stream", "user", "tools"})


def provider_edits(settings: Settings, params: dict[str, Any]) -> tuple[str, ...]:
    """The types of the client's ``context_management`` edits that the upstream applies
    (an Anthropic upstream; any other drops them)."""
    if settings.upstream_provider != "anthropic":
        return ()
    edits = mapping(params.get("context_management")).get("edits")
    return tuple(str(mapping(e).get("type")) for e in edits or () if mapping(e).get("type"))
