"""Fake nvidia-smi for sandbox and Molecule hosts (no GPU): reports the GPUs of a JSON file.

The file is /etc/sglang-sim/nvidia-smi.json (or $FAKE_NVIDIA_SMI_CONFIG)::

    {"driver_version": "580.95.05", "cuda_version": "13.0", "driver_loaded": true,
     "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "memory_total_mib": 97887,
               "memory_used_mib": 0, "compute_cap": "12.0", "uuid": "GPU-...",
               "pci_bus_id": "00000000:01:00.0", "persistence_mode": "Enabled"}, ...],
     "compute_apps": [{"pid": 1234, "gpu_uuid": "GPU-...", "used_memory_mib": 1000,
                       "process_name": "python3"}]}

Without the file: 8 RTX PRO 6000 Blackwell GPUs with fixed UUIDs and no compute apps. Supported:
bare ``nvidia-smi``, ``-L``, ``-i/--id``, ``--query-gpu=...`` and ``--query-compute-apps=...`` with
``--format=csv[,noheader][,nounits]``, ``topo -p2p r|w|n|a|p`` (``"p2p": {"0-4": "CNS"}`` in the file sets
a pair's status), ``--version``, ``-h``. When /dev/nvidiactl exists but cannot be opened (a denying
device policy), queries fail as NVML does. Output follows the real tool's CSV
(``index, memory.total [MiB]`` headers, ``97887 MiB`` values). ``"driver_loaded": false`` makes
every command fail like a host whose driver is not loaded (exit 9).

The running driver changes only at a boot, as on a host, where the kernel loads the nvidia.ko that DKMS
built for the installed packages: at each boot the unit ``sglang-sim-nvidia-module.service``
(``nvidia-module-load`` next to this file) writes the installed ``nvidia-kernel-open-dkms`` version to
/run/sglang-sim/nvidia-module (or ``$FAKE_NVIDIA_MODULE``), a tmpfs that the next boot starts empty; or
``failed`` when /etc/sglang-sim/drill-module-fails-to-load exists (a module that did not build or load).
The file's driver is reported unless the JSON file sets ``driver_version``; ``failed`` means
``"driver_loaded": false``. Before the first boot with the packages installed: 580.95.05.
"""

from __future__ import annotations

import errno
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for the annotations only: importing typing would cost each call about 9 ms
    from typing import Any

CONFIG = "/etc/sglang-sim/nvidia-smi.json"
MODULE = "/run/sglang-sim/nvidia-module"
DEFAULT_DRIVER = "580.95.05"
DEFAULT_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running.\n"
)
INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
USAGE = """NVIDIA System Management Interface -- v{driver}

nvidia-smi [OPTION1 [ARG1]] [OPTION2 [ARG2]] ...

    -h,   --help                Print usage information and exit.
    -L,   --list-gpus           Display a list of GPUs connected to the system.
    -i,   --id=                 Target a specific GPU.
    --query-gpu=                Information about GPU.
    --query-compute-apps=       List of active compute processes.
    --format=                   Comma separated list of format options: csv, noheader, nounits.
    --version                   Print version information and exit.
"""

# field -> (header, unit); "count" is the number of GPUs shown.
GPU_FIELDS: dict[str, tuple[str, str]] = {
    "index": ("index", ""),
    "name": ("name", ""),
    "gpu_name": ("name", ""),
    "uuid": ("uuid", ""),
    "gpu_uuid": ("uuid", ""),
    "pci.bus_id": ("pci.bus_id", ""),
    "gpu_bus_id": ("pci.bus_id", ""),
    "driver_version": ("driver_version", ""),
    "memory.total": ("memory.total [MiB]", "MiB"),
    "memory.used": ("memory.used [MiB]", "MiB"),
    "memory.free": ("memory.free [MiB]", "MiB"),
    "compute_cap": ("compute_cap", ""),
    "persistence_mode": ("persistence_mode", ""),
    "compute_mode": ("compute_mode", ""),
    "count": ("count", ""),
    "utilization.gpu": ("utilization.gpu [%]", "%"),
    "temperature.gpu": ("temperature.gpu", ""),
}
APP_FIELDS: dict[str, tuple[str, str]] = {
    "pid": ("pid", ""),
    "gpu_uuid": ("gpu_uuid", ""),
    "gpu_name": ("gpu_name", ""),
    "gpu_bus_id": ("gpu_bus_id", ""),
    "used_memory": ("used_gpu_memory [MiB]", "MiB"),
    "used_gpu_memory": ("used_gpu_memory [MiB]", "MiB"),
    "process_name": ("process_name", ""),
    "name": ("process_name", ""),
}


