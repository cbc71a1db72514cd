# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The variables the settings table reads, so role sglang_config looks them up by name."""

from __future__ import annotations

DOCUMENTATION = r"""
name: setting_variables
author: sglang-deploy contributors (@sglang-deploy)
short_description: The role variables and short names of the SGLang settings table
version_added: "1.0.0"
description:
  - Returns the name of every role variable (C(sglang_*)) and command-line short name (C(hicache_ratio) ...)
    that a row of the settings table in C(plugins/module_utils/sglang_settings.py) reads, in table order.
  - Role C(sglang_config) passes their values to C(sglang.deploy.resolve) with the C(ansible.builtin.vars)
    lookup, so adding a setting to the table needs no change to the role.
options: {}
"""

EXAMPLES = r"""
- name: The values of every setting variable
  ansible.builtin.debug:
    msg: "{{ dict(names | zip(query('ansible.builtin.vars', *names, default=''))) }}"
  vars:
    names: "{{ query('sglang.deploy.setting_variables') }}"
"""

RETURN = r"""
_raw:
  description: Variable names, in the order of the settings table.
  type: list
  elements: str
  sample: [sglang_model_path, sglang_served_model_name, sglang_tp_size, sglang_hicache_ratio, hicache_ratio]
"""

from typing import Any

from ansible.plugins.lookup import LookupBase
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_settings


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        return sglang_settings.variables()
