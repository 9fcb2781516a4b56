"""The request fields the proxy handles itself instead of forwarding them to the
upstream (the upstream itself is the runtime's: ``loci.upstreams``)."""

#: Request fields the proxy handles itself instead of forwarding.
OWN_FIELDS = frozenset({"model", "messages", "stream", "user", "tools"})
