# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jinja filters over the project's Python: resolve SGLang args once, quote them for systemd."""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: sglang
short_description: Resolve SGLang arguments and quote them for systemd
description:
  - C(sglang_resolve) turns the role variables of one host into SGLang's argv and environment,
    validated against the flag catalog of C(sglang_version). It returns errors instead of raising,
    so a play can list every problem of a host at once.
  - C(sglang_exec_start) quotes an argv for a systemd C(ExecStart=) line.
  - C(sglang_env_lines) writes the body of an C(EnvironmentFile=).
"""

EXAMPLES = r"""
- name: Resolve
  ansible.builtin.set_fact:
    __sglang_resolved: "{{ __sglang_inputs | sglang_resolve }}"
- name: ExecStart line
  ansible.builtin.debug:
    msg: "{{ [venv ~ '/bin/python', '-m', 'sglang.launch_server'] | sglang_exec_start(__sglang_resolved.args) }}"
"""

RETURN = r"""
_value:
  description: For sglang_resolve, a dict with ok, errors, warnings, version, instance, unit, args, argv, env.
  type: raw
"""

_HERE = os.path.dirname(os.path.abspath(__file__))
_UTILS = os.path.join(_HERE, "..", "module_utils")


def _load(name: str) -> ModuleType:
    """Import a module from plugins/module_utils by path (this repository is not a collection)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(_UTILS, name + ".py"))
    if spec is None or spec.loader is None:  # pragma: no cover
        raise AnsibleFilterError(f"cannot load {name} from {_UTILS}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("sglang_catalog")
_args = _load("sglang_args")


def sglang_resolve(inputs: Any) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        raise AnsibleFilterError(f"sglang_resolve expects a mapping of variables, got {type(inputs).__name__}")
    return _args.resolve(dict(inputs))


def sglang_exec_start(prefix: Any, args: Any = None) -> str:
    """`[python, -m, sglang.launch_server] | sglang_exec_start(resolved.args)`."""
    try:
        return _args.systemd_exec_line([str(w) for w in prefix], [[str(w) for w in group] for group in args or []])
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_exec_start: {exc}") from exc


def sglang_env_lines(env: Any) -> str:
    """`resolved.env | sglang_env_lines`: the EnvironmentFile body."""
    try:
        return _args.env_file_lines({str(k): str(v) for k, v in dict(env).items()})
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"sglang_env_lines: {exc}") from exc


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglang_resolve": sglang_resolve,
            "sglang_exec_start": sglang_exec_start,
            "sglang_env_lines": sglang_env_lines,
        }
