"""The variable check (sglang_inputs) accepts what the inventories and drills use, and says why it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.sglang.deploy.plugins.lookup.variable_problems import ROLES, _specs
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_inputs import check
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_types import SIZE_ALLOWED, to_bytes
from helpers import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

SPECS = _specs(ROLES)
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)
UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def errors(**given: object) -> list[str]:
    return check(dict(given), list(given), SPECS)


PATTERNS = ("inventory/*/group_vars/*.yml", "extensions/molecule/*/group_vars/*.yml",
            "extensions/molecule/*/host_vars/*.yml")
SHIPPED = sorted(str(p.relative_to(ROOT)) for pattern in PATTERNS for p in ROOT.glob(pattern))


@pytest.mark.parametrize("inventory", SHIPPED)
def test_every_shipped_inventory_passes(inventory: str) -> None:
    data = yaml.safe_load((ROOT / inventory).read_text()) or {}
    templated = {k: v for k, v in data.items() if "{{" not in str(v)}  # evaluated by Ansible in the drills
    assert check(templated, list(data), SPECS) == []


@pytest.mark.parametrize("given", [
    {"sglang_rolling_serial": "25%"}, {"sglang_rolling_serial": 2}, {"hicache_ratio": "2.0"},
    {"sglang_port": 30000}, {"sglang_host": "::"}, {"sglang_host": "gpu-node-1.example"},
    {"nvidia_driver_branch": 580}, {"sglang_api_key": 12345}, {"sglang_service_restart_sec": 0},
    {"sglang_hicache_size": 0}, {"my_own_variable": 1}, {"ansible_host": "10.0.0.1"},
])
def test_accepted(given: dict[str, object]) -> None:
    assert check(given, list(given), SPECS) == []


def test_a_refusal_names_the_variable_says_why_and_what_is_allowed() -> None:
    assert errors(sglang_service_hardening="Strict") == [
        "sglang_service_hardening: 'Strict' is not one of the choices (did you mean strict?); allowed: strict, "
        "basic, none"]
    assert errors(hicache_raito="3") == [
        "hicache_raito: is not a variable of sglang-deploy and would be ignored; allowed: did you mean hicache_ratio?"]
    assert errors(hicache_ratio="0.9")[0].startswith(
        "hicache_ratio (overrides sglang_hicache_ratio): 0.9 is out of range; allowed: a number above 1.0")


def test_every_problem_is_listed_not_only_the_first() -> None:
    found = errors(sglang_port=80, sglang_service_drain_timeout=0, sglang_tp_szie=4)
    assert [e.split(":")[0] for e in found] == ["sglang_tp_szie", "sglang_service_drain_timeout", "sglang_port"]


def test_a_hook_must_be_an_existing_task_file(tmp_path: Path) -> None:
    hook = tmp_path / "hook.yml"
    hook.write_text("---\n- name: Hook\n  ansible.builtin.debug:\n")
    assert errors(sglang_rollout_pre_restart_hooks=[str(hook)]) == []
    assert errors(sglang_rollout_pre_restart_hooks=[str(tmp_path / "missing.yml")])


def test_stall_timeouts_are_checked_as_the_readiness_waiter_checks_them() -> None:
    allowed = ("allowed: starting, distributed_init, loading_weights, kv_cache, cuda_graphs, host_kv_pool, warmup, "
               "each a whole number of seconds >= 1")
    assert errors(sglang_service_stall_timeouts={"loading": 300, "warmup": 0}) == [
        f"sglang_service_stall_timeouts: 'loading' is not a load phase; {allowed}",
        f"sglang_service_stall_timeouts: warmup: 0 is not a whole number of seconds >= 1; {allowed}"]


@pytest.mark.parametrize("var", ["sglang_api_key", "sglang_admin_api_key", "sglang_router_api_key",
                                 "sglang_router_admin_api_key"])
def test_an_api_key_is_one_word_of_ascii_and_a_refusal_never_shows_it(var: str) -> None:
    assert errors(**{var: "Ab3~+/=._-"}) == []
    for bad in ("two words", "clé-secrète"):
        found = errors(**{var: bad})
        assert len(found) == 1 and found[0].startswith(f"{var}: contains a blank or a character outside printable")
        assert bad not in found[0] and "secr" not in found[0]
    found = errors(**{var: "-Xk3y"})  # after --api-key, argparse would take it for an option
    assert found == [f"{var}: starts with '-', which SGLang's argument parser would read as an option (the value is "
                     "not shown); allowed: one word of printable ASCII that does not start with '-'"]


@pytest.mark.parametrize(("flag", "why"), [
    ("api-key", "is set by the deploy; allowed: other router flags (use sglang_router_api_key)"),
    ("--worker-urls", "is set by the deploy"),
    ("control-plane-api-keys", "is set by the deploy; allowed: other router flags (use sglang_router_admin_api_key)"),
    ("tls-cert-path", "is set by the deploy; allowed: other router flags (use sglang_router_tls_cert)"),
    ("--tls-key-path", "is set by the deploy; allowed: other router flags (use sglang_router_tls_key)"),
    ("jwt-token", "would put a secret on the router's command line"),
    ("oracle_password", "would put a secret on the router's command line"),
])
def test_router_flags_the_deploy_owns_or_that_carry_secrets_are_refused(flag: str, why: str) -> None:
    found = errors(sglang_router_extra_args={flag: "x"})
    assert len(found) == 1 and found[0].startswith(f"sglang_router_extra_args[{flag!r}]: {why}"), found


def test_router_flags_that_only_look_like_secrets_are_accepted() -> None:
    assert errors(sglang_router_extra_args={"tokenizer-path": "/m", "server-key-path": "/k", "max-tree-size": 9}) == []


def test_one_of_our_variables_without_its_prefix_is_refused_when_given_with_dash_e() -> None:
    """-e mem_fraction_static=0.88 would be ignored silently; in the inventory the name may be another tool's."""
    given = {"mem_fraction_static": 0.88, "tp_size": 4, "api_key": "k", "hicache_ratio": 2.0}
    found = check(given, list(given), SPECS, command_line={"mem_fraction_static", "tp_size", "hicache_ratio"})
    assert found == [
        "mem_fraction_static: is not a variable of sglang-deploy and would be ignored; allowed: did you mean "
        "sglang_mem_fraction_static?",
        "tp_size: is not a variable of sglang-deploy and would be ignored; allowed: did you mean sglang_tp_size?"]
    assert check(given, list(given), SPECS) == []  # the same names from the inventory: left alone


