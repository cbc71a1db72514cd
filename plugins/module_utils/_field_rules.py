# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rules of one value each for the install roles' settings (and the alert rules' durations), in one place: the
central input check (``sglang_inputs.check``, up front, on every value the inventory or ``-e`` gives, before
anything changes) and each role's settings check (``plugins/filter/settings.py``, on the values the role resolves,
defaults included) apply the same rule. Rules between values (a driver version of its branch, a revision required
in download mode) stay in the role's check.

A value is read as the role's Jinja reads it: its text (``None`` is ``'None'``); null or an empty text is "not set"
where a rule allows it."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

BRANCH_RE = re.compile(r"^[0-9]{3}$")
OLDEST_BRANCH = 580  # CUDA 13, which SGLang needs, requires 580+
COMPUTE_CAPABILITY_RE = re.compile(r"^[0-9]+\.[0-9]+$")
FINGERPRINT_RE = re.compile(r"^[0-9A-Fa-f]{40}([0-9A-Fa-f]{24})?$")
REPO_URL_RE = re.compile(r"^(https?|file):/")
INDEX_URL_RE = re.compile(r"^https?://[^\s/]+")
EXACT_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
# A Hugging Face repository id (huggingface_hub's validate_repo_id: <owner>/<name>, letters, digits, '.', '_', '-').
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# A Debian package name (Debian Policy 5.6.1: lower case letters, digits, '+', '-', '.'; two characters at least).
DEBIAN_PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# A Prometheus duration (prometheus/common model.ParseDuration): units from the largest down, such as 1h30m or 2s.
DURATION_RE = re.compile(r"^(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?$")
# NVML's buffer for a device name (nvml.h: NVML_DEVICE_NAME_V2_BUFFER_SIZE 96, the terminating NUL included): no
# GPU reports a longer one, so a longer name can only never match.
GPU_NAME_MAX = 95
# A Prometheus job the rules and the dashboard select with job="<name>" (PromQL string, YAML scalar): no quote,
# backslash, brace or space to escape in either.
JOB_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")
# A lease's id: sha256 of the holder's controller, boot, PID and start, 16 hex digits (module_utils/_controller.py).
LEASE_ID_RE = re.compile(r"^[0-9a-f]{16}$")
# SGLang as one pinned requirement (PEP 508 name, optional extras, ==version): what uv installs and the stack's
# state compares (a range or a URL would float between hosts).
REQUIREMENT_RE = re.compile(r"^sglang(\[[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*\])?==[0-9][A-Za-z0-9.+!-]*$")
# ansible.builtin.reboot runs `shutdown -r 0 "<msg>"` through the host's shell (action/reboot.py,
# DEFAULT_SHUTDOWN_COMMAND_ARGS): in the message a quote ends the argument, and $ or ` runs a command.
REBOOT_MESSAGE_RE = re.compile(r'^[^"`$\\]{0,200}$')
# What sglang_service_template_dir must hold: the role's three templates.
SERVICE_TEMPLATES = ("sglang.service.j2", "sglang.env.j2", "sglang.secrets.yaml.j2")


class Rule(NamedTuple):
    """``accepts(value)``; ``allowed``: what is, in words; ``shown``: whether a refusal may quote the value (a URL
    may carry a credential)."""

    accepts: Callable[[Any], bool]
    allowed: str
    shown: bool = True


def text(value: Any) -> str:
    return str(value)


def empty(value: Any) -> bool:
    """Not set: null or an empty text (Jinja's ``value | length == 0`` with null as empty)."""
    return value is None or text(value) == ""


def _matches(regex: re.Pattern[str], *, or_empty: bool = False) -> Callable[[Any], bool]:
    return lambda value: (or_empty and empty(value)) or bool(regex.match(text(value)))


def branch_ok(value: Any) -> bool:
    return bool(BRANCH_RE.match(text(value))) and int(text(value)) >= OLDEST_BRANCH


def capability_ok(value: Any) -> bool:
    return value is None or bool(COMPUTE_CAPABILITY_RE.match(text(value)))


def fingerprint_ok(value: Any) -> bool:
    return empty(value) or bool(FINGERPRINT_RE.match(text(value).replace(" ", "")))


def controller_file_ok(value: Any) -> bool:
    return empty(value) or os.path.isfile(text(value))


def controller_dir_ok(value: Any) -> bool:
    return empty(value) or os.path.isdir(text(value))


def gpu_name_ok(value: Any) -> bool:
    return value is None or 0 < len(text(value).strip()) <= GPU_NAME_MAX


def templates_ok(value: Any) -> bool:
    return all(os.path.isfile(os.path.join(text(value), name)) for name in SERVICE_TEMPLATES)


def no_space_ok(value: Any) -> bool:
    return empty(value) or not any(character.isspace() for character in text(value))


_INDEX = Rule(_matches(INDEX_URL_RE, or_empty=True), "an http(s):// URL, or empty for the default", shown=False)
_REVISION = Rule(_matches(COMMIT_RE, or_empty=True),
                 "a commit of the repository, 40 hex digits (a branch or tag would float between hosts), or empty")
_MANIFEST = Rule(controller_file_ok, "a file on the controller (a SHA-256 manifest), or empty")
_REPO = Rule(_matches(REPO_ID_RE, or_empty=True),
             "a Hugging Face repository id such as moonshotai/Kimi-K2.5, or empty")


def duration_ok(value: Any) -> bool:
    return text(value) not in ("", "0") and bool(DURATION_RE.match(text(value)))


