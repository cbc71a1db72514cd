"""The adversarial input matrix: named bad inputs, each refused by render.yml, plan.yml and
deploy.yml --check with a message that names the variable and what is allowed, before any file is
written and before any host is contacted.

All cases run in one playbook run per playbook: each case is one host of a generated inventory (the
example inventory's variables, plus the case's own in host_vars), so a run of 120 hosts costs about
one of a few seconds each. A case whose host is contacted, whose files are written, or whose refusal
names another variable fails.

Classes (issue 11): 1 unit-file injection, 2 role variables outside the resolve step, 3 values the
real parser rejects, 4 failures that would wait for the start, 5 typos and silent no-ops, 6 Python
errors instead of messages, 7 rollout settings checked late, 8 secrets on argv, 9 internal switches
from outside, 10 settings through the sglang_extra_args back door; (issue 49) 11 inputs that would hurt a host:
system paths and accounts, the dump directory, hooks, URL paths, the lease, switches the playbooks set, cross-field
rules; 12 one case per declared option the classes before do not touch.
test_every_declared_option_is_touched_by_a_case fails for an option no case touches that UNCOVERED does not list.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from helpers import ROOT

MODEL = str(ROOT / "extensions/molecule/resources/models/kimi-k2.5/config.json")


# Syntactic PEM blocks: the checks read the blocks' kind, never the key material (SGLang opens the files at start).
CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUW\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n"
ENCRYPTED_KEY = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEF\n-----END ENCRYPTED PRIVATE KEY-----\n"


class Case(NamedTuple):
    klass: int
    name: str
    variables: dict[str, Any]
    variable: str          # the variable the refusal must start with


Add = Callable[..., None]


def _class1(add: Add) -> None:
    """Unit-file injection: a control character in anything that reaches a unit, env or config line."""
    attack = "kimi)\n[Service]\nExecStartPre=+/bin/touch /root/pwned\n#"
    add(1, "served-name-newline-section", {"sglang_served_model_name": attack})
    for char, label in (("\r", "cr"), ("\x00", "nul"), ("\x1b", "esc"), ("\x7f", "del"), ("\t", "tab"),
                        ("\x85", "c1-nel")):
        add(1, f"served-name-{label}", {"sglang_served_model_name": f"kimi{char}x"})
    add(1, "model-path-newline", {"sglang_model_path": "/models/k\nExecStartPre=/bin/true"})
    add(1, "home-newline", {"sglang_home": "/var/lib/sglang\nUser=root"})
    add(1, "venv-newline", {"sglang_venv_dir": "/opt/v\nUser=root"})
    add(1, "config-dir-newline", {"sglang_service_config_dir": "/etc/sglang\n[Service]"})
    add(1, "read-write-path-newline", {"sglang_service_read_write_paths": ["/data\nUser=root"]})
    add(1, "device-allow-newline", {"sglang_service_device_allow_extra": ["/dev/fuse rw\nDevicePolicy=auto"]})
    add(1, "requires-newline", {"sglang_service_requires": ["a.service\nUser=root"]})
    add(1, "ip-allow-newline", {"sglang_service_ip_allow_extra": ["10.0.0.1\nIPAddressAllow=any"]})
    add(1, "env-value-newline", {"sglang_env": {"NCCL_DEBUG": "WARN\nLD_PRELOAD=/tmp/x.so"}})
    add(1, "env-key-newline", {"sglang_env": {"A\nB": "1"}})
    add(1, "extra-arg-value-newline", {"sglang_extra_args": {"context-length": "1\n2"}})
    add(1, "api-key-newline", {"sglang_api_key": "abc\ndef"})
    add(1, "user-newline", {"sglang_user": "sglang\nUser=root"})
    add(1, "group-nul", {"sglang_group": "sglang\x00"})
    add(1, "smoke-prompt-newline", {"sglang_service_smoke_prompt": "a\nb"})
    add(1, "health-path-newline", {"sglang_service_health_path": "/health\n"})
    add(1, "router-extra-newline", {"sglang_router_extra_args": {"log-level": "info\nx"}})
    add(1, "hf-token-newline", {"sglang_weights_hf_token": "hf_x\ny"})
    add(1, "driver-version-newline", {"nvidia_driver_version": "580.95.05\nPin: release *"})
    add(1, "stall-key-newline", {"sglang_service_stall_timeouts": {"starting\n": 300}})
    add(1, "instance-newline", {"sglang_instance": "kimi\nx"})


def _class2(add: Add) -> None:
    """Role variables the resolve step does not read, checked against their role's argument spec."""
    for name, value in (("sglang_service_hardening", "Strict"), ("sglang_service_hardening", ""),
                        ("nvidia_driver_reboot_policy", "Auto"), ("sglang_stack_prerelease", "yes"),
                        ("sglang_weights_mode", "Download"), ("sglang_router_policy", "rr"),
                        ("sglang_config_plan", "always")):
        add(2, f"choice-{name}-{value or 'empty'}", {name: value})
    for name, value in (("sglang_service_drain_timeout", "abc"), ("sglang_service_drain_timeout", 0),
                        ("sglang_service_drain_timeout", -5), ("sglang_service_restart_sec", -1),
                        ("sglang_service_start_limit_burst", 0), ("sglang_service_limit_nofile", "many"),
                        ("sglang_service_poll_interval", 0), ("sglang_service_probe_timeout", 10),
                        ("sglang_service_probe_alloc_mib", 0), ("nvidia_driver_reboot_timeout", 0),
                        ("sglang_stack_install_timeout", -1), ("sglang_weights_download_poll", 0),
                        ("sglang_service_smoke_max_tokens", 0), ("sglang_router_start_timeout", "1m"),
                        ("sglang_service_unpin_margin", 1.5)):
        add(2, f"number-{name}-{value}", {name: value})
    for name, value in (("sglang_service_read_write_paths", "/data"), ("sglang_service_requires", "a.service"),
                        ("nvidia_driver_packages", "nvidia-open"), ("sglang_service_stall_timeouts", [300]),
                        ("sglang_router_extra_args", "--x"), ("sglang_service_probe", "maybe"),
                        ("nvidia_driver_persistence_mode", "sometimes"), ("sglang_service_device_allow_extra", {})):
        add(2, f"type-{name}", {name: value})
    # The unit's IP allow-list: addresses, CIDRs and systemd's keywords only; never "any", never a host name.
    add(2, "ip-allow-any", {"sglang_service_ip_allow_extra": ["any"]})
    add(2, "ip-allow-name", {"sglang_service_ip_allow_extra": ["clients.example.internal"]})
    add(2, "ip-allow-bad-cidr", {"sglang_service_ip_allow_extra": ["10.0.0.0/33"]})
    add(2, "ip-allow-scope", {"sglang_service_ip_allow_extra": ["fe80::1%eth0"]})
    add(2, "ip-allow-two-words", {"sglang_service_ip_allow_extra": ["10.0.0.1 10.0.0.2"]})
    add(2, "type-sglang_service_ip_firewall", {"sglang_service_ip_firewall": "maybe"})
    add(2, "path-relative-home", {"sglang_home": "var/lib/sglang"})
    add(2, "path-blank", {"sglang_service_read_write_paths": ["/data/my models"]})
    add(2, "path-specifier", {"sglang_service_config_dir": "/etc/%n"})
    add(2, "path-quote", {"sglang_venv_dir": '/opt/"v"'})
    add(2, "user-name", {"sglang_user": "Bad User"})


