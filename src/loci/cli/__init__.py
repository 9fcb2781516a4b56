"""The ``loci`` command."""

from loci.cli.app import main

__all__ = ["main"]
