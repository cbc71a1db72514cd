# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the configuration: resolve a host's SGLang settings once, and quote them for systemd."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_config, sglang_quote

DOCUMENTATION = r"""
name: resolve
author: sglang-deploy contributors (@sglang-deploy)
short_description: Resolve a host's SGLang configuration, and quote it for systemd
description:
  - C(sglang.deploy.resolve) turns the variables of one host (the settings table's variables and short names,
    plus the context role sglang_config adds) into its SGLang configuration, validated against the flag catalog
    of C(sglang_version) in the directory given as its argument. It returns errors instead of raising, so a play
    can list every problem of a host.
  - C(sglang.deploy.exec_start) quotes an argument list for a systemd C(ExecStart=) line;
    C(sglang.deploy.env_lines) writes the body of an C(EnvironmentFile=); C(sglang.deploy.unit_text) writes free
    text on a unit line (C(%) escaped, control characters refused); C(sglang.deploy.flags) turns a
    mapping of flag to value into flag groups for a program without a catalog (sglang-router).
positional: catalog_directory
options:
  _input:
    description: The variables of one host.
    type: dict
    required: true
  catalog_directory:
    description: The directory of the flag catalogs (C(roles/sglang_config/files/catalogs)).
    type: str
"""

EXAMPLES = r"""
- name: Resolve
  ansible.builtin.set_fact:
    sglang_config: "{{ inputs | sglang.deploy.resolve(role_path ~ '/files/catalogs') }}"
- name: ExecStart line
  ansible.builtin.debug:
    msg: "{{ [venv ~ '/bin/python', '-m', 'sglang.launch_server'] | sglang.deploy.exec_start(sglang_config.args) }}"
"""

RETURN = r"""
_value:
  description: The configuration of the host.
  type: dict
  contains:
    ok:
      description: Whether the configuration has no errors.
      type: bool
      sample: true
    errors:
      description: Each problem, starting with the variable it is about and ending with what is allowed.
      type: list
      elements: str
      sample: ["sglang_hicache_ratio: 0.5 is out of range; allowed: a number above 1.0"]
    args:
      description: The flag groups of ExecStart, in order.
      type: list
      elements: list
      sample: [["--model-path", "/models/Kimi-K2.5"], ["--hicache-ratio", "2.0"]]
    settings:
      description: SGLang dest to the flag, typed value and source of every setting that is set.
      type: dict
      sample: {"hicache_ratio": {"flag": "--hicache-ratio", "value": 2.0, "source": "sglang_hicache_ratio"}}
    env:
      description: The environment file's variables.
      type: dict
      sample: {"PYTHONUNBUFFERED": "1", "CUDA_HOME": "/usr/local/cuda-13.0"}
"""


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