class UsageError(Exception):
    """Bad command line (exit 2)."""


# default_uuid() of the eight default GPUs, written out: every call of the fake reports them, and importing hashlib
# (and json, which only a config file needs) was most of a call's CPU time, on the cores the sandbox's hosts share.
DEFAULT_UUIDS = (
    "GPU-45f3babc-e451-b4da-3582-46dd292be0b5",
    "GPU-5bd35e59-916c-5936-bcd9-7ab5dd8ff5cf",
    "GPU-f4abedc3-b533-4f68-7354-5b39cd5513e8",
    "GPU-093fafa8-03a0-c76c-9216-001015696d30",
    "GPU-e8a789b0-67ac-234f-f6d7-34c5a9ceb29b",
    "GPU-9acbe034-a93c-ea8b-2c29-3f4eca1710b7",
    "GPU-e0e053d4-f64a-55f2-5191-b8a23991cb79",
    "GPU-b8ef6906-fbd3-6d6f-ade9-e781586565d8",
)


def default_uuid(index: int) -> str:
    if index < len(DEFAULT_UUIDS):
        return DEFAULT_UUIDS[index]
    import hashlib  # pylint: disable=import-outside-toplevel

    digest = hashlib.sha256(f"sglang-deploy fake GPU {index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def default_gpu(index: int) -> dict[str, Any]:
    return {
        "name": DEFAULT_NAME, "memory_total_mib": 97887, "memory_used_mib": 0, "compute_cap": "12.0",
        "uuid": default_uuid(index), "pci_bus_id": f"00000000:{index + 1:02X}:00.0", "persistence_mode": "Enabled",
    }


def loaded_module() -> str | None:
    """The driver the last boot loaded (a version, or "failed"); None before a boot has loaded one."""
    try:
        with open(os.environ.get("FAKE_NVIDIA_MODULE") or MODULE, encoding="utf-8") as handle:
            return handle.read().strip() or None
    except FileNotFoundError:
        return None


def load_config() -> dict[str, Any]:
    path = os.environ.get("FAKE_NVIDIA_SMI_CONFIG") or CONFIG
    try:
        with open(path, encoding="utf-8") as handle:
            import json  # pylint: disable=import-outside-toplevel

            config = json.load(handle)
    except FileNotFoundError:
        config = {}
    loaded = loaded_module()
    config.setdefault("driver_version", loaded if loaded not in (None, "failed") else DEFAULT_DRIVER)
    config.setdefault("cuda_version", "13.0")
    config.setdefault("driver_loaded", loaded != "failed")
    gpus = config.get("gpus")
    if gpus is None:
        gpus = [{} for _index in range(8)]
    config["gpus"] = [{**default_gpu(i), **gpu, "index": i} for i, gpu in enumerate(gpus)]
    config.setdefault("compute_apps", [])
    return config


def app_memory(config: dict[str, Any], gpu: dict[str, Any]) -> int:
    return sum(int(app.get("used_memory_mib", 0)) for app in config["compute_apps"]
               if app.get("gpu_uuid") == gpu["uuid"])


def memory_used(config: dict[str, Any], gpu: dict[str, Any]) -> int:
    return int(gpu.get("memory_used_mib", 0)) + app_memory(config, gpu)


def gpu_value(config: dict[str, Any], gpu: dict[str, Any], field: str, count: int) -> Any:
    used = memory_used(config, gpu)
    values = {
        "index": gpu["index"], "name": gpu["name"], "uuid": gpu["uuid"], "pci.bus_id": gpu["pci_bus_id"],
        "driver_version": config["driver_version"], "memory.total": gpu["memory_total_mib"], "memory.used": used,
        "memory.free": int(gpu["memory_total_mib"]) - used, "compute_cap": gpu["compute_cap"],
        "persistence_mode": gpu.get("persistence_mode", "Enabled"), "count": count,
        "compute_mode": gpu.get("compute_mode", "Default"),
        "utilization.gpu": gpu.get("utilization_gpu", 0), "temperature.gpu": gpu.get("temperature_gpu", 34),
    }
    aliases = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
    return values[aliases.get(field, field)]


def app_value(config: dict[str, Any], app: dict[str, Any], field: str) -> Any:
    gpu = next((g for g in config["gpus"] if g["uuid"] == app.get("gpu_uuid")), {})
    values = {
        "pid": app.get("pid"), "gpu_uuid": app.get("gpu_uuid"), "gpu_name": gpu.get("name", "[N/A]"),
        "gpu_bus_id": gpu.get("pci_bus_id", "[N/A]"), "used_memory": app.get("used_memory_mib", 0),
        "process_name": app.get("process_name", "[N/A]"),
    }
    aliases = {"used_gpu_memory": "used_memory", "name": "process_name"}
    return values[aliases.get(field, field)]


def parse_format(text: str | None) -> tuple[bool, bool]:
    """(header, units) of --format=csv[,noheader][,nounits]."""
    if text is None:
        raise UsageError('"--format=" must be specified when querying.\n' + INVALID)
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if "csv" not in parts or any(p not in ("csv", "noheader", "nounits") for p in parts):
        raise UsageError(f'"{text}" is not a valid format.\n' + INVALID)
    return "noheader" not in parts, "nounits" not in parts


def csv_lines(fields: list[str], table: dict[str, tuple[str, str]], rows: list[list[Any]], header: bool,
              units: bool) -> list[str]:
    lines = [", ".join(table[f][0] for f in fields)] if header else []
    for row in rows:
        cells = []
        for field, value in zip(fields, row, strict=True):
            unit = table[field][1]
            sep = "" if unit == "%" else " "
            cells.append(f"{value}{sep}{unit}" if unit and units else str(value))
        lines.append(", ".join(cells))
    return lines


def query_fields(text: str, table: dict[str, tuple[str, str]]) -> list[str]:
    fields = [f.strip() for f in text.split(",") if f.strip()]
    for field in fields:
        if field not in table:
            raise UsageError(f'Field "{field}" is not a valid field to query.\n')
    if not fields:
        raise UsageError(INVALID)
    return fields


def select_gpus(config: dict[str, Any], ids: str | None) -> list[dict[str, Any]]:
    if ids is None:
        return config["gpus"]
    chosen = []
    for wanted in (part.strip() for part in ids.split(",")):
        match = [g for g in config["gpus"] if wanted in (str(g["index"]), g["uuid"])
                 or g["pci_bus_id"].lower() == wanted.lower()]
        if not match:
            raise UsageError(f"No devices were found matching the id {wanted}.\n")
        chosen += match
    return chosen


def row(left: str, middle: str, right: str) -> str:
    return f"|{left[:41].ljust(41)}|{middle[:24].rjust(24)}|{right[:22].rjust(22)}|"


def short_name(name: str, width: int = 26) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def table_view(config: dict[str, Any], gpus: list[dict[str, Any]]) -> str:
    """The default nvidia-smi screen (91 columns, as drivers 535+ print it)."""
    width = 91
    border = "+" + "-" * (width - 2) + "+"
    split = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    driver, cuda = config["driver_version"], config["cuda_version"]
    title = f" NVIDIA-SMI {driver}".ljust(35) + f"Driver Version: {driver}".ljust(31) + f"CUDA Version: {cuda}"
    out = [
        time.strftime("%a %b %d %H:%M:%S %Y"), border, "|" + title.ljust(width - 2) + "|", split,
        row(" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ", " Volatile Uncorr. ECC "),
        row(" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ", " GPU-Util  Compute M. "),
        row("", "", "               MIG M. "),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for gpu in gpus:
        persistence = "On" if gpu.get("persistence_mode", "Enabled") == "Enabled" else "Off"
        used = memory_used(config, gpu)
        out.append(row(f" {gpu['index']:>3}  {short_name(gpu['name']):<26}{persistence:>7}  ",
                       f"{gpu['pci_bus_id']} Off ", "Off "))
        temp = gpu.get("temperature_gpu", 34)
        out.append(row(f" 30%   {temp}C    P8             15W /  600W ", f"{used}MiB /  {gpu['memory_total_mib']}MiB ",
                       f"     {gpu.get('utilization_gpu', 0)}%      Default "))
        out.append(row("", "", "N/A "))
        out.append(split)
    out += ["", border, "| Processes:".ljust(width - 1) + "|",
            "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|" + "=" * (width - 2) + "|"]
    by_uuid = {g["uuid"]: g for g in gpus}
    apps = [a for a in config["compute_apps"] if a.get("gpu_uuid") in by_uuid]
    if not apps:
        out.append("|  No running processes found".ljust(width - 1) + "|")
    for app in apps:
        index = by_uuid[app["gpu_uuid"]]["index"]
        name = str(app.get("process_name", ""))[:34]
        used = f"{app.get('used_memory_mib', 0)}MiB"
        out.append(f"|  {index:>3}   N/A  N/A  {app.get('pid', 0):>15}    C   {name:<34} {used:>10} |")
    out.append(border)
    return "\n".join(out) + "\n"


P2P_LEGEND = """
Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  U    = Unknown
"""


def topo_p2p(config: dict[str, Any], argv: list[str]) -> str:
    """`topo -p2p r|w|n|a|p`: the matrix (tab separated, as the real tool prints it), statuses from
    the config's "p2p" {"0-4": "CNS"} (a pair not listed is OK), then the legend."""
    if len(argv) != 3 or argv[1] != "-p2p" or argv[2] not in ("r", "w", "n", "a", "p"):
        raise UsageError(INVALID)
    statuses = config.get("p2p") or {}
    count = len(config["gpus"])
    lines = ["\t" + "\t".join(f"GPU{i}" for i in range(count))]
    for i in range(count):
        cells = ["X" if i == j else statuses.get(f"{i}-{j}", statuses.get(f"{j}-{i}", "OK")) for j in range(count)]
        lines.append(f" GPU{i}\t" + "\t".join(cells))
    return "\n".join(lines) + "\n" + P2P_LEGEND


def parse_args(argv: list[str]) -> dict[str, str | None]:
    options: dict[str, str | None] = {}
    flags_with_value = {"-i": "id", "--id": "id", "--query-gpu": "query_gpu",
                        "--query-compute-apps": "query_apps", "--format": "format"}
    index = 0
    while index < len(argv):
        arg = argv[index]
        name, eq, value = arg.partition("=")
        if name in ("-h", "--help", "-L", "--list-gpus", "--version"):
            options[name.lstrip("-")] = None
        elif name in flags_with_value:
            if not eq:
                index += 1
                if index >= len(argv):
                    raise UsageError(INVALID)
                value = argv[index]
            options[flags_with_value[name]] = value
        else:
            raise UsageError(INVALID)
        index += 1
    return options


def open_control_device() -> str | None:
    """NVML opens /dev/nvidiactl first: a node the cgroup device policy denies makes it fail
    (NVIDIA's container toolkit documents "Failed to initialize NVML: Unknown Error" for that case).
    A missing node is left alone (hosts without the sandbox's nodes); no driver behind it (ENXIO)
    is the sandbox's normal state."""
    try:
        os.close(os.open("/dev/nvidiactl", os.O_RDWR))
    except OSError as error:
        if error.errno in (errno.EPERM, errno.EACCES):
            return "Failed to initialize NVML: Unknown Error\n"
    return None


def run(argv: list[str]) -> tuple[int, str]:
    if argv[:1] == ["topo"]:
        config = load_config()
        if not config["driver_loaded"]:
            return 9, NO_DRIVER
        return 0, topo_p2p(config, argv)
    options = parse_args(argv)
    config = load_config()
    if "h" in options or "help" in options:
        return 0, USAGE.format(driver=config["driver_version"])
    if "version" in options:
        driver = config["driver_version"]
        return 0, (f"NVIDIA-SMI version  : {driver}\nNVML version        : {driver.rsplit('.', 1)[0]}\n"
                   f"DRIVER version      : {driver}\nCUDA Version        : {config['cuda_version']}\n")
    if not config["driver_loaded"]:
        return 9, NO_DRIVER
    denied = open_control_device()
    if denied:
        return 255, denied
    gpus = select_gpus(config, options.get("id"))
    if "L" in options or "list-gpus" in options:
        return 0, "".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n" for g in gpus)
    if "query_gpu" in options:
        header, units = parse_format(options.get("format"))
        fields = query_fields(options["query_gpu"] or "", GPU_FIELDS)
        rows = [[gpu_value(config, g, f, len(gpus)) for f in fields] for g in gpus]
        return 0, "".join(line + "\n" for line in csv_lines(fields, GPU_FIELDS, rows, header, units))
    if "query_apps" in options:
        header, units = parse_format(options.get("format"))
        fields = query_fields(options["query_apps"] or "", APP_FIELDS)
        uuids = {g["uuid"] for g in gpus}
        apps = [a for a in config["compute_apps"] if a.get("gpu_uuid") in uuids]
        rows = [[app_value(config, a, f) for f in fields] for a in apps]
        return 0, "".join(line + "\n" for line in csv_lines(fields, APP_FIELDS, rows, header, units))
    if "format" in options:
        raise UsageError(INVALID)
    return 0, table_view(config, gpus)


def main() -> int:
    try:
        code, text = run(sys.argv[1:])
    except UsageError as error:
        sys.stdout.write(str(error))
        return 2
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.stderr.write(f"nvidia-smi (fake): bad configuration: {error}\n")
        return 1
    sys.stdout.write(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