def _class3(add: Add) -> None:
    """Values SGLang's argparse rejects at start."""
    add(3, "served-name-option", {"sglang_served_model_name": "--api-key=x"})
    add(3, "served-name-dash", {"sglang_served_model_name": "-k"})
    add(3, "kv-dtype-option", {"sglang_kv_cache_dtype": "--fp8"})
    add(3, "extra-value-option", {"sglang_extra_args": {"attention-backend": "--triton"}},
        "sglang_extra_args['attention-backend']")
    add(3, "extra-empty-nargs-plus", {"sglang_extra_args": {"cuda-graph-bs-decode": []}},
        "sglang_extra_args['cuda-graph-bs-decode']")
    add(3, "extra-switch-given-word", {"sglang_extra_args": {"trust-remote-code": "maybe"}},
        "sglang_extra_args['trust-remote-code']")
    add(3, "extra-value-flag-true", {"sglang_extra_args": {"context-length": True}},
        "sglang_extra_args['context-length']")
    add(3, "extra-list-for-one", {"sglang_extra_args": {"context-length": [1, 2]}},
        "sglang_extra_args['context-length']")
    add(3, "extra-int-word", {"sglang_extra_args": {"max-running-requests": "48k"}},
        "sglang_extra_args['max-running-requests']")
    add(3, "extra-human-int-word", {"sglang_extra_args": {"context-length": "lots"}},
        "sglang_extra_args['context-length']")


