# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mask the configured secrets (the server's client and admin keys, the router's key) in text that reaches
Ansible's output: journal excerpts, failure messages, results.

SGLang 0.5.23 prints its keys itself: the startup line ``server_args=ServerArgs(... api_key='K' ...)`` and
argparse's ``unrecognized arguments: --api_key K`` both go to the journal, which the readiness wait quotes on a
failure. Each secret is replaced by ``********`` as written, and in the escaped forms a log line may hold it in
(Python's repr, JSON). Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

MASK = "********"


def spellings(secrets: Iterable[Any]) -> list[str]:
    """Every form of each non-empty secret a log line may hold it in, longest first (so no longer form is left
    half masked by a shorter one)."""
    found: set[str] = set()
    for secret in secrets:
        text = "" if secret is None else str(secret)
        if not text:
            continue
        found |= {text, json.dumps(text)[1:-1], repr(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return sorted(found, key=lambda s: (-len(s), s))


def mask(value: Any, secrets: Iterable[Any]) -> Any:
    """``value`` (a string, or lists and mappings of them, keys included) with every secret replaced by MASK."""
    forms = spellings(secrets)
    return _masked(value, forms) if forms else value


def _masked(value: Any, forms: list[str]) -> Any:
    if isinstance(value, str):
        for form in forms:
            value = value.replace(form, MASK)
        return value
    if isinstance(value, dict):
        return {_masked(key, forms): _masked(item, forms) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_masked(item, forms) for item in value)
    return value
