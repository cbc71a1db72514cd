"""Generate the SGLang flag catalog (``roles/sglang_config/files/catalogs/sglang-<version>.json``) from the real wheel.

Usage::

    python3 tools/sglang_catalog.py 0.5.23 [--out roles/sglang_config/files/catalogs/] [--wheel-dir .cache/wheels]

Steps:

1. ``pip download --no-deps sglang==<version>`` into the wheel cache (reused when present), pinned
   to one wheel tag (CPython 3.11, manylinux x86_64) so every machine reads the same file.
   ``msgspec`` (the only compiled library SGLang's argument machinery really needs, pinned) is
   cached the same way.
2. Both wheels are unpacked into a temporary directory.
3. A child CPython 3.11 (some help texts depend on the Python version; the tool itself runs on
   any 3.10+ and finds ``python3.11``), started as ``python -I -S`` (no site-packages, no user
   site, no ``PYTHON*`` variables) in a fixed environment, imports ``sglang.srt.server_args``
   with every module that is neither the standard library, ``sglang`` nor ``msgspec`` replaced
   by a permissive stub (torch, triton, transformers, flashinfer, sgl_kernel, numpy, psutil,
   ...), builds the parser exactly as
   ``prepare_server_args`` does (``argparse.ArgumentParser`` + ``ServerArgs.add_cli_args``) and
   dumps every action in parser order.
4. The child runs twice, under different HOME/TMPDIR/USER/hostname/CPU count/hash seed/random
   seed (and whatever the OS hands out, such as free ports). Any option whose record differs
   between the two runs embeds a machine- or run-specific value: the varying fields are replaced
   by ``"<machine-specific>"`` and listed under ``"normalized"``. Object addresses and the temp
   dir are scrubbed from reprs, and choices given as a set are sorted; both are listed too.
   The stubbed platform is a CUDA host (``torch.version.cuda`` set, ROCm/NPU/XPU/MPS absent), so
   platform-dependent defaults read as on the NVIDIA machines we deploy to.
5. The catalog is written with sorted keys, ``indent=1`` and a trailing newline: byte-for-byte
   reproducible.

The format is documented in ``plugins/module_utils/sglang_catalog.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "roles" / "sglang_config" / "files" / "catalogs"
DEFAULT_WHEEL_DIR = REPO_ROOT / ".cache" / "wheels"
FORMAT = 1
PACKAGE = "sglang"

# The sglang wheel is read for one fixed tag, whatever the host runs, so the recorded wheel name
# and hash do not depend on the machine. Pure-Python releases match any tag.
WHEEL_PYTHON = "3.11"
CHILD_VERSION = (3, 11)
WHEEL_ABI = "cp311"
WHEEL_PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64")

# Real (not stubbed) libraries the argument machinery needs; pinned for reproducibility.
REAL_DEPS: tuple[tuple[str, str], ...] = (("msgspec", "0.22.0"),)

# The stubbed world looks like a CUDA host (no GPU needed): platform probes answer "CUDA", the
# other accelerator stacks are absent, and the optional platform packages cannot be imported.
_ABSENT = "<absent>"
_STUB_ATTRS: dict[str, Any] = {
    "torch.version.hip": None,
    "torch.version.cuda": "13.0",
    "torch.version.musa": _ABSENT,
    "torch.npu": _ABSENT,
    "torch.hpu": _ABSENT,
    "torch.xpu": _ABSENT,
    "torch.mps": _ABSENT,
    "torch.musa": _ABSENT,
    "torch.cuda.is_available": True,
    "triton.runtime.driver.active.get_current_target().backend": "cuda",
}
_NOT_INSTALLED = (
    "torch_npu", "torchada", "torch_musa", "habana_frameworks", "intel_extension_for_pytorch",
    "mlx", "mlx_lm", "vllm",
)
# Third-party modules served by a standard-library twin (same API for what SGLang calls at import).
_ALIASES = {"dill": "pickle"}

SUPPRESS = "==SUPPRESS=="
MACHINE_SPECIFIC = "<machine-specific>"
_SET_CHOICES = "_choices_were_a_set"
CHILD_FLAG = "--_child"

# Environment of the two child runs: a clean, fixed environment, with the machine-ish values
# varied between the runs so that defaults depending on them show up as differences.
_RUN_VARIANTS: tuple[dict[str, str], ...] = (
    {"HOME": "/nonexistent/home-a", "HOSTNAME": "catalog-host-a", "CPUS": "7",
     "PYTHONHASHSEED": "0", "SEED": "1", "USER": "catalog-a"},
    {"HOME": "/nonexistent/home-b", "HOSTNAME": "catalog-host-b", "CPUS": "13",
     "PYTHONHASHSEED": "1", "SEED": "2", "USER": "catalog-b"},
)

_ACTION_NAMES = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_AppendConstAction": "append_const",
    "_CountAction": "count",
    "_ExtendAction": "extend",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "BooleanOptionalAction": "boolean_optional",
}
_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+")


# --------------------------------------------------------------------------- parent side


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def wheel_is_wanted(name: str, package: str, version: str) -> bool:
    """A cached wheel of ``package==version`` with the tag we read (pure or cp311 x86_64)."""
    prefix = f"{package}-{version}-"
    if not (name.startswith(prefix) and name.endswith(".whl")):
        return False
    tags = name[len(prefix):-len(".whl")]
    if tags.endswith("-none-any"):
        return True
    return tags.startswith(f"{WHEEL_ABI}-{WHEEL_ABI}-") and tags.endswith("x86_64") and "linux" in tags


def find_cached_wheel(wheel_dir: Path, package: str, version: str) -> Path | None:
    found = sorted(p for p in wheel_dir.glob("*.whl") if wheel_is_wanted(p.name, package, version))
    return found[0] if found else None


def pip_download(requirement: str, dest: Path) -> None:
    """``pip download --no-deps`` of one wheel for the pinned tag (CPython 3.11, x86_64 Linux)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--quiet", "--dest", str(dest), "--only-binary=:all:", "--python-version", WHEEL_PYTHON,
           "--implementation", "cp", "--abi", WHEEL_ABI, "--abi", "none", requirement]
    for platform in WHEEL_PLATFORMS:
        cmd += ["--platform", platform]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"pip download {requirement} failed:\n{result.stdout}{result.stderr}")