def _class4(add: Add) -> None:
    """Conditions that would only fail when the server starts."""
    for port in (80, 1023):
        add(4, f"privileged-port-{port}", {"sglang_port": port})
    add(4, "port-zero", {"sglang_port": 0})
    add(4, "port-too-big", {"sglang_port": 70000})
    add(4, "bind-not-address", {"sglang_host": "not/an/address"})
    add(4, "bind-blank", {"sglang_host": "0.0.0.0 1.2.3.4"})
    add(4, "bind-bad-ip", {"sglang_host": "300.1.1.1"})
    add(4, "router-bind", {"sglang_router_host": "a b"})
    # sglang-router 0.3.2 exits on a host name for --host, and binds every interface for one in --prometheus-host.
    add(4, "router-bind-host-name", {"sglang_router_host": "router.example"})
    add(4, "router-prometheus-host-name", {"sglang_router_prometheus_host": "localhost"})
    add(4, "router-prometheus-blank", {"sglang_router_prometheus_host": "10.0.0.5 10.0.0.6"})
    add(4, "ready-zero", {"sglang_ready_timeout": 0})
    add(4, "ready-too-short", {"sglang_ready_timeout": 30})
    add(4, "argv-word-too-long", {"sglang_extra_args": {"chat-template": "x" * 140000}},
        "sglang_extra_args['chat-template']")
    # TLS: all three PEM texts or none; SGLang would stop at start ("--ssl-certfile requires --ssl-keyfile").
    add(4, "tls-cert-without-key", {"sglang_tls_cert": CERT, "sglang_tls_ca": CERT}, "sglang_tls_key")
    add(4, "tls-key-without-cert", {"sglang_tls_key": KEY, "sglang_tls_ca": CERT}, "sglang_tls_cert")
    add(4, "tls-without-ca", {"sglang_tls_cert": CERT, "sglang_tls_key": KEY}, "sglang_tls_ca")
    add(4, "tls-ca-a-path", {"sglang_tls_cert": CERT, "sglang_tls_key": KEY, "sglang_tls_ca": "/etc/ssl/ca.pem"},
        "sglang_tls_ca")
    add(4, "tls-cert-not-pem", {"sglang_tls_cert": "server.pem", "sglang_tls_key": KEY, "sglang_tls_ca": CERT},
        "sglang_tls_cert")


def _class5(add: Add) -> None:
    """Typos and silent no-ops."""
    for name in ("hicache_raito", "sglang_hicache_raito", "hicache-ratio", "sglang_hicahce_ratio",
                 "sglang_tp_szie", "sglang_servce_hardening", "nvidia_driver_versoin", "hicache_sise",
                 "sglang_unknown_thing", "HICACHE_RATIO"):
        add(5, f"typo-{name}", {name: "3.0"})
    add(5, "alias-empty", {"hicache_ratio": ""})
    add(5, "underscore-number", {"hicache_ratio": "1_5"})
    add(5, "ratio-not-above-one", {"hicache_ratio": "1.0"})
    # Weight sizes state their unit: GB and GiB differ by 7 %, and du -h's "547G" means GiB.
    add(5, "weights-renamed-gb", {"sglang_model_weight_gb": 547})
    add(5, "weights-bare-number", {"sglang_model_weight_size": 547})
    add(5, "weights-du-letter", {"sglang_model_weight_size": "547G"})
    add(5, "draft-weights-unknown-unit", {"sglang_draft_weight_size": "3 gigs"})


def _class6(add: Add) -> None:
    """Inputs that used to surface as Python errors."""
    for value in ("1e308", "inf", "nan", "-inf"):
        add(6, f"ratio-{value}", {"hicache_ratio": value})
    add(6, "memory-inf", {"sglang_host_memory_available_gb": "inf"})
    add(6, "weights-negative", {"sglang_model_weight_size": "-1 GB"})
    add(6, "mem-fraction-above-one", {"sglang_mem_fraction_static": 1.5})
    add(6, "model-config-not-json", {"sglang_model_config_file": str(ROOT / "README.md")})
    add(6, "model-config-missing", {"sglang_model_config_file": "/nonexistent/config.json"})
    add(6, "model-config-list", {"sglang_model_config_file": "@LIST_JSON@"})
    add(6, "api-key-list", {"sglang_api_key": ["a"]})
    add(6, "tp-size-word", {"sglang_tp_size": "eight"})


def _class7(add: Add) -> None:
    """Rollout settings that used to be refused only when the rollout began."""
    for value in ("0", "abc", "150%", "-1"):
        add(7, f"serial-{value}", {"sglang_rolling_serial": value})
    add(7, "hook-missing", {"sglang_rollout_pre_restart_hooks": ["/nonexistent/hook.yml"]})
    add(7, "hook-relative", {"sglang_rollout_post_restart_hooks": ["hooks/record.yml"]})
    for value in (0, -1, 3601, "soon"):  # the lease's bounded wait for its lock
        add(7, f"lease-lock-timeout-{value}", {"sglang_rollout_lease_lock_timeout": value})


