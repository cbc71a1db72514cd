"""Build the SGLang simulator wheel ``sglang-<version>+sim-py3-none-any.whl``.

    python3 molecule/resources/simulator/build_wheel.py --version 0.5.23 --out DIR [--catalog PATH]

The wheel holds ``sglang/`` (``__init__``, ``version``, ``launch_server`` and the simulator in
``sglang/_sim``) plus copies of ``plugins/module_utils/sglang_catalog.py``, of
``plugins/module_utils/sglang_capacity.py`` and ``sglang_types.py`` (the capacity formulas ``hostmem``
uses) and of the version's flag catalog (default
``<repo>/roles/sglang_config/files/catalogs/sglang-<version>.json``), so the installed simulator reads
nothing from the repository. With ``--companion NAME==VERSION`` it also builds stand-in wheels of
pinned companions (FlashInfer's prebuilt kernels, which the stack role installs with SGLang). The
bytes are deterministic: sorted entries, fixed timestamps and
modes. ``pip install --no-index --find-links DIR 'sglang==<version>'`` selects it, since a local
version label (``+sim``) matches a specifier without one (PEP 440).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import sys
import zipfile
from collections.abc import Sequence

HERE = os.path.dirname(os.path.realpath(__file__))  # real: reached through the molecule symlink or not
SOURCE = os.path.join(HERE, "src", "sglang")
REPO = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))  # extensions/molecule/resources/simulator
CATALOG_MODULE = os.path.join(REPO, "plugins", "module_utils", "sglang_catalog.py")
CAPACITY_MODULE = os.path.join(REPO, "plugins", "module_utils", "sglang_capacity.py")
TYPES_MODULE = os.path.join(REPO, "plugins", "module_utils", "sglang_types.py")
LOCAL_LABEL = "sim"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
PUBLIC_VERSION = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")

INIT = '''"""sglang: simulator build, a test double of the SGLang server (see sglang._sim)."""

from sglang.version import __version__

__all__ = ["__version__"]
'''
VERSION = '__version__ = "{version}"\n'
METADATA = """Metadata-Version: 2.1
Name: sglang
Version: {version}
Summary: SGLang server simulator for deployment tests (no GPU; standard library only)
License: GPL-3.0-or-later
Requires-Python: >=3.10
{requires}
Drop-in test double of `python -m sglang.launch_server`: flag catalog of sglang {public},
simulated load, HTTP API, metrics, drain and fault injection. Not an inference engine.
"""
# The probe (roles/sglang_service) asks the CUDA runtime through this entry point when it exists:
# the simulator answers in the sandbox, torch on a real host.
ENTRY_POINTS = """[sglang_deploy.probe]
cuda = sglang._sim.probe:Backend
"""
COMPANION_METADATA = """Metadata-Version: 2.1
Name: {name}
Version: {version}
Summary: sglang-deploy sandbox stand-in for {name} (FlashInfer's prebuilt kernels); holds no kernels

Test double with the real name and version, so the stack role's pins and checks run in the sandbox.
"""
WHEEL = """Wheel-Version: 1.0
Generator: sglang-deploy build_wheel.py
Root-Is-Purelib: true
Tag: py3-none-any
"""


class BuildError(Exception):
    """The wheel cannot be built from these inputs."""


def full_version(version: str) -> str:
    """0.5.23 -> 0.5.23+sim; a version that already has a local label is kept."""
    public, _sep, local = version.partition("+")
    if not PUBLIC_VERSION.match(public):
        raise BuildError(f"not a release version: {version!r}")
    return f"{public}+{local or LOCAL_LABEL}"


def read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def source_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for root, dirs, names in os.walk(SOURCE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, os.path.dirname(SOURCE)).replace(os.sep, "/")
                files[rel] = read(path)
    return files


def catalog_bytes(path: str, public: str) -> bytes:
    try:
        data = read(path)
        catalog = json.loads(data)
    except (OSError, ValueError) as error:
        raise BuildError(f"cannot read catalog {path}: {error}") from None
    if catalog.get("format") != 1 or not isinstance(catalog.get("options"), list):
        raise BuildError(f"{path} is not a format-1 flag catalog")
    if str(catalog.get("version")).split("+", 1)[0] != public:
        raise BuildError(f"{path} is the catalog of sglang {catalog.get('version')}, not {public}")
    return data


def package_files(version: str, catalog_path: str) -> dict[str, bytes]:
    public = version.split("+", 1)[0]
    files = source_files()
    files["sglang/__init__.py"] = INIT.encode()
    files["sglang/version.py"] = VERSION.format(version=version).encode()
    files["sglang/_sim/sglang_catalog.py"] = read(CATALOG_MODULE)
    files["sglang/_sim/sglang_capacity.py"] = read(CAPACITY_MODULE)
    files["sglang/_sim/sglang_types.py"] = read(TYPES_MODULE)
    files[f"sglang/_sim/catalogs/sglang-{public}.json"] = catalog_bytes(catalog_path, public)
    return files


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def with_dist_info(files: dict[str, bytes], version: str, name: str = "sglang",
                   metadata: str | None = None, requires: Sequence[str] = ()) -> dict[str, bytes]:
    dist_info = f"{name}-{version}.dist-info"
    out = dict(files)
    requires_text = "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
    out[dist_info + "/METADATA"] = (metadata or METADATA.format(version=version, public=version.split("+", 1)[0],
                                                                requires=requires_text)).encode()
    out[dist_info + "/WHEEL"] = WHEEL.encode()
    if name == "sglang":
        out[dist_info + "/entry_points.txt"] = ENTRY_POINTS.encode()
    lines = [f"{name},{record_hash(data)},{len(data)}" for name, data in sorted(out.items())]
    lines.append(dist_info + "/RECORD,,")
    out[dist_info + "/RECORD"] = ("\n".join(lines) + "\n").encode()
    return out


def write_wheel(path: str, files: dict[str, bytes]) -> None:
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o100644 << 16
            archive.writestr(info, files[name])
    os.replace(tmp, path)


def build(version: str, out_dir: str, catalog: str | None = None, requires: Sequence[str] = ()) -> str:
    """Build the wheel into out_dir and return its path. requires: Requires-Dist lines of the real
    wheel that the sandbox's probe relies on (ninja, the pinned flashinfer-python)."""
    full = full_version(version)
    public = full.split("+", 1)[0]
    catalog_path = catalog or os.path.join(REPO, "roles", "sglang_config", "files", "catalogs", f"sglang-{public}.json")
    files = with_dist_info(package_files(full, catalog_path), full, requires=requires)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"sglang-{full}-py3-none-any.whl")
    write_wheel(path, files)
    return path


