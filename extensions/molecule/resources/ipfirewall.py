"""The IP firewall drills' tools (role sglang_service, sglang_service_ip_firewall): connect to a container's port
from the Docker host, which is on no server's allow-list, and tell a connection from a drop (systemd's BPF filter
drops the packets: the connection times out) and from a refusal (nothing listens: an RST).

The control listener is the proof that only the firewall stands between: the same container, the same network
path, a port of a transient unit without IPAddress rules, which the Docker host reaches."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any

CONTROL_UNIT = "sglang-firewall-control"
CONTROL_PORT = 30099
# Long enough for a SYN's answer on a Docker bridge many times over (it comes in well under a millisecond).
DROP_SECONDS = 5.0


def container_ip(name: str, network: str | None = None) -> str:
    """A container's address (on ``network``, else its only one), from docker inspect."""
    template = (f'{{{{(index .NetworkSettings.Networks "{network}").IPAddress}}}}' if network
                else "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}")
    return subprocess.check_output(["docker", "inspect", "-f", template, name], text=True).split()[0]


def docker_host_ip(name: str, network: str | None = None) -> str:
    """The Docker host's address as the container sees it: the gateway of its network."""
    template = (f'{{{{(index .NetworkSettings.Networks "{network}").Gateway}}}}' if network
                else "{{range .NetworkSettings.Networks}}{{.Gateway}} {{end}}")
    return subprocess.check_output(["docker", "inspect", "-f", template, name], text=True).split()[0]


def connect(address: str, port: int, seconds: float = DROP_SECONDS) -> str:
    """'connected', 'timeout' (the packets were dropped) or 'refused' (an RST: nothing listens)."""
    try:
        with socket.create_connection((address, port), timeout=seconds):
            return "connected"
    except TimeoutError:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"


def start_control(host: Any) -> None:
    """A listener on CONTROL_PORT in a transient unit with no IP rules, on the container of testinfra ``host``."""
    host.run(f"systemctl stop {CONTROL_UNIT}.service; systemctl reset-failed {CONTROL_UNIT}.service")
    started = host.run(f"systemd-run --unit {CONTROL_UNIT} --collect python3 -m http.server {CONTROL_PORT} "
                       "--bind 0.0.0.0")
    assert started.rc == 0, started.stderr


def stop_control(host: Any) -> None:
    host.run(f"systemctl stop {CONTROL_UNIT}.service")


def wait_connected(address: str, port: int, seconds: float = 60) -> str:
    """Connect until it connects (a listener that is starting refuses); the deadline only bounds a failure."""
    deadline = time.monotonic() + seconds
    outcome = connect(address, port)
    while outcome == "refused" and time.monotonic() < deadline:
        time.sleep(0.2)
        outcome = connect(address, port)
    return outcome


def bpf_unsupported_lines(host: Any) -> str:
    """systemd's own word when it cannot attach the firewall: "<unit>: unit configures an IP firewall, but the local
    system does not support BPF/cgroup firewalling." (once per boot, for the first unit with one: Debian's own
    systemd-journald.service has IPAddressDeny=any), or bpf-firewall.c's "BPF firewalling not supported"."""
    return host.run("journalctl -b --no-pager -o cat | grep -E 'configures an IP firewall, but|BPF firewalling not "
                    "supported' || true").stdout.strip()
