"""Settings, in one place.

Sources, lowest precedence first: built-in defaults, ``$LOCI_HOME/loci.toml``, the
workspace's ``loci.toml``, ``LOCI_*`` environment variables, then explicit overrides
(CLI flags, keyword arguments). A TOML table such as ``[embedding]`` maps to the fields
that start with its name (``provider`` → ``embedding_provider``, environment variable
``LOCI_EMBEDDING_PROVIDER``); ``[models]`` and ``[memory_types]`` are whole tables.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from loci.errors import ConfigError

SETTINGS_FILE = "loci.toml"
_TABLE_FIELDS = ("models", "memory_types")


@dataclass(frozen=True)
class Settings:
    """Every tunable of Loci. Build with :func:`load_settings`."""

    home: Path = field(default_factory=lambda: Path("~/.loci").expanduser())
    #: Store URL; empty means ``sqlite:///$LOCI_HOME/loci.db``.
    store: str = ""
    #: Where workspace files (SOUL.md, skills/, memory/) are looked up; None = cwd.
    workspace: Path | None = None
    user: str = "default"
    agent: str = "default"
    #: The model that context is compiled for; picks the window and the tokenizer.
    model: str = "gpt-4.1"
    #: "auto" (exact where known), "heuristic", or an encoding name (cl100k_base, ...).
    tokenizer: str = "auto"
    #: Share of the model's window that compiled context targets (seeds/000: 75%).
    context_target: float = 0.75
    #: Extra or overriding context windows, model name (or glob) → tokens.
    models: dict[str, int] = field(default_factory=dict)
    #: Custom memory types, name → TTL in days (0 = never expires).
    memory_types: dict[str, int] = field(default_factory=dict)
    #: Mirror every memory to ``memory/{id}.md`` in the workspace (or $LOCI_HOME).
    memory_mirror: bool = True
    #: "local" (bundled MiniLM, offline), "openai" (any compatible API), "hash", "none".
    embedding_provider: str = "local"
    embedding_model: str = ""
    embedding_base_url: str = ""
    embedding_api_key: str = ""
    #: Threads of the local model per process (0: up to 4; ``loci serve --workers N``
    #: gives each worker its share of the cores).
    embedding_threads: int = 0
    #: Where the bundled model's faster int8 build is made and kept (empty:
    #: ``$LOCI_HOME/models``; see ``embeddings.quantize``).
    embedding_cache: str = ""
    #: "weighted" (seeds/002: 0.7 vector + 0.3 keyword) or "rrf".
    search_fusion: str = "weighted"
    search_vector_weight: float = 0.7
    search_keyword_weight: float = 0.3
    search_recency_weight: float = 0.0
    search_recency_half_life_days: float = 30.0
    #: Context layers in order (empty: the default order); a layer left out is off.
    context_layers: list[str] = field(default_factory=list)
    #: Budgets by layer or section name: tokens, or a share of the window below 1.
    context_budgets: dict[str, float] = field(default_factory=dict)
    #: How many memories, and how many turns of the event log, recall adds at most.
    recall_limit: int = 5
    #: Failures of one tool in a session before a reflexion hint is added.
    reflexion_threshold: int = 3
    #: The user's name as the context states it (default: the user id).
    user_name: str = ""
    #: Chat model for summaries and extraction: "extractive" (offline), "openai"
    #: (any compatible base URL: OpenAI, Ollama, vLLM, LM Studio) or "anthropic".
    llm_provider: str = "extractive"
    llm_model: str = ""
    llm_base_url: str = ""
    llm_api_key: str = ""
    compaction_auto: bool = True
    compaction_threshold: float = 0.75
    compaction_emergency: float = 0.80
    compaction_flush: float = 0.85
    compaction_sleep: float = 0.50
    compaction_idle_seconds: float = 600.0
    compaction_preserve_messages: int = 20
    compaction_preserve_share: float = 0.20
    #: At most this many tokens per compaction summary; within that, a quarter of the
    #: history budget (``context.layers.SUMMARY_SHARE``), which the summary shares.
    compaction_summary_tokens: int = 8_000
    #: A custom summarization prompt for LLM summaries (empty: the built-in one).
    compaction_prompt: str = ""
    #: ``loci serve``: where to listen. A non-loopback host needs API keys.
    server_host: str = "127.0.0.1"
    server_port: int = 8765
    #: Largest request body the server accepts, in bytes (larger: HTTP 413).
    server_max_body: int = 8 * 1024 * 1024
    #: Host names the server answers besides loopback ones (DNS rebinding: see
    #: ``server.guard``); with API keys and none listed, any.
    server_allowed_hosts: list[str] = field(default_factory=list)
    #: Web origins (``https://app.example``) allowed to change data from a browser.
    server_allowed_origins: list[str] = field(default_factory=list)
    #: Scopes (user, agent) whose engines the server keeps open.
    server_cache_scopes: int = 256
    #: The OpenAI-compatible proxy's upstream: ``openai`` (any compatible base URL) or
    #: ``anthropic``; empty means the ``[llm]`` provider.
    proxy_provider: str = ""
    proxy_base_url: str = ""
    proxy_api_key: str = ""
    #: Models that ``GET /v1/models`` lists (default: the configured model).
    proxy_models: list[str] = field(default_factory=list)

    @property
    def store_url(self) -> str:
        return self.store or f"sqlite:///{self.home / 'loci.db'}"

    @property
    def model_cache(self) -> Path:
        """Where the bundled embedding model's int8 build is kept."""
        return Path(self.embedding_cache).expanduser() if self.embedding_cache \
            else self.home / "models"

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the given non-None fields replaced (values are checked)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **_coerce_all(given, "override"))


