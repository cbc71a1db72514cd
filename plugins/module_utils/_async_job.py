# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: an Ansible async job on its host, polled the way ansible-core (2.19 to 2.21) polls it.

The job file is ``<async_dir>/<jid>``, where async_dir is the shell option ``async_dir`` (ansible.cfg
``[defaults] async_dir``, ``ANSIBLE_ASYNC_DIR``, ``ansible_async_dir``): ansible-core's ActionBase._execute_module
passes it to the job as ``ANSIBLE_ASYNC_DIR``, async_wrapper.main writes there (``os.path.expanduser``), and the
async_status action plugin hands it to its module as ``_async_dir``. The action plugin sglang_ready does the same
for this poll. The file, by async_wrapper.py (jwrite: a temporary file renamed over it):

- absent until the wrapper has forked and daemonized, while the task that started the job returns after at
  most 2.5 s either way;
- ``{"started": true, "finished": false, "ansible_job_id": ...}`` while the module runs (_run_module);
- the module's result when it ends, or the wrapper's own failure (``Timeout exceeded`` at the time limit).

async_status.main reads it: no file is "could not find job"; a file that does not parse is running; one with
``started`` and no true ``finished`` is running; one without ``started`` is the finished result. The file alone
cannot show a job that died: nothing replaces ``started`` when the wrapper's child running the module is killed
(its supervisor's ``os.waitpid`` loop just ends, writing nothing) or all of the job's processes are (SIGKILL,
the OOM killer, a host that restarts), and async_status then reports the job as running until the polls run out.
So whether the job still runs is read from the process table as well: every process of the job has
async_wrapper's argv ``<python> .../async_wrapper.py <jid without .pid> <limit> <module> <args>``
(ActionBase._execute_module, ``async_cmd``; tests/fixtures/ansible/), from before the file is written until after
the result is. ansible-core 2.21 inserts preserve_tmp before the module and appends the module's command
(lib/ansible/plugins/action/__init__.py:1271 in 2.21.5, read by modules/async_wrapper.py:215-219): the job id
stays the element after the wrapper, which is all this reads. The argv holds no directory (ANSIBLE_ASYNC_DIR is
in the environment): the file is found in the configured directory, the processes by the job id, which is random.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object

PROC = "/proc"


class JobGone(Exception):
    """The job has no process and no result: it never ran here, was collected, or its wrapper was killed."""


def finished_result(path: str) -> dict[str, Any] | None:
    """The job's result once it has ended, with ``finished`` true; None while the file is missing, does not
    parse, or says started and not finished (async_status.main's rules)."""
    job = read_object(path)
    if job is None or ("started" in job and not job.get("finished")):
        return None
    job.pop("invocation", None)  # the job module's own arguments, not the poll's
    return dict(job, finished=True)


def wrapper_running(jid: str) -> bool:
    """Whether a process of Ansible's async wrapper for job ``jid`` runs (its argv, read from PROC)."""
    first = jid.rsplit(".", 1)[0].encode()
    return any(entry.name.isdigit() and _is_wrapper_of(_argv(entry.path), first) for entry in os.scandir(PROC))


def _argv(process: str) -> list[bytes]:
    try:
        with open(os.path.join(process, "cmdline"), "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:  # the process ended meanwhile
        return []


def _is_wrapper_of(argv: list[bytes], first: bytes) -> bool:
    return any(os.path.basename(arg).startswith(b"async_wrapper") and argv[index + 1] == first
               for index, arg in enumerate(argv[:-1]))


def collect(async_dir: str, jid: str) -> dict[str, Any] | None:
    """The ended job's result, its file removed (as async_status mode=cleanup would); None while it runs.

    Raises JobGone when neither a result nor a process of the job is there. The file is read again after the
    process table: the wrapper writes the result before its processes end, so a job that ended between the two
    reads is collected, not gone.
    """
    path = os.path.join(async_dir, jid)
    result = finished_result(path)
    if result is None and not wrapper_running(jid):
        result = finished_result(path)
        if result is None:
            raise JobGone(_gone(path, jid, async_dir))
    if result is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
    return result


def _gone(path: str, jid: str, async_dir: str) -> str:
    if os.path.exists(path):
        return (f"async job {jid} in {async_dir} ended without a result: no process of its async wrapper runs "
                f"(killed, or the host restarted)")
    return f"no async job {jid} in {async_dir} and no process of it runs"
