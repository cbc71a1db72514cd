# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the configuration: resolve a host's SGLang settings once, and quote them for systemd."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_args

DOCUMENTATION = r"""
name: resolve
short_description: Resolve SGLang settings and quote them for systemd
description:
  - C(sglang.deploy.resolve) turns the role variables of one host into SGLang's argument list and
    environment, validated against the flag catalog of C(sglang_version) (in the directory given as
    its argument). It returns errors instead of raising, so a play can list every problem of a host.
  - C(sglang.deploy.exec_start) quotes an argument list for a systemd C(ExecStart=) line;
    C(sglang.deploy.env_lines) writes the body of an C(EnvironmentFile=); C(sglang.deploy.flags) turns a
    C({flag: value}) mapping into flag groups for a program without a catalog.
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
  description: For resolve, a dict with ok, errors, warnings, version, instance, unit, args, argv, env.
  type: raw
"""


def resolve(inputs: Any, catalog_directory: Any = None) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"resolve expects a mapping of variables, got {type(inputs).__name__}")
    return sglang_args.resolve(dict(inputs), str(catalog_directory) if catalog_directory else None)


def exec_start(prefix: Any, args: Any = None) -> str:
    """`[python, -m, sglang.launch_server] | sglang.deploy.exec_start(resolved.args)`."""
    try:
        return sglang_args.systemd_exec_line([str(w) for w in prefix],
                                             [[str(w) for w in group] for group in args or []])
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"exec_start: {exc}") from exc


def env_lines(env: Any) -> str:
    """`resolved.env | sglang.deploy.env_lines`: the EnvironmentFile body."""
    try:
        return sglang_args.env_file_lines({str(k): str(v) for k, v in dict(env).items()})
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"env_lines: {exc}") from exc


def flags(mapping: Any, var: str = "extra_args") -> list[list[str]]:
    """`{flag: value}` -> `[[--flag, value], [--bare]]` for programs without a flag catalog."""
    try:
        return sglang_args.flag_groups(dict(mapping or {}), var)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"resolve": resolve, "exec_start": exec_start, "env_lines": env_lines, "flags": flags}