def _class8(add: Add) -> None:
    """Secrets on the command line."""
    for flag in ("ssl-keyfile-password", "api-key", "admin-api-key", "config"):
        add(8, f"secret-{flag}", {"sglang_extra_args": {flag: "s3cret"}}, f"sglang_extra_args['{flag}']")
    for flag in ("api-key", "control-plane-api-keys"):  # the router's key goes through a file
        add(8, f"router-secret-{flag}", {"sglang_router_extra_args": {flag: "s3cret"}},
            f"sglang_router_extra_args['{flag}']")
    add(8, "router-key-blank", {"sglang_router_api_key": "two words"})
    add(8, "router-admin-key-blank", {"sglang_router_admin_api_key": "two words"})
    # On a router host (ROUTER_CASES) bound off loopback: the control plane needs a key of its own, held by the
    # deploy, and the clients a key, unless the inventory opts out.
    add(8, "router-cp-client-key-only", {"sglang_router_api_key": "client-k1"}, "sglang_router_admin_api_key")
    add(8, "router-cp-no-key", {"sglang_router_host": "0.0.0.0"}, "sglang_router_admin_api_key")
    add(8, "router-cp-admin-key-only", {"sglang_router_admin_api_key": "admin-k1"}, "sglang_router_api_key")
    add(8, "router-cp-same-keys", {"sglang_router_api_key": "same-k1", "sglang_router_admin_api_key": "same-k1"},
        "sglang_router_admin_api_key")
    keys = {"sglang_router_api_key": "client-k1", "sglang_router_admin_api_key": "admin-k1"}
    add(8, "router-cp-tls-cert-without-key", {**keys, "sglang_router_tls_cert": CERT, "sglang_router_tls_ca": CERT},
        "sglang_router_tls_key")
    add(8, "router-cp-tls-without-ca", {**keys, "sglang_router_tls_cert": CERT, "sglang_router_tls_key": KEY},
        "sglang_router_tls_ca")
    for flag in ("tls-cert-path", "tls-key-path"):  # the router's TLS files are written by the deploy
        add(8, f"router-own-{flag}", {"sglang_router_extra_args": {flag: "/etc/x.pem"}},
            f"sglang_router_extra_args['{flag}']")
    add(8, "api-key-dash", {"sglang_api_key": "-k3y"})
    # Issue 48: who can reach the server, and what its clients can run.
    add(8, "keyless-wildcard-bind", {"sglang_api_key": "", "sglang_admin_api_key": ""}, "sglang_api_key")
    add(8, "keyless-lan-bind", {"sglang_host": "10.0.0.11", "sglang_api_key": "", "sglang_admin_api_key": ""},
        "sglang_api_key")
    add(8, "admin-key-only", {"sglang_api_key": "", "sglang_host": "127.0.0.1"}, "sglang_admin_api_key")
    add(8, "allow-unauthenticated-word", {"sglang_allow_unauthenticated": "maybe"})
    for flag, value in (("enable-custom-logit-processor", True), ("tool-server", "demo")):
        add(8, f"unsafe-{flag}", {"sglang_extra_args": {flag: value}}, f"sglang_extra_args['{flag}']")
    for name in ("HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD"):
        add(8, f"secret-env-{name}", {"sglang_env": {name: "x"}}, f"sglang_env['{name}']")
    add(8, "numa-auto-no-sandbox", {"sglang_numa_bind": "auto", "sglang_service_hardening": "none"}, "sglang_numa_bind")
    # TLS: an encrypted key needs --ssl-keyfile-password, which /server_info returns; a certificate is no key.
    add(8, "tls-key-encrypted", {"sglang_tls_cert": CERT, "sglang_tls_key": ENCRYPTED_KEY, "sglang_tls_ca": CERT},
        "sglang_tls_key")
    add(8, "tls-key-a-certificate", {"sglang_tls_cert": CERT, "sglang_tls_key": CERT, "sglang_tls_ca": CERT},
        "sglang_tls_key")
    add(8, "tls-cert-a-key", {"sglang_tls_cert": KEY, "sglang_tls_key": KEY, "sglang_tls_ca": CERT},
        "sglang_tls_cert")


def _class9(add: Add) -> None:
    """Internal switches given from outside."""
    for name in ("__sglang_service_must_restart", "sglang_config_variable_errors", "sglang_service_deploy_plan",
                 "__sglang_service_restart_decided", "__nvidia_driver_reboot_needed"):
        add(9, f"internal-{name}", {name: False})


def _class10(add: Add) -> None:
    """Named settings through the sglang_extra_args back door."""
    for flag, value in (("hicache-ratio", 0.5), ("enable-hierarchical-cache", True), ("tp-size", 4),
                        ("speculative-algorithm", "NGRAM"), ("mem-fraction-static", 0.99), ("port", 80),
                        ("nnodes", 2)):
        add(10, f"backdoor-{flag}", {"sglang_extra_args": {flag: value}}, f"sglang_extra_args['{flag}']")
    for flag in ("ssl-certfile", "ssl-keyfile", "ssl-ca-certs"):  # set from sglang_tls_*, to files the deploy writes
        add(10, f"backdoor-{flag}", {"sglang_extra_args": {flag: "/etc/ssl/x.pem"}}, f"sglang_extra_args['{flag}']")


