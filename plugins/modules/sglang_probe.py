#!/usr/bin/python
# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the pre-restart probe in the new unit's exact sandbox, as a transient systemd unit."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_probe
short_description: Check what an SGLang server needs in its first minute, in its new unit's own sandbox
author: sglang-deploy contributors (@sglang-deploy)
description:
  - Takes the unit file and environment file a change would write (rendered, not yet on the host) and
    runs O(script) as a transient unit with C(systemd-run), with every execution-environment setting
    of the new unit's C([Service]) section (user, sandboxing, device policy, limits, working directory,
    the environment file) and its C(Requires=)/C(After=) dependencies, so nothing is checked from a
    second, hand-kept list of settings.
  - The new environment file is written to a private file under O(work_dir) for the probe and removed
    afterwards; the unit file, the environment file and the running server are not touched.
  - The script prints one JSON object per check; a failed check, a script that does not start
    (C(203/EXEC), a namespace or device setting systemd refuses) or a probe that exceeds O(timeout) fails
    the module with the probe's own output and systemd's journal lines about the transient unit.
version_added: "1.0.0"
options:
  unit:
    description: The server's unit, for example C(sglang-kimi.service); the probe unit is named after it.
    type: str
    required: true
  unit_text:
    description: The unit file the change would write.
    type: str
    required: true
  env_text:
    description:
      - The environment file the change would write (its C(EnvironmentFile=) is replaced by a copy).
      - It can hold secrets (an API key, a Hugging Face token), so it is never logged.
    type: str
    required: true
  script:
    description: Python source of the probe, run by the unit's own interpreter (the first word of C(ExecStart=)).
    type: str
    required: true
  settings:
    description: Settings passed to the script as JSON (GPUs, model paths, CUDA release, NCCL check, ...).
    type: dict
    default: {}
  timeout:
    description: Seconds the probe may run (C(RuntimeMaxSec=) of the transient unit).
    type: int
    default: 300
  work_dir:
    description: Root-only directory for the probe's copy of the environment file.
    type: path
    default: /run/sglang-deploy/probe
requirements:
  - systemd 236 or later (C(systemd-run --pipe --collect))
extends_documentation_fragment: [sglang.deploy.attributes, sglang.deploy.attributes.read_only]
attributes:
  check_mode:
    details: The probe runs in a transient unit and changes nothing on the host, so it runs in check mode too.
"""

EXAMPLES = r"""
- name: Probe the new configuration before the server is drained
  sglang.deploy.sglang_probe:
    unit: sglang-kimi.service
    unit_text: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
    env_text: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
    script: "{{ lookup('ansible.builtin.file', 'sglang_probe.py') }}"
    settings:
      gpus: 8
      model_path: /models/Kimi-K2.5
      cuda_version: "13.0"
      nccl: true
  register: probe
"""

RETURN = r"""
ok:
  description: Every check passed.
  type: bool
  returned: always
  sample: true
checks:
  description: The probe's checks in the order they ran.
  type: list
  elements: dict
  returned: always
  sample: [{"check": "interpreter", "ok": true, "detail": "/opt/sglang/0.5.23/venv/bin/python 3.12.3"}]
  contains:
    check:
      description:
        - Name of the check (interpreter, writable, model, toolchain, flashinfer, cuda, triton, nccl, nvml).
        - A server started with C(--device cpu) has the check C(cpu) instead of the last four.
      type: str
      sample: cuda
    ok:
      description: Whether it passed.
      type: bool
      sample: true
    detail:
      description: What was found, or why it failed.
      type: str
      sample: "torch 2.14.1 (CUDA 13.0): allocated 64 MiB and ran a kernel on 8 GPU(s)"
failed_checks:
  description: The names of the checks that failed.
  type: list
  elements: str
  returned: always
  sample: ["toolchain"]
elapsed_s:
  description: Seconds the probe took, from systemd-run to its exit.
  type: float
  returned: always
  sample: 23.4