def build_companion(requirement: str, out_dir: str, requires: Sequence[str] = ()) -> str:
    """A stand-in wheel for NAME==VERSION (flashinfer-cubin==0.7.2): a module NAME with __version__, and the
    Requires-Dist lines given (the jit-cache shim's, one per architecture's kernel package)."""
    name, _sep, version = requirement.partition("==")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name) or not version:
        raise BuildError(f"not a NAME==VERSION pin: {requirement!r}")
    module = re.sub(r"[-_.]+", "_", name).lower()
    files = {f"{module}/__init__.py": f'"""Stand-in for {name} (sglang-deploy sandbox)."""\n\n'
                                      f'__version__ = "{version}"\n'.encode()}
    metadata = COMPANION_METADATA.format(name=name, version=version)
    if requires:
        head, _blank, body = metadata.partition("\n\n")
        metadata = head + "\n" + "".join(f"Requires-Dist: {line}\n" for line in requires) + "\n" + body
    files = with_dist_info(files, version, module, metadata)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{module}-{version}-py3-none-any.whl")
    write_wheel(path, files)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--version", required=True, help="SGLang version to simulate, e.g. 0.5.23")
    parser.add_argument("--out", required=True, help="directory to write the wheel into")
    parser.add_argument("--catalog",
                        help="flag catalog (default: <repo>/roles/sglang_config/files/catalogs/sglang-V.json)")
    parser.add_argument("--companion", action="append", default=[], metavar="NAME==VERSION",
                        help="also build a stand-in wheel of this pinned companion (FlashInfer, its kernels)")
    parser.add_argument("--companion-requires", action="append", default=[], metavar="NAME=REQUIREMENT",
                        help="a Requires-Dist line of the companion NAME (the jit-cache shim's kernel packages)")
    parser.add_argument("--requires", action="append", default=[], metavar="REQUIREMENT",
                        help="a Requires-Dist line of the simulator wheel, as the real wheel has it")
    options = parser.parse_args(argv)
    try:
        print(build(options.version, options.out, options.catalog, options.requires))
        for requirement in options.companion:
            name = requirement.partition("==")[0]
            requires = [line.partition("=")[2] for line in options.companion_requires
                        if line.partition("=")[0] == name]
            print(build_companion(requirement, options.out, requires))
    except BuildError as error:
        print(f"build_wheel: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