def _class11(add: Add) -> None:
    """No input can hurt a host (issue 49): system paths and accounts, the dump directory, hooks, URL paths, the
    lease, switches the playbooks set, cross-field rules."""
    for path in ("/", "/etc", "/etc/cron.d", "/usr/local/sglang", "/boot/x", "/proc/x", "/sys/x", "/dev/shm/x",
                 "/tmp/sglang", "/var/tmp/x", "/run/sglang", "/root", "/root/x", "/home", "/home/ubuntu", "/opt",
                 "/srv", "/var", "/var/lib", "/var/log", "/bin", "/lib64/x", "/models", "/models/Kimi-K2.5/state"):
        add(11, f"home-{path.strip('/').replace('/', '-') or 'slash'}", {"sglang_home": path})
    for name, value in (("sglang_service_config_dir", "/etc"), ("sglang_service_config_dir", "/"),
                        ("sglang_service_config_dir", "/etc/ssh"), ("sglang_router_config_dir", "/etc"),
                        ("sglang_rollout_rollback_dir", "/var"), ("sglang_venv_dir", "/opt/venv"),
                        ("sglang_venv_dir", "/tmp/venv"), ("sglang_router_venv_dir", "/usr/venv"),
                        ("sglang_stack_wheelhouse_dir", "/usr"), ("sglang_stack_uv_dir", "/boot/uv"),
                        ("sglang_stack_python_install_dir", "/root/python"), ("sglang_router_wheelhouse_dir", "/srv"),
                        ("sglang_weights_state_dir", "/var/lib"), ("sglang_presharded_dir", "/models"),
                        ("sglang_presharded_dir", "/var/lib/sglang"),
                        ("sglang_presharded_dir", "/var/lib/sglang/.cache"),
                        ("sglang_rollout_lease_file", "lease.json"), ("sglang_rollout_lease_file", "/etc/lease.json"),
                        ("sglang_weights_hf_token_file", "/usr/hf-token"), ("sglang_service_unit_dir", "/"),
                        ("sglang_model_path", "/"), ("sglang_speculative_draft_model_path", "/opt")):
        add(11, f"path-{name}-{value.strip('/').replace('/', '-') or 'slash'}", {name: value})
    for paths in (["/"], ["/etc"], ["/models/Kimi-K2.5"], ["/data", "/usr"]):
        add(11, f"read-write-{'-'.join(p.strip('/').replace('/', '-') or 'slash' for p in paths)}",
            {"sglang_service_read_write_paths": paths})
    for name, value in (("sglang_user", "root"), ("sglang_group", "root"), ("sglang_router_user", "root"),
                        ("sglang_user", "daemon"), ("sglang_group", "sudo"), ("sglang_user", "ubuntu")):
        add(11, f"account-{name}-{value}", {name: value})
    add(11, "account-login-user", {"ansible_user": "deploy", "sglang_user": "deploy"}, "sglang_user")
    add(11, "account-login-ssh-user", {"ansible_ssh_user": "sglang"}, "sglang_user")
    add(11, "account-router-login-user", {"ansible_user": "ops", "sglang_router_user": "ops"}, "sglang_router_user")
    add(11, "extra-load-format-presharded", {"sglang_extra_args": {"load-format": "presharded"}},
        "sglang_extra_args['load-format']")
    add(11, "extra-loader-config-presharded",
        {"sglang_extra_args": {"model-loader-extra-config": '{"presharded_path": "/models"}'}},
        "sglang_extra_args['model-loader-extra-config']")
    for hook in ("post_drain", "pre_start", "pre_rejoin"):
        add(11, f"hook-{hook}-missing", {f"sglang_rollout_{hook}_hooks": ["/nonexistent/hook.yml"]})
    add(11, "health-path-relative", {"sglang_service_health_path": "health_generate"})
    add(11, "lease-ttl-one-second", {"sglang_rollout_lease_ttl": 1})
    add(11, "lease-ttl-below-a-batch", {"sglang_rollout_lease_ttl": 1200})
    add(11, "lease-shorter-than-the-load", {"sglang_ready_timeout": 7200})
    add(11, "switch-lease-action", {"sglang_rollout_lease_action": "release"})
    add(11, "switch-config-refuse-false", {"sglang_config_refuse": False})
    add(11, "switch-driver-preflight-refuse", {"nvidia_driver_preflight_refuse": False})
    add(11, "switch-service-refusals", {"sglang_service_refusals": []})
    add(11, "internal-deploy-account-refusals", {"__deploy_account_refusals": []})
    add(11, "draft-tokens-below-steps", {"sglang_speculative_num_draft_tokens": 3})
    add(11, "draft-tokens-realigned", {"sglang_speculative_num_draft_tokens": 8})
    add(11, "env-value-e2big", {"sglang_env": {"NCCL_DEBUG": "x" * 200_000}})
    add(11, "advertise-host-blank", {"sglang_advertise_host": "gpu node 1"})
    add(11, "limit-nofile-one", {"sglang_service_limit_nofile": 1})
    add(11, "numa-node-twice", {"sglang_host_numa_memory": {"nodes_gb": {"0": 220, "00": 90}, "gpus": [0, 0]}})
    # A live threshold without speculative decoding is rendered with a note in the plan, not refused
    # (tests/unit/plugins/module_utils/test_sglang_config.py; the engine's live-change drill sets one).
    add(11, "extra-numa-node", {"sglang_extra_args": {"numa-node": [0, 1, 2, 3, 4, 5, 6, 7]}},
        "sglang_extra_args['numa-node']")


