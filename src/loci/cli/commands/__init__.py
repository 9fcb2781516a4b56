"""CLI commands, one module per domain; importing this package registers them."""

from loci.cli.commands import (
    compaction,
    context,
    demo,
    erasure,
    evaluation,
    knowledge,
    mcp,
    memory,
    migrate,
    server,
    sessions,
    usage,
    workspace,
)

__all__ = ["compaction", "context", "demo", "erasure", "evaluation", "knowledge", "mcp",
           "memory", "migrate", "server", "sessions", "usage", "workspace"]
