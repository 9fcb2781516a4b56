"""Settings, in one place.

Sources, lowest precedence first: built-in defaults, ``$LOCI_HOME/loci.toml``, the
workspace's ``loci.toml``, ``LOCI_*`` environment variables, then explicit overrides
(CLI flags, keyword arguments). A TOML table such as ``[embedding]`` is a section of
:class:`Settings` (``settings.embedding.provider``); its keys also have a flat name
(``embedding_provider``) for the environment (``LOCI_EMBEDDING_PROVIDER``) and keyword
overrides. ``[models]``, ``[memory_types]`` and ``[prices]`` are whole tables.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, get_type_hints

from loci.errors import ConfigError
from loci.pricing import Price

SETTINGS_FILE = "loci.toml"
_TABLE_FIELDS = ("models", "memory_types", "prices")
FUSION_METHODS = ("weighted", "rrf")
RETENTION_ACTIONS = ("erase", "archive")
#: The longest retention, in days (a thousand years: the cutoff stays a date).
MAX_RETENTION_DAYS = 365_000
#: Whose memories an agent keeps: its own ("agent") or its user's, shared by all their
#: agents ("user"); ``loci.memory.scopes``.
MEMORY_SCOPES = ("agent", "user")


def _fraction(section: str, **shares: float) -> None:
    for name, value in shares.items():
        if not 0 < value <= 1:
            raise ConfigError(f"[{section}] {name} must be a fraction in (0, 1] (got {value})")


@dataclass(frozen=True)
class EmbeddingSettings:
    """``[embedding]``: the embedding model that search uses."""

    #: "local" (bundled MiniLM, offline), "openai" (any compatible API), "hash", "none".
    provider: str = "local"
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    #: Threads of the local model per process (0: up to 4; ``loci serve --workers N``
    #: gives each worker its share of the cores).
    threads: int = 0
    #: Where the bundled model's faster int8 build is made and kept (empty:
    #: ``$LOCI_HOME/models``; see ``embeddings.quantize``).
    cache: str = ""


@dataclass(frozen=True)
class SearchSettings:
    """``[search]``: how hybrid search fuses keyword and vector candidates."""

    #: "weighted" (0.7 vector + 0.3 keyword) or "rrf".
    fusion: str = "weighted"
    vector_weight: float = 0.7
    keyword_weight: float = 0.3
    #: Reciprocal rank fusion's constant.
    rrf_k: int = 60
    #: Share of the final score given to recency (0 = off).
    recency_weight: float = 0.0
    recency_half_life_days: float = 30.0
    #: Memory the vectors each process keeps for search may take (MB), their graphs
    #: included: past it, the scopes searched least recently are dropped from memory,
    #: and read back from the store when searched again.
    vector_memory_mb: int = 2048

    def __post_init__(self) -> None:
        if self.vector_memory_mb <= 0:
            raise ConfigError("[search] vector_memory_mb must be positive")
        if self.fusion not in FUSION_METHODS:
            raise ConfigError(f"[search] fusion must be one of {FUSION_METHODS}: {self.fusion!r}")
        if self.vector_weight + self.keyword_weight <= 0:
            raise ConfigError("[search] vector_weight and keyword_weight must not both be 0")
        if self.recency_weight > 1 or self.recency_half_life_days <= 0:
            raise ConfigError("[search] recency_weight must be in [0, 1], its half life > 0")


@dataclass(frozen=True)
class ContextSettings:
    """``[context]``: what compiled context holds and how large it is."""

    #: Share of the model's window that compiled context targets (75%).
    target: float = 0.75
    #: Context layers in order (empty: the default order); a layer left out is off.
    layers: list[str] = field(default_factory=list)
    #: Budgets by layer or section name: tokens, or a share of the window below 1.
    budgets: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _fraction("context", target=self.target)


@dataclass(frozen=True)
class CompactionSettings:
    """``[compaction]``: when to compact (shares of the model's window) and how."""

    auto: bool = True
    threshold: float = 0.75
    emergency: float = 0.80
    flush: float = 0.85
    #: Compact at this share once the session has been idle for ``idle_seconds``: the
    #: provider's prompt cache has gone cold by then, so compacting costs no cache hit.
    sleep: float = 0.35
    idle_seconds: float = 600.0
    preserve_messages: int = 20
    preserve_share: float = 0.20
    #: At most this many tokens per compaction summary; within that, a quarter of the
    #: history budget (``context.layers.SUMMARY_SHARE``), which the summary shares.
    summary_tokens: int = 8_000
    #: A custom summarization prompt for LLM summaries (empty: the built-in one).
    prompt: str = ""
    #: Tool outputs longer than this keep their head and a truncation note.
    mask_chars: int = 2_000
    #: Tool outputs longer than this also become a readable artifact document.
    artifact_chars: int = 5_000

    def __post_init__(self) -> None:
        _fraction("compaction", threshold=self.threshold, emergency=self.emergency,
                  flush=self.flush, sleep=self.sleep, preserve_share=self.preserve_share)
        if not self.sleep <= self.threshold <= self.emergency:
            raise ConfigError("[compaction] thresholds must rise: sleep <= threshold <= "
                              f"emergency (got {self.sleep}, {self.threshold}, "
                              f"{self.emergency})")
        if self.mask_chars < 100:
            raise ConfigError("[compaction] mask_chars must be at least 100")


@dataclass(frozen=True)
class RetentionSettings:
    """``[retention]``: sessions left untouched for ``days`` are erased (their events,
    compactions and index entries; memories learned from them stay) or archived (out
    of live history, still searchable), by ``loci purge --older-than`` and by the
    server once a day. 0 days: kept forever."""

    days: float = 0.0
    action: str = "erase"

    def __post_init__(self) -> None:
        if self.action not in RETENTION_ACTIONS:
            raise ConfigError(f"[retention] action must be one of "
                              f"{', '.join(RETENTION_ACTIONS)} (got {self.action!r})")
        if not 0 <= self.days <= MAX_RETENTION_DAYS:
            raise ConfigError(f"[retention] days must be from 0 to {MAX_RETENTION_DAYS:,} "
                              f"(got {self.days!r})")


@dataclass(frozen=True)
class LLMSettings:
    """``[llm]``: the chat model for summaries and memory extraction."""

    #: "extractive" (offline), "openai" (any compatible base URL: OpenAI, Ollama, vLLM,
    #: LM Studio) or "anthropic".
    provider: str = "extractive"
    model: str = ""
    base_url: str = ""
    api_key: str = ""


@dataclass(frozen=True)
class ServerSettings:
    """``[server]``: ``loci serve``."""

    #: Where to listen. A non-loopback host needs API keys.
    host: str = "127.0.0.1"
    port: int = 8765
    #: Largest request body the server accepts, in bytes (larger: HTTP 413).
    max_body: int = 8 * 1024 * 1024
    #: Host names the server answers besides loopback ones (DNS rebinding: see
    #: ``server.guard``); with API keys and none listed, any.
    allowed_hosts: list[str] = field(default_factory=list)
    #: Web origins (``https://app.example``) allowed to change data from a browser.
    allowed_origins: list[str] = field(default_factory=list)
    #: Scopes (user, agent) whose engines the server keeps open.
    cache_scopes: int = 256
    #: Minutes a user's memories stay unchanged before the server prepares a
    #: consolidation proposal for them to review (it never applies one); 0: never.
    consolidate_idle: float = 0.0

    def __post_init__(self) -> None:
        if self.consolidate_idle < 0:
            raise ConfigError("[server] consolidate_idle must be >= 0 minutes")
        if not 0 <= self.port <= 65535 or min(self.max_body, self.cache_scopes) < 1:
            raise ConfigError(f"[server] port must be from 0 to 65535, max_body and "
                              f"cache_scopes at least 1 (got {self.port}, {self.max_body}, "
                              f"{self.cache_scopes})")


@dataclass(frozen=True)
class ProxySettings:
    """``[proxy]``: the upstream of the OpenAI-compatible proxy."""

    #: ``openai`` (any compatible base URL) or ``anthropic``; empty means the ``[llm]``
    #: provider.
    provider: str = ""
    base_url: str = ""
    api_key: str = ""
    #: Models that ``GET /v1/models`` lists (default: the configured model).
    models: list[str] = field(default_factory=list)
    #: Run the model's calls of Anthropic's memory tool (when the client declares it)
    #: against the user's knowledge base, instead of returning them to the client.
    memory_tool: bool = False
    #: Seconds an upstream call may take: each wait for its next bytes, and a streamed
    #: answer in all. Past it the client gets an error saying so (a 502; mid-stream the
    #: API's error event), not a hang.
    timeout: float = 600.0

    def __post_init__(self) -> None:
        if not 0 < self.timeout <= 86_400:
            raise ConfigError(f"[proxy] timeout must be in (0, 86400] seconds "
                              f"(got {self.timeout})")


@dataclass(frozen=True)
class Settings:
    """Every tunable of Loci, top-level knobs and one section per TOML table. Build with
    :func:`load_settings`."""

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
    #: Extra or overriding context windows, model name (or glob) → tokens.
    models: dict[str, int] = field(default_factory=dict)
    #: Prices per model (or glob), US dollars per million tokens, over the presets
    #: (``loci.pricing``): ``[prices."my-model"] input = 1.0, output = 4.0,
    #: cached_input = 0.1, cache_write = 1.25`` (the cache prices default to input's).
    prices: dict[str, Price] = field(default_factory=dict)
    #: Custom memory types, name → TTL in days (0 = never expires).
    memory_types: dict[str, int] = field(default_factory=dict)
    #: Mirror every memory to ``memory/{id}.md`` in the workspace (or $LOCI_HOME).
    memory_mirror: bool = True
    #: Extract facts from every new turn in the background (``loci.memory.live``);
    #: off, facts are extracted at compaction and when a session ends.
    memory_extraction: bool = True
    #: ``[memory] scope``: "agent" (each agent of a user keeps its own memories) or
    #: "user" (the user's agents share them; state and documents stay per agent).
    memory_scope: str = "agent"
    #: How many turns of the event log recall weighs for each message (memories: up to
    #: a third of it); how many are shown, the score floor and the budget decide.
    recall_limit: int = 30
    #: Failures of one tool in a session before a reflexion hint is added.
    reflexion_threshold: int = 3
    #: The user's name as the context states it (default: the user id).
    user_name: str = ""
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    proxy: ProxySettings = field(default_factory=ProxySettings)

    def __post_init__(self) -> None:
        if self.memory_scope not in MEMORY_SCOPES:
            raise ConfigError(f"[memory] scope must be one of {', '.join(MEMORY_SCOPES)} "
                              f"(got {self.memory_scope!r})")
        if small := {name: size for name, size in self.models.items() if size < 1}:
            raise ConfigError(f"[models] a context window is at least 1 token (got {small})")
        if self.workspace is not None and ("\0" in str(self.workspace)
                                           or self.workspace.is_file()):
            raise ConfigError(f"workspace {str(self.workspace)!r} is no directory")

    @property
    def store_url(self) -> str:
        return self.store or f"sqlite:///{self.home / 'loci.db'}"

    @property
    def upstream_provider(self) -> str:
        """The proxy's upstream provider: ``[proxy] provider``, else ``[llm]``'s."""
        return (self.proxy.provider or self.llm.provider).strip().lower()

    @property
    def memory_root(self) -> Path:
        """Where the markdown mirror's ``memory/`` directory lives."""
        return self.workspace or self.home

    @property
    def model_cache(self) -> Path:
        """Where the bundled embedding model's int8 build is kept."""
        return Path(self.embedding.cache).expanduser() if self.embedding.cache \
            else self.home / "models"

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with the given non-None settings replaced (flat names such as
        ``compaction_sleep``, as :func:`load_settings` takes them; values are checked)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return _build(self, _coerce_all(given, "override"), {})


def load_settings(
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    **overrides: Any,
) -> Settings:
    """Load settings from files and environment, then apply ``overrides`` (flat names:
    ``compaction_sleep`` is ``[compaction] sleep``)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    home = Path(overrides.get("home") or env.get("LOCI_HOME") or "~/.loci").expanduser()
    values["home"] = home
    workspace = overrides.get("workspace") or env.get("LOCI_WORKSPACE")
    workspace_dir = Path(workspace).expanduser() if workspace else (cwd or Path.cwd())
    # Each source is checked on its own, so that an error names where the value came from.
    sources = [(str(path), _read_toml(path)) for path in _settings_files(home, workspace_dir)]
    sources.append(("environment (LOCI_*)", _from_env(env)))
    sources.append(("settings", {k: v for k, v in overrides.items() if v is not None}))
    origins: dict[str, str] = {}
    for origin, raw in sources:
        values.update(_coerce_all(raw, origin))
        origins.update(dict.fromkeys(raw, origin))
    if workspace:
        values["workspace"] = workspace_dir
    return _with_provider_keys(_build(Settings(), values, origins), env)


#: Each provider's own key variable, read when Loci's key setting is empty.
PROVIDER_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY",
                          "anthropic": "ANTHROPIC_API_KEY"}


def _with_provider_keys(settings: Settings, env: Mapping[str, str]) -> Settings:
    """``settings`` with the key a user already has for a provider (``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``) where Loci's own is unset, and only for the provider's own
    API (no ``base_url``): such a key is never sent to another server."""
    llm, proxy = settings.llm, settings.proxy

    def standard(provider: str, base_url: str) -> str:
        variable = PROVIDER_KEY_VARIABLES.get(provider.strip().lower())
        return env.get(variable, "") if variable and not base_url else ""

    # The proxy falls back on [llm]'s key (``loci.upstreams``): only a configured one.
    if not proxy.api_key and not llm.api_key:
        proxy = replace(proxy, api_key=standard(proxy.provider or llm.provider,
                                                proxy.base_url or llm.base_url))
    if not llm.api_key:
        llm = replace(llm, api_key=standard(llm.provider, llm.base_url))
    return replace(settings, llm=llm, proxy=proxy)


def _build(base: Settings, values: Mapping[str, Any], origins: Mapping[str, str]) -> Settings:
    """``base`` with flat ``values`` applied. A section checks its knobs together; its
    error names where they came from (``origins``, by flat name)."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        section, name, _ = _FIELDS[key]
        if section is None:
            top[name] = value
        else:
            sections.setdefault(section, {})[name] = value
    for section, changes in sections.items():
        try:
            top[section] = replace(getattr(base, section), **changes)
        except ConfigError as exc:
            where = sorted({origins.get(f"{section}_{name}", "settings") for name in changes})
            raise ConfigError(f"{' and '.join(where)}: {exc}") from exc
    return replace(base, **top)


def _settings_files(home: Path, workspace: Path) -> list[Path]:
    candidates = [home / SETTINGS_FILE, workspace / SETTINGS_FILE]
    unique = list(dict.fromkeys(p.resolve() for p in candidates))
    return [p for p in unique if p.is_file()]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read settings: {exc}") from exc
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key not in _TABLE_FIELDS:
            for sub, sub_value in value.items():
                flat[f"{key}_{sub}"] = sub_value
        else:
            flat[key] = value
    unknown = sorted(set(flat) - _FIELDS.keys())
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(unknown)}")
    return flat


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in _FIELDS:
        if name in _TABLE_FIELDS or name == "home":
            continue
        raw = env.get(f"LOCI_{name.upper()}")
        if raw is not None and raw != "":
            found[name] = raw
    return found