# One bad value per type of a declared option (class 12): the argument spec's type, its choices, or the range every
# number has (sglang_inputs: an int not listed in RANGES must be >= 1).
_BAD_BY_TYPE: dict[str, Any] = {"int": -7, "float": "lots", "bool": "maybe", "list": "not-a-list",
                                "dict": "not-a-mapping"}
# Text options whose rule refuses a value that is not a plain path, a key of one word, or an existing file.
_BAD_TEXT = {"nvidia_driver_proc_dir": "proc dir", "sglang_admin_api_key": "two words",
             "sglang_draft_config_file": "/nonexistent/config.json", "sglang_service_prometheus_group": "two words",
             "sglang_speculative_algorithm": "NOT-AN-ALGORITHM",
             "sglang_stack_python": "python 3", "sglang_startup_log": "/nonexistent/startup.log",
             "sglang_weights_hf_venv": "relative/venv",
             # The install roles' one-value rules, up front (module_utils/_field_rules.py).
             "nvidia_driver_gpu_compute_capability": "Blackwell",
             "nvidia_driver_repo_key_fingerprint": "3BF863CC", "nvidia_driver_repo_base_url": "mirror.example/cuda",
             "nvidia_driver_repo_key_url": "mirror.example/cuda.asc", "sglang_stack_uv_version": "latest",
             "sglang_router_version": "0.3", "sglang_stack_index_url": "mirror.example/simple",
             "sglang_stack_flashinfer_index_url": "flashinfer.ai/whl", "sglang_weights_index_url": "pypi",
             "sglang_weights_hf_endpoint": "hf-mirror.example", "sglang_router_index_url": "mirror.example",
             "sglang_weights_model_revision": "main", "sglang_weights_draft_revision": "v1.0",
             "sglang_weights_model_manifest": "/nonexistent/kimi.sha256",
             "sglang_weights_draft_manifest": "/nonexistent/eagle3.sha256",
             "sglang_weights_model_repo": "Kimi-K2.5", "sglang_weights_draft_repo": "https://huggingface.co/x/y",
             "sglang_weights_hf_hub_version": "latest", "sglang_stack_python_dev_package": "Python3-Dev",
             **{f"sglang_monitoring_{name}": "5 minutes" for name in (
                 "saturated_for", "hicache_pressure_window", "hicache_pressure_for", "failed_for", "restart_window",
                 "router_down_for", "router_workers_for", "drift_for")},
             # The last 23 (issue 49): a rule each up front, or the resolve step's own refusal naming the variable.
             "nvidia_driver_branch": "latest", "nvidia_driver_gpu_name": "NVIDIA RTX PRO 6000 " * 6,
             "sglang_gpu_compute_capability": "sm_120",
             "sglang_cuda_version": "cuda13", "sglang_version": "0.4.99", "sglang_multinode_group": "no_such_group",
             "sglang_hicache_io_backend": "io_uring", "sglang_hicache_mem_layout": "row_major",
             "sglang_hicache_storage_backend": "s3", "sglang_hicache_write_policy": "write_around",
             "sglang_maintenance_why": 'driver "580" $(reboot)', "sglang_service_rolling_serial": "all",
             "sglang_service_template_dir": "/nonexistent/templates",
             "sglang_monitoring_server_job": "sglang server", "sglang_monitoring_router_job": 'router"',
             "sglang_monitoring_node_job": "node{}", "sglang_monitoring_output_dir": "/etc",
             "sglang_monitoring_promtool": "prom tool", "sglang_rollout_lease_host": "no-such-host",
             "sglang_rollout_lease_takeover": "the old one", "sglang_router_wheelhouse": "/nonexistent/wheels",
             "sglang_stack_wheelhouse": "/nonexistent/wheels", "sglang_stack_requirement": "sglang>=0.5",
             "sglang_router_worker_ca": "/etc/ssl/certs/servers-ca.pem"}  # a path, not the PEM text
# Declared options no case touches, each with the reason it can have none: none is left. (The install roles'
# one-value rules, URLs, versions, revisions, manifests, wheelhouses, job names and the alert rules' durations are
# checked up front, module_utils/_field_rules.py, with a case each through _BAD_TEXT.) A new option must get a case
# above (or a rule and a case), or be listed here with the reason it has none.
UNCOVERED: set[str] = set()


def _declared() -> dict[str, dict[str, Any]]:
    from ansible_collections.sglang.deploy.plugins.lookup.variable_problems import ROLES, _specs
    return {name: option or {} for options in _specs(ROLES).values() for name, option in (options or {}).items()}


def _touched(cases: list[Case]) -> set[str]:
    from ansible_collections.sglang.deploy.plugins.module_utils.sglang_settings import ALIASES
    return {ALIASES.get(name, name) for case in cases for name in case.variables}


