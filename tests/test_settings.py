import re
from pathlib import Path

import pytest

from loci import ConfigError, load_settings


def test_defaults(tmp_path: Path) -> None:
    s = load_settings(env={}, cwd=tmp_path)
    assert s.home == Path("~/.loci").expanduser()
    assert s.store_url == f"sqlite:///{s.home / 'loci.db'}"
    assert s.model == "gpt-4.1" and s.context.target == 0.75


def test_precedence_home_then_workspace_then_env_then_overrides(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "loci.toml").write_text('model = "home-model"\nuser = "h"\nagent = "ha"\n')
    (work / "loci.toml").write_text(
        'model = "work-model"\nuser = "w"\n[models]\n"my-llm" = 32000\n'
        '[embedding]\nprovider = "hash"\n'
    )
    env = {"LOCI_HOME": str(home), "LOCI_USER": "e"}
    s = load_settings(env=env, cwd=work)
    assert (s.model, s.user, s.agent) == ("work-model", "e", "ha")
    assert s.models == {"my-llm": 32000}
    assert s.embedding.provider == "hash"
    assert load_settings(env=env, cwd=work, user="cli").user == "cli"


def test_home_moves_the_default_store(tmp_path: Path) -> None:
    s = load_settings(env={"LOCI_HOME": str(tmp_path)}, cwd=tmp_path)
    assert s.store_url == f"sqlite:///{tmp_path / 'loci.db'}"


def test_env_values_are_typed(tmp_path: Path) -> None:
    s = load_settings(env={"LOCI_CONTEXT_TARGET": "0.5", "LOCI_RECALL_LIMIT": "42",
                           "LOCI_CONTEXT_LAYERS": "identity, history",
                           "LOCI_MEMORY_MIRROR": "off"}, cwd=tmp_path)
    assert s.context.target == 0.5 and s.recall_limit == 42
    assert s.context.layers == ["identity", "history"] and s.memory_mirror is False


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("modle = 'x'", "unknown setting(s): modle"),
        ("context_target = 3", "must be a fraction"),
        ("recall_limit = 'lots'", "recall_limit"),
        ("memory_mirror = 'maybe'", "must be true or false"),
        ("[context]\nbudgets = 3", "must be a table"),
        ("model = ", "cannot read settings"),
        ("[search]\nvector_memory_mb = 0", "vector_memory_mb must be positive"),
    ],
)
def test_bad_settings_are_config_errors(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "loci.toml").write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(env={"LOCI_HOME": str(tmp_path / "none")}, cwd=tmp_path)


def test_bad_env_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="context_target"):
        load_settings(env={"LOCI_CONTEXT_TARGET": "most"}, cwd=tmp_path)


def test_sections_are_typed_and_every_source_reaches_them(tmp_path: Path) -> None:
    (tmp_path / "loci.toml").write_text("[compaction]\nthreshold = 0.7\n[search]\nrrf_k = 30\n")
    s = load_settings(env={"LOCI_COMPACTION_SLEEP": "0.3"}, cwd=tmp_path,
                      compaction_emergency=0.9)
    assert (s.compaction.threshold, s.compaction.sleep, s.compaction.emergency) == (
        0.7, 0.3, 0.9)
    assert s.search.rrf_k == 30 and s.search.fusion == "weighted"
    again = s.with_overrides(compaction_sleep=0.2)
    assert again.compaction.sleep == 0.2 and again.compaction.threshold == 0.7


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[compaction]\nsleep = 0.9", "thresholds must rise"),
        ("[search]\nfusion = 'best'", "fusion must be one of ('weighted', 'rrf'): 'best'"),
        ("[search]\nvector_weight = 0\nkeyword_weight = 0", "must not both be 0"),
        ("[compaction]\nmask_chars = 10", "mask_chars must be at least 100"),
        # A TTL of -1 made every fact of its type expired (and `purge --expired` took it).
        ("[memory_types]\nsticky = -1", "must be a finite number, not negative"),
        ("recall_limit = inf", "cannot convert float infinity to integer"),
        ("[context]\nbudgets = {memories = nan}", "must be a finite number"),
        ("[prices.m]\ninput = nan\noutput = 1", "must be a finite number"),
        ("[server]\nport = 99999", "port must be from 0 to 65535"),
        ("[server]\nmax_body = 0", "max_body and cache_scopes at least 1"),
    ],
)
def test_a_section_checks_its_knobs_together_and_names_the_file(
    tmp_path: Path, toml: str, message: str
) -> None:
    (tmp_path / "loci.toml").write_text(toml)
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        load_settings(env={"LOCI_HOME": str(tmp_path / "none")}, cwd=tmp_path)
    assert str(tmp_path / "loci.toml") in str(caught.value)


def test_a_window_under_one_token_or_a_workspace_that_is_no_directory_is_refused(
        tmp_path: Path) -> None:
    env = {"LOCI_HOME": str(tmp_path / "none")}
    for toml, message in [("[models]\nm = 0", "a context window is at least 1 token"),
                          (f"workspace = '{tmp_path / 'loci.toml'}'", "is no directory"),
                          ('workspace = "a\\u0000b"', "is no directory")]:
        (tmp_path / "loci.toml").write_text(toml)
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_settings(env=env, cwd=tmp_path)


def test_an_error_across_sources_names_each_of_them(tmp_path: Path) -> None:
    (tmp_path / "loci.toml").write_text("[compaction]\nthreshold = 0.3\n")
    with pytest.raises(ConfigError, match="environment") as caught:
        load_settings(env={"LOCI_HOME": str(tmp_path / "none"),
                           "LOCI_COMPACTION_SLEEP": "0.4"}, cwd=tmp_path)
    assert "loci.toml" in str(caught.value)


def test_the_provider_s_own_key_variable_when_loci_s_is_unset(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
    openai = load_settings(env=env, cwd=tmp_path, home=str(tmp_path), proxy_provider="openai")
    assert openai.proxy.api_key == "sk-openai"
    anthropic = load_settings(env={**env, "LOCI_PROXY_PROVIDER": "anthropic",
                                   "LOCI_LLM_PROVIDER": "openai"}, cwd=tmp_path,
                              home=str(tmp_path))
    assert (anthropic.proxy.api_key, anthropic.llm.api_key) == ("sk-ant", "sk-openai")
    own = load_settings(env={**env, "LOCI_PROXY_API_KEY": "mine"}, cwd=tmp_path,
                        home=str(tmp_path), proxy_provider="openai")
    assert own.proxy.api_key == "mine"


def test_a_provider_key_never_goes_to_another_base_url(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-openai"}
    local = load_settings(env=env, cwd=tmp_path, home=str(tmp_path), proxy_provider="openai",
                          proxy_base_url="http://localhost:11434/v1")
    assert local.proxy.api_key == ""
    assert load_settings(env=env, cwd=tmp_path, home=str(tmp_path)).llm.api_key == ""
