# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of the pre-restart probe's report: one line per check. Documented in its sidecar file, probe_line.yml."""

from __future__ import annotations

from typing import Any


def probe_line(check: Any) -> str:
    """One line of the probe report: `  ok   cuda: ...` / `  FAIL toolchain: ...`."""
    item = dict(check or {})
    return f"  {'ok  ' if item.get('ok') else 'FAIL'} {item.get('check')}: {item.get('detail')}"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"probe_line": probe_line}
