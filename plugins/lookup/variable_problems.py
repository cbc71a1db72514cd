# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check every variable the user set, for every role, before any play changes a host."""

from __future__ import annotations

DOCUMENTATION = r"""
name: variable_problems
author: sglang-deploy contributors (@sglang-deploy)
short_description: Refusals for the variables a user set on a host, checked against every role's argument spec
version_added: "2.0.0"
description:
  - Reads the C(main) argument spec of every role in the given roles directory, and checks each variable the
    current host has from its inventory or from C(-e) (not the roles' defaults) against it, with the ranges,
    characters, paths, names and cross-variable conditions of C(plugins/module_utils/sglang_inputs.py).
  - Unknown variables that look like the roles' own (C(sglang_*), C(nvidia_driver_*), a short name such as
    C(hicache_ratio), or a near miss of either) and internal switches (C(__sglang_*)) are refused too, and so
    is a name given with C(-e) that is one of the roles' variables without its C(sglang_) prefix
    (C(-e mem_fraction_static=0.88)); in the inventory such a name may belong to another tool and is left alone.
  - The first play of every playbook runs it before any role (C(playbooks/check.yml)), so deploy,
    render and plan refuse bad input before anything changes, and before Ansible's own argument-spec checks.
options:
  _terms:
    description: The roles directory; by default the collection's own (C(roles/) beside C(plugins/)).
    required: false
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Refuse bad variables
  ansible.builtin.fail:
    msg: "{{ problems }}"
  when: problems | length > 0
  vars:
    problems: "{{ query('sglang.deploy.variable_problems') }}"
"""

RETURN = r"""
_raw:
  description: Each refusal, starting with the variable it is about and ending with what is allowed.
  type: list
  elements: str
  sample:
    - "sglang_service_hardening: 'Strict' is not one of the choices (did you mean strict?); allowed: strict, basic,
      none"
    - "hicache_raito: is not a variable of sglang-deploy and would be ignored; allowed: did you mean hicache_ratio?"
"""

import os
from typing import Any

import yaml
from ansible import context
from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_inputs

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ten times faster, once per host
ROLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


# The roles' argument specs, read once in Ansible's main process before it forks a worker per task and host
# (before_fork, called by the sglang.deploy.prefork callback); a roles directory not read then is read each time.
_SPECS: dict[str, dict[str, dict[str, Any]]] = {}


def before_fork(roles_dir: str = ROLES) -> None:
    """Read the collection's argument specs once per run, in the main process."""
    _SPECS[os.path.abspath(roles_dir)] = _specs(roles_dir)


def _specs(roles_dir: str) -> dict[str, dict[str, Any]]:
    known = _SPECS.get(os.path.abspath(roles_dir))
    if known is not None:
        return known
    specs = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                entry = (yaml.load(handle, Loader=_LOADER) or {}).get("argument_specs", {}).get("main") or {}
            specs[role] = entry.get("options") or {}
    return specs


def _command_line_names(loader: Any) -> set[str]:
    """The names given with -e in this run."""
    from ansible.utils.vars import load_extra_vars

    if not context.CLIARGS.get("extra_vars"):
        return set()
    try:
        return {str(name) for name in load_extra_vars(loader)}
    except Exception:  # ansible-playbook itself reports an -e it cannot read
        return set()


def _ours(name: str, known: dict[str, Any]) -> bool:
    return (name in known or name in sglang_inputs.ALIASES or name in sglang_inputs.PLAY_VARIABLES
            or name.startswith(sglang_inputs.PREFIXES) or bool(sglang_inputs.INTERNAL.match(name)))


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        if variables is None:
            raise AnsibleError("sglang.deploy.variable_problems needs the task's variables")
        specs = _specs(str(terms[0]) if terms else ROLES)
        known = sglang_inputs.known_names(specs)
        raw = variables["hostvars"].raw_get(variables["inventory_hostname"])
        names = [str(name) for name in raw]
        given: dict[str, Any] = {}
        problems: list[str] = []
        for name in names:
            if name == "sglang_config" or not (_ours(name, known) or name in sglang_inputs.LOGIN_VARIABLES):
                continue
            try:
                given[name] = self._templar.template(raw[name])
            except Exception as exc:  # any templating error becomes a refusal naming the variable
                problems.append(f"{name}: cannot be evaluated ({exc}); allowed: a value or an expression that "
                                "evaluates")
        command_line = _command_line_names(self._loader)
        groups = {str(group) for group in variables.get("group_names") or []}
        hosts = {str(host) for host in (variables.get("groups") or {}).get("all") or []}
        return problems + sglang_inputs.check(given, names, specs, command_line=command_line, groups=groups,
                                              hosts=hosts)
