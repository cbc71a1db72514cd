"""_nvidia_smi: CSV queries read with csv (quoted names keep their commas), and bounded runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.sglang.deploy.plugins.module_utils import _nvidia_smi as smi
from helpers import ROOT

FIELDS = ("index", "name", "memory.total")


def test_rows_are_read_as_csv() -> None:
    text = '0, NVIDIA L40S, 46068\n\n1, "NVIDIA A100-SXM4-80GB, MIG 1g.10gb", 81920\n'
    assert smi.parse_csv(text, FIELDS) == [
        {"index": "0", "name": "NVIDIA L40S", "memory.total": "46068"},
        {"index": "1", "name": "NVIDIA A100-SXM4-80GB, MIG 1g.10gb", "memory.total": "81920"}]
    assert smi.parse_csv("", FIELDS) == []


def test_a_row_of_another_shape_is_an_error_or_skipped() -> None:
    text = "0, NVIDIA L40S, 46068\nNo running processes found\n"
    with pytest.raises(ValueError, match="unexpected nvidia-smi line: 'No running processes found'"):
        smi.parse_csv(text, FIELDS)
    assert smi.parse_csv(text, FIELDS, strict=False) == [{"index": "0", "name": "NVIDIA L40S", "memory.total": "46068"}]


def test_a_real_hosts_query_with_units_reads_the_same() -> None:
    header, *rows = (ROOT / "tests/fixtures/real-host/nvidia-smi-query-8gpu-pcie.csv").read_text().splitlines()
    fields = [name.split(" [")[0] for name in header.split(", ")]
    gpus = smi.parse_csv("\n".join(rows), fields)
    assert len(gpus) == 8 and {smi.mib(gpu["memory.total"]) for gpu in gpus} == {46068}
    assert gpus[6]["pci.bus_id"] == "00000000:E3:00.0" and gpus[0]["driver_version"] == "580.178.04"


@pytest.mark.parametrize(("cell", "mib"), [("97887", 97887), ("97887 MiB", 97887), ("81920.0", 81920),
                                           ("[N/A]", None), ("", None)])
def test_memory_cells(cell: str, mib: int | None) -> None:
    assert smi.mib(cell) == mib


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AnsibleModule:
    """A real module; tmp_path/bin comes first on PATH."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with patch_module_args({}):
        return AnsibleModule(argument_spec={})


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "bin" / "nvidia-smi"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return "nvidia-smi"


def test_query_runs_the_csv_format_and_reads_the_rows(module: AnsibleModule, tmp_path: Path) -> None:
    command = script(tmp_path, '[ "$1 $2" = "--query-gpu=index,name,memory.total --format=csv,noheader,nounits" ] '
                               '&& echo "0, NVIDIA L40S, 46068"')
    answer, rows = smi.query(module, command, FIELDS)
    assert answer.ok and rows == [{"index": "0", "name": "NVIDIA L40S", "memory.total": "46068"}]


def test_failures_say_why(module: AnsibleModule, tmp_path: Path) -> None:
    assert smi.run(module, "nvidia-smi", ["-L"]) == smi.Answer(None, "", "nvidia-smi is not installed")
    command = script(tmp_path, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\"; "
                               "exit 9")
    answer, rows = smi.query(module, command, FIELDS)
    assert (answer.rc, rows) == (9, []) and answer.error.startswith("NVIDIA-SMI has failed")


def test_a_hung_nvidia_smi_is_stopped_at_the_bound(module: AnsibleModule, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(smi, "TIMEOUT_S", 1)
    answer = smi.run(module, script(tmp_path, "sleep 30"), ["-L"])
    assert answer.rc == 124 and answer.error == "nvidia-smi did not answer within 1 s"