# --- weight sizes state their unit (issue 12) ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "size"), [
    ("547 GiB", 547 * 2**30), ("587 GB", 587 * 10**9), ("587354357760 B", 587354357760), ("1.5 TB", 15 * 10**11),
    ("547gib", 547 * 2**30), (" 12 MiB ", 12 * 2**20), ("3 bytes", 3), ("0.5 KiB", 512),
])
def test_a_size_is_read_with_its_unit(text: str, size: int) -> None:
    assert to_bytes(text) == size
    assert errors(sglang_model_weight_size=text) == []


@pytest.mark.parametrize(("value", "why"), [
    (547, "'547' has no unit (GB and GiB differ by 7 %)"),  # a YAML number, checked as the text it is
    ("547", "'547' has no unit (GB and GiB differ by 7 %)"),
    (547.0, "'547.0' has no unit (GB and GiB differ by 7 %)"),
    ("547G", "'547G' has a one-letter unit; du -h and ls -lh mean GiB by it, write '547 GiB'"),
    ("3 gigs", "'3 gigs' has an unknown unit 'gigs'"),
    ("1.5 B", "'1.5 B' is not a whole number of bytes"),
    ("-1 GB", "'-1 GB' is not a size"),
    ("0 GB", "'0 GB' is out of range"),
    ("2 PB", "'2 PB' has an unknown unit 'PB'"),
])
def test_a_size_without_a_usable_unit_is_refused_naming_the_units(value: object, why: str) -> None:
    found = errors(sglang_draft_weight_size=value)
    assert len(found) == 1 and found[0].startswith(f"sglang_draft_weight_size: {why}"), found
    assert "allowed:" in found[0]


def test_the_old_gb_variables_are_refused_with_their_successor() -> None:
    found = errors(sglang_model_weight_gb=547)
    assert found == [f"sglang_model_weight_gb: was replaced by sglang_model_weight_size, a size that states its unit; "
                     f"allowed: sglang_model_weight_size: {SIZE_ALLOWED}"]


@pytest.mark.parametrize(("old", "new", "role"),
                         [("sglang_service_lease_takeover", "sglang_rollout_lease_takeover", "sglang_rollout"),
                          ("sglang_service_post_drain_hooks", "sglang_rollout_post_drain_hooks", "sglang_rollout"),
                          ("sglang_service_reboot_command", "sglang_maintenance_reboot_command", "sglang_maintenance")])