def _class12(add: Add, cases: list[Case]) -> None:
    """One case per declared option that no class above touches: a value of the wrong type, a choice not offered,
    a number out of range, or a text its rule refuses."""
    touched = _touched(cases)
    for name, option in sorted(_declared().items()):
        if name in touched or name in UNCOVERED:
            continue
        value = "Not-A-Choice" if option.get("choices") else _BAD_TEXT.get(name, _BAD_BY_TYPE.get(option.get("type")))
        if value is not None:
            add(12, f"option-{name}", {name: value})


def _cases() -> list[Case]:
    c: list[Case] = []

    def add(klass: int, name: str, variables: dict[str, Any], variable: str | None = None) -> None:
        c.append(Case(klass, name, variables, variable or next(iter(variables))))

    for klass in (_class1, _class2, _class3, _class4, _class5, _class6, _class7, _class8, _class9, _class10,
                  _class11):
        klass(add)
    _class12(add, list(c))
    return c


CASES = _cases()
# Cases whose host is a router too (group sglang_routers), where the router's control-plane rules apply.
ROUTER_CASES = [case.name for case in CASES if case.name.startswith("router-cp-")]


def _inventory(tmp: Path) -> Path:
    """The example inventory's variables for every case host, the case's own in its host_vars; hosts
    are docker containers that do not exist, so a contacted host shows as unreachable."""
    inventory = tmp / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "host_vars").mkdir()
    shared = yaml.safe_load((ROOT / "inventory/example/group_vars/all.yml").read_text())
    shared.update(yaml.safe_load((ROOT / "inventory/example/group_vars/sglang_workers/vault.yml").read_text()))
    shared["sglang_model_config_file"] = MODEL
    shared["sglang_draft_config_file"] = str(ROOT / "extensions/molecule/resources/models/kimi-k2.5-eagle3/config.json")
    shared["ansible_connection"] = "community.docker.docker"
    (inventory / "group_vars/all.yml").write_text(yaml.safe_dump(shared))
    listed = tmp / "list.json"
    listed.write_text("[1, 2]")
    hosts = {}
    for case in CASES:
        variables = {k: (str(listed) if v == "@LIST_JSON@" else v) for k, v in case.variables.items()}
        (inventory / "host_vars" / f"{case.name}.yml").write_text(json.dumps(variables))
        hosts[case.name] = {"ansible_host": f"sglang-never-created-{case.name}"[:60]}
    routers = {name: {} for name in ROUTER_CASES}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"children": {"sglang_workers": {"hosts": hosts}, "sglang_routers": {"hosts": routers}}}}))
    return inventory


def _run(inventory: Path, playbook: str, *extra: str) -> dict[str, Any]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_CALLBACKS_ENABLED="sglang.deploy.sglang_progress", ANSIBLE_NOCOLOR="1")
    binary = shutil.which("ansible-playbook") or str(Path(sys.executable).parent / "ansible-playbook")
    run = subprocess.run([binary, playbook, "-i", str(inventory), *extra], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=False, timeout=900)
    assert run.stdout.startswith("{"), run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(run.stdout)


