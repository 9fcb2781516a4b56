"""One name rule wherever a name enters: no user, agent or session name is reserved
(``*``, the operator's tenant) or a path (``/``, ``\\``, ``.``, ``..``; a session's
``/``-separated parts are no path steps), so no name
obtains operator rights; rows older versions stored under such names stay erasable and
exportable, and erasing them never revokes an operator key."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loci import Loci, Scope, open_store
from loci.checks import OPERATOR, check_name
from loci.cli.app import main
from loci.errors import ValidationError

REFUSED = [OPERATOR, ".", "..", "a/b", "../maya", "a\\b", "/", "maya\n"]
#: Sessions may be "/"-separated parts ("team/alpha"), but no part may be a path step.
SESSIONS_REFUSED = [OPERATOR, ".", "..", "../maya", "a\\b", "/", "a//b", "team/..", "a/"]


@pytest.mark.parametrize("name", REFUSED)
def test_the_rule_refuses_reserved_names_and_paths(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid user"):
        check_name("user", name)


def test_plain_names_pass() -> None:
    for name in ("maya", "a..b", "Zoë", "user@example.com", "s-1:2"):
        assert check_name("user", name) == name
    assert check_name("session", "team/alpha") == "team/alpha"


@pytest.mark.parametrize("name", SESSIONS_REFUSED)
def test_session_parts_are_no_path_steps(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid session"):
        check_name("session", name)


@pytest.mark.parametrize("name", REFUSED)
def test_the_library_refuses_them_as_user_agent_and_session(home: Path, name: str) -> None:
    for scope in ({"user": name}, {"agent": name}):
        with pytest.raises(ValidationError):
            Loci.open(**scope)
    with Loci.open() as loci:
        if name in SESSIONS_REFUSED:
            with pytest.raises(ValidationError):
                loci.add(name, "user", "hi")
        with pytest.raises(ValidationError):
            loci.runtime.create_key(name)


def test_no_cli_command_makes_an_operator_key_from_a_name(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--user", OPERATOR]) == 2
    assert "reserved" in capsys.readouterr().err
    with Loci.open() as loci:
        assert loci.runtime.api_keys() == []
    assert main(["keys", "create", "--operator"]) == 0


def legacy_store(home: Path) -> str:
    """A store holding an operator key and rows under names older versions accepted."""
    url = f"sqlite:///{home / 'loci.db'}"
    store = open_store(url)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        for tenant in (OPERATOR, "a/b"):
            store.set_state(Scope(tenant, "default"), "note", "old row", now)
        from loci.keys import create_key
        create_key(store, OPERATOR, now, "ops")
    finally:
        store.close()
    return url


@pytest.mark.parametrize("name", [OPERATOR, "a/b"])
def test_rows_under_a_refused_name_stay_erasable(
        home: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = legacy_store(home)
    archive = home / "out.zip"
    assert main(["user", "export", name, "-o", str(archive), "--store", url]) == 0
    assert archive.stat().st_size > 0
    assert main(["user", "erase", name, "--yes", "--store", url]) == 0
    capsys.readouterr()
    with Loci.open(store=url) as loci:
        assert loci.runtime.agents(name) == []
        operator_keys = [k for k in loci.runtime.api_keys() if k.tenant == OPERATOR]
        assert [k.revoked for k in operator_keys] == [False]


def test_labels_that_are_no_names_keep_their_slashes(home: Path) -> None:
    """A model ("openai/gpt-4o" through OpenRouter) and a state key are labels: the
    name rule is not theirs."""
    with Loci.open() as loci:
        record = loci.usage.record("s1", {"prompt_tokens": 3, "completion_tokens": 1},
                                   model="openai/gpt-4o")
        assert record.model == "openai/gpt-4o"
        assert loci.state_set("repo/branch", "main").key == "repo/branch"


def test_an_archive_cannot_bring_a_reserved_name_in(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = home / "maya.zip"
    with Loci.open(user="maya") as loci:
        loci.add("s1", "user", "hello")
        archive.write_bytes(loci.runtime.export_user("maya"))
        loci.runtime.erase_user("maya")
    forged = home / "forged.zip"
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(forged, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename.endswith(".json"):
                data = data.replace(b'"maya"', b'"*"')
            target.writestr(item, data)
    assert main(["user", "import", str(forged)]) == 2
    assert "reserved" in capsys.readouterr().err
    with Loci.open() as loci:
        assert loci.runtime.agents(OPERATOR) == []
