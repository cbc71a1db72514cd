# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: a systemd unit's properties, read with ``systemctl show``.

``systemctl show -p A,B unit`` prints one ``KEY=VALUE`` line per property. A value may itself hold
``=`` (``Environment=A=1 B=2``), so a line splits at its first ``=`` only. A unit that does not exist
is no error for systemctl: it answers ``LoadState=not-found``.
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from ansible.module_utils.basic import AnsibleModule


class SystemctlError(Exception):
    """systemctl is missing, could not run, or failed."""


def parse_show(text: str) -> dict[str, str]:
    """``systemctl show`` output -> {property: value}; lines without ``=`` are skipped."""
    properties: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            properties[key] = value
    return properties


def show_argv(systemctl: str, unit: str, properties: t.Sequence[str]) -> list[str]:
    """The ``systemctl show`` command line for these properties of the unit."""
    return [systemctl, "show", "-p", ",".join(properties), "--", unit]


def show(module: AnsibleModule, unit: str, properties: t.Sequence[str]) -> dict[str, str]:
    """The unit's properties, read through the module's run_command; SystemctlError when that fails."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        raise SystemctlError("systemctl is not installed")
    argv = show_argv(systemctl, unit, properties)
    try:
        rc, out, err = module.run_command(argv, handle_exceptions=False)
    except OSError as exc:
        raise SystemctlError(f"{' '.join(argv)}: {exc}") from exc
    if rc != 0:
        raise SystemctlError(f"{' '.join(argv)} failed ({rc}): {err.strip()}")
    return parse_show(out)
