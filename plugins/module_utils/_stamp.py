# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: what a role left on a host, observed, recorded and compared.

A role that converged records a stamp: the digest of its inputs (computed on the controller) and a
manifest of what it manages (paths, directory listings, file trees, Debian packages, systemd units,
users, groups, read-only commands), with how each of those looked right then. The next run reads the
stamp and looks again: when the inputs are the same and nothing in the manifest moved, the role has
nothing to do on that host. Standard library only; the host's commands come in through ``run``.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import stat
import typing as t

if t.TYPE_CHECKING:
    from ansible.module_utils.basic import AnsibleModule

Run = t.Callable[[t.Sequence[str]], tuple[int, str]]
DEFAULT_DIR = "/var/lib/sglang-deploy/stamps"


def module_runner(module: AnsibleModule) -> Run:
    """A Run through the module's run_command; a command that is not installed exits 127."""
    def run(argv: t.Sequence[str]) -> tuple[int, str]:
        path = module.get_bin_path(argv[0])
        if not path:
            return 127, ""
        rc, out, _err = module.run_command([path, *argv[1:]], errors="surrogate_or_replace")
        return rc, out
    return run


KINDS = ("paths", "listings", "trees", "packages", "units", "users", "groups", "commands")
VERSION = 1


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _guarded(read: t.Callable[[str], t.Any], path: str) -> tuple[t.Any, str]:
    """(read(path), "") or (None, why not): 'absent' when the path is missing, 'unreadable (...)' otherwise."""
    try:
        return read(path), ""
    except FileNotFoundError:
        return None, "absent"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror})"


def _digest(rows: list[str]) -> str:
    return f"sha256:{hashlib.sha256(chr(10).join(rows).encode()).hexdigest()}"


def path_state(path: str) -> str:
    """Type, mode and owner of a path, and a regular file's content digest; 'absent' when missing."""
    info, failure = _guarded(os.lstat, path)
    if failure:
        return failure
    kind = "dir" if stat.S_ISDIR(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) \
        else "chr" if stat.S_ISCHR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
    state = f"{kind} {stat.S_IMODE(info.st_mode):04o} {info.st_uid}:{info.st_gid}"
    if kind == "file":
        digest, failure = _guarded(sha256_file, path)
        state += f" {failure or 'sha256:' + digest}"
    elif kind == "link":
        state += f" -> {os.readlink(path)}"
    return state


def listing_state(path: str) -> str:
    """The sorted names in a directory (a virtualenv's *.dist-info carry the versions), as a digest."""
    names, failure = _guarded(os.listdir, path)
    return failure or f"{len(names)} entries {_digest(sorted(names))}"


def tree_state(path: str) -> str:
    """Every file under a directory by relative path, size and modification time, as a digest."""
    if not os.path.isdir(path):
        return "absent" if not os.path.lexists(path) else "not a directory"
    rows = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            info, failure = _guarded(os.stat, full)
            size = f"{info.st_size} {info.st_mtime_ns}" if info else failure.split(" ", maxsplit=1)[0]
            rows.append(f"{os.path.relpath(full, path)} {size}")
    return f"{len(rows)} files {_digest(rows)}"


def user_state(name: str) -> str:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return "absent"
    return f"uid {entry.pw_uid} gid {entry.pw_gid} home {entry.pw_dir} shell {entry.pw_shell}"


def group_state(name: str) -> str:
    try:
        return f"gid {grp.getgrnam(name).gr_gid}"
    except KeyError:
        return "absent"


