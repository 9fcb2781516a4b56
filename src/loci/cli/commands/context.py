"""Context and token commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from loci import Loci, context_window, token_counter
from loci.cli.app import cli, print_json, scoped
from loci.tokens import heuristic_count


@cli.command()
@click.argument("session")
@click.argument("message", required=False)
@click.option("--model", help="Model to compile for (window and tokenizer).")
@click.option("--window", type=click.IntRange(min=512),
              help="Context window in tokens for this call (default: the model's).")
@click.option("--format", "fmt", type=click.Choice(["openai", "anthropic", "text", "json"]),
              default="text", show_default=True)
@click.option("--explain", is_flag=True, help="Show each layer's tokens, budget and items.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON (--format json; with --explain: the explain view only).")
@scoped
def context(
    loci: Loci, session: str, message: str | None, model: str | None, window: int | None,
    fmt: str, explain: bool, as_json: bool,
) -> None:
    """Compile the context of SESSION's next LLM call, around MESSAGE."""
    loci.session(session)
    compiled = loci.compile(session, message, model=model, window=window)
    if explain and as_json:
        data = compiled.to_dict()
        print_json({k: v for k, v in data.items() if k != "messages"})
        return
    if fmt == "json" or as_json:
        print_json(compiled.to_dict())
    elif fmt == "openai":
        click.echo(json.dumps(compiled.to_openai(), ensure_ascii=False, indent=2))
    elif fmt == "anthropic":
        click.echo(json.dumps(compiled.to_anthropic(), ensure_ascii=False, indent=2))
    else:
        click.echo(compiled.to_text())
    if explain and fmt != "json":
        click.echo("\n--- explain ---")
        click.echo(compiled.explain())


@cli.command()
@click.argument("file", required=False, default="-",
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--model", default="gpt-4.1", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tokens(file: str, model: str, as_json: bool) -> None:
    """Count the tokens of FILE (or stdin) for MODEL, exactly where possible."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"{file} is not UTF-8 text ({exc.reason} at byte "
                               f"{exc.start})") from exc
    counter = token_counter(model)
    result = {
        "model": model,
        "method": counter.method,
        "tokens": counter.count(text),
        "heuristic_tokens": heuristic_count(text),
        "characters": len(text),
        "context_window": context_window(model),
    }
    if as_json:
        print_json(result)
    else:
        click.echo(
            f"{result['tokens']} tokens ({counter.method}); heuristic "
            f"{result['heuristic_tokens']}; {len(text)} characters; "
            f"{model} window {result['context_window']:,}"
        )
