"""No input can hurt a host (issue 49): system paths, accounts, the dump directory, hooks, URL paths, the lease,
switches the playbooks set, and the cross-field rules, refused by the variable check naming the variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.lookup.variable_problems import ROLES, _specs
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_inputs as inputs
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_presharded as presharded
from hypothesis import given, settings
from hypothesis import strategies as st

SPECS = _specs(ROLES)
KNOWN = inputs.known_names(SPECS)
PROPERTY = settings(max_examples=80, deadline=None, derandomize=True)


def refusals(**given: Any) -> list[str]:
    return inputs.check(dict(given), list(given), SPECS)


def about(errors: list[str], variable: str) -> list[str]:
    return [e for e in errors if e.startswith(variable + ":") or e.startswith(variable + "[")]


# --- the path table: every entry refused, with everything under a tree, and the allowed neighbours ----------------

REFUSED_PATHS = ["/", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/usr/local", "/usr/local/sglang", "/etc",
                 "/etc/sglang", "/boot", "/proc", "/proc/1", "/sys", "/dev", "/dev/shm", "/run", "/run/sglang",
                 "/tmp", "/tmp/venv", "/var/tmp/x", "/root", "/root/sglang", "/home", "/home/alice", "/opt", "/srv",
                 "/mnt", "/media", "/var", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail",
                 "/var/opt", "/var/local", "/var/backups", "/snap", "/lost+found", "/var/lib/", "/opt/../etc"]
ALLOWED_PATHS = ["/var/lib/sglang", "/opt/sglang/0.5.23/venv", "/srv/models-cache", "/data/sglang",
                 "/home/alice/sglang", "/var/log/sglang", "/mnt/nvme/sglang", "/var/cache/sglang"]


def test_every_entry_of_the_system_path_table_is_refused() -> None:
    for root in inputs.SYSTEM_PATHS:
        assert inputs.system_path_reason(root), root
    for root, (kind, _reason) in inputs.SYSTEM_PATHS.items():
        below = root.rstrip("/") + "/sglang"
        # /home/<name> is a user's home; one level further is the user's own.
        assert bool(inputs.system_path_reason(below)) == (kind == "tree" or root == "/home"), below


@pytest.mark.parametrize("path", REFUSED_PATHS)
@pytest.mark.parametrize("var", ["sglang_home", "sglang_presharded_dir", "sglang_stack_wheelhouse_dir",
                                 "sglang_router_wheelhouse_dir", "sglang_weights_state_dir", "sglang_stack_uv_dir",
                                 "sglang_stack_python_install_dir"])
def test_an_owned_path_of_the_system_is_refused_naming_the_variable(var: str, path: str) -> None:
    found = about(refusals(**{var: path}), var)
    assert found and "cannot be the package's" in found[0] and "allowed:" in found[0], found


@pytest.mark.parametrize("path", ALLOWED_PATHS)
def test_a_directory_of_its_own_is_allowed(path: str) -> None:
    assert refusals(sglang_home=path) == []


def test_a_writable_path_of_the_unit_follows_the_same_rule() -> None:
    found = refusals(sglang_service_read_write_paths=["/data/scratch", "/"])
    assert len(found) == 1 and found[0].startswith("sglang_service_read_write_paths: / cannot be the package's")
    assert refusals(sglang_service_read_write_paths=["/data/scratch"]) == []


@pytest.mark.parametrize(("var", "path", "refused"), [
    ("sglang_venv_dir", "/opt/sglang/0.5.23/venv", False), ("sglang_venv_dir", "/opt/venv", True),
    ("sglang_venv_dir", "/opt", True), ("sglang_venv_dir", "/tmp/venv", True), ("sglang_venv_dir", "/usr/venv", True),
    ("sglang_router_venv_dir", "/opt/sglang-router/0.3.2/venv", False), ("sglang_router_venv_dir", "/srv/venv", True),
])
def test_a_virtualenv_and_the_parent_the_package_chowns(var: str, path: str, refused: bool) -> None:
    assert bool(about(refusals(**{var: path}), var)) == refused


@pytest.mark.parametrize(("var", "path", "refused"), [
    ("sglang_service_config_dir", "/etc/sglang", False), ("sglang_service_config_dir", "/etc", True),
    ("sglang_service_config_dir", "/", True), ("sglang_service_config_dir", "/etc/ssh", True),
    ("sglang_service_config_dir", "/etc/systemd/system", True), ("sglang_service_config_dir", "/usr/etc", True),
    ("sglang_router_config_dir", "/etc/sglang-router", False), ("sglang_router_config_dir", "/etc/pam.d", True),
    ("sglang_rollout_rollback_dir", "/etc/sglang/rollback", False), ("sglang_rollout_rollback_dir", "/var", True),
    ("sglang_rollout_rollback_dir", "/var/lib/sglang-rollback", False),
])
def test_a_configuration_directory_is_etc_of_its_own(var: str, path: str, refused: bool) -> None:
    assert bool(about(refusals(**{var: path}), var)) == refused


@pytest.mark.parametrize(("var", "path", "refused"), [
    ("sglang_rollout_lease_file", "/var/lib/sglang-deploy/rollout-lease.json", False),
    ("sglang_rollout_lease_file", "/etc/lease.json", True), ("sglang_rollout_lease_file", "/lease.json", True),
    ("sglang_rollout_lease_file", "lease.json", True), ("sglang_weights_hf_token_file", "/usr/token", True),
])
def test_a_file_the_package_writes_has_a_directory_of_its_own(var: str, path: str, refused: bool) -> None:
    assert bool(about(refusals(**{var: path}), var)) == refused


def test_the_unit_directory_is_one_systemd_reads() -> None:
    assert refusals(sglang_service_unit_dir="/etc/systemd/system") == []
    assert about(refusals(sglang_service_unit_dir="/"), "sglang_service_unit_dir")


@pytest.mark.parametrize(("given", "variable"), [
    ({"sglang_home": "/models", "sglang_model_path": "/models/kimi"}, "sglang_home"),
    ({"sglang_home": "/models/kimi/state", "sglang_model_path": "/models/kimi"}, "sglang_home"),
    ({"sglang_service_read_write_paths": ["/models/kimi"], "sglang_model_path": "/models/kimi"},
     "sglang_service_read_write_paths"),
    ({"sglang_presharded_dir": "/models", "sglang_model_path": "/models/kimi",
      "sglang_service_read_write_paths": ["/models"]}, "sglang_presharded_dir"),
    ({"sglang_presharded_dir": "/models/eagle", "sglang_speculative_draft_model_path": "/models/eagle"},
     "sglang_presharded_dir"),
    ({"sglang_model_path": "/"}, "sglang_model_path"),
    ({"sglang_model_path": "/opt"}, "sglang_model_path"),
])
def test_no_owned_path_is_the_models_or_holds_it(given: dict[str, Any], variable: str) -> None:
    assert about(refusals(**given), variable), refusals(**given)


# --- the accounts ------------------------------------------------------------------------------

@pytest.mark.parametrize("var", sorted(inputs.ACCOUNTS))
@pytest.mark.parametrize("name", ["root", "daemon", "nobody", "sudo", "www-data"])
def test_an_account_of_the_system_is_never_the_service_account(var: str, name: str) -> None:
    found = about(refusals(**{var: name}), var)
    assert found and "allowed:" in found[0]


@pytest.mark.parametrize("login", inputs.LOGIN_VARIABLES)
def test_the_login_user_is_never_the_service_account(login: str) -> None:
    found = refusals(**{login: "deploy", "sglang_user": "deploy"})
    assert about(found, "sglang_user") and login in found[0]
    assert about(refusals(**{login: "sglang"}), "sglang_user")  # the default sglang_user
    assert refusals(**{login: "deploy"}) == []


def test_an_existing_account_is_refused_unless_the_package_made_it_or_it_is_adopted() -> None:
    alice = ["x", "1000", "1000", "Alice", "/home/alice", "/bin/bash"]
    mine = ["x", "998", "998", inputs.ACCOUNT_COMMENT, "/var/lib/sglang", "/usr/sbin/nologin"]
    home = "/var/lib/sglang"
    found = inputs.existing_account_problems("alice", "sglang", alice, None, home, adopt=False)
    assert len(found) == 1 and found[0].startswith("sglang_user: the account 'alice' already exists")
    assert inputs.ADOPT_VARIABLE in found[0]
    assert inputs.existing_account_problems("alice", "sglang", alice, None, home, adopt=True) == []
    assert inputs.existing_account_problems("sglang", "sglang", mine, None, home, adopt=False) == []
    assert inputs.existing_account_problems("sglang", "sglang", None, None, home, adopt=False) == []
    old = ["x", "998", "998", "", "/var/lib/sglang/", "/usr/sbin/nologin"]  # made by a release before the comment
    assert inputs.existing_account_problems("sglang", "sglang", old, None, home, adopt=False) == []
    www = ["x", "33", "33", "www-data", "/var/www", "/usr/sbin/nologin"]  # a daemon's account: another home
    assert inputs.existing_account_problems("www", "sglang", www, None, home, adopt=False)
    toor = ["x", "0", "0", inputs.ACCOUNT_COMMENT, "/root", "/bin/sh"]
    assert inputs.existing_account_problems("toor", "sglang", toor, None, home, adopt=True)
    assert inputs.existing_account_problems("sglang", "zero", None, ["x", "0", ""], home, adopt=True)


def test_the_account_filter_reads_getent_facts() -> None:
    from ansible_collections.sglang.deploy.plugins.filter.accounts import account_refusals
    passwd = {"alice": ["x", "1000", "1000", "", "/home/alice", "/bin/bash"]}
    assert account_refusals(passwd, "alice", "sglang", {"sglang": None}, "/var/lib/sglang")
    assert account_refusals({"sglang": None}, "sglang", "sglang", {"sglang": None}, "/var/lib/sglang") == []
    assert account_refusals(passwd, "alice", "sglang", None, "/var/lib/sglang", True) == []


# --- the dump directory and its prune -------------------------------------------------------------

def test_the_dump_directory_is_never_the_home_nor_a_cache() -> None:
    assert about(refusals(sglang_presharded_dir="/var/lib/sglang"), "sglang_presharded_dir")
    assert about(refusals(sglang_presharded_dir="/var/lib/sglang/.cache"), "sglang_presharded_dir")
    assert about(refusals(sglang_home="/data/s", sglang_presharded_dir="/data"), "sglang_presharded_dir")
    assert refusals(sglang_presharded_dir="/var/lib/sglang/presharded") == []
    assert refusals(sglang_home="/data/sglang") == []  # the default dump directory follows the home


@pytest.mark.parametrize("extra", [{"load-format": "presharded"}, {"load_format": "PRESHARDED"},
                                   {"model-loader-extra-config": '{"presharded_path": "/models"}'}])
def test_presharded_loading_through_the_extra_args_is_refused(extra: dict[str, str]) -> None:
    found = [e for e in refusals(sglang_extra_args=extra) if "sglang_presharded" in e]
    assert found and found[0].startswith("sglang_extra_args[")


def _dump(tmp: Path, name: str, mark: bool, ready: bool = True) -> None:
    sub = tmp / name / "TP-8-sig-0123456789abcdef"
    sub.mkdir(parents=True)
    if ready:
        (sub / presharded.READY_FILE).write_text("")
    if mark:
        (tmp / name / presharded.MARKER_FILE).write_text("")


def test_the_prune_removes_only_marked_dumps_of_other_keys(tmp_path: Path) -> None:
    current, previous, older, unmarked = "a" * 16, "b" * 16, "c" * 16, "d" * 16
    for name in (current, previous, older):
        _dump(tmp_path, name, mark=True)
    _dump(tmp_path, unmarked, mark=False)
    for name in ("kimi-k2.5", "kimi-k2.5-eagle3"):  # the weights, in a dump directory someone shared with them
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    state = presharded.read_state(str(tmp_path))
    pruned = presharded.to_prune(state, current)
    assert older in pruned or previous in pruned
    assert set(pruned) <= {previous, older}
    assert state["foreign"] == ["kimi-k2.5", "kimi-k2.5-eagle3"]


@PROPERTY
@given(st.dictionaries(st.text(min_size=1, max_size=20), st.fixed_dictionaries(
    {"ready": st.booleans(), "marked": st.booleans(), "mtime": st.integers(0, 10**9)}), max_size=8),
    st.sampled_from(["a" * 16, "0123456789abcdef"]))
def test_the_prune_never_lists_an_unmarked_entry_nor_the_current_key(dumps: dict[str, Any], key: str) -> None:
    pruned = presharded.to_prune({"dumps": dumps}, key)
    assert all(dumps[name]["marked"] for name in pruned)
    assert key not in pruned and key + presharded.DRAFT_SUFFIX not in pruned
    assert all(presharded.KEY_RE.match(name.removesuffix(presharded.DRAFT_SUFFIX)) for name in pruned)


# --- hooks, URL paths, the lease, the switches ----------------------------------------------------

@pytest.mark.parametrize("var", sorted(inputs.HOOK_FILES))
def test_every_hook_list_is_checked_up_front(var: str, tmp_path: Path) -> None:
    hook = tmp_path / "hook.yml"
    hook.write_text("---\n- name: Hook\n  ansible.builtin.debug:\n")
    assert refusals(**{var: [str(hook)]}) == []
    assert about(refusals(**{var: [str(tmp_path / "typo.yml")]}), var)


@pytest.mark.parametrize(("value", "refused"), [("/health_generate", False), ("/health?x=1", False),
                                                ("health_generate", True), ("", True), ("/a b", True)])
def test_the_health_path_starts_with_a_slash(value: str, refused: bool) -> None:
    assert bool(about(refusals(sglang_service_health_path=value), "sglang_service_health_path")) == refused


@pytest.mark.parametrize(("given", "refused"), [
    ({"sglang_rollout_lease_ttl": 7200}, False), ({"sglang_rollout_lease_ttl": 1}, True),
    ({"sglang_rollout_lease_ttl": 599}, True), ({"sglang_rollout_lease_ttl": 1300}, True),
    ({"sglang_rollout_lease_ttl": 1380}, False),
    ({"sglang_rollout_lease_ttl": 800, "sglang_ready_timeout": 600}, True),
    ({"sglang_ready_timeout": 7200}, True),
    ({"sglang_rollout_lease_ttl": 900, "sglang_ready_timeout": 600, "sglang_service_drain_timeout": 60}, False),
])
def test_the_lease_outlasts_a_batch(given: dict[str, Any], refused: bool) -> None:
    named = "sglang_rollout_lease_ttl" if "sglang_rollout_lease_ttl" in given else next(iter(given))
    assert bool(about(refusals(**given), named)) == refused


@pytest.mark.parametrize("var", sorted(inputs.PLAYBOOK_SWITCHES))
def test_a_switch_the_playbooks_set_cannot_be_given(var: str) -> None:
    option = KNOWN.get(var, (None, {}))[1]
    value = {"bool": False, "list": [], "dict": {}}.get(option.get("type", "str"), "release")
    found = about(refusals(**{var: value}), var)
    assert found, refusals(**{var: value})


def test_config_refuse_false_as_a_json_bool_names_the_variable() -> None:
    found = refusals(sglang_config_refuse=False)
    assert found and found[0].startswith("sglang_config_refuse: is set by the playbooks")


# --- cross-field rules -------------------------------------------------------------------------

@pytest.mark.parametrize(("steps", "topk", "tokens", "refused"), [
    (3, 1, 4, False), (3, 1, 3, True), (3, 1, 2, True), (3, 1, 8, True), (3, 4, 8, False), (3, 4, 3, True),
])
def test_draft_tokens_follow_the_steps(steps: int, topk: int, tokens: int, refused: bool) -> None:
    given = {"sglang_speculative_algorithm": "EAGLE3", "sglang_speculative_num_steps": steps,
             "sglang_speculative_eagle_topk": topk, "sglang_speculative_num_draft_tokens": tokens}
    assert bool(about(refusals(**given), "sglang_speculative_num_draft_tokens")) == refused


def test_an_environment_value_execve_refuses() -> None:
    assert about(refusals(sglang_env={"BIG": "x" * 200_000}), "sglang_env")
    assert refusals(sglang_env={"SMALL": "x" * 1000}) == []


@pytest.mark.parametrize(("value", "refused"), [("gpu-1.example", False), ("10.0.0.1", False), ("fd00::1", False),
                                                ("gpu 1", True), ("a/b", True)])
def test_the_advertised_host_is_one_name(value: str, refused: bool) -> None:
    assert bool(about(refusals(sglang_advertise_host=value), "sglang_advertise_host")) == refused


def test_the_defaults_pass_the_safety_rules() -> None:
    defaults = {name: option.get("default") for name, (_role, option) in KNOWN.items()
                if option.get("default") is not None and "{{" not in str(option.get("default"))
                and name not in inputs.PLAYBOOK_SWITCHES}
    assert inputs.safety(defaults, KNOWN) == []


# --- the low-severity cases ---------------------------------------------------------------------

@pytest.mark.parametrize(("given", "variable"), [
    ({"sglang_service_limit_nofile": 1}, "sglang_service_limit_nofile"),
    ({"sglang_host_numa_memory": {"nodes_gb": {"0": 220, "00": 90}, "gpus": [0, 0]}}, "sglang_host_numa_memory"),
    ({"sglang_extra_args": {"numa-node": [0, 1]}}, "sglang_extra_args['numa-node']"),
])
def test_the_low_severity_cases_are_refused(given: dict[str, Any], variable: str) -> None:
    found = [e for e in refusals(**given) if e.startswith(variable)]
    assert found and "allowed:" in found[0], refusals(**given)


def test_the_low_severity_rules_accept_the_usual_values() -> None:
    assert refusals(sglang_service_limit_nofile=1048576) == []
    assert refusals(sglang_host_numa_memory={"nodes_gb": {"0": 220, "1": 90}, "gpus": [0, 1]}) == []
    assert refusals(sglang_speculative_algorithm="EAGLE3", sglang_speculative_accept_threshold_single=0.5) == []
    # Without speculative decoding a live threshold is written with a note in the plan (sglang_config), not refused.
    assert refusals(sglang_speculative_accept_threshold_single=0.5) == []
