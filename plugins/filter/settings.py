# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the install roles' settings: what each of nvidia_driver, sglang_stack and sglang_weights refuses
before anything changes, beyond what its argument spec says (ranges, characters, paths, cross-checks, files on the
controller). Each role's C(<role>_settings_errors) output is one of these filters. Each filter is documented in its
sidecar file, <filter>.yml.

Each takes a mapping of the variables it reads, by name (the role's C(__<role>_settings) in its vars/main.yml). The
values are read only when a check needs them: a mapping of templates (Ansible's lazy one) templates a value at its
first read, so the stack's wheelhouse and FlashInfer's package list are not looked at online.

The checks read the values as the role's Jinja did: a value is matched as its text (C(str); C(None) is
C('None')), a number is read as Jinja's C(int) reads it (C('42.7') is 42, anything unreadable 0), and the message
shows a value as Ansible renders it (C(None) as nothing)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import _field_rules as rules

# nvidia_driver (the rules of one value each: module_utils/_field_rules.py, shared with the up-front check)
_DRIVER_VERSION_RE = re.compile(r"^[0-9]{3}\.[0-9]+(\.[0-9]+)?$")
_PACKAGE_WITH_VERSION_RE = re.compile(r".*[ =<>]")
OLDEST_BRANCH = rules.OLDEST_BRANCH

# sglang_stack
# FlashInfer's architecture tags (flashinfer-jit-cache-<tag>): sm120f, sm100a, sm90a, sm89, ...
KERNEL_TAG_RE = re.compile(r"^sm[0-9]{2,3}[af]?$")
_PIN_RE = re.compile(r"^[A-Za-z0-9_.-]+ *== *[^ ]+$")
_PACKAGE_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_HOME_RE = re.compile(r"^/(root|home)(/|$)")
_CONSTRAINTS_RE = re.compile(r"^sglang-(.*)\.txt$")
_WHEEL_PROJECT_RE = re.compile(r"^([^-]+)-.*$")
MIN_INSTALL_TIMEOUT = 60
MIN_DOWNLOAD_TIMEOUT = 60

# sglang_weights (and the stack's interpreter directory)
_ABSOLUTE_RE = re.compile(r"^/")

NVIDIA_DRIVER_SETTINGS = (
    "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_gpu_count", "nvidia_driver_gpu_compute_capability",
    "nvidia_driver_repo_key_fingerprint", "nvidia_driver_repo_base_url", "nvidia_driver_packages",
)
SGLANG_STACK_SETTINGS = (
    "sglang_version", "sglang_stack_uv_version", "sglang_stack_wheelhouse", "sglang_stack_flashinfer_prebuilt",
    "sglang_stack_flashinfer_kernels", "sglang_stack_flashinfer_index_url", "sglang_stack_python_install_dir",
    "sglang_stack_extra_constraints", "sglang_stack_excludes", "sglang_stack_install_timeout",
    "sglang_stack_install_poll",
    # Derived by the role (vars/main.yml), read only when a check needs them.
    "flashinfer_jit_version", "flashinfer_packages",
)
SGLANG_WEIGHTS_SETTINGS = (
    "sglang_model_path", "sglang_speculative_draft_model_path", "sglang_weights_mode", "sglang_weights_model_repo",
    "sglang_weights_model_revision", "sglang_weights_draft_repo", "sglang_weights_draft_revision",
    "sglang_weights_model_manifest", "sglang_weights_draft_manifest", "sglang_weights_hf_token_file",
    "sglang_weights_state_dir", "sglang_weights_download_timeout", "sglang_weights_download_poll",
)


def _reader(filter_name: str, settings: Any, names: tuple[str, ...]) -> Callable[[str], Any]:
    """A function that reads one variable of settings (a mapping with exactly these names), only when asked."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(f"{filter_name}: expected a mapping of the role's variables, got {type(settings)}")
    missing = [name for name in names if name not in settings]
    unknown = sorted(str(name) for name in settings if name not in names)
    if missing or unknown:
        raise AnsibleFilterError(f"{filter_name}: the mapping lacks {missing} and has unknown keys {unknown}; "
                                 f"it takes {list(names)}")
    return settings.__getitem__


def _match(pattern: re.Pattern[str], value: Any) -> bool:
    """Ansible's `value is match(pattern)`: re.match on the value's text."""
    return pattern.match(str(value)) is not None


def _int(value: Any) -> int:
    """Jinja's `value | int`: '42' and '42.7' are 42, what is not a number 0."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def _length(value: Any) -> int:
    """Jinja's `value | length`, with null as empty (a value the variable check refuses has a length too)."""
    if value is None:
        return 0
    try:
        return len(value)
    except TypeError:
        return len(str(value))


def _items(value: Any) -> list[Any]:
    """The items of a list setting, as Jinja's select and map take them: none of a false value (null, an empty
    string), a string's characters."""
    if not value:
        return []
    try:
        return list(value)
    except TypeError:
        return [value]


def _plain(value: Any) -> Any:
    """A value without Ansible's wrappers (lazy containers, tagged scalars), for the message's text."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _shown(value: Any) -> str:
    """A value as Ansible shows `{{ value }}` in a message: null as nothing, a list as Python writes it."""
    return "" if value is None else str(_plain(value))


def nvidia_driver_settings_errors(settings: Any) -> list[str]:
    """`__nvidia_driver_settings | sglang.deploy.nvidia_driver_settings_errors`: the refusals of role nvidia_driver's
    settings, in order (empty: none)."""
    get = _reader("nvidia_driver_settings_errors", settings, NVIDIA_DRIVER_SETTINGS)
    errors = []
    branch, version = get("nvidia_driver_branch"), get("nvidia_driver_version")
    if not rules.branch_ok(branch):
        errors.append(f"nvidia_driver_branch must be a driver branch of {OLDEST_BRANCH} or newer (CUDA 13, which "
                      f"SGLang needs, requires {OLDEST_BRANCH}+), got '{_shown(branch)}'")
    if not _match(_DRIVER_VERSION_RE, version):
        errors.append(f"nvidia_driver_version must be an exact driver version such as 580.95.05, got "
                      f"'{_shown(version)}'")
    if str(version).split(".", maxsplit=1)[0] != str(branch):
        errors.append(f"nvidia_driver_version {_shown(version)} is not of nvidia_driver_branch {_shown(branch)}; "
                      "change both together")
    gpu_count = get("nvidia_driver_gpu_count")
    if gpu_count is not None and _int(gpu_count) < 1:
        errors.append(f"nvidia_driver_gpu_count must be 1 or more (or null to skip the check), got "
                      f"{_shown(gpu_count)}")
    capability = get("nvidia_driver_gpu_compute_capability")
    if not rules.capability_ok(capability):
        errors.append(f"nvidia_driver_gpu_compute_capability must look like 12.0 (or be null), got "
                      f"'{_shown(capability)}'")
    fingerprint = get("nvidia_driver_repo_key_fingerprint")
    if not rules.fingerprint_ok(fingerprint):
        errors.append(f"nvidia_driver_repo_key_fingerprint must be a full key fingerprint (40 hex digits; spaces "
                      f"allowed) or empty, got '{_shown(fingerprint)}'")
    base_url = get("nvidia_driver_repo_base_url")
    if not rules.RULES["nvidia_driver_repo_base_url"].accepts(base_url):
        errors.append(f"nvidia_driver_repo_base_url must be an http(s):// or file:/ URL, got '{_shown(base_url)}'")
    with_versions = [name for name in _items(get("nvidia_driver_packages")) if _match(_PACKAGE_WITH_VERSION_RE, name)]
    if with_versions:
        errors.append(f"nvidia_driver_packages lists package names only (the version is nvidia_driver_version), got "
                      f"{_shown(with_versions)}")
    return errors


def _constraint_versions(directory: str) -> list[str]:
    """The SGLang versions with a constraints file (sglang-<version>.txt) in directory."""
    names = glob.glob("sglang-*.txt", root_dir=directory)
    return sorted(_CONSTRAINTS_RE.sub(r"\1", name) for name in names if os.path.isfile(os.path.join(directory, name)))


def _wheels(wheelhouse: str) -> list[str]:
    """The file names of the wheels directly in the wheelhouse (*.whl, as a shell glob: not hidden ones)."""
    return [name for name in glob.glob("*.whl", root_dir=wheelhouse) if os.path.isfile(os.path.join(wheelhouse, name))]


def _wheelhouse_errors(get: Callable[[str], Any], wheelhouse: Any, version: Any, uv_version: Any) -> list[str]:
    """What an offline install lacks in the wheelhouse on the controller: uv, SGLang, FlashInfer's packages."""
    shown = _shown(wheelhouse)
    if not os.path.isdir(str(wheelhouse)):
        return [f"sglang_stack_wheelhouse {shown} is not a directory on the controller"]
    errors = []
    wheels = _wheels(str(wheelhouse))
    if not any(re.match("uv-" + re.escape(str(uv_version)) + "-", name) for name in wheels):
        errors.append(f"the wheelhouse {shown} (sglang_stack_wheelhouse) has no uv {_shown(uv_version)} wheel: add "
                      f"it with `pip download uv=={_shown(uv_version)} -d {shown}`")
    if not any(re.match("sglang-" + re.escape(str(version)) + "[-+]", name) for name in wheels):
        errors.append(f"the wheelhouse {shown} (sglang_stack_wheelhouse) has no sglang {_shown(version)} wheel: fill "
                      f"it with `pip download sglang=={_shown(version)} -c <constraints> -d {shown}`")
    projects = [_WHEEL_PROJECT_RE.sub(r"\1", name).replace("_", "-") for name in wheels]
    missing = [package for package in _items(get("flashinfer_packages")) if package not in projects]
    if missing:
        errors.append(
            f"the wheelhouse {shown} (sglang_stack_wheelhouse) lacks FlashInfer's prebuilt kernels "
            f"({', '.join(str(_plain(package)) for package in missing)} missing; the kernel packages are those of "
            f"sglang_stack_flashinfer_kernels, at the version of the jit-cache shim in "
            f"roles/sglang_stack/files/constraints/sglang-{_shown(version)}.txt, from "
            f"{_shown(get('sglang_stack_flashinfer_index_url'))} and its /cu<CUDA> index: docs/air-gapped.md); add "
            f"them, or set sglang_stack_flashinfer_prebuilt: false to let FlashInfer compile kernels on first use")
    return errors


def sglang_stack_settings_errors(settings: Any, constraints_directory: str) -> list[str]:
    """`__sglang_stack_settings | sglang.deploy.sglang_stack_settings_errors(constraints_dir)`: the refusals of role
    sglang_stack's settings, in order (empty: none). Offline (a wheelhouse set), the wheelhouse on the controller
    must hold uv, SGLang and FlashInfer's packages."""
    get = _reader("sglang_stack_settings_errors", settings, SGLANG_STACK_SETTINGS)
    errors = []
    version, uv_version = get("sglang_version"), get("sglang_stack_uv_version")
    versions = _constraint_versions(str(constraints_directory))
    if str(version) not in versions:
        errors.append(f"sglang_version {_shown(version)} has no constraints file in roles/sglang_stack/files/"
                      f"constraints/ (the GPU stack its wheel pins); versions with one: {', '.join(versions)}")
    if not rules.RULES["sglang_stack_uv_version"].accepts(uv_version):
        errors.append(f"sglang_stack_uv_version must be an exact version such as 0.13.9, got '{_shown(uv_version)}'")
    wheelhouse = get("sglang_stack_wheelhouse")
    if _length(wheelhouse) > 0:  # offline
        errors += _wheelhouse_errors(get, wheelhouse, version, uv_version)
    prebuilt, kernels = get("sglang_stack_flashinfer_prebuilt"), get("sglang_stack_flashinfer_kernels")
    if prebuilt and (_length(kernels) == 0 or not all(_match(KERNEL_TAG_RE, tag) for tag in _items(kernels))):
        errors.append(f"sglang_stack_flashinfer_kernels takes FlashInfer's architecture tags, one per GPU "
                      f"architecture of the hosts (sm120f: compute capability 12.0 with CUDA 12.9 or newer; sm100a, "
                      f"sm90a, sm89, ...), at least one while sglang_stack_flashinfer_prebuilt is true; got "
                      f"{_shown(kernels)}")
    if prebuilt and _length(get("flashinfer_jit_version")) == 0 and str(version) in versions:
        errors.append(f"roles/sglang_stack/files/constraints/sglang-{_shown(version)}.txt pins no "
                      f"flashinfer-jit-cache, whose version the kernel packages take; set "
                      f"sglang_stack_flashinfer_prebuilt: false for this release")
    install_dir = get("sglang_stack_python_install_dir")
    if not _match(_ABSOLUTE_RE, install_dir) or _match(_HOME_RE, install_dir):
        errors.append(f"sglang_stack_python_install_dir must be an absolute path outside /root and /home (the "
                      f"service user runs the interpreter uv puts there), got '{_shown(install_dir)}'")
    not_pins = [line for line in _items(get("sglang_stack_extra_constraints")) if not _match(_PIN_RE, line)]
    if not_pins:
        errors.append(f"sglang_stack_extra_constraints takes name==version lines only, got {_shown(not_pins)}")
    excludes = get("sglang_stack_excludes")
    if (not all(_match(_PACKAGE_NAME_RE, name) for name in _items(excludes))
            or any(re.sub(r"[-_.]+", "-", str(name).lower()) == "sglang" for name in _items(excludes))):
        errors.append(f"sglang_stack_excludes takes package names (letters, digits, '.', '_', '-') other than "
                      f"sglang itself, got {_shown(excludes)}")
    return errors + _timeout_and_poll(get, "sglang_stack_install", MIN_INSTALL_TIMEOUT)


def sglang_weights_settings_errors(settings: Any) -> list[str]:
    """`__sglang_weights_settings | sglang.deploy.sglang_weights_settings_errors`: the refusals of role
    sglang_weights's settings, in order (empty: none). A manifest must be a file on the controller."""
    get = _reader("sglang_weights_settings_errors", settings, SGLANG_WEIGHTS_SETTINGS)
    errors = []
    model_path, draft_path = get("sglang_model_path"), get("sglang_speculative_draft_model_path")
    if not _match(_ABSOLUTE_RE, model_path):
        errors.append(f"sglang_model_path must be an absolute directory on the host, got '{_shown(model_path)}'")
    if draft_path and not _match(_ABSOLUTE_RE, draft_path):
        errors.append(f"sglang_speculative_draft_model_path must be an absolute directory on the host, got "
                      f"'{_shown(draft_path)}'")
    download = get("sglang_weights_mode") == "download"
    if download:
        repo, revision = get("sglang_weights_model_repo"), get("sglang_weights_model_revision")
        if _length(repo) == 0 or not _match(rules.COMMIT_RE, revision):
            errors.append(f"sglang_weights_mode is download: sglang_weights_model_repo (e.g. moonshotai/Kimi-K2.5) "
                          f"and sglang_weights_model_revision, a 40-hex-digit commit (a branch or tag would float "
                          f"between hosts), are required; got repo '{_shown(repo)}', revision '{_shown(revision)}'")
    if download and draft_path:
        repo, revision = get("sglang_weights_draft_repo"), get("sglang_weights_draft_revision")
        if _length(repo) == 0 or not _match(rules.COMMIT_RE, revision):
            errors.append(f"sglang_weights_mode is download and a draft model is set "
                          f"(sglang_speculative_draft_model_path): sglang_weights_draft_repo and a 40-hex-digit "
                          f"sglang_weights_draft_revision are required; got repo '{_shown(repo)}', revision "
                          f"'{_shown(revision)}'")
    for name in ("sglang_weights_model_manifest", "sglang_weights_draft_manifest"):
        manifest = get(name)
        if not rules.controller_file_ok(manifest):
            errors.append(f"{name} {_shown(manifest)} is not a file on the controller")
    token_file, state_dir = get("sglang_weights_hf_token_file"), get("sglang_weights_state_dir")
    if not _match(_ABSOLUTE_RE, token_file) or not _match(_ABSOLUTE_RE, state_dir):
        errors.append(f"sglang_weights_hf_token_file and sglang_weights_state_dir must be absolute paths, got "
                      f"'{_shown(token_file)}' and '{_shown(state_dir)}'")
    return errors + _timeout_and_poll(get, "sglang_weights_download", MIN_DOWNLOAD_TIMEOUT)


def _timeout_and_poll(get: Any, prefix: str, minimum: int) -> list[str]:
    """An async job's bound (<prefix>_timeout, at least ``minimum`` s) and its poll (<prefix>_poll, at least 1 s)."""
    timeout, poll = get(f"{prefix}_timeout"), get(f"{prefix}_poll")
    if _int(timeout) < minimum or _int(poll) < 1:
        return [f"{prefix}_timeout must be at least {minimum} s and {prefix}_poll at least 1 s, got "
                f"{_shown(timeout)} and {_shown(poll)}"]
    return []


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"nvidia_driver_settings_errors": nvidia_driver_settings_errors,
                "sglang_stack_settings_errors": sglang_stack_settings_errors,
                "sglang_weights_settings_errors": sglang_weights_settings_errors}
