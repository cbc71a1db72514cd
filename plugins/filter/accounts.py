# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of the service accounts found on a host: an existing account the deploy did not create is refused
before anything changes, unless the inventory adopts it (issue 49). The rule is
sglang_inputs.existing_account_problems; the filter is documented in its sidecar file, account_refusals.yml."""

from __future__ import annotations

from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.sglang_inputs import existing_account_problems


def _entry(database: Any, key: str) -> list[str] | None:
    """The fields after the name of ``key`` in getent's facts (``{name: [fields]}``, or None when missing)."""
    if not isinstance(database, dict):
        return None
    fields = database.get(key)
    return [str(field) for field in fields] if isinstance(fields, list) else None


def account_refusals(passwd: Any, user: str, group: str, groups: Any = None, home: str = "",
                     adopt: bool = False) -> list[str]:
    """`ansible_facts.getent_passwd | account_refusals(user, group, ansible_facts.getent_group, home, adopt)`:
    the refusals of the service user and group as the host has them."""
    return existing_account_problems(str(user), str(group), _entry(passwd, str(user)), _entry(groups, str(group)),
                                     str(home), bool(adopt))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"account_refusals": account_refusals}