def _flat_fields() -> dict[str, tuple[str | None, str, str]]:
    """Flat name (``compaction_sleep``: TOML key, ``LOCI_*`` variable and keyword) →
    (section or None, field, type)."""
    found: dict[str, tuple[str | None, str, str]] = {}
    sections = get_type_hints(Settings)
    for f in fields(Settings):
        section = sections[f.name]
        if is_dataclass(section):
            for sub in fields(section):
                found[f"{f.name}_{sub.name}"] = (f.name, sub.name, str(sub.type))
        else:
            found[f.name] = (None, f.name, str(f.type))
    return found


_FIELDS = _flat_fields()


def _coerce_all(values: Mapping[str, Any], origin: str) -> dict[str, Any]:
    return {key: _coerce(key, value, origin) for key, value in values.items()}


def _coerce(key: str, value: Any, origin: str) -> Any:
    if key not in _FIELDS:
        raise ConfigError(f"{origin}: unknown setting {key!r}")
    kind = _FIELDS[key][2]
    try:
        if kind in ("int", "float"):
            return _number(value, int if kind == "int" else float)
        if kind == "bool":
            return _boolean(value)
        if kind in ("Path", "Path | None"):
            return Path(value).expanduser()
        if kind == "dict[str, Price]":
            return _prices(value)
        if kind.startswith("dict"):
            if not isinstance(value, dict):
                raise ValueError("must be a table")
            number = float if "float" in kind else int
            return {str(k): _number(v, number) for k, v in value.items()}
        if kind.startswith("list"):
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, list):
                raise ValueError("must be a list")
            return [str(v).strip() for v in items if str(v).strip()]
        return str(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"{origin}: setting {key!r} = {value!r}: {exc}") from exc


