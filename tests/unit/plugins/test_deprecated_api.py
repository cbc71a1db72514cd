"""The collection's plugins use only the ansible-core API that stays: nothing ansible-core 2.19 to 2.21 marks as
deprecated (due in 2.23 and 2.24) or means to deprecate.

- ``ansible.module_utils.six``: Python 2 compatibility, deprecated for removal; the standard library has it all.
- A callback's ``result._task``, ``result._result``, ``result._host``: ansible-core 2.19's CallbackTaskResult
  (executor/task_result.py) marks them ``deprecated ... core_version='2.23'`` in favour of the public ``task``,
  ``result`` and ``host``, which the callbacks' tests' stand-ins carry (and only they).
- A connection's ``has_native_async``: ansible-core's ConnectionBase.is_pipelining_enabled says it is to be
  deprecated, and 2.21's normal action no longer reads it."""

from __future__ import annotations

import functools
import re

import pytest
from ansible.executor.task_result import CallbackTaskResult
from helpers import ROOT

DEPRECATED = {
    "six": re.compile(r"module_utils\.six\b|^\s*(?:import|from)\s+six\b", re.MULTILINE),
    "private result attributes": re.compile(r"\bresult\._(?:task|result|host)\b"),
    "has_native_async": re.compile(r"\.has_native_async\b"),
}


def _plugins() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "plugins").rglob("*.py"))


@pytest.mark.parametrize("what", sorted(DEPRECATED))
def test_no_plugin_uses_it(what: str) -> None:
    found = [f"{rel}:{text[:m.start()].count(chr(10)) + 1}" for rel in _plugins()
             for text in [(ROOT / rel).read_text()] for m in DEPRECATED[what].finditer(text)]
    assert not found, f"{what}: {found}"


def test_the_check_finds_each_form() -> None:
    text = ("from ansible.module_utils.six.moves.urllib.error import HTTPError\n"
            "if result._task.action and result._result.get('x') and result._host:\n"
            "    wrap = self._connection.has_native_async\n")
    assert [len(DEPRECATED[w].findall(text)) for w in sorted(DEPRECATED)] == [1, 3, 1]


@pytest.mark.parametrize("name", ["host", "task", "result"])
def test_the_public_names_the_callbacks_read_are_ansible_cores(name: str) -> None:
    """What the callbacks read (and their tests' stand-ins carry) is public on the installed ansible-core."""
    assert isinstance(getattr(CallbackTaskResult, name, None), (property, functools.cached_property)), name