def fetch_wheel(package: str, version: str, wheel_dir: Path) -> Path:
    """The cached wheel of ``package==version`` for the pinned tag, downloaded first if absent."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cached = find_cached_wheel(wheel_dir, package, version)
    if cached is None:
        log(f"downloading {package}=={version} into {wheel_dir}")
        pip_download(f"{package}=={version}", wheel_dir)
        cached = find_cached_wheel(wheel_dir, package, version)
    if cached is None:
        raise SystemExit(f"pip download left no usable {package}-{version} wheel in {wheel_dir}")
    return cached


def child_python(requested: str | None = None) -> str:
    """A CPython 3.11 to load SGLang's parser in.

    The catalog text depends on the interpreter (argparse adds "(default: ...)" to
    BooleanOptionalAction help on 3.10, 3.13 strips docstring indentation that SGLang puts in
    help), so the child always runs the version the wheels are tagged for.
    """
    if requested:
        return requested
    if sys.implementation.name == "cpython" and sys.version_info[:2] == CHILD_VERSION:
        return sys.executable
    name = "python{}.{}".format(*CHILD_VERSION)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"tools/sglang_catalog.py needs CPython 3.11: run it with {name} or pass --python PATH")
    return found


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract_wheel(wheel: Path, dest: Path) -> None:
    """Unpack a wheel (all of it: the child imports only what server_args needs)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(dest)


def child_env(variant: dict[str, str], tmpdir: Path) -> dict[str, str]:
    """A fixed environment: nothing from the caller's environment leaks into the defaults."""
    tmp = tmpdir / ("tmpdir-" + variant["SEED"])
    tmp.mkdir(exist_ok=True)
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": variant["HOME"],
        "USER": variant["USER"],
        "TMPDIR": str(tmp),
        "PYTHONHASHSEED": variant["PYTHONHASHSEED"],
        "CATALOG_HOSTNAME": variant["HOSTNAME"],
        "CATALOG_CPUS": variant["CPUS"],
        "CATALOG_SEED": variant["SEED"],
    }


def run_child(python: str, roots: Sequence[Path], variant: dict[str, str], tmpdir: Path) -> dict[str, Any]:
    out = tmpdir / f"dump-{variant['SEED']}.json"
    cmd = [python, "-I", "-S", str(Path(__file__).resolve()), CHILD_FLAG, str(out)]
    cmd += [str(root) for root in roots]
    result = subprocess.run(cmd, capture_output=True, text=True, env=child_env(variant, tmpdir),
                            cwd=str(tmpdir), check=False)
    if result.returncode != 0 or not out.exists():
        raise SystemExit(f"loading the SGLang parser failed (exit {result.returncode}):\n"
                         f"{result.stdout[-4000:]}{result.stderr[-8000:]}")
    with out.open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def scrub(value: Any, tmpdir: Path) -> Any:
    """Drop object addresses and our temp dir from reprs (values that can never be stable)."""
    if isinstance(value, str):
        return _ADDRESS_RE.sub("", value).replace(str(tmpdir), "<tmp>")
    if isinstance(value, list):
        return [scrub(item, tmpdir) for item in value]
    if isinstance(value, dict):
        return {key: scrub(item, tmpdir) for key, item in value.items()}
    return value