def load_settings(
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    **overrides: Any,
) -> Settings:
    """Load settings from files and environment, then apply ``overrides``."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    home = Path(overrides.get("home") or env.get("LOCI_HOME") or "~/.loci").expanduser()
    values["home"] = home
    workspace = overrides.get("workspace") or env.get("LOCI_WORKSPACE")
    workspace_dir = Path(workspace).expanduser() if workspace else (cwd or Path.cwd())
    # Each source is checked on its own, so that an error names where the value came from.
    for path in _settings_files(home, workspace_dir):
        values.update(_coerce_all(_read_toml(path), str(path)))
    values.update(_coerce_all(_from_env(env), "environment (LOCI_*)"))
    values.update(_coerce_all({k: v for k, v in overrides.items() if v is not None},
                              "settings"))
    if workspace:
        values["workspace"] = workspace_dir
    return Settings(**values)


def _settings_files(home: Path, workspace: Path) -> list[Path]:
    candidates = [home / SETTINGS_FILE, workspace / SETTINGS_FILE]
    unique = list(dict.fromkeys(p.resolve() for p in candidates))
    return [p for p in unique if p.is_file()]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read settings: {exc}") from exc
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key not in _TABLE_FIELDS:
            for sub, sub_value in value.items():
                flat[f"{key}_{sub}"] = sub_value
        else:
            flat[key] = value
    unknown = sorted(set(flat) - _FIELD_TYPES.keys())
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    return flat


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in _FIELD_TYPES:
        if name in _TABLE_FIELDS or name == "home":
            continue
        raw = env.get(f"LOCI_{name.upper()}")
        if raw is not None and raw != "":
            found[name] = raw
    return found


_FIELD_TYPES: dict[str, str] = {f.name: str(f.type) for f in fields(Settings)}
#: Settings that are shares of the model's window.
_FRACTIONS = frozenset({"context_target", "compaction_threshold", "compaction_emergency",
                        "compaction_flush", "compaction_sleep", "compaction_preserve_share"})


def _coerce_all(values: Mapping[str, Any], origin: str) -> dict[str, Any]:
    return {key: _coerce(key, value, origin) for key, value in values.items()}


def _coerce(key: str, value: Any, origin: str) -> Any:
    kind = _FIELD_TYPES.get(key)
    if kind is None:
        raise ConfigError(f"{origin}: unknown setting {key!r}")
    try:
        if kind == "int":
            if int(value) < 0:
                raise ValueError("must not be negative")
            return int(value)
        if kind == "bool":
            return _boolean(value)
        if kind == "float":
            number = float(value)
            if key in _FRACTIONS and not 0 < number <= 1:
                raise ValueError("must be a fraction in (0, 1]")
            if number < 0:
                raise ValueError("must not be negative")
            return number
        if kind in ("Path", "Path | None"):
            return Path(value).expanduser()
        if kind.startswith("dict"):
            if not isinstance(value, dict):
                raise ValueError("must be a table")
            if "float" in kind:
                return {str(k): float(v) for k, v in value.items()}
            return {str(k): int(v) for k, v in value.items()}
        if kind.startswith("list"):
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, list):
                raise ValueError("must be a list")
            return [str(v).strip() for v in items if str(v).strip()]
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{origin}: setting {key!r} = {value!r}: {exc}") from exc


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")