def test_the_variables_the_role_split_moved_are_refused_with_their_new_name(old: str, new: str, role: str) -> None:
    """2.0.0 split sglang_service: an inventory that still sets an old name is told the new one, not ignored."""
    found = errors(**{old: []})
    assert found == [f"{old}: was replaced by {new}, role {role} owns it since 2.0.0; allowed: {new}: "
                     "the same value under the new name"], found


@PROPERTY
@given(number=st.integers(min_value=1, max_value=10**6), unit=st.sampled_from(sorted(UNITS)),
       blank=st.sampled_from(["", " ", "  "]))
def test_any_number_with_a_unit_is_that_many_units_and_without_one_is_refused(
        number: int, unit: str, blank: str) -> None:
    assert to_bytes(f"{number}{blank}{unit}") == number * UNITS[unit]
    assert to_bytes(f"{number}{blank}{unit.lower()}") == number * UNITS[unit]
    with pytest.raises(ValueError, match="has no unit"):
        to_bytes(f"{number}{blank}")


def router_errors(**given: object) -> list[str]:
    """The refusals for a host of group sglang_routers."""
    return check(dict(given), list(given), SPECS, groups={"sglang_routers"})


BOTH_KEYS = {"sglang_router_api_key": "client-k1", "sglang_router_admin_api_key": "admin-k1"}


@pytest.mark.parametrize("given", [
    BOTH_KEYS,
    {**BOTH_KEYS, "sglang_router_host": "10.0.0.5"},
    {"sglang_router_host": "127.0.0.1"},  # loopback only: no key needed
    {"sglang_router_host": "::1", "sglang_router_api_key": "client-k1"},
    {"sglang_router_allow_insecure_control_plane": True},  # the inventory says so
    {"sglang_router_allow_insecure_control_plane": True, "sglang_router_api_key": "client-k1"},
])
def test_a_router_off_loopback_with_both_keys_or_an_opt_in_is_accepted(given: dict[str, object]) -> None:
    assert router_errors(**given) == []


@pytest.mark.parametrize(("given", "variables"), [
    ({}, ["sglang_router_admin_api_key", "sglang_router_api_key"]),  # the default bind, 0.0.0.0, no key
    ({"sglang_router_api_key": "client-k1"}, ["sglang_router_admin_api_key"]),
    ({"sglang_router_admin_api_key": "admin-k1", "sglang_router_host": "::"}, ["sglang_router_api_key"]),
    ({"sglang_router_api_key": "client-k1", "sglang_router_host": "10.0.0.5"}, ["sglang_router_admin_api_key"]),
])
def test_a_router_off_loopback_without_both_keys_is_refused_naming_the_missing_one(
        given: dict[str, object], variables: list[str]) -> None:
    found = router_errors(**given)
    assert [e.split(":", 1)[0] for e in found] == variables, found
    for error in found:
        assert "off loopback" in error and "allowed:" in error and "sglang_router_allow_insecure_control_plane" in error
        assert "client-k1" not in error and "admin-k1" not in error
    # The same variables on a server host (not a router) are not the router's concern.
    assert errors(**given) == []


ROUTER_CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUW\n-----END CERTIFICATE-----\n"
ROUTER_KEY = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0a2V5bWF0ZXJpYWw\n-----END PRIVATE KEY-----\n"
ROUTER_TLS = {"sglang_router_tls_cert": ROUTER_CERT, "sglang_router_tls_key": ROUTER_KEY,
              "sglang_router_tls_ca": ROUTER_CERT}


def test_the_routers_tls_is_all_three_or_none() -> None:
    assert router_errors(**BOTH_KEYS, **ROUTER_TLS) == []
    for missing in ROUTER_TLS:
        found = router_errors(**BOTH_KEYS, **{name: value for name, value in ROUTER_TLS.items() if name != missing})
        assert [e.split(":", 1)[0] for e in found] == [missing], found
        assert "allowed:" in found[0] and "c2VjcmV0a2V5bWF0ZXJpYWw" not in found[0]
    found = router_errors(**BOTH_KEYS, sglang_router_tls_cert=ROUTER_CERT)
    assert [e.split(":", 1)[0] for e in found] == ["sglang_router_tls_key", "sglang_router_tls_ca"], found
    # On a server host the router's variables are not checked together (the router's hosts check them).
    assert errors(sglang_router_tls_cert=ROUTER_CERT) == []


