# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rollout lease, on the controller."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import _controller

DOCUMENTATION = r"""
name: lease_gone
short_description: Whether a rollout lease's holder is known gone, seen from this controller
description:
  - C(lease | sglang.deploy.lease_gone) returns a dictionary of the lease id and why, when the lease's holder
    ran on this controller's current boot and its C(ansible-playbook) process is gone; else an empty one (its
    holder lives, ran on another controller, or cannot be checked here). Module C(sglang.deploy.rollout_lease)
    takes it as its O(gone).
options:
  _input:
    description: The lease, as module C(sglang.deploy.rollout_lease) returns it (null when there is none).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Take the lease, over a stale one of this controller's if asked to
  sglang.deploy.rollout_lease:
    state: held
    holder: "{{ lookup('sglang.deploy.controller') }}"
    gone: "{{ current.lease | sglang.deploy.lease_gone }}"
"""

RETURN = r"""
_value:
  description: The lease id and why its holder is gone, or an empty dictionary.
  type: dict
"""


def lease_gone(lease: Any) -> dict[str, str]:
    return _controller.gone(lease)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"lease_gone": lease_gone}
