"""The stack's filter: what uv pip check reports that the install must act on."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter.stack import unmet_requirements

# uv 0.13.9's own output on the engine scenario's CPU virtualenv (SGLang 0.5.23 installed with --excludes).
CHECK = [
    "Using Python 3.11.2 environment at: /opt/sglang/0.5.23/venv",
    "Checked 175 packages in 17ms",
    "Found 3 incompatibilities",
    "The package `sglang` requires `cuda-python>=13.0`, but it's not installed",
    "The package `sglang` requires `flashinfer-python[cu13]==0.7.2`, but it's not installed",
    "The package `sglang` requires `torch-memory-saver>=0.0.9.post1`, but it's not installed",
]


def test_the_left_out_packages_are_not_problems_whatever_their_spelling() -> None:
    assert unmet_requirements(CHECK, ["cuda-python", "FlashInfer_Python", "torch.memory-saver"]) == []


def test_a_missing_package_not_left_out_is_a_problem() -> None:
    assert unmet_requirements(CHECK, ["cuda-python", "flashinfer-python"]) == [CHECK[-1]]


def test_a_wrong_version_or_an_unknown_line_is_a_problem_even_for_a_left_out_name() -> None:
    wrong = "The package `sglang` requires `torch==2.14.1`, but `2.13.0` is installed"
    error = "error: Failed to inspect Python interpreter"
    assert unmet_requirements([*CHECK[:3], wrong, error], ["torch"]) == [wrong, error]


def test_a_compatible_virtualenv_has_none() -> None:
    assert unmet_requirements(["Checked 12 packages in 3ms", "All installed packages are compatible"], []) == []


def test_anything_but_lines_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="expected the lines"):
        unmet_requirements("Found 1 incompatibility", [])