@pytest.mark.parametrize(("name", "value", "why"), [
    ("sglang_router_tls_key", ROUTER_CERT, "not one private key"),
    ("sglang_router_tls_cert", ROUTER_KEY, "not only certificates"),
    ("sglang_router_tls_ca", "/etc/ssl/router-ca.pem", "but a path"),
])
def test_the_routers_pem_texts_are_checked_as_the_servers_are(name: str, value: str, why: str) -> None:
    found = router_errors(**BOTH_KEYS, **{**ROUTER_TLS, name: value})
    assert [e.split(":", 1)[0] for e in found] == [name] and why in found[0], found
    assert "c2VjcmV0a2V5bWF0ZXJpYWw" not in found[0]


def test_the_admin_key_must_differ_from_the_clients_key_even_on_loopback() -> None:
    for host in ("127.0.0.1", "0.0.0.0"):
        found = router_errors(sglang_router_api_key="same-k1", sglang_router_admin_api_key="same-k1",
                              sglang_router_host=host, sglang_router_allow_insecure_control_plane=True)
        assert len(found) == 1 and found[0].startswith("sglang_router_admin_api_key: is the same as"), found
        assert "same-k1" not in found[0]


@pytest.mark.parametrize(("var", "value", "ok"), [
    ("sglang_router_host", "10.0.0.5", True), ("sglang_router_host", "fd00::5", True),
    ("sglang_router_host", "router.example", False), ("sglang_router_host", "localhost", False),
    ("sglang_router_host", "", False),
    ("sglang_router_prometheus_host", "", True), ("sglang_router_prometheus_host", "10.0.0.5", True),
    ("sglang_router_prometheus_host", "0.0.0.0", True), ("sglang_router_prometheus_host", "::", True),
    ("sglang_router_prometheus_host", "localhost", False), ("sglang_router_prometheus_host", "300.1.1.1", False),
    ("sglang_router_prometheus_host", "a b", False),
])
def test_the_routers_listeners_take_ip_addresses_only(var: str, value: str, ok: bool) -> None:
    found = errors(**{var: value})
    if ok:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(f"{var}: {value!r} is not an IP address; allowed: an IPv4 "
                                                       "or IPv6 address"), found


# --- the install roles' one-value rules, up front (module_utils/_field_rules.py, shared with their settings checks) --

def test_every_one_value_rule_accepts_its_roles_default() -> None:
    """A rule that refused its own default would stop every deploy that does not set the variable."""
    from ansible_collections.sglang.deploy.plugins.module_utils._field_rules import RULES
    defaults = {name: option.get("default") for options in SPECS.values() for name, option in (options or {}).items()}
    assert set(RULES) <= set(defaults), set(RULES) - set(defaults)
    # Two defaults are expressions, which the check sees templated (lookup variable_problems templates every value).
    rendered = {"sglang_stack_requirement": "sglang==0.5.23",
                "sglang_service_template_dir": str(ROOT / "roles/sglang_service/templates")}
    assert sorted(name for name in RULES if "{{" in str(defaults[name])) == sorted(rendered)
    defaults.update(rendered)
    assert {name: errors(**{name: defaults[name]}) for name in RULES} == {name: [] for name in RULES}


