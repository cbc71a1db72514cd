#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until an SGLang systemd unit serves a real generation; fail fast when it cannot."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_ready
short_description: Wait for an SGLang unit to be ready, failing fast on a crash
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Follows one invocation of a systemd unit running SGLang. On every poll it reads the unit's
    C(ActiveState), C(SubState), C(NRestarts) and C(InvocationID) and calls the server's health
    endpoint, which runs a real one-token generation (C(/health_generate)). The port being open,
    C(/ping) and C(/model_info) are never taken as ready.
  - It succeeds only for the invocation that started after O(previous_invocation_id). It fails
    within one poll interval when that invocation exits, fails, is restarted by systemd, or is
    replaced, and puts the invocation's last journal lines in the message.
  - It fails as soon as a load phase makes no progress for longer than its bound in
    O(stall_timeouts), quoting the last progress line, instead of waiting out the whole O(timeout).
  - It reads SGLang's load progress from the journal (phase, safetensors shard percentage) and
    writes it to O(status_file) on every poll.
  - Meant to run as an Ansible async job (C(async), C(poll=0)) so a dropped connection during a
    15-minute load does not stop it. Poll it with O(jid) set, which returns the progress while
    it runs and the waiter's result (or failure) once it ends.
  - The poll reads the job the way M(ansible.builtin.async_status) does, in the directory Ansible's async
    wrapper wrote it to, the connection's C(async_dir) (see O(async_dir)). Unlike M(ansible.builtin.async_status),
    it also fails a job whose wrapper is gone without writing a result (killed, or the host restarted), instead
    of reporting it as running until the polls run out.
