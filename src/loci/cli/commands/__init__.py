"""CLI commands, one module per domain; importing this package registers them."""

from loci.cli.commands import context, demo, memory, sessions

__all__ = ["context", "demo", "memory", "sessions"]