def _number(value: Any, kind: type[int] | type[float]) -> int | float:
    """A number setting: finite and not negative (a TTL of -1 days made every fact of
    its type expired, ``inf`` a crash in every command)."""
    number = kind(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError("must be a finite number, not negative")
    return number


def _prices(value: Any) -> dict[str, Price]:
    """``[prices]``: model → {input, output, cached_input, cache_write} per million."""
    if not isinstance(value, Mapping):
        raise ValueError("must be a table of models")
    prices = {}
    for model, entry in value.items():
        if isinstance(entry, Price):
            prices[str(model)] = entry
            continue
        if not isinstance(entry, Mapping) or not {"input", "output"} <= entry.keys():
            raise ValueError(f"{model!r} needs input and output (dollars per million tokens)")
        unknown = set(entry) - {"input", "output", "cached_input", "cache_write"}
        if unknown:
            raise ValueError(f"{model!r}: unknown price(s) {', '.join(sorted(unknown))}")
        numbers = {k: float(_number(v, float)) for k, v in entry.items()}
        prices[str(model)] = Price(numbers["input"], numbers["output"],
                                   numbers.get("cached_input", numbers["input"]),
                                   numbers.get("cache_write", numbers["input"]))
    return prices


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError("must be true or false")
    return text in ("1", "true", "yes", "on")