def _outcomes(result: dict[str, Any]) -> dict[str, tuple[str, str, bool]]:
    """host -> (the task that failed first, its message, whether the host was ever unreachable)."""
    outcome: dict[str, tuple[str, str, bool]] = {}
    unreachable = set()
    for play in result["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("unreachable"):
                    unreachable.add(host)
                if res.get("failed") and host not in outcome:
                    outcome[host] = (task["task"]["name"], str(res.get("msg", "")), False)
    return {host: (name, msg, host in unreachable) for host, (name, msg, _seen) in outcome.items()}


def _refusals(inventory: Path, playbook: str, *extra: str) -> dict[str, tuple[str, str, bool]]:
    """Every case's refusal. A refusal of the variable check (playbooks/check.yml) ends the whole run
    (any_errors_fatal), as it must for a deploy; the cases it did not reach run again, limited to them."""
    outcome: dict[str, tuple[str, str, bool]] = {}
    pending = [case.name for case in CASES]
    while pending:
        found = _outcomes(_run(inventory, playbook, "--limit", ",".join(pending), *extra))
        assert found, f"{playbook} accepted {pending}"
        outcome.update(found)
        pending = [name for name in pending if name not in found]
    return outcome


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("matrix")
    inventory = _inventory(tmp)
    render = _refusals(inventory, "playbooks/render.yml", "-e", f"render_dir={tmp / 'render'}")
    sample = _plan_sample(render)
    _run(inventory, "playbooks/plan.yml", "--limit", ",".join(sample), "-e", f"plan_json={tmp / 'plan.json'}")
    return {"tmp": tmp, "render": render, "plan": json.loads((tmp / "plan.json").read_text()),
            "inventory": inventory, "plan_sample": sample}


# The variable check's own refusal task (playbooks/check.yml): most cases stop there.
CHECK_TASK = "Refuse bad variables before any role runs"
PLAN_PER_CLASS = 3


def _plan_sample(render: dict[str, tuple[str, str, bool]]) -> list[str]:
    """The cases plan.yml reports: every case a later step refused (the resolve step, a role's own check), and the
    first PLAN_PER_CLASS of each class that the variable check refused. plan.yml reports what render.yml refuses
    through the same check and resolve code, which render runs on every case; over all 338 hosts it took 182 s
    (about 30 ms per host and task, Ansible's own), most of the matrix's time, for no refusal of its own."""
    later = [case.name for case in CASES if render.get(case.name, ("", "", False))[0] != CHECK_TASK]
    first: dict[int, list[str]] = {}
    for case in CASES:
        if case.name not in later and len(first.setdefault(case.klass, [])) < PLAN_PER_CLASS:
            first[case.klass].append(case.name)
    return later + [name for names in first.values() for name in names]


def _names_variable(message: str, variable: str) -> bool:
    lines = [line.lstrip("- ").strip() for line in message.splitlines()]
    return any(line.startswith(variable) and "allowed" in line for line in lines)


def test_the_matrix_covers_every_class_with_at_least_100_inputs() -> None:
    per_class = Counter(case.klass for case in CASES)
    assert sorted(per_class) == list(range(1, 13))
    assert len(CASES) >= 100
    assert len({case.name for case in CASES}) == len(CASES)
    print("MEASURED bad-input matrix:", len(CASES), "inputs;", dict(sorted(per_class.items())))


def test_plan_yml_s_report_switch_cannot_be_given(tmp_path: Path) -> None:
    """__check_report (plan.yml's report mode, a play variable there) given with -e to render.yml: refused naming
    it, nothing written. (Not a case of the matrix: in plan.yml the refused host has no plan to keep the reason.)"""
    result = _run(ROOT / "inventory/example", "playbooks/render.yml", "-e", "__check_report=true",
                  "-e", f"render_dir={tmp_path / 'render'}")
    outcome = _outcomes(result)
    assert outcome and all(_names_variable(message, "__check_report") for _task, message, _seen in outcome.values())
    assert not (tmp_path / "render").exists()


def test_every_declared_option_is_touched_by_a_case() -> None:
    """Every option of every role's argument spec is touched by a case, or listed in UNCOVERED with its reason:
    a new variable without a rule (and a case) fails here."""
    declared = set(_declared())
    untouched = declared - _touched(CASES)
    assert sorted(untouched - UNCOVERED) == [], "options no case touches: give each a case, or a rule and a case"
    assert sorted(UNCOVERED - untouched) == [], "listed in UNCOVERED but touched by a case (or not declared)"
    print(f"MEASURED bad-input matrix: {len(declared) - len(untouched)} of {len(declared)} declared options "
          f"touched by a case; {len(untouched)} listed in UNCOVERED")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_render_refuses_naming_the_variable_and_writes_nothing(runs: dict[str, Any], case: Case) -> None:
    task, message, unreachable = runs["render"].get(case.name, ("", "", False))
    assert _names_variable(message, case.variable), f"{task}: {message}"
    assert not (runs["tmp"] / "render" / case.name).exists()
    assert not unreachable


def test_plan_json_keeps_the_reason_of_each_kind_of_refusal(runs: dict[str, Any]) -> None:
    """plan.yml's report mode keeps each sampled case's refusal, naming its variable: every case a later step than
    the variable check refused, and PLAN_PER_CLASS of each class that the check refused (_plan_sample)."""
    by_name = {case.name: case for case in CASES}
    sample = runs["plan_sample"]
    assert sorted(runs["plan"]) == sorted(sample)
    assert {by_name[name].klass for name in sample} == set(range(1, 13))
    lost = {name: runs["plan"][name]["errors"] for name in sample
            if runs["plan"][name]["ok"] or not any(error.startswith(by_name[name].variable) and "allowed" in error
                                                   for error in runs["plan"][name]["errors"])}
    assert not lost, lost
    later = [name for name in sample if runs["render"][name][0] != CHECK_TASK]
    print(f"MEASURED bad-input matrix: plan.yml kept the reason of {len(sample)} cases ({len(later)} refused after "
          f"the variable check, {len(sample) - len(later)} by it, {PLAN_PER_CLASS} per class)")


def test_deploy_check_refuses_every_case_before_contacting_any_host(runs: dict[str, Any]) -> None:
    """deploy.yml --check --diff: every case refused in the variable check or the resolve step, no host
    contacted, nothing changed."""
    outcome = _refusals(runs["inventory"], "deploy.yml", "--check", "--diff")
    for case in CASES:
        task, message, unreachable = outcome[case.name]
        assert _names_variable(message, case.variable), f"{case.name}: {task}: {message}"
        assert "nothing was changed" in message
        assert not unreachable, f"{case.name} was contacted"
