"""TLS through the roles, offline on the example inventory: the unit's ExecStart carries the three paths, the three
files render to the PEM texts given (the template action and the restart decision's lookup byte for byte, so a TLS
server is not restarted by every deploy), their modes, and every URL the roles call the server at is https with the
CA file as uri's ca_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import ROOT, run_example

CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUW\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"
CA = "-----BEGIN CERTIFICATE-----\nMIIBrjCCAVSgAwIBAgIUC\n-----END CERTIFICATE-----\n"

PLAYBOOK = """
- name: Resolve with TLS, write the TLS files as the deploy does, and keep what the roles would call
  hosts: sglang_workers
  gather_facts: false
  vars:
    sglang_config_plan: advisory
  roles:
    - role: sglang_config
  tasks:
    - name: Write the unit and the environment file (render.yml)
      ansible.builtin.include_role:
        name: sglang_service
        tasks_from: render.yml
        public: true
    - name: Write the TLS files with the template action, as configure.yml does
      ansible.builtin.template:
        src: "{{ role_templates }}/{{ item.template }}"
        dest: "{{ render_dir }}/{{ inventory_hostname }}/{{ item.dest | basename }}"
        mode: "0600"
      loop: "{{ __sglang_service_tls_files }}"
      no_log: true
      delegate_to: localhost
    - name: Keep the lookups' renderings and the roles' addresses
      ansible.builtin.copy:
        dest: "{{ render_dir }}/{{ inventory_hostname }}.tls.json"
        content: "{{ {'rendered': query('sglang.deploy.rendered', *templates),
                      'files': sglang_service_all_files, 'base_url': sglang_service_base_url,
                      'ca_path': sglang_service_ca_path, 'health': __sglang_service_health_url | trim,
                      'url': sglang_config.url, 'tls': sglang_config.tls} | to_json }}"
        mode: "0600"
      vars:
        templates: "{{ __sglang_service_tls_files | map(attribute='template')
                       | map('regex_replace', '^', role_templates ~ '/') | list }}"
      delegate_to: localhost
"""


def test_tls_renders_the_files_the_flags_and_https_everywhere(tmp_path: Path) -> None:
    playbook = tmp_path / "tls.yml"
    playbook.write_text(PLAYBOOK)
    extra = tmp_path / "tls-vars.yml"
    extra.write_text(yaml.safe_dump({"sglang_tls_cert": CERT, "sglang_tls_key": KEY, "sglang_tls_ca": CA,
                                     "role_templates": str(ROOT / "roles/sglang_service/templates")}))
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_ROLES_PATH=str(ROOT / "roles"))
    command = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    proc = subprocess.run([command, str(playbook), "-i", "inventory/example", "-e", f"render_dir={tmp_path}",
                           "-e", f"@{extra}"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "MIGHAgEAMBMGByqGSM49" not in proc.stdout + proc.stderr, "the key reached Ansible's output"

    host = tmp_path / "gpu-node-1"
    unit = (host / "sglang-kimi.service").read_text()
    for flag, path in (("--ssl-certfile", "kimi.tls.crt"), ("--ssl-keyfile", "kimi.tls.key"),
                       ("--ssl-ca-certs", "kimi.tls-ca.crt")):
        assert f"{flag} /etc/sglang/{path}" in unit
    assert "MIGHAgEAMBMGByqGSM49" not in unit + (host / "kimi.env").read_text()

    written = {name: (host / name).read_text() for name in ("kimi.tls.crt", "kimi.tls.key", "kimi.tls-ca.crt")}
    assert written == {"kimi.tls.crt": CERT, "kimi.tls.key": KEY, "kimi.tls-ca.crt": CA}
    seen = json.loads((tmp_path / "gpu-node-1.tls.json").read_text())
    assert seen["rendered"] == list(written.values())
    modes = {Path(f["dest"]).name: (f["mode"], f["group"]) for f in seen["files"]}
    assert modes["kimi.tls.key"] == ("0640", "sglang") and modes["kimi.tls.crt"] == ("0640", "sglang")
    assert modes["kimi.tls-ca.crt"] == ("0644", "root")
    assert seen["base_url"] == "https://127.0.0.1:30000"
    assert seen["health"].startswith("https://127.0.0.1:30000/")
    assert seen["ca_path"] == "/etc/sglang/kimi.tls-ca.crt"
    assert seen["url"].startswith("https://") and seen["tls"]["https"] is True


def test_prometheus_scrapes_tls_servers_over_https_with_their_ca(tmp_path: Path) -> None:
    """playbooks/prometheus.yml: the https target's __scheme__, and the CA for the scrape job's tls_config."""
    extra = tmp_path / "tls-vars.yml"
    extra.write_text(yaml.safe_dump({"sglang_tls_cert": CERT, "sglang_tls_key": KEY, "sglang_tls_ca": CA}))
    out = tmp_path / "out"
    result = run_example("playbooks/prometheus.yml", "-e", f"sglang_monitoring_output_dir={out}", "-e", f"@{extra}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    targets = json.loads((out / "sglang-targets.json").read_text())
    assert targets[0]["targets"] == ["10.0.0.11:30000"] and targets[0]["labels"]["__scheme__"] == "https"
    assert (out / "sglang-ca.crt").read_text() == CA
    assert "sglang-ca.crt" in result.stdout


ROUTER_PLAYBOOK = """
- name: Resolve the servers with TLS, as the deploy's first plays do
  hosts: sglang_workers
  gather_facts: false
  vars:
    sglang_config_plan: advisory
  roles:
    - role: sglang_config

