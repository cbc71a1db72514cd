# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection: running ``nvidia-smi`` and reading its CSV queries.

``nvidia-smi --query-gpu=a,b --format=csv,noheader,nounits`` prints one CSV row per GPU with the
cells in the order asked, separated by ``", "``. A cell that holds a comma (a GPU name may) is quoted,
so rows are read with :mod:`csv`, never split on commas. ``--query-compute-apps=`` prints one row per
process and nothing at all when there is none. A GPU that fell off the bus can hang NVML, so every
call is bounded by coreutils ``timeout`` when it is installed.
"""

from __future__ import annotations

import csv
import typing as t

if t.TYPE_CHECKING:
    from ansible.module_utils.basic import AnsibleModule

CSV_FORMAT = "--format=csv,noheader,nounits"
TIMEOUT_S = 60


class Answer(t.NamedTuple):
    """What one nvidia-smi call returned: exit status (None when it did not run), standard output, and
    why it failed (or "")."""

    rc: int | None
    out: str
    error: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


def query_args(fields: t.Sequence[str], what: str = "gpu") -> list[str]:
    """Arguments of a CSV query: ``what`` is ``gpu`` or ``compute-apps``."""
    return [f"--query-{what}={','.join(fields)}", CSV_FORMAT]


def parse_csv(text: str, fields: t.Sequence[str], strict: bool = True) -> list[dict[str, str]]:
    """Rows of a ``--format=csv,noheader`` query as {field: cell}, cells stripped. A row with another
    number of cells than fields raises ValueError, or is skipped when not ``strict``."""
    rows = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row:
            continue
        if len(row) != len(fields):
            if strict:
                raise ValueError(f"unexpected nvidia-smi line: {','.join(row)!r}")
            continue
        rows.append(dict(zip(fields, (cell.strip() for cell in row), strict=True)))
    return rows


def mib(cell: str) -> int | None:
    """A memory cell as whole MiB: ``97887`` (nounits), ``97887 MiB``; None for ``[N/A]`` and the like."""
    try:
        return int(float(cell.split(maxsplit=1)[0]))
    except (IndexError, ValueError):
        return None


def run(module: AnsibleModule, command: str, args: t.Sequence[str]) -> Answer:
    """Run ``command args`` (a name on PATH or a path) through the module, bounded by TIMEOUT_S."""
    path = module.get_bin_path(command)
    if not path:
        return Answer(None, "", f"{command} is not installed")
    bound = module.get_bin_path("timeout")
    argv = ([bound, "--kill-after=5", str(TIMEOUT_S)] if bound else []) + [path, *args]
    try:
        rc, out, err = module.run_command(argv, handle_exceptions=False, errors="surrogate_or_replace")
    except OSError as exc:
        return Answer(None, "", f"{command}: {exc}")
    if rc == 124 and bound:
        return Answer(rc, out, f"{command} did not answer within {TIMEOUT_S} s")
    return Answer(rc, out, "" if rc == 0 else ((out + err).strip() or f"exit status {rc}"))


def query(module: AnsibleModule, command: str, fields: t.Sequence[str], what: str = "gpu", strict: bool = True,
          ask: t.Callable[[list[str]], Answer] | None = None) -> tuple[Answer, list[dict[str, str]]]:
    """Run a CSV query and read its rows (none when it failed); ValueError from :func:`parse_csv`. ``ask``
    answers the query's arguments instead of :func:`run` (a caller that keeps the answers of its calls)."""
    args = query_args(fields, what)
    answer = ask(args) if ask else run(module, command, args)
    return answer, parse_csv(answer.out, fields, strict) if answer.ok else []
