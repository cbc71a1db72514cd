# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang flag catalog: every command-line option one SGLang version accepts.

A catalog is JSON written by ``tools/sglang_catalog.py`` from the real ``sglang`` wheel
(``roles/sglang_config/files/catalogs/sglang-<version>.json``). The same catalog is read by the
controller-side validation (render, plan, deploy) and by the SGLang simulator, which builds its
argument parser from it (``molecule/resources/simulator/src/sglang/_sim/argparser.py``, a test double that
does not ship with the collection), so a flag that validation refuses is also refused by the server double.

Format (``"format": 1``)::

    {"format": 1, "package": "sglang", "version": "0.5.23",
     "wheel": "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "wheel_sha256": "...",
     "normalized": {},
     "options": [
       {"dest": "model_path", "flags": ["--model-path", "--model"], "action": "store",
        "type": "str", "nargs": null, "choices": null, "default": null, "const": null,
        "required": false, "help": "..."}, ...]}

``action`` is one of store, store_true, store_false, store_const, append, append_const, count,
extend, help, version, boolean_optional, or the class name of a custom argparse action.
``type`` is str, int, float, or the name of the callable SGLang passes (validated as a string);
null when argparse has none. ``choices`` are typed JSON values (a set in SGLang is sorted);
``default``/``const`` are JSON values, or the ``repr`` of values JSON cannot hold;
``argparse.SUPPRESS`` is ``"==SUPPRESS=="``. ``help`` is the raw text (``%(default)s`` kept) or null.
Options are in parser order; flags are unique but a dest may repeat (a deprecated spelling shares
the dest of its replacement, e.g. ``--cuda-graph-max-bs`` -> ``cuda_graph_max_bs_decode``).

Custom actions carry ``"extra"``: the attributes the action adds, e.g. ``new_flag`` (the
replacement a deprecation warning names), ``const_value`` (what a DeprecatedStoreConstAction
stores) or ``error_message`` (a retired flag that makes SGLang exit with that message).

Top level, ``"normalized"`` maps a dest to why a field of it was rewritten by the generator
(a machine- or run-specific default, an unordered set of choices); ``{}`` when nothing was.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from typing import Any

FORMAT = 1
# The catalogs live with the role that resolves the configuration (roles/sglang_config/files/catalogs), which
# passes their directory; a caller without one may name it in SGLANG_CATALOG_DIR.
CATALOG_DIR_ENV = "SGLANG_CATALOG_DIR"
_VERSION_RE = re.compile(r"^sglang-(?P<version>[0-9][0-9A-Za-z.+-]*)\.json$")

Catalog = dict[str, Any]


class CatalogError(Exception):
    """A catalog is missing or malformed."""


def catalog_dir(directory: str | None = None) -> str:
    found = directory or os.environ.get(CATALOG_DIR_ENV)
    if not found:
        raise CatalogError(f"no catalog directory given (roles/sglang_config/files/catalogs, or {CATALOG_DIR_ENV})")
    return os.path.normpath(found)


def available_versions(directory: str | None = None) -> list[str]:
    """Versions with a committed catalog, oldest first."""
    try:
        names = os.listdir(catalog_dir(directory))
    except (OSError, CatalogError):
        return []
    found = [m.group("version") for m in map(_VERSION_RE.match, names) if m]
    return sorted(found, key=version_key)


def version_key(version: str) -> tuple:
    """Sort key for versions like 0.5.23, 0.5.10.post1, 0.5.23+sim (local part ignored)."""
    base = str(version).split("+", 1)[0]
    parts: list[Any] = []
    for piece in re.split(r"[.]", base):
        match = re.match(r"^(\d+)(.*)$", piece)
        if match:
            parts.append((int(match.group(1)), match.group(2)))
        else:
            parts.append((-1, piece))
    return tuple(parts)


def load_catalog(version: str, directory: str | None = None) -> Catalog:
    """Load the catalog of one SGLang version; raise CatalogError naming the known versions."""
    base = str(version).split("+", 1)[0]
    path = os.path.join(catalog_dir(directory), f"sglang-{base}.json")
    if not os.path.exists(path):
        known = ", ".join(available_versions(directory)) or "none"
        raise CatalogError(
            f"no flag catalog for sglang {base}; allowed: a version with a catalog ({known}), or generate one "
            f"with tools/sglang_catalog.py {base}"
        )
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if data.get("format") != FORMAT or not isinstance(data.get("options"), list):
        raise CatalogError(f"{path} is not a format-{FORMAT} flag catalog")
    return data


def flag_index(catalog: Catalog) -> dict[str, dict[str, Any]]:
    """Map every flag spelling (``--model-path``, ``--model``) to its option."""
    return {flag: option for option in catalog["options"] for flag in option["flags"]}


def find_option(catalog: Catalog, flag: str) -> dict[str, Any] | None:
    """The option for an exact flag spelling, or None (no abbreviations: we always emit full names)."""
    return flag_index(catalog).get(flag)


def suggest(catalog: Catalog, flag: str, limit: int = 3) -> list[str]:
    """Close spellings of an unknown flag, for a "did you mean" hint."""
    return difflib.get_close_matches(flag, list(flag_index(catalog)), n=limit, cutoff=0.6)
