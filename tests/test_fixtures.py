"""One fixture per thing: no fixture name is defined in more than one test module, so a
test's ``client`` or ``store`` is the one in ``tests/conftest.py`` (or
``tests/server/conftest.py``) and a variant is asked for with a marker
(``loci_settings``, ``real_clock``, ``backends``), not written again."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: Names still defined twice, each with why; an entry goes once its names are one.
ALLOWED = {
    "provider": "a scripted fake provider per module (test_responses_upstream, "
                "test_usage_proxy); both become the shared fake provider's fixture once "
                "the fakes' move to loci.testing (issue #45, item 3) has landed",
    "proxy": "a different harness per module (test_proxy_fuzz: one proxy per face for "
             "the module; test_proxy_hostile: a face per test over a faulting provider); "
             "renamed once the proxy's faces are rewritten (issue #45, items 1 and 2)",
}


def fixture_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name ``function`` is a fixture under, or None if it is none."""
    for decorator in function.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = ast.unparse(call.func if call else decorator)
        if target in ("pytest.fixture", "fixture"):
            named = [k.value for k in call.keywords if k.arg == "name"] if call else []
            if named and isinstance(named[0], ast.Constant):
                return str(named[0].value)
            return function.name
    return None


def fixture_modules() -> dict[str, list[str]]:
    """Each fixture name defined under ``tests/``, with the modules that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = fixture_name(node)
                if name is not None:
                    found[name].append(str(path.relative_to(TESTS)))
    return found


def test_no_fixture_is_defined_in_two_modules() -> None:
    found = fixture_modules()
    assert {"client", "loci", "store", "engine", "live_server"} <= set(found)
    twice = {name: modules for name, modules in found.items() if len(modules) > 1}
    assert {n: m for n, m in twice.items() if n not in ALLOWED} == {}, (
        "one fixture per thing: use the shared one (a marker for a variant) or a name "
        "of its own")
    assert set(ALLOWED) <= set(twice), "an allowed name is defined once now: drop it"
