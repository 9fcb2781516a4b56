"""The ``loci`` command group, shared options, output helpers and error handling.

Every ``LociError`` (and every bad file or argument) becomes one line on stderr and
exit code 2; no traceback reaches the user.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any, TypeVar

import click

from loci import Loci, LociError
from loci.timeutil import format_timestamp

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="loci-context", prog_name="loci")
@click.option("--store", metavar="URL", help="Store URL (default from settings).")
@click.option("--user", metavar="USER", help="Tenant (user) whose data to use.")
@click.option("--agent", metavar="AGENT", help="Agent within the user.")
@click.option("--workspace", metavar="DIR", help="Workspace directory for files.")
@click.pass_context
def cli(ctx: click.Context, /, **options: str | None) -> None:
    """Loci: context and memory for LLM agents.

    Stores sessions, memories, state and documents, and compiles the context of each
    LLM call under a token budget. The store comes from loci.toml, LOCI_STORE or
    --store (default: SQLite in $LOCI_HOME, ~/.loci). --store, --user, --agent and
    --workspace go before the command or after it (`loci --user maya sessions`).
    """
    ctx.obj = options


def global_option(name: str, value: str | None) -> str | None:
    """A command's own ``--name`` if given, else the one given before the command."""
    if value is not None:
        return value
    context = click.get_current_context(silent=True)
    options = context.find_root().obj if context is not None else None
    return options.get(name) if isinstance(options, dict) else None


def scoped(command: F) -> F:
    """Add --store/--user/--agent/--workspace and pass an open ``Loci`` as ``loci``."""

    @click.option("--store", metavar="URL", help="Store URL (default from settings).")
    @click.option("--user", metavar="USER", help="Tenant (user) whose data to use.")
    @click.option("--agent", metavar="AGENT", help="Agent within the user.")
    @click.option("--workspace", metavar="DIR", help="Workspace directory for files.")
    @functools.wraps(command)
    def wrapper(
        store: str | None, user: str | None, agent: str | None, workspace: str | None,
        **kwargs: Any,
    ) -> Any:
        with Loci.open(store=global_option("store", store), user=global_option("user", user),
                       agent=global_option("agent", agent),
                       workspace=global_option("workspace", workspace)) as loci:
            return command(loci=loci, **kwargs)

    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def to_jsonable(value: Any) -> Any:
    """Dataclasses, tuples and datetimes as plain JSON values."""
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value


def print_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable(value), ensure_ascii=False, indent=2))


def one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn errors into one line and exit code 2."""
    from loci.cli import commands  # noqa: F401  (registers the commands)

    if sys.stdin is None:  # started with standard input closed (`<&-`): it reads as empty
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (the process keeps it)
    try:
        # Outside standalone mode click returns the exit code of click.exceptions.Exit.
        code = cli.main(args=argv, prog_name="loci", standalone_mode=False)
        if isinstance(code, int):
            return code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "loci"
        click.echo(f"error: {exc.format_message()} (see '{where} --help')", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return 2
    except click.Abort:
        click.echo("aborted", err=True)
        return 1
    except LociError as exc:  # one line, whatever a driver's message holds (psycopg: \n\t)
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        return 2
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        return 2
    except UnicodeDecodeError as exc:  # a file given (or a loci.toml) that is not UTF-8
        click.echo(f"error: a file is not UTF-8 text ({exc.reason} at byte {exc.start})",
                   err=True)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def run() -> None:
    sys.exit(main())