@pytest.mark.parametrize(("name", "good", "bad", "shown"), [
    ("nvidia_driver_gpu_compute_capability", "12.0", "Blackwell", True),
    ("nvidia_driver_repo_key_fingerprint", "EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC", "3BF863CC", True),
    ("nvidia_driver_repo_base_url", "file:///srv/mirror/cuda", "mirror.example/cuda", False),
    ("nvidia_driver_repo_key_url", "https://mirror.example/cuda.asc", "mirror.example/cuda.asc", False),
    ("sglang_stack_uv_version", "0.13.9", "latest", True),
    ("sglang_router_version", "0.3.2", "0.3", True),
    ("sglang_stack_index_url", "https://user:s3cret@mirror.example/simple", "s3cret@mirror", False),
    ("sglang_stack_flashinfer_index_url", "https://flashinfer.ai/whl", "", False),
    ("sglang_weights_hf_endpoint", "https://hf-mirror.example", "hf-mirror.example", False),
    ("sglang_weights_model_revision", "0123456789abcdef0123456789abcdef01234567", "main", True),
    ("sglang_weights_draft_revision", "", "v1.0", True),
    ("sglang_weights_model_manifest", "", "/nonexistent/kimi.sha256", True),
    ("sglang_weights_model_repo", "moonshotai/Kimi-K2.5", "Kimi-K2.5", True),
    ("sglang_weights_hf_hub_version", "2.4.0", "latest", True),
    ("sglang_stack_python_dev_package", "python3.12-dev", "Python3-Dev", True),
    # issue 49's last 23 options (the ones with a rule of one value)
    ("nvidia_driver_branch", "590", "latest", True),
    ("nvidia_driver_gpu_name", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "x" * 96, True),
    ("sglang_gpu_compute_capability", "12.0", "sm_120", True),
    ("sglang_stack_requirement", "sglang[all]==0.5.23", "sglang>=0.5", False),
    ("sglang_stack_requirement", "sglang==0.5.23", "sglang @ https://user:s3cret@example.invalid/sglang.whl", False),
    ("sglang_stack_wheelhouse", "", "/nonexistent/wheels", True),
    ("sglang_router_wheelhouse", str(ROOT / "tests"), "/nonexistent/wheels", True),
    ("sglang_service_template_dir", str(ROOT / "roles/sglang_service/templates"), str(ROOT / "roles"), True),
    ("sglang_maintenance_why", "kernel 6.1.0-28 pending", 'driver "580"', True),
    ("sglang_maintenance_why", "", "$(touch /root/pwned)", True),
    ("sglang_maintenance_why", "a" * 200, "`id`", True),
    ("sglang_rollout_lease_takeover", "0123456789abcdef", "alice's lease", True),
    ("sglang_monitoring_server_job", "sglang", "sglang server", True),
    ("sglang_monitoring_router_job", "sglang-router", 'router"', True),
    ("sglang_monitoring_node_job", "", "node{}", True),
    ("sglang_monitoring_promtool", "/usr/local/bin/promtool", "prom tool", True),
])
def test_the_install_roles_one_value_rules_refuse_up_front_naming_the_variable(
        name: str, good: str, bad: str, shown: bool) -> None:
    assert errors(**{name: good}) == []
    found = errors(**{name: bad})
    assert len(found) == 1 and found[0].startswith(f"{name}: ") and "allowed: " in found[0], found
    if shown:
        assert repr(bad) in found[0], found
    else:  # a URL may carry a credential
        assert "the value is not shown" in found[0] and (not bad or bad not in found[0]), found


def test_a_manifest_that_is_a_file_on_the_controller_is_accepted(tmp_path: Path) -> None:
    manifest = tmp_path / "kimi.sha256"
    manifest.write_text("")
    assert errors(sglang_weights_model_manifest=str(manifest), sglang_weights_draft_manifest=str(manifest)) == []


@pytest.mark.parametrize(("value", "refused"), [
    ("/", True), ("/etc", True), ("/etc/systemd/system", True), ("/usr/local/share/rules", True), ("/opt", True),
    ("/tmp", True), ("/home/alice", True),
    ("/etc/prometheus/rules.d", False), ("/tmp/monitoring", False), ("/root/monitoring", False),
    ("/home/alice/monitoring", False), ("/srv/prometheus", False), ("monitoring", False),
])
def test_the_monitoring_output_is_never_a_system_directory_of_the_controller(value: str, refused: bool) -> None:
    found = errors(sglang_monitoring_output_dir=value)
    if refused:
        assert len(found) == 1 and found[0].startswith(f"sglang_monitoring_output_dir: {value} cannot hold ") \
            and "allowed: " in found[0], found
    else:
        assert found == []


@pytest.mark.parametrize("name", ["sglang_rolling_serial", "sglang_service_rolling_serial"])
@pytest.mark.parametrize(("value", "ok"), [(1, True), ("25%", True), ("100%", True), ("all", False), (0, False),
                                           ("-1", False), ("101%", False)])
def test_both_names_of_the_batch_size_take_a_count_or_a_percentage(name: str, value: object, ok: bool) -> None:
    found = errors(**{name: value})
    assert (found == []) == ok, found
    assert ok or found[0].startswith(f"{name}: {str(value)!r} is not a batch size; allowed: "), found


def test_the_lease_host_is_a_host_of_the_inventory() -> None:
    hosts = frozenset({"router-1", "gpu-node-1"})
    assert check({"sglang_rollout_lease_host": "router-1"}, ["sglang_rollout_lease_host"], SPECS, hosts=hosts) == []
    found = check({"sglang_rollout_lease_host": "router-9"}, ["sglang_rollout_lease_host"], SPECS, hosts=hosts)
    assert found == ["sglang_rollout_lease_host: 'router-9' is not a host of the inventory, so no deploy could take "
                     "the lease there; allowed: a host of the inventory (a router, or a server), or empty for the "
                     "first router (the first server without one)"]
    assert check({"sglang_rollout_lease_host": ""}, ["sglang_rollout_lease_host"], SPECS, hosts=hosts) == []