version_added: "1.0.0"
options:
  unit:
    description: The systemd unit, for example C(sglang-kimi.service).
    type: str
    required: true
  url:
    description: Health URL that runs a generation, for example C(http://127.0.0.1:30000/health_generate).
    type: str
  ca_path:
    description:
      - With an C(https) O(url) (the server has TLS, C(sglang_tls_cert)), the PEM file of the CA the server's
        certificate is verified against (C(sglang_config.tls.ca_file)); a server whose certificate it does not
        verify never counts as ready. Without it, the system's trust store.
    type: path
  previous_invocation_id:
    description:
      - InvocationID of the unit before a restart was requested. Readiness then counts only for a
        newer invocation. Empty when no restart was requested (the current invocation is followed).
    type: str
    default: ""
  timeout:
    description:
      - Seconds the new invocation may take to answer a generation, counted from its main process's start
        (systemd's C(ExecMainStartTimestampMonotonic)), that is the model load. The load times the waiter
        records for the next budget are counted from the same start.
      - Until that process has started, the wait allows O(stop_timeout) more, for the process it replaces
        to stop.
    type: int
    default: 1080
  stop_timeout:
    description:
      - Seconds the process being replaced may take to stop, the unit's C(TimeoutStopSec=) (after it,
        systemd kills it). Allowed on top of O(timeout) while no new invocation has started, so a slow
        stop does not shorten the load's own budget.
    type: int
    default: 0
  interval:
    description: Seconds between polls.
    type: float
    default: 2
  start_grace:
    description: Seconds an inactive unit with no pending job may take to begin starting.
    type: int
    default: 30
  health_timeout:
    description: Seconds one health request may take (SGLang's own generation health timeout is 20 s).
    type: int
    default: 30
  journal_lines:
    description: Journal lines of the failed invocation quoted in a failure message.
    type: int
    default: 25
  status_file:
    description: JSON file the waiter writes its progress to on every poll.
    type: path
  observed_file:
    description:
      - When the server is ready, the waiter writes what its start measured there (RV(startup), with the
        time, the invocation, O(identity) and the load phases), for the capacity plan of the next run to
        calibrate from. Written only for a start whose figures could be read.
    type: path
  identity:
    description: The settings of the configuration that decide the memory before the KV pool, kept in O(observed_file).
    type: dict
    default: {}
  stall_timeouts:
    description:
      - Seconds each load phase may go without progress before the load counts as hung and the wait
        fails, quoting the last progress line. Keys C(starting), C(distributed_init),
        C(loading_weights) (between two shard updates), C(kv_cache), C(cuda_graphs) (between two
        captured batch sizes), C(host_kv_pool), C(warmup). A phase without a key is bounded only by
        O(timeout). A load that is slow but moving keeps waiting. The journal is read again before a
        silence counts, so a poll that took long itself is not mistaken for one.
    type: dict
    default: {}
  shard_progress:
    description:
      - Whether this host sees the weight loader's shard progress (global rank 0 does; the other nodes
        of a multi-node server do not), so that C(loading_weights) can be bounded between shards.
    type: bool
    default: true
  secrets:
    description:
      - "The configured secrets (the server's API keys, the router's key). Every occurrence in the result, the
        failure message and its journal excerpt, and the progress of a poll is replaced by C(********), as written
        and in the escaped forms a log line may hold (Python repr, JSON). SGLang prints its keys itself (its
        startup line C(server_args=...), and argparse's C(unrecognized arguments: --api_key ...)). Never logged."
    type: list
    elements: str
    default: []
  jid:
    description:
      - Poll mode. The async job id of a running waiter; returns C(finished=false) and the
        progress from O(status_file) while it runs, or the waiter's own result once it ended, and
        removes the job file then.
      - Whether the job still runs is also read from the processes of Ansible's async wrapper for it
        (their argv holds the job id). A job whose file is not written yet while such a process runs is
        still starting (the starting task returns after at most 2.5 s either way). A job whose file has
        no result and no such process has died and fails the poll, as does a job with neither a file nor a process.
    type: str
  async_dir:
    description:
      - Directory of Ansible's async job files (poll mode); C(~) is the home of the user the module runs as,
        as for Ansible's async wrapper.
      - The action plugin sets it, unless the task does, to the connection's shell option C(async_dir) that the
        wrapper wrote the job under (C(async_dir) in the C([defaults]) section of C(ansible.cfg),
        E(ANSIBLE_ASYNC_DIR), or the variable C(ansible_async_dir)), as M(ansible.builtin.async_status) gets it.
    type: path
    default: ~/.ansible_async
requirements:
  - systemd with C(journalctl)
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only]
attributes:
  action:
    description: Runs through the action plugin of the same name, which gives the poll the configured O(async_dir).
    support: full
  async:
    description: Runs as an Ansible async job; that is how it is meant to be started.
    support: full
seealso:
  - module: ansible.builtin.async_status
"""

EXAMPLES = r"""
- name: Start the readiness wait (detached)
  sglang.deploy.sglang_ready:
    unit: sglang-kimi.service
    url: http://127.0.0.1:30000/health_generate
    previous_invocation_id: "{{ previous.stdout }}"
    timeout: 1080
    stop_timeout: 390  # the unit's TimeoutStopSec
    status_file: /run/sglang-deploy/sglang-kimi.service.ready.json
  async: 1590  # timeout + stop_timeout + 120
  poll: 0
  register: ready_job

- name: Wait, showing progress
  sglang.deploy.sglang_ready:
    unit: sglang-kimi.service
    jid: "{{ ready_job.ansible_job_id }}"
    status_file: /run/sglang-deploy/sglang-kimi.service.ready.json
  register: ready
  until: ready.finished
  retries: 400
  delay: 3
"""

RETURN = r"""
finished:
  description: Whether the wait has ended; always true in wait mode.
  type: bool
  returned: always
  sample: true
ready:
  description: The unit answered a real generation.
  type: bool
  returned: when finished
  sample: true
unit:
  description: The unit waited for.
  type: str
  returned: when finished
  sample: sglang-kimi.service
elapsed_s:
  description: Seconds from the start of the wait to the answer (or the failure).
  type: float
  returned: when finished
  sample: 412.3
phase:
  description: Last load phase seen in the journal.
  type: str
  returned: when finished
  sample: fired up
describe:
  description: The phase in words, with the shard progress while weights load.
  type: str
  returned: when finished
  sample: loading weights 45% (29/64 shards)
progress:
  description: Last safetensors progress seen; null before the first shard.
  type: dict
  returned: when finished
  contains:
    percent:
      description: Percentage of shards loaded.
      type: int
      sample: 45
    done:
      description: Shards loaded.
      type: int
      sample: 29
    total:
      description: Shards in all.
      type: int
      sample: 64
phases:
  description: Each phase seen, in order, with the seconds since the wait started.
  type: list
  elements: dict
  returned: when finished
  contains:
    phase:
      description: The phase.
      type: str
      sample: loading weights
    key:
      description: The stall bound it falls under (a key of O(stall_timeouts)).
      type: str
      sample: loading_weights
    at_s:
      description: Seconds since the wait started.
      type: float
      sample: 12.5
  sample: [{"phase": "loading weights", "key": "loading_weights", "at_s": 12.5},
           {"phase": "fired up", "key": "warmup", "at_s": 398.0}]
stall_key:
  description: The stall bound the current phase falls under (a key of O(stall_timeouts)).
  type: str
  returned: when finished
  sample: warmup
last_progress_line:
  description: The last journal line that showed progress.
  type: str
  returned: when finished
  sample: "The server is fired up and ready to roll!"
invocation_id:
  description: The invocation followed (the one that became ready, or failed).
  type: str
  returned: when finished
  sample: 0b6c0f7d4e2a4b8c9d1e2f3a4b5c6d7e
active_state:
  description: systemd's ActiveState of the unit at the last poll.
  type: str
  returned: when finished
  sample: active
sub_state:
  description: systemd's SubState of the unit at the last poll.
  type: str
  returned: when finished
  sample: running
health:
  description: The last health answer, an HTTP status or why there was none.
  type: str
  returned: when finished
  sample: HTTP 200
main_pid:
  description: Main PID of the invocation that became ready.
  type: int
  returned: when ready
  sample: 48213
n_restarts:
  description: systemd's NRestarts counter for the unit.
  type: int
  returned: when ready
  sample: 0
startup:
  description:
    - What the start measured, read from its journal (module_utils sglang_startup), minimum across the
      ranks of this host; null when the journal lacks the weight-load lines.
  type: dict
  returned: when ready
  contains:
    pre_load_free_bytes:
      description: Free GPU memory before the weights loaded.
      type: int
      sample: 100738457928
    after_weights_free_bytes:
      description: Free GPU memory after the last weights loaded before the KV pool.
      type: int
      sample: 21249213972
    weights_bytes:
      description: What the weights took, the difference of the two.
      type: int
      sample: 79489243955
    kv_tokens:
      description: Tokens of the target's KV pool, per rank.
      type: int
      sample: 154998
    ranks:
      description: TP ranks whose lines were read.
      type: int
      sample: 8
    loads:
      description: Each weight load, with the architecture, seconds (SGLang's elapsed=) and memory used.
      type: list
      elements: dict
      sample: [{"architecture": "KimiK25ForConditionalGeneration", "elapsed_s": 244.1, "usage_bytes": 79006171217}]
    server_args:
      description: The memory-deciding settings of the start's server_args line, when it has one.
      type: dict
      sample: {"tp_size": 8, "mem_fraction_static": 0.85}
  sample: {"pre_load_free_bytes": 100738457928, "after_weights_free_bytes": 21249213972, "kv_tokens": 154998}
load:
  description:
    - The load's timings (module_utils _load), kept in O(observed_file) for the next deploy's readiness budget
      and stall bounds and for status.yml.
  type: dict
  returned: when ready
  contains:
    total_s:
      description:
        - Seconds from the start of the invocation's main process (systemd's C(ExecMainStartTimestampMonotonic))
          to the ready answer. Not the drain of the process it replaced, nor the wait for it.
        - Where systemd does not give that start, from the earlier of the invocation's first journal line and
          the first poll that saw the invocation.
      type: float
      sample: 712.4
    phases_s:
      description: Seconds spent under each stall key (C(starting) until the first phase).
      type: dict
      sample: {"starting": 3.1, "distributed_init": 9.8, "loading_weights": 664.0, "kv_cache": 4.2,
               "cuda_graphs": 21.5, "warmup": 9.8}
    silence_s:
      description: The longest time each stall key went without a progress line.
      type: dict
      sample: {"loading_weights": 11.2, "cuda_graphs": 6.0}
    weights_load_s:
      description: SGLang's own weight-load time, its C(elapsed=) summed over the model and the draft.
      type: float
      sample: 663.9
    weights_bytes:
      description: The size of the model's and the draft's safetensors on this host.
      type: int
      sample: 587354357760
    read_gb_per_s:
      description: The rate the weights were read at, RV(load.weights_bytes) over RV(load.weights_load_s), in GB/s.
      type: float
      sample: 0.885
  sample: {"total_s": 712.4, "weights_load_s": 663.9, "read_gb_per_s": 0.885}
fired_up_to_ready_s:
  description: Seconds from SGLang's "fired up and ready to roll" log line to the ready answer.
  type: float
  returned: when ready and the line was seen
  sample: 6.2
sglang_progress:
  description:
    - Poll mode, while the waiter runs - its last status from O(status_file) (empty before the first
      poll), which the C(sglang.deploy.sglang_progress) callback prints.
    - It has the keys unit, phase, describe, progress, elapsed_s, invocation_id, active_state, sub_state,
      health, phases, stall_key and last_progress_line, as documented above.
  type: dict
  returned: in poll mode while the wait runs
  sample: {"unit": "sglang-kimi.service", "phase": "loading weights", "describe": "loading weights 45% (29/64 shards)",
           "elapsed_s": 131.0, "health": "[Errno 111] Connection refused"}
"""

import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils import _async_job, sglang_waiter
from ansible_collections.sglang.deploy.plugins.module_utils._json_file import read_object
from ansible_collections.sglang.deploy.plugins.module_utils._mask import mask
from ansible_collections.sglang.deploy.plugins.module_utils._stall import ALLOWED as STALL_ALLOWED
from ansible_collections.sglang.deploy.plugins.module_utils._stall import stall_bounds
from ansible_collections.sglang.deploy.plugins.module_utils._systemd import SystemctlError

ARGUMENT_SPEC: dict[str, dict[str, t.Any]] = {
    "unit": {"type": "str", "required": True},
    "url": {"type": "str"},
    "ca_path": {"type": "path"},
    "previous_invocation_id": {"type": "str", "default": ""},
    "timeout": {"type": "int", "default": 1080},
    "stop_timeout": {"type": "int", "default": 0},
    "interval": {"type": "float", "default": 2},
    "start_grace": {"type": "int", "default": 30},
    "health_timeout": {"type": "int", "default": 30},
    "journal_lines": {"type": "int", "default": 25},
    "status_file": {"type": "path"},
    "observed_file": {"type": "path"},
    "identity": {"type": "dict", "default": {}},
    "stall_timeouts": {"type": "dict", "default": {}},
    "shard_progress": {"type": "bool", "default": True},
    "secrets": {"type": "list", "elements": "str", "default": [], "no_log": True},
    "jid": {"type": "str"},
    "async_dir": {"type": "path", "default": "~/.ansible_async"},
}


def poll_job(module: AnsibleModule) -> t.NoReturn:
    """Poll mode: the detached waiter's progress while it runs; its result or failure once it has ended."""
    p = module.params
    try:
        result = _async_job.collect(p["async_dir"], p["jid"])
    except _async_job.JobGone as exc:
        module.fail_json(msg=mask(str(exc), p["secrets"]), finished=True)
    if result is None:
        progress = mask(read_object(p["status_file"]) or {}, p["secrets"])
        module.exit_json(changed=False, finished=False, sglang_progress=progress)
    result = mask(result, p["secrets"])
    if result.get("failed"):
        module.fail_json(msg=result.pop("msg", "the readiness waiter failed"), **result)
    module.exit_json(**result)


def wait(module: AnsibleModule) -> t.NoReturn:
    """Wait mode: follow the unit until it answers a generation, or fail with why it cannot."""
    p = module.params
    if not p["url"]:
        module.fail_json(msg="url is required unless jid is given")
    for name in ("timeout", "stop_timeout"):
        if p[name] < 0:
            module.fail_json(msg=f"{name} must be 0 or more seconds, got {p[name]}")
    bounds, problems = stall_bounds(p["stall_timeouts"])
    if problems:
        module.fail_json(msg=f"stall_timeouts: {'; '.join(problems)}; allowed: {STALL_ALLOWED}")
    waiter = sglang_waiter.Waiter(dict(p, stall_timeouts=bounds), sglang_waiter.SystemdHost(module))
    try:
        result = waiter.run()
    except (sglang_waiter.WaitFailed, SystemctlError) as exc:
        status = mask(waiter.status(), p["secrets"])
        sglang_waiter.write_status(p["status_file"], dict(status, failed=True))
        module.fail_json(msg=mask(str(exc), p["secrets"]), ready=False, finished=True, **status)
    module.exit_json(**mask(result, p["secrets"]))


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_by={"jid": ("status_file",)},
                           supports_check_mode=True)
    if module.params["jid"]:
        poll_job(module)
    wait(module)


if __name__ == "__main__":
    main()
