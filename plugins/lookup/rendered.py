# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible.builtin.template's lookup, without its deep copy of every variable for each file."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rendered
author: sglang-deploy contributors (@sglang-deploy)
short_description: Render templates as the ansible.builtin.template lookup does, without copying every variable
version_added: "2.0.0"
description:
  - Returns each template rendered as the C(ansible.builtin.template) lookup returns it. It is that lookup,
    with the same search path, template variables (C(ansible_managed), C(template_path), ...) and options.
  - That lookup deep-copies all of the task's variables before each file, to add the template variables to
    the copy; this one gives it a shallow copy instead, which is what the C(ansible.builtin.template) action
    renders the file it writes with. A template reads variables and changes none.
  - Role C(sglang_service)'s restart decision renders the unit, its environment and its secrets on every
    host of every deploy to compare them with the host's; the deep copies were half of that task's cost.
options:
  _terms:
    description: The templates to render, found as the C(ansible.builtin.template) lookup finds them.
    required: true
    type: list
    elements: str
  variable_start_string:
    description: The string marking the beginning of a print statement.
    default: '{{'
    type: str
  variable_end_string:
    description: The string marking the end of a print statement.
    default: '}}'
    type: str
  template_vars:
    description: A dictionary, the keys become additional variables available for templating.
    default: {}
    type: dict
  comment_start_string:
    description: The string marking the beginning of a comment statement.
    default: '{#'
    type: str
  comment_end_string:
    description: The string marking the end of a comment statement.
    default: '#}'
    type: str
  trim_blocks:
    description: Whether the first newline after a block is removed (block, not variable tag).
    type: bool
    default: true
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Render the unit and its environment file on the controller
  ansible.builtin.set_fact:
    rendered: "{{ query('sglang.deploy.rendered', 'templates/sglang.service.j2', 'templates/sglang.env.j2') }}"
"""

RETURN = r"""
_raw:
  description: Each template's content after templating, in the order given.
  type: list
  elements: str
  sample: ["# Ansible managed\n[Unit]\nDescription=SGLang server kimi\n"]
"""

import typing as t

from ansible.plugins.lookup.template import LookupModule as TemplateLookup


class _ShallowlyCopied(dict):  # type: ignore[type-arg]
    """The task's variables; their deep copy is a shallow one (a new top level, the same values)."""

    def __deepcopy__(self, memo: dict[int, t.Any]) -> dict[str, t.Any]:
        return dict(self)


class LookupModule(TemplateLookup):
    def run(self, terms: list[t.Any], variables: dict[str, t.Any] | None = None, **kwargs: t.Any) -> list[t.Any]:
        return super().run(terms, _ShallowlyCopied(variables or {}), **kwargs)