def _note(normalized: dict[str, str], dest: str, reason: str) -> None:
    if reason not in normalized.get(dest, "").split("; "):
        normalized[dest] = "; ".join(filter(None, [normalized.get(dest), reason]))


def scrub_options(options: list[dict[str, Any]], tmpdir: Path, normalized: dict[str, str]) -> list[dict[str, Any]]:
    """Options with unstable reprs cleaned; each change is recorded in ``normalized``."""
    cleaned = []
    for option in options:
        if option.pop(_SET_CHOICES, False):
            _note(normalized, option["dest"], "choices: a set in SGLang (unordered), sorted")
        clean = {}
        for field, value in option.items():
            clean[field] = scrub(value, tmpdir)
            if clean[field] != value:
                _note(normalized, option["dest"], f"{field}: object address / temp path removed from repr")
        cleaned.append(clean)
    return cleaned


def _hint(values: Sequence[Any]) -> str:
    """Which varied machine fact a differing value contains."""
    joined = " ".join(json.dumps(v) for v in values)
    hints = []
    for key, label in (("home-", "HOME"), ("catalog-host-", "hostname"), ("catalog-a", "user"),
                       ("tmpdir-", "TMPDIR")):
        if key in joined:
            hints.append(label)
    if re.search(r"\b(7|13)\b", joined):
        hints.append("CPU count")
    return "/".join(hints) if hints else "random state, free port or hash order"


def _same_items(first: Any, second: Any) -> bool:
    if not (isinstance(first, list) and isinstance(second, list)):
        return False
    return sorted(first, key=repr) == sorted(second, key=repr)


def merge_runs(first: list[dict[str, Any]], second: list[dict[str, Any]],
               normalized: dict[str, str]) -> list[dict[str, Any]]:
    """Options of run 1; fields that differ in run 2 are replaced by a placeholder and recorded."""
    if [o["flags"] for o in first] != [o["flags"] for o in second]:
        raise SystemExit("the two parser dumps list different options: the parser is not deterministic")
    merged = []
    for one, two in zip(first, second, strict=True):
        option = dict(one)
        for field in sorted(one):
            if one[field] == two.get(field):
                continue
            if field == "choices" and _same_items(one[field], two[field]):
                option[field] = sorted(one[field], key=repr)
                _note(normalized, one["dest"], "choices: order varies between runs, sorted")
            else:
                option[field] = MACHINE_SPECIFIC
                hint = _hint([one[field], two[field]])
                _note(normalized, one["dest"], f"{field}: varies with {hint}, replaced by {MACHINE_SPECIFIC}")
        merged.append(option)
    return merged