def parse_dpkg(text: str) -> dict[str, str]:
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` -> {name: 'version status'}.
    The status' first letter is the selection: h is a hold (apt-mark hold)."""
    states = {}
    for line in text.splitlines():
        cells = line.split("\t")
        if len(cells) == 3 and cells[0]:
            states[cells[0].split(":")[0]] = f"{cells[1]} {cells[2].strip()}".strip()
    return states


def _states(names: t.Sequence[str], run: Run, argv: list[str], parse: t.Callable[[str], dict[str, str]],
            missing: str) -> dict[str, str]:
    """One command for every name; a name the output leaves out is `missing`."""
    if not names:
        return {}
    _rc, out = run([*argv, *names])
    found = parse(out)
    return {name: found.get(name) or missing for name in names}


def package_states(names: t.Sequence[str], run: Run) -> dict[str, str]:
    # dpkg-query exits 1 when a name is unknown, and still prints the others.
    return _states(names, run, ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"],
                   parse_dpkg, "absent")


def parse_units(text: str) -> dict[str, str]:
    """``systemctl show -p Id,UnitFileState,ActiveState a b`` (blocks separated by blank lines)."""
    states, block = {}, {}
    for line in [*text.splitlines(), ""]:
        key, sep, value = line.partition("=")
        if sep:
            block[key] = value
        elif block:
            states[block.get("Id", "")] = f"{block.get('UnitFileState') or '-'}/{block.get('ActiveState', '-')}"
            block = {}
    return states


def unit_states(names: t.Sequence[str], run: Run) -> dict[str, str]:
    return _states(names, run, ["systemctl", "show", "-p", "Id,UnitFileState,ActiveState", "--"], parse_units,
                   "unknown")


def command_state(argv: t.Sequence[str], run: Run) -> str:
    rc, out = run(argv)
    return f"exit {rc} sha256:{hashlib.sha256(out.encode()).hexdigest()}"


def normalized(manifest: dict[str, t.Any] | None) -> dict[str, list[t.Any]]:
    """The manifest with every kind present, empty entries and duplicates dropped, in a stable order."""
    manifest = manifest or {}
    unknown = sorted(set(manifest) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown manifest kinds {unknown}; allowed: {', '.join(KINDS)}")
    result: dict[str, list[t.Any]] = {}
    for kind in KINDS:
        entries = [entry for entry in manifest.get(kind) or [] if entry]
        if kind == "commands":
            result[kind] = [list(map(str, entry)) for entry in entries]
        else:
            result[kind] = sorted({str(entry) for entry in entries})
    return result


def observe(manifest: dict[str, list[t.Any]], run: Run,
            known: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """How each entry of a normalized manifest looks now: {kind: {entry: state}}. ``known`` holds the states of
    packages and units already asked for (read_many asks once for every stamp's)."""
    known = known or {}
    return {
        "paths": {path: path_state(path) for path in manifest["paths"]},
        "listings": {path: listing_state(path) for path in manifest["listings"]},
        "trees": {path: tree_state(path) for path in manifest["trees"]},
        "packages": _known_or_asked(manifest["packages"], known.get("packages"), package_states, run),
        "units": _known_or_asked(manifest["units"], known.get("units"), unit_states, run),
        "users": {name: user_state(name) for name in manifest["users"]},
        "groups": {name: group_state(name) for name in manifest["groups"]},
        "commands": {" ".join(argv): command_state(argv, run) for argv in manifest["commands"]},
    }


def _known_or_asked(names: t.Sequence[str], known: dict[str, str] | None,
                    ask: t.Callable[[t.Sequence[str], Run], dict[str, str]], run: Run) -> dict[str, str]:
    """The states of names: from ``known`` (which holds every one of them) when given, else asked for."""
    return {name: known[name] for name in names} if known is not None else ask(names, run)


def drift(recorded: dict[str, dict[str, str]], now: dict[str, dict[str, str]]) -> list[str]:
    """What moved since the stamp, one line per entry: 'package nvidia-open: 580.95.05-1 hi -> absent'."""
    lines = []
    for kind in KINDS:
        before, after = recorded.get(kind, {}), now.get(kind, {})
        for entry in sorted(set(before) | set(after)):
            if before.get(entry) != after.get(entry):
                lines.append(f"{kind[:-1]} {entry}: {before.get(entry, 'not recorded')} -> {after.get(entry, 'gone')}")
    return lines


def stamp_path(directory: str, name: str) -> str:
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a stamp name is a plain file name, got {name!r}")
    return os.path.join(directory, f"{name}.json")


def load(path: str) -> tuple[dict[str, t.Any] | None, dict[str, list[t.Any]], str]:
    """A stamp file: (stamp, its normalized manifest, ""), or (None, {}, why it does not count)."""
    try:
        with open(path, encoding="utf-8") as handle:
            stamp = json.load(handle)
        if not isinstance(stamp, dict) or stamp.get("version") != VERSION:
            raise ValueError("another stamp format")
        return stamp, normalized(stamp.get("manifest")), ""
    except FileNotFoundError:
        return None, {}, "no stamp: the role has not converged on this host yet"
    except (OSError, ValueError) as exc:
        return None, {}, f"unreadable stamp {path}: {exc}"


def compared(stamp: dict[str, t.Any] | None, manifest: dict[str, list[t.Any]], why: str, run: Run,
             known: dict[str, dict[str, str]] | None = None) -> dict[str, t.Any]:
    """A loaded stamp as the controller sees it: found, the recorded digest, and the drift since."""
    if stamp is None:
        return {"found": False, "digest": None, "drift": [why]}
    return {"found": True, "digest": stamp.get("digest"), "recorded_at": stamp.get("recorded_at"),
            "drift": drift(stamp.get("observed") or {}, observe(manifest, run, known))}


def read(path: str, run: Run) -> dict[str, t.Any]:
    """A stamp as the controller sees it: found, the recorded digest, and the drift since."""
    return compared(*load(path), run)


def read_many(names: t.Sequence[str], directory: str, run: Run) -> dict[str, dict[str, t.Any]]:
    """read() for each of the roles' stamps in directory, with one dpkg-query for all their packages and one
    systemctl for all their units (each answers per name); ValueError for a name that is not a plain file name."""
    loaded = {name: load(stamp_path(directory, name)) for name in names}
    manifests = [manifest for _found, manifest, _why in loaded.values() if manifest]
    known = {"packages": package_states(sorted({name for m in manifests for name in m["packages"]}), run),
             "units": unit_states(sorted({name for m in manifests for name in m["units"]}), run)}
    return {name: compared(*entry, run, known) for name, entry in loaded.items()}