probe_unit:
  description: Name of the transient unit (its journal keeps the probe's output).
  type: str
  returned: always
  sample: sglang-kimi-probe-1764512345.service
properties:
  description: The unit settings the probe ran with, as passed to systemd-run.
  type: list
  elements: str
  returned: always
  sample: ["User=sglang", "DevicePolicy=closed", "DeviceAllow=char-nvidia rw"]
"""

import json
import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# [Service] settings that describe how the unit is started, stopped and restarted rather than the
# environment its process runs in: the transient unit has a lifecycle of its own.
LIFECYCLE = frozenset({
    "Type", "ExecStart", "ExecStartPre", "ExecStartPost", "ExecCondition", "ExecReload", "ExecStop",
    "ExecStopPost", "Restart", "RestartSec", "RestartPreventExitStatus", "RestartForceExitStatus",
    "SuccessExitStatus", "TimeoutSec", "TimeoutStartSec", "TimeoutStopSec", "TimeoutAbortSec", "RuntimeMaxSec",
    "KillMode", "KillSignal", "FinalKillSignal", "SendSIGKILL", "SendSIGHUP", "RemainAfterExit", "PIDFile",
    "NotifyAccess", "WatchdogSec", "SyslogIdentifier", "StandardInput", "StandardOutput", "StandardError",
})
# [Unit] settings the probe keeps: what must run before the server's process can.
DEPENDENCIES = ("Requires", "Wants", "After", "BindsTo", "Requisite")


def unit_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """Sections of a unit file as (key, value) lists, comments dropped, continuations joined."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif "=" in line and current is not None:
            key, value = line.split("=", 1)
            current.append((key.strip(), value.strip()))
    return sections


def probe_properties(text: str, env_file: str) -> tuple[list[str], str]:
    """The systemd-run properties of the unit's execution environment, and its interpreter."""
    sections = unit_sections(text)
    service = sections.get("Service", [])
    exec_start = next((value for key, value in service if key == "ExecStart"), "")
    interpreter = exec_start.split()[0].lstrip("-@:+!") if exec_start else ""
    properties = [f"{key}={value}" for key, value in sections.get("Unit", []) if key in DEPENDENCIES]
    for key, value in service:
        if key == "EnvironmentFile":
            properties.append(f"EnvironmentFile={env_file}")
        elif key not in LIFECYCLE:
            properties.append(f"{key}={value}")
    return properties, interpreter


def read_results(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    checks, done = [], None
    for line in stdout.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "check" in data:
            checks.append({"check": str(data["check"]), "ok": bool(data.get("ok")), "detail": str(data.get("detail"))})
        elif isinstance(data, dict) and data.get("done"):
            done = data
    return checks, done


def journal_lines(module: AnsibleModule, unit: str, count: int = 15) -> str:
    journalctl = module.get_bin_path("journalctl") or "journalctl"
    code, out, _stderr = module.run_command([journalctl, "--no-pager", "-o", "cat", "-n", str(count),
                                             "_SYSTEMD_UNIT=" + unit, "+", "UNIT=" + unit])
    return out.strip() if code == 0 else ""


def write_env(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def run_probe(module: AnsibleModule) -> dict[str, Any]:
    p = module.params
    name = p["unit"].removesuffix(".service")
    probe_unit = f"{name}-probe-{int(time.time() * 1000)}.service"
    env_file = os.path.join(p["work_dir"], probe_unit.removesuffix(".service") + ".env")
    properties, interpreter = probe_properties(p["unit_text"], env_file)
    if not interpreter.startswith("/"):
        module.fail_json(msg="the unit has no ExecStart with an absolute interpreter path to probe with",
                         ok=False, checks=[], failed_checks=["unit"], elapsed_s=0.0, probe_unit=probe_unit,
                         properties=properties)
    argv = [module.get_bin_path("systemd-run", required=True), "--unit", probe_unit,
            "--description", f"sglang-deploy probe of {p['unit']}'s new configuration", "--wait", "--pipe",
            "--collect", "--quiet", "--service-type=exec", "-p", f"RuntimeMaxSec={p['timeout']}"]
    for prop in properties:
        argv += ["-p", prop]
    argv += ["--", interpreter, "-", json.dumps(p["settings"], sort_keys=True)]
    write_env(env_file, p["env_text"])
    started = time.monotonic()
    try:
        code, out, err = module.run_command(argv, data=p["script"], binary_data=True)
    finally:
        os.unlink(env_file)
    elapsed = round(time.monotonic() - started, 1)
    checks, done = read_results(out)
    failed = [check["check"] for check in checks if not check["ok"]]
    result = {"ok": code == 0 and done is not None and done.get("ok") is True and not failed, "checks": checks,
              "failed_checks": failed, "elapsed_s": elapsed, "probe_unit": probe_unit, "properties": properties}
    if not result["ok"]:
        result["msg"] = failure_message(module, probe_unit, code, checks, done, err, p["timeout"])
    return result


def failure_message(module: AnsibleModule, probe_unit: str, code: int, checks: list[dict[str, Any]],
                    done: dict[str, Any] | None, stderr: str, timeout: int) -> str:
    failed = [f"{check['check']}: {check['detail']}" for check in checks if not check["ok"]]
    if failed:
        return "the probe failed: " + " | ".join(failed)
    journal = journal_lines(module, probe_unit)
    how = f"did not finish within {timeout} s" if "timeout" in (stderr + journal).lower() else \
        f"ended with exit code {code} before reporting"
    return (f"the probe {how} ({stderr.strip() or 'no output'}); systemd on {probe_unit}: "
            f"{' | '.join(journal.splitlines()[-8:]) or 'no journal lines'}")


ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "unit": {"type": "str", "required": True},
    "unit_text": {"type": "str", "required": True},
    "env_text": {"type": "str", "required": True, "no_log": True},
    "script": {"type": "str", "required": True},
    "settings": {"type": "dict", "default": {}},
    "timeout": {"type": "int", "default": 300},
    "work_dir": {"type": "path", "default": "/run/sglang-deploy/probe"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_probe(module)
    if not result["ok"]:
        module.fail_json(changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