def generate(version: str, out_dir: Path, wheel_dir: Path, keep_help: bool = True,
             python: str | None = None) -> Path:
    interpreter = child_python(python)
    wheel = fetch_wheel(PACKAGE, version, wheel_dir)
    helpers = [fetch_wheel(name, pin, wheel_dir) for name, pin in REAL_DEPS]
    with tempfile.TemporaryDirectory(prefix="sglang-catalog-") as raw_tmp:
        tmpdir = Path(raw_tmp)
        roots = []
        for index, whl in enumerate([wheel, *helpers]):
            root = tmpdir / f"src{index}"
            extract_wheel(whl, root)
            roots.append(root)
        dumps = [run_child(interpreter, roots, variant, tmpdir) for variant in _RUN_VARIANTS]
        normalized: dict[str, str] = {}
        first, second = (scrub_options(dump["options"], tmpdir, normalized) for dump in dumps)
    options = merge_runs(first, second, normalized)
    if not keep_help:
        for option in options:
            option["help"] = None
    catalog = {
        "format": FORMAT,
        "package": PACKAGE,
        "version": version,
        "wheel": wheel.name,
        "wheel_sha256": sha256_of(wheel),
        "normalized": normalized,
        "options": options,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"sglang-{version}.json"
    path.write_text(json.dumps(catalog, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return path


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("version", help="sglang version on PyPI, e.g. 0.5.23")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="catalog directory (default: roles/sglang_config/files/catalogs/)")
    parser.add_argument("--wheel-dir", type=Path, default=DEFAULT_WHEEL_DIR,
                        help="wheel cache (default: .cache/wheels under the repo)")
    parser.add_argument("--no-help", action="store_true", help="drop help texts (smaller files)")
    parser.add_argument("--python", help="CPython 3.11 that loads the parser (default: this one or python3.11)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    path = generate(args.version, args.out, args.wheel_dir, keep_help=not args.no_help, python=args.python)
    with path.open(encoding="utf-8") as handle:
        count = len(json.load(handle)["options"])
    log(f"wrote {path} ({count} options) in {time.monotonic() - started:.1f} s")
    return 0


# --------------------------------------------------------------------------- child side
# Runs under ``python -I -S``: standard library only, plus the unpacked wheels on sys.path.


def child_main(out: str, roots: Sequence[str]) -> int:
    _pin_machine_values()
    sys.path[:0] = list(roots)
    _install_stubs()
    _install_bare_package(PACKAGE, roots)
    parser = _sglang_parser()
    options = [_describe_action(action) for action in parser._actions]
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"options": options}, handle)
    return 0


def _pin_machine_values() -> None:
    """Make machine facts come from the environment the parent chose (varied between runs)."""
    import multiprocessing
    import random
    import socket

    cpus = int(os.environ["CATALOG_CPUS"])
    hostname = os.environ["CATALOG_HOSTNAME"]
    random.seed(int(os.environ["CATALOG_SEED"]))
    os.cpu_count = lambda: cpus
    multiprocessing.cpu_count = lambda: cpus
    os.sched_getaffinity = lambda pid: set(range(cpus))
    socket.gethostname = lambda: hostname
    socket.getfqdn = lambda name="": hostname


def _install_bare_package(name: str, roots: Sequence[str]) -> None:
    """Register ``sglang`` without running its ``__init__`` (which imports the whole runtime)."""
    import types

    for root in roots:
        path = os.path.join(root, name)
        if os.path.isdir(path):
            module = types.ModuleType(name)
            module.__path__ = [path]
            module.__file__ = os.path.join(path, "__init__.py")
            sys.modules[name] = module
            return
    raise SystemExit(f"{name} not found in the wheel")


def _sglang_parser() -> argparse.ArgumentParser:
    import importlib
    import logging

    logging.disable(logging.CRITICAL)
    module = importlib.import_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser(prog="sglang serve")
    module.ServerArgs.add_cli_args(parser)
    return parser


def _json_value(value: Any) -> Any:
    """A JSON value for a default/const/choice; anything else becomes its repr."""
    exact = type(value)  # subclasses (IntEnum, str-based Enum, OrderedDict, ...) become their repr
    if value is None or exact in (bool, int, str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if exact in (list, tuple):
        return [_json_value(item) for item in value]
    if exact is dict and all(isinstance(k, str) for k in value):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_json_value(item) for item in value), key=repr)
    return repr(value)


def _type_name(kind: Any) -> str | None:
    if kind is None:
        return None
    name = getattr(kind, "__name__", None)
    if name is None and hasattr(kind, "func"):  # functools.partial
        name = getattr(kind.func, "__name__", None)
    return str(name) if name else type(kind).__name__


def _choices(choices: Any) -> list[Any] | None:
    if choices is None:
        return None
    values = list(choices)
    if isinstance(choices, (set, frozenset)):
        values = sorted(values, key=repr)
    return [_json_value(value) for value in values]


_BASE_ATTRS = frozenset(vars(argparse.Action(["--x"], "x")))


def _extra(action: argparse.Action) -> dict[str, Any]:
    """Attributes a custom action adds (``new_flag``, ``const_value``, ``error_message``, ...)."""
    return {key: _json_value(value) for key, value in sorted(vars(action).items())
            if key not in _BASE_ATTRS and key != "container" and not key.startswith("_")}


def _describe_action(action: argparse.Action) -> dict[str, Any]:
    kind = type(action).__name__
    nargs = action.nargs
    custom = type(action).__module__ != "argparse"
    described = {
        "dest": action.dest,
        "flags": list(action.option_strings),
        "action": kind if custom else _ACTION_NAMES.get(kind, kind),
        "type": _type_name(action.type),
        "nargs": nargs if nargs is None or isinstance(nargs, (int, str)) else repr(nargs),
        "choices": _choices(action.choices),
        "default": _json_value(action.default),
        "const": _json_value(action.const),
        "required": bool(action.required),
        "help": action.help if action.help is None else str(action.help),
    }
    if custom:
        described["extra"] = _extra(action)
    if isinstance(action.choices, (set, frozenset)):
        described[_SET_CHOICES] = True
    return described


