# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who this ansible-playbook run is, as the rollout lease records its holder."""

from __future__ import annotations

DOCUMENTATION = r"""
name: controller
author: sglang-deploy contributors (@sglang-deploy)
short_description: This run's identity for the rollout lease (user, controller, ansible-playbook's PID, command)
version_added: "2.0.0"
description:
  - Returns one dictionary describing the C(ansible-playbook) process this task runs under, as module
    C(sglang.deploy.rollout_lease) records the lease's holder.
  - Its C(id) is derived from the controller's host name and boot, the PID and the process's start, so every task of
    one run gives the same id and another run another. The command line leaves out the values of variables whose
    names look secret (key, token, password, secret, credential).
options: {}
"""

EXAMPLES = r"""
- name: Take the rollout lease
  sglang.deploy.rollout_lease:
    state: held
    holder: "{{ lookup('sglang.deploy.controller') }}"
"""

RETURN = r"""
_raw:
  description: One dictionary with id, user, controller, boot_id, pid, pid_start, command and started.
  type: list
  elements: dict
"""

from typing import Any

from ansible.plugins.lookup import LookupBase
from ansible_collections.sglang.deploy.plugins.module_utils import _controller


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        return [_controller.holder()]
