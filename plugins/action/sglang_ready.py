# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of sglang.deploy.sglang_ready: runs the module, async or not, and gives its poll (jid) the
directory of Ansible's async job files as ansible-core configures it.

ansible-core keeps that directory in the shell plugin's option ``async_dir`` (ansible.cfg ``[defaults]
async_dir``, ``ANSIBLE_ASYNC_DIR``, ``ansible_async_dir``). ActionBase._execute_module gives an async job
``ANSIBLE_ASYNC_DIR=<that option>``, and async_wrapper.main writes the job file there after
``os.path.expanduser``. Ansible's own poll, the async_status action plugin, reads the same option
(``_get_async_dir``: ``get_shell_option('async_dir', default='~/.ansible_async')``) and passes it to its module
as ``_async_dir``. This plugin passes it as the module's ``async_dir`` (when the task does not set one). It leaves
``~`` to the module (a ``type: path`` option, as async_status's ``_async_dir`` is), which expands it as the same
user, with the same HOME, as the wrapper did: no extra round trip to the host on every poll.
"""

from __future__ import annotations

import typing as t

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

DEFAULT_ASYNC_DIR = "~/.ansible_async"  # ansible-core's default, where the shell plugin has no such option


class ActionModule(ActionBase):
    """Run sglang_ready as the normal action plugin does, with the configured async_dir in poll mode."""

    _supports_check_mode = True
    _supports_async = True

    def module_args(self) -> dict[str, t.Any]:
        """The task's arguments; in poll mode, with the async_dir the job was written under."""
        args = dict(self._task.args)
        if args.get("jid") and args.get("async_dir") is None:
            args["async_dir"] = self.get_shell_option("async_dir", default=DEFAULT_ASYNC_DIR)
        return args

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        del tmp  # no longer has any effect (ActionBase.run)
        # Async through Ansible's async_wrapper whenever the task is async, as ansible-core 2.21's normal action
        # asks (_execute_module decides the rest). The connection's has_native_async, which 2.19's normal action
        # still reads and ansible-core means to deprecate, is true only for Windows shells (winrm, psrp, ssh to
        # PowerShell), where this Python module cannot run at all.
        wrap_async = bool(self._task.async_val)
        result = merge_hash(result, self._execute_module(module_args=self.module_args(), task_vars=task_vars,
                                                         wrap_async=wrap_async))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
