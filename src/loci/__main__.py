"""``python -m loci`` runs the CLI."""

from loci.cli.app import run

run()
