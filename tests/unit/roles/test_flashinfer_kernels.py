"""sglang_stack: FlashInfer's kernel packages (0.7.2's jit-cache shim requires one per GPU architecture), checked
against what FlashInfer itself says (tests/fixtures/flashinfer, each fact with its source) and uv's real output."""

from __future__ import annotations

import json
import re

import jinja2
import yaml
from ansible.plugins.filter.core import regex_escape
from ansible_collections.sglang.deploy.plugins.filter.settings import (
    KERNEL_TAG_RE,
    SGLANG_STACK_SETTINGS,
    sglang_stack_settings_errors,
)
from ansible_collections.sglang.deploy.plugins.filter.stack import unmet_requirements
from helpers import ROOT

FIXTURES = ROOT / "tests/fixtures/flashinfer"
FACTS = json.loads((FIXTURES / "facts.json").read_text())
ROLE = ROOT / "roles/sglang_stack"
DEFAULTS = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
VARS = yaml.safe_load((ROLE / "vars/main.yml").read_text())
CHECK = (FIXTURES / "uv-0.13.9-pip-check-shim-without-deps.txt").read_text().splitlines()


def other_kernels(kernels: list[str]) -> str:
    """The role's own expression (vars/main.yml __sglang_stack_other_kernels), rendered for these kernels."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["regex_escape"] = regex_escape
    return env.from_string(VARS["__sglang_stack_other_kernels"]).render(sglang_stack_flashinfer_kernels=kernels)


def test_the_default_kernel_package_is_the_reference_gpus_with_the_releases_cuda() -> None:
    """The reference host: RTX PRO 6000 Blackwell (compute capability 12.0); SGLang 0.5.23's torch is CUDA 13.0."""
    cuda = yaml.safe_load((ROOT / "roles/sglang/vars/main.yml").read_text())["__sglang_cuda_versions"]["0.5.23"]
    assert DEFAULTS["sglang_stack_flashinfer_kernels"] == [FACTS["architecture_tags"]["12.0"][cuda]]


def test_the_role_accepts_every_tag_flashinfer_names_and_nothing_else() -> None:
    """The role's check (sglang_stack_settings_errors) and the names built from what it accepts match the shim's
    own pattern."""
    shim = re.compile(FACTS["shim"]["kernel_package_pattern"])
    for tag in FACTS["cu130_x86_64_kernel_tags"]["tags"] + ["sm120a", "sm121a", "sm110a"]:
        assert KERNEL_TAG_RE.match(tag) and shim.fullmatch(f"flashinfer-jit-cache-{tag}"), tag
        assert not kernel_refusals([tag]), tag
    for wrong in ("blackwell", "120f", "sm1200f", "sm120x", "SM120F", "sm120f; rm -rf /"):
        assert not re.fullmatch(KERNEL_TAG_RE.pattern.strip("^$"), wrong), wrong
        assert kernel_refusals([wrong]), wrong


def kernel_refusals(kernels: list[str]) -> list[str]:
    """The stack's refusals of these kernel tags, everything else as the role's defaults have it."""
    settings = {name: DEFAULTS.get(name) for name in SGLANG_STACK_SETTINGS}
    settings.update(sglang_version="0.5.23", sglang_stack_flashinfer_kernels=kernels, flashinfer_jit_version="0.7.2",
                    flashinfer_packages=[])
    return [error for error in sglang_stack_settings_errors(settings, str(ROLE / "files/constraints"))
            if "takes FlashInfer's architecture tags" in error]


def test_other_gpus_kernel_packages_reported_missing_by_the_real_uv_are_not_problems() -> None:
    assert any("flashinfer-jit-cache-sm100a" in line for line in CHECK)
    assert unmet_requirements(CHECK, [], other_kernels(["sm120f"])) == []


def test_the_hosts_own_kernel_package_missing_is_a_problem() -> None:
    missing = [line.replace("sm100a", "sm120f") for line in CHECK]
    assert unmet_requirements(missing, [], other_kernels(["sm120f"])) == [missing[-1]]
    assert unmet_requirements(CHECK, [], other_kernels(["sm120f", "sm100a"])) == [CHECK[-1]]


def test_the_kernels_are_installed_without_the_shims_dependencies_and_only_from_flashinfers_index() -> None:
    """With its dependencies the shim needs every GPU's kernel package: uv 0.13.9 cannot resolve it from a
    wheelhouse that holds the host's own only (the recorded output), and online it downloads them all."""
    assert "flashinfer-jit-cache-sm100a was not found" in (
        FIXTURES / "uv-0.13.9-install-shim-with-deps-offline.txt").read_text()
    tasks = {task["name"]: task for task in yaml.safe_load((ROLE / "tasks/install.yml").read_text())}
    main = next(task for name, task in tasks.items() if name.startswith("Install SGLang with its pinned GPU stack"))
    kernels = next(task for name, task in tasks.items() if name.startswith("Install FlashInfer's prebuilt kernels"))
    assert "flashinfer" not in main["ansible.builtin.command"]["argv"]
    assert "__sglang_stack_flashinfer_source" not in main["ansible.builtin.command"]["argv"]
    assert "'--no-deps'" in kernels["ansible.builtin.command"]["argv"]
    assert "__sglang_stack_flashinfer_packages" in kernels["ansible.builtin.command"]["argv"]
    # FlashInfer's index is no extra index of the main install: uv would take flashinfer-python from it.
    assert "extra-index-url" not in VARS["__sglang_stack_uv_source"]