_DURATION = Rule(duration_ok, "a Prometheus duration such as 5m, 90s or 1h30m (units y, w, d, h, m, s, ms, "
                              "largest first)")

_CAPABILITY = Rule(capability_ok, "a compute capability such as 12.0, or null to skip the check")
_WHEELHOUSE = Rule(controller_dir_ok, "a directory on the controller, or empty to install from the index")
_JOB = "a job name of letters, digits, '_', '.', ':', '-'"

# (nvidia_driver_branch's floor, branch_ok, is in the role's check only: render.yml describes the unit of a host
# with an older driver too, whose device group has another name; the deploy refuses that branch. Up front, only
# its form.)
RULES: dict[str, Rule] = {
    "nvidia_driver_branch": Rule(_matches(BRANCH_RE), f"a driver branch of three digits such as 580 (the deploy "
                                                      f"installs {OLDEST_BRANCH} or newer)"),
    "nvidia_driver_gpu_name": Rule(gpu_name_ok, f"the name every GPU reports in nvidia-smi, such as NVIDIA RTX PRO "
                                                f"6000 Blackwell Server Edition (at most {GPU_NAME_MAX} characters, "
                                                f"NVML's), or null to skip the check"),
    "sglang_gpu_compute_capability": _CAPABILITY,
    "nvidia_driver_gpu_compute_capability": _CAPABILITY,
    "nvidia_driver_repo_key_fingerprint": Rule(fingerprint_ok, "a full key fingerprint (40 hex digits; spaces "
                                                               "allowed), or empty"),
    "nvidia_driver_repo_base_url": Rule(_matches(REPO_URL_RE), "an http(s):// or file:/ URL", shown=False),
    "nvidia_driver_repo_key_url": Rule(_matches(REPO_URL_RE, or_empty=True), "an http(s):// or file:/ URL, or empty",
                                       shown=False),
    "sglang_stack_uv_version": Rule(_matches(EXACT_VERSION_RE), "an exact version such as 0.13.9"),
    "sglang_router_version": Rule(_matches(EXACT_VERSION_RE), "an exact version such as 0.3.2"),
    "sglang_stack_index_url": _INDEX,
    "sglang_stack_flashinfer_index_url": Rule(_matches(INDEX_URL_RE),
                                              "an http(s):// URL: FlashInfer's wheel index or a mirror of it",
                                              shown=False),
    "sglang_weights_index_url": _INDEX,
    "sglang_weights_hf_endpoint": _INDEX,
    "sglang_router_index_url": _INDEX,
    "sglang_weights_model_revision": _REVISION,
    "sglang_weights_draft_revision": _REVISION,
    "sglang_weights_model_manifest": _MANIFEST,
    "sglang_weights_draft_manifest": _MANIFEST,
    "sglang_weights_model_repo": _REPO,
    "sglang_weights_draft_repo": _REPO,
    "sglang_weights_hf_hub_version": Rule(_matches(EXACT_VERSION_RE), "an exact version such as 2.4.0"),
    "sglang_stack_python_dev_package": Rule(_matches(DEBIAN_PACKAGE_RE, or_empty=True),
                                            "a Debian package name such as python3.12-dev, or empty for the one of "
                                            "the stack's interpreter"),
    "sglang_stack_wheelhouse": _WHEELHOUSE,
    "sglang_router_wheelhouse": _WHEELHOUSE,
    "sglang_stack_requirement": Rule(_matches(REQUIREMENT_RE), "SGLang pinned to one version, such as "
                                                               "sglang==0.5.23 or sglang[all]==0.5.23",
                                     shown=False),  # a direct reference's URL may carry a credential
    "sglang_service_template_dir": Rule(templates_ok, "a directory on the controller holding "
                                                      + ", ".join(SERVICE_TEMPLATES)),
    "sglang_maintenance_why": Rule(_matches(REBOOT_MESSAGE_RE),
                                   "at most 200 characters without \", `, $ or \\ (the reboot's message goes "
                                   "inside double quotes of a shell command)"),
    "sglang_rollout_lease_takeover": Rule(_matches(LEASE_ID_RE, or_empty=True),
                                          "the id of a stale lease, 16 hex digits as the refusal that names it "
                                          "says, or empty"),
    "sglang_monitoring_promtool": Rule(no_space_ok, "promtool's name on PATH or its path, without spaces, or "
                                                    "empty to skip the check"),
    "sglang_monitoring_server_job": Rule(_matches(JOB_RE), _JOB),
    "sglang_monitoring_router_job": Rule(_matches(JOB_RE), _JOB),
    "sglang_monitoring_node_job": Rule(_matches(JOB_RE, or_empty=True), _JOB + ", or empty (no node_exporter)"),
    # role sglang_monitoring: the alert rules' durations (promtool would refuse them only in make monitoring)
    **{f"sglang_monitoring_{name}": _DURATION for name in (
        "saturated_for", "hicache_pressure_window", "hicache_pressure_for", "failed_for", "restart_window",
        "router_down_for", "router_workers_for", "drift_for")},
}


def refusal(name: str, value: Any) -> list[str]:
    """The refusal of ``value`` for ``name`` by its rule ([] when it has none or it passes)."""
    rule = RULES.get(name)
    if rule is None or rule.accepts(value):
        return []
    what = f"{text(value)!r} is not allowed" if rule.shown else "is not allowed (the value is not shown)"
    return [f"{name}: {what}; allowed: {rule.allowed}"]
