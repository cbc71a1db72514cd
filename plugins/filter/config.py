# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the configuration: resolve a host's SGLang settings once, and quote them for systemd. Each filter is
documented in its sidecar file, <filter>.yml."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_config, sglang_quote


def resolve(inputs: Any, catalog_directory: Any = None) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"resolve expects a mapping of variables, got {type(inputs).__name__}")
    return sglang_config.resolve(dict(inputs), str(catalog_directory) if catalog_directory else None)


def exec_start(prefix: Any, args: Any = None) -> str:
    """`[python, -m, sglang.launch_server] | sglang.deploy.exec_start(resolved.args)`."""
    try:
        words = [str(word) for word in prefix]
        return sglang_quote.systemd_exec_line(words, [[str(word) for word in group] for group in args or []])
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"exec_start: {exc}") from exc


def env_lines(env: Any) -> str:
    """`resolved.env | sglang.deploy.env_lines`: the EnvironmentFile body."""
    try:
        return sglang_quote.env_file_lines({str(k): str(v) for k, v in dict(env).items()})
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"env_lines: {exc}") from exc


def flags(mapping: Any, var: str = "extra_args") -> list[list[str]]:
    """`{flag: value}` -> `[[--flag, value], [--bare]]` for programs without a flag catalog."""
    try:
        return sglang_config.flag_groups(dict(mapping or {}), var)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


def unit_text(value: Any) -> str:
    """`value | sglang.deploy.unit_text`: free text on a unit line (Description=), specifiers escaped."""
    try:
        return sglang_quote.unit_text(str(value))
    except ValueError as exc:
        raise AnsibleFilterError(f"unit_text: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"resolve": resolve, "exec_start": exec_start, "env_lines": env_lines, "flags": flags,
                "unit_text": unit_text}
