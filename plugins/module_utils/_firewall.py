# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server unit's IP allow-list: systemd's cgroup firewall (``IPAddressDeny=any`` plus ``IPAddressAllow=``).

One home for what may appear after ``IPAddressAllow=``: an IPv4 or IPv6 address, a CIDR, or one of systemd's
keywords ``localhost`` (127.0.0.0/8 and ::1), ``link-local`` and ``multicast`` (systemd.resource-control(5)).
``any`` is refused: it would switch the firewall off, which ``sglang_service_ip_firewall: false`` says plainly.

``allow_list`` turns the inventory's sources (each a reason and an address or host name) into the unit's lines.
Host names are resolved before, on the server host (``getent ahosts``, role sglang_service's ip_allow.yml), and
come in as ``resolved``: name -> addresses. A name with no address refuses the host before anything changes.
Standard library only.
"""

from __future__ import annotations

import ipaddress
from typing import Any

KEYWORDS = ("localhost", "link-local", "multicast")
EXTRA_VARIABLE = "sglang_service_ip_allow_extra"
ENTRY_ALLOWED = ("an IPv4 or IPv6 address, a CIDR such as 10.0.0.0/24 or fd00::/64, or one of systemd's keywords "
                 + ", ".join(KEYWORDS) + " (to switch the firewall off: sglang_service_ip_firewall: false)")


class FirewallError(ValueError):
    """A source of the allow-list that gives no address; the message names the variable."""


def entry(value: Any) -> str:
    """One IPAddressAllow= value, normalised (10.0.0.5/24 -> 10.0.0.0/24, 10.0.0.5/32 -> 10.0.0.5); ValueError when
    it is none."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a string")
    text = value.strip(" ")
    if text in KEYWORDS:
        return text
    if not text or "%" in text or any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError(f"{value!r} is not an address, a CIDR or a keyword")
    try:
        if "/" in text:
            network = ipaddress.ip_network(text, strict=False)
            return str(network.network_address if network.prefixlen == network.max_prefixlen else network)
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"{value!r} is not an address, a CIDR or a keyword") from None


def is_entry(value: Any) -> bool:
    try:
        entry(value)
    except ValueError:
        return False
    return True


def extra_errors(values: Any) -> list[str]:
    """Refusals of sglang_service_ip_allow_extra, each naming the variable and the item."""
    if not isinstance(values, list):
        return [f"{EXTRA_VARIABLE}: is not a list; allowed: a list of entries, each {ENTRY_ALLOWED}"]
    errors = []
    for index, value in enumerate(values):
        if str(value).strip() == "any":
            errors.append(f"{EXTRA_VARIABLE}[{index}]: 'any' would let every address in; allowed: {ENTRY_ALLOWED}")
        elif not is_entry(value):
            errors.append(f"{EXTRA_VARIABLE}[{index}]: {value!r} is not an address, a CIDR or a keyword; allowed: "
                          f"{ENTRY_ALLOWED}")
    return errors


# Binds that the host's own requests reach over loopback (module_utils _live.server_url's 127.0.0.1).
LOOPBACK_BINDS = ("", "0.0.0.0", "::", "127.0.0.1", "::1", "localhost")
ROUTERS_GROUP = "sglang_routers"


def host_address(name: str, hostvars: Any) -> str:
    """The address the inventory gives a host: sglang_advertise_host, else ansible_host, else its name."""
    variables = hostvars.get(name, {}) if name in hostvars else {}  # ansible's HostVars: Undefined, not KeyError
    for key in ("sglang_advertise_host", "ansible_host"):
        value = variables.get(key) if key in variables else None
        if value is not None and str(value).strip():
            return str(value).strip()
    return name


