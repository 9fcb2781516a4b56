"""CLI commands, one module per domain; importing this package registers them."""

from loci.cli.commands import compaction, context, demo, memory, sessions, workspace

__all__ = ["compaction", "context", "demo", "memory", "sessions", "workspace"]
