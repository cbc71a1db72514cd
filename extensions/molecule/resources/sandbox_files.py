"""Pack the files that make a systemd container look like an 8-GPU host into one tarball, on the controller.

    sandbox_files.py TARBALL

playbooks/sandbox-prepare.yml unpacks it at / on every sandbox host in one task: a module run per file (what
the playbook did before) cost a remote round trip each, 50 of them per host, most of a prepare on a busy machine.
The tarball holds, owned by root with the modes the hosts need:
- /usr/bin/nvidia-smi, nvidia_smi.py and nvidia-module-load (the fake nvidia-smi and its boot-time "module load");
- /etc/systemd/system/sglang-sim-nvidia-module.service (the unit that runs it at each boot);
- /etc/sglang-sim/proc-driver-nvidia/gpus/<bus id>/information for the eight GPUs: what the driver's procfs says
  (format of open-gpu-kernel-modules 580.95.05, kernel-open/nvidia/nv-procfs.c), bus ids as the fake nvidia-smi's;
- /models/kimi-k2.5 and /models/kimi-k2.5-eagle3: the real config.json files, tiny shards and the safetensors
  index that models/make_model.py writes (64 shards and 1).
Only these files and the directories the package's sandbox owns are entries: /usr, /etc and their subdirectories
keep their own modes.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import tempfile
from pathlib import Path

RESOURCES = Path(__file__).resolve().parent
GPUS = 8
MODELS = {"kimi-k2.5": 64, "kimi-k2.5-eagle3": 1}
MTIME = 1_700_000_000  # one fixed time: the same files pack to the same tarball, and a second unpack changes nothing


def _information(index: int) -> str:
    return (f"Model: \t\t NVIDIA RTX PRO 6000 Blackwell Server Edition\n"
            f"Bus Type: \t PCIe\n"
            f"Bus Location: \t 0000:{index + 1:02x}:00.0\n"
            f"Device Minor: \t {index}\n")


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, MTIME
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, MTIME
    tar.addfile(info, io.BytesIO(data))


def _make_model() -> object:
    spec = importlib.util.spec_from_file_location("make_model", RESOURCES / "models" / "make_model.py")
    if spec is None or spec.loader is None:
        raise SystemExit("models/make_model.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _models(tar: tarfile.TarFile) -> None:
    make_model = _make_model()
    _add_dir(tar, "models")
    with tempfile.TemporaryDirectory() as scratch:
        for name, shards in MODELS.items():
            staged = Path(scratch) / name
            staged.mkdir()
            (staged / "config.json").write_bytes((RESOURCES / "models" / name / "config.json").read_bytes())
            if make_model.main(["make_model.py", str(staged), str(shards)]) != 0:  # type: ignore[attr-defined]
                raise SystemExit(f"make_model.py could not stage {name}")
            _add_dir(tar, f"models/{name}")
            for path in sorted(staged.iterdir()):
                _add_file(tar, f"models/{name}/{path.name}", path.read_bytes())


def pack(tarball: Path) -> None:
    smi = RESOURCES / "nvidia-smi"
    with tarfile.open(tarball, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        _add_file(tar, "usr/bin/nvidia_smi.py", (smi / "nvidia_smi.py").read_bytes())
        _add_file(tar, "usr/bin/nvidia-smi", (smi / "nvidia-smi").read_bytes(), 0o755)
        _add_file(tar, "usr/bin/nvidia-module-load", (smi / "nvidia-module-load").read_bytes(), 0o755)
        _add_file(tar, "etc/systemd/system/sglang-sim-nvidia-module.service",
                  (smi / "sglang-sim-nvidia-module.service").read_bytes())
        for directory in ("etc/sglang-sim", "etc/sglang-sim/proc-driver-nvidia",
                          "etc/sglang-sim/proc-driver-nvidia/gpus"):
            _add_dir(tar, directory)
        for index in range(GPUS):
            gpu = f"etc/sglang-sim/proc-driver-nvidia/gpus/0000:{index + 1:02x}:00.0"
            _add_dir(tar, gpu)
            _add_file(tar, f"{gpu}/information", _information(index).encode())
        _models(tar)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    pack(Path(sys.argv[1]))