def sources(hostvars: Any, groups: dict[str, list[str]], host: str, multinode_group: str = "",
            prometheus_group: str = "", bind: str = "", extra: list[str] | None = None) -> list[dict[str, str]]:
    """What may reach the server of ``host``, each with why: loopback, the bind address when it is not a
    wildcard or loopback one (this host's own requests go there), every router, every Prometheus host, the other
    hosts of a multi-node server, then sglang_service_ip_allow_extra."""
    found = [{"why": "loopback (127.0.0.0/8, ::1): this host's own requests - the readiness wait, smoke test, "
                     "drain, status and live changes", "address": "localhost"}]
    if str(bind or "").strip() not in LOOPBACK_BINDS:
        found.append({"why": "the bind address (sglang_host): this host's own requests come from it",
                      "address": str(bind).strip()})
    for router in groups.get(ROUTERS_GROUP) or []:
        found.append({"why": f"router {router} (group {ROUTERS_GROUP})", "address": host_address(router, hostvars)})
    for prometheus in (groups.get(prometheus_group) or []) if prometheus_group else []:
        found.append({"why": f"Prometheus {prometheus} (group {prometheus_group})",
                      "address": host_address(prometheus, hostvars)})
    for peer in (groups.get(multinode_group) or []) if multinode_group else []:
        if peer != host:
            found.append({"why": f"multi-node peer {peer} (group {multinode_group}: torch.distributed, NCCL)",
                          "address": host_address(peer, hostvars)})
    for item in extra or []:
        found.append({"why": EXTRA_VARIABLE, "address": str(item)})
    return found


def names_to_resolve(sources: list[dict[str, Any]]) -> list[str]:
    """The host names among the sources' addresses (what is not an address, a CIDR or a keyword), in order."""
    names: list[str] = []
    for source in sources:
        address = str(source.get("address") or "").strip()
        if address and not is_entry(address) and address not in names:
            names.append(address)
    return names


def resolved(results: list[dict[str, Any]]) -> dict[str, list[str]]:
    """name -> addresses from the registered loop of ansible.builtin.getent (database ahosts, fail_key false):
    each result's item is the name, its ansible_facts.getent_ahosts is keyed by address (a name that does not
    resolve comes back keyed by itself, with no value). Addresses sorted, IPv4 first."""
    found: dict[str, list[str]] = {}
    for result in results or []:
        if not isinstance(result, dict) or "item" not in result:
            continue
        table = (result.get("ansible_facts") or {}).get("getent_ahosts") or {}
        addresses = {str(ipaddress.ip_address(key)) for key in table if _is_address(key)}
        found[str(result["item"])] = sorted(addresses, key=_address_order)
    return found


def _address_order(address: str) -> tuple[int, int]:
    parsed = ipaddress.ip_address(address)
    return parsed.version, int(parsed)


def _is_address(text: Any) -> bool:
    try:
        ipaddress.ip_address(str(text))
    except ValueError:
        return False
    return True


def _reason(text: Any) -> str:
    """A source's reason, made safe for a comment line of the unit (one line of printable text)."""
    return "".join(c if c.isprintable() else "?" for c in str(text)).strip()


def allow_list(sources: list[dict[str, Any]], names: dict[str, list[str]] | None = None,
               where: str = "the server host") -> list[dict[str, str]]:
    """The unit's IPAddressAllow= lines, in the sources' order, each address once with every reason for it.

    ``sources``: [{"why": "router r1", "address": "10.0.0.5" | "r1.example" | "10.0.0.0/24" | "localhost"}];
    ``names``: name -> addresses (see ``resolved``); ``where``: the host that resolved them, for the message.
    Raises FirewallError for a name that did not resolve, or an empty address.
    """
    lines: dict[str, list[str]] = {}
    for source in sources:
        why = _reason(source.get("why") or "")
        address = str(source.get("address") or "").strip()
        if is_entry(address):
            addresses = [entry(address)]
        elif not address:
            raise FirewallError(f"sglang_service_ip_firewall: {why} has no address; allowed: an address or host name "
                                "in the inventory (ansible_host or sglang_advertise_host)")
        else:
            addresses = [entry(a) for a in (names or {}).get(address) or []]
            if not addresses:
                raise FirewallError(
                    f"sglang_service_ip_firewall: {why}: the host name {address!r} does not resolve on {where} "
                    f"(getent ahosts), so the server's firewall cannot let it in; allowed: an address in the "
                    "inventory (ansible_host or sglang_advertise_host), a name the server host resolves, "
                    f"{EXTRA_VARIABLE} for other clients, or sglang_service_ip_firewall: false")
            why = f"{why} ({address})"
        for allowed in addresses:
            reasons = lines.setdefault(allowed, [])
            if why not in reasons:
                reasons.append(why)
    return [{"allow": allowed, "why": "; ".join(reasons)} for allowed, reasons in lines.items()]