- name: Render the router's unit and its workers' CA file from role sglang_router's own files
  hosts: sglang_routers
  gather_facts: false
  vars_files:
    - "{{ playbook_dir_of_roles }}/sglang_router/defaults/main.yml"
    - "{{ playbook_dir_of_roles }}/sglang_router/vars/main.yml"
  tasks:
    - name: The unit, as tasks/run.yml writes it
      ansible.builtin.template:
        src: "{{ playbook_dir_of_roles }}/sglang_router/templates/sglang-router.service.j2"
        dest: "{{ render_dir }}/{{ inventory_hostname }}.service"
        mode: "0600"
      delegate_to: localhost
    - name: The CA file's content and path, as tasks/run.yml writes them
      ansible.builtin.copy:
        content: >-
          {{ {'cas': __sglang_router_worker_cas, 'file': __sglang_router_worker_ca_file,
              'api': __sglang_router_local_url, 'api_ca': __sglang_router_local_ca} | to_json }}
        dest: "{{ render_dir }}/{{ inventory_hostname }}.cas.json"
        mode: "0600"
      delegate_to: localhost
"""


def test_the_router_verifies_https_servers_against_their_ca(tmp_path: Path) -> None:
    """Role sglang_router: with servers that serve https, the router's unit passes --ca-cert-paths with the file
    that holds each server's CA once, and names that file in SSL_CERT_FILE; with their CA trusted ahead
    (sglang_router_worker_ca) the same before they serve https; without TLS none of them (the real router's
    behaviour with both is tests/unit/roles/test_router_control_plane.py's)."""
    playbook = tmp_path / "router.yml"
    playbook.write_text(ROUTER_PLAYBOOK)
    fleet = tmp_path / "fleet.yml"
    fleet.write_text(yaml.safe_dump({"all": {"children": {
        "sglang_workers": {"hosts": {"gpu-node-2": {"ansible_host": "10.0.0.12", "sglang_model_config_file": "",
                                                    "sglang_draft_config_file": ""}}},
        "sglang_routers": {"hosts": {"router-1": {"ansible_host": "10.0.0.5",
                                                  "sglang_router_prometheus_host": "10.0.0.5"}}}}}}))
    results = {}
    router_tls = {"sglang_router_tls_cert": CERT, "sglang_router_tls_key": KEY, "sglang_router_tls_ca": CA}
    server_tls = {"sglang_tls_cert": CERT, "sglang_tls_key": KEY, "sglang_tls_ca": CA}
    for label, tls in (("tls", server_tls), ("plain", {}), ("router-tls", router_tls),
                       ("trusted-ahead", {"sglang_router_worker_ca": CA}),
                       ("tls-trusted-ahead", {**server_tls, "sglang_router_worker_ca": "\n" + CA})):
        out = tmp_path / label
        out.mkdir()
        extra = tmp_path / f"{label}-vars.yml"
        extra.write_text(yaml.safe_dump({**tls, "playbook_dir_of_roles": str(ROOT / "roles")}))
        proc = run_example(str(playbook), "-i", str(fleet), "-e", f"render_dir={out}", "-e", f"@{extra}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        results[label] = ((out / "router-1.service").read_text(), json.loads((out / "router-1.cas.json").read_text()))
    unit, cas = results["tls"]
    assert (cas["cas"], cas["file"]) == ([CA.strip()], "/etc/sglang-router/workers-ca.pem")  # two servers, one CA
    assert "--ca-cert-paths /etc/sglang-router/workers-ca.pem" in unit
    # The router's health checker ignores the flag (sglang-router 0.3.2): it reads the CAs from OpenSSL's variable.
    assert "\nEnvironment=SSL_CERT_FILE=/etc/sglang-router/workers-ca.pem\n" in unit
    # The servers' CA trusted ahead (sglang_router_worker_ca) while they still serve plain http: the router's unit
    # and CA file are already what they will be once the servers serve https, so their switch restarts no router.
    for label in ("trusted-ahead", "tls-trusted-ahead"):
        assert results[label] == results["tls"], label
    unit, cas = results["plain"]
    assert cas["cas"] == [] and "--ca-cert-paths" not in unit and "SSL_CERT_FILE" not in unit
    assert "--tls-" not in unit and " --ca " not in unit
    assert (cas["api"], cas["api_ca"]) == ("http://127.0.0.1:30080", "")
    # TLS on the router's own listener: its flags, the launcher's CA, and the deploy's https address verified by it.
    unit, cas = results["router-tls"]
    assert "--tls-cert-path /etc/sglang-router/tls.crt" in unit and "--tls-key-path /etc/sglang-router/tls.key" in unit
    assert " --ca /etc/sglang-router/tls-ca.crt --" in unit.replace("\\\n", " ").replace("  ", " ")
    assert (cas["api"], cas["api_ca"]) == ("https://127.0.0.1:30080", "/etc/sglang-router/tls-ca.crt")
    assert not [secret for secret in KEY.splitlines()[1:-1] if secret in unit]