# ---- stubs for the heavy third-party modules -------------------------------------------


def _install_stubs() -> None:
    """Append a finder that turns every otherwise unimportable module into a permissive stub."""
    import abc
    import importlib
    import importlib.abc
    import importlib.machinery
    import inspect
    import types

    real = {"sglang"} | {name for name, _pin in REAL_DEPS}

    def attribute(qualname: str) -> Any:
        """The value of a stub attribute: a fixed fact from _STUB_ATTRS, or a new stub."""
        if qualname in _STUB_ATTRS:
            fact = _STUB_ATTRS[qualname]
            if fact == _ABSENT:
                raise AttributeError(qualname)
            if isinstance(fact, bool):
                return lambda *args, **kwargs: fact
            return fact
        return make_stub(qualname)

    class StubMeta(abc.ABCMeta):
        """Metaclass of the stub classes: any attribute, call, index or operator works."""

        def __getattr__(cls, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            child = attribute(f"{cls.__qualname__}.{name}")
            type.__setattr__(cls, name, child)
            return child

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            if "__stub__" not in cls.__dict__:
                return type.__call__(cls, *args, **kwargs)  # a real class deriving from a stub
            if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or inspect.isclass(args[0])):
                return args[0]  # used as a decorator
            return make_stub(f"{cls.__qualname__}()")

        def __getitem__(cls, item: Any) -> Any:
            return make_stub(f"{cls.__qualname__}[]")

        def __setitem__(cls, item: Any, value: Any) -> None:
            return None

        def __delitem__(cls, item: Any) -> None:
            return None

        def register(cls, *args: Any, **kwargs: Any) -> Any:
            """Shadows ABCMeta.register: ``AutoConfig.register(name, cls)`` and friends."""
            return args[-1] if args else None

        def __iter__(cls) -> Any:
            return iter(())

        def __len__(cls) -> int:
            return 0

        def __bool__(cls) -> bool:
            return False

        def __contains__(cls, item: Any) -> bool:
            return False

        def __int__(cls) -> int:
            return 0

        def __index__(cls) -> int:
            return 0

        def __float__(cls) -> float:
            return 0.0

        def __enter__(cls) -> Any:
            return cls

        def __exit__(cls, *exc: Any) -> bool:
            return False

        def __lt__(cls, other: Any) -> bool:
            return False

        __le__ = __gt__ = __ge__ = __lt__

        def __repr__(cls) -> str:
            return f"<stub {cls.__qualname__}>"

        def __hash__(cls) -> int:
            return hash(cls.__qualname__)

        def __eq__(cls, other: Any) -> bool:
            return cls is other

        def _operator(cls, *other: Any) -> Any:
            return make_stub(f"{cls.__qualname__}(op)")

        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _operator
        __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = _operator
        __pow__ = __rpow__ = __neg__ = __pos__ = __matmul__ = __and__ = __rand__ = _operator

    class StubBase(metaclass=StubMeta):
        __stub__ = True

        def __init_subclass__(cls, **kwargs: Any) -> None:
            pass

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return make_stub(f"{type(self).__qualname__}.{name}")

    def make_stub(qualname: str) -> Any:
        cls = StubMeta(qualname.rsplit(".", 1)[-1], (StubBase,), {"__stub__": True, "__qualname__": qualname})
        return cls

    class StubModule(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            child = attribute(f"{self.__name__}.{name}")
            setattr(self, name, child)
            return child

    class StubLoader(importlib.abc.Loader):
        def create_module(self, spec: Any) -> Any:
            module = StubModule(spec.name)
            module.__path__ = []
            module.__version__ = "0.0.0"
            return module

        def exec_module(self, module: Any) -> None:
            return None

    class StubFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            top = fullname.split(".", 1)[0]
            if top in real or top in _NOT_INSTALLED or fullname in _STUB_ATTRS:
                return None
            return importlib.machinery.ModuleSpec(fullname, StubLoader(), is_package=True)

    sys.meta_path.append(StubFinder())
    for alias, module in _ALIASES.items():
        sys.modules[alias] = importlib.import_module(module)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == CHILD_FLAG:
        sys.exit(child_main(sys.argv[2], sys.argv[3:]))
    sys.exit(main())
