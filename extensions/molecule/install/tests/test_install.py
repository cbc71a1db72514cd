"""Verify the install scenario: apt's side of the driver, the stack, the weights, then drills.

Tests run in file order: the converged host first (packages, pin, hold, files, stack, weights),
then drills that drive molecule/install/converge.yml through the ansible-playbook CLI: refused
inputs (among them / as the home, the login user and an account the deploy did not create as the service user),
a Secure Boot host, a wrong key fingerprint, a host whose nvidia-smi reports 7 GPUs, a
truncated shard, a virtualenv without its GPUs' FlashInfer kernel package, and last the driver
upgrade (and back) with its reboot handler. Every drill leaves the host as converged (Molecule's
idempotence step has already proved that a second run changes nothing). Lines starting with APT
show apt's view, for the record.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any

import pytest
import testinfra.utils.ansible_runner
from drill import recap, run_playbook, why

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
HOST = "sglang-molecule-install"
testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY).get_hosts("sglang_workers")

VERSION, NEWER, BRANCH_NEWER = "580.95.05", "580.105.08", "590.44.01"
DRIVER_PACKAGES = ["firmware-nvidia-gsp", "libcuda1", "libnvidia-ml1", "nvidia-driver-cuda", "nvidia-kernel-open-dkms",
                   "nvidia-kernel-support", "nvidia-modprobe", "nvidia-persistenced"]
SMI_CONFIG = "/etc/sglang-sim/nvidia-smi.json"
UNIT = "sglang-kimi.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
SHARD = "/models/kimi-k2.5/model-00007-of-00064.safetensors"
# The driver role alone: deploy.yml's resolve and host preflight (tagged always) are not what these drills test.
DRIVER_ONLY = ("--tags", "driver", "--skip-tags", "always")
WATCHED = ["/etc/apt/sources.list.d/nvidia-cuda.sources", "/etc/apt/preferences.d/nvidia-driver.pref",
           "/etc/apt/keyrings/nvidia-cuda.asc", "/etc/modprobe.d/blacklist-nouveau.conf", UNIT_PATH]


def play(*extra: str) -> tuple[int, str, float]:
    """Run converge.yml (deploy.yml's install order) through the CLI against this scenario's host."""
    return run_playbook("extensions/molecule/install/converge.yml", *extra)


def changed_tasks(output: str) -> list[str]:
    """Names of the tasks that reported changed (default callback: TASK [...] then changed: lines)."""
    names, current = [], ""
    for line in output.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            current = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif line.startswith("changed:") and current not in names:
            names.append(current)
    return names


def digests(host: Any) -> str:
    return host.check_output("sha256sum " + " ".join(WATCHED))


def dpkg_versions(host: Any) -> dict[str, str]:
    fields = "'${Package} ${Version} ${db:Status-Abbrev}\\n'"
    out = host.check_output(f"dpkg-query -W -f {fields} " + " ".join(DRIVER_PACKAGES))
    # Status-Abbrev: wanted state (i install, h hold), then current state (i installed).
    return {line.split()[0]: line.split()[1] for line in out.splitlines() if line.split()[2][1:2] == "i"}


def show_apt(host: Any, title: str) -> None:
    for command in ("apt-mark showhold", "apt-cache policy nvidia-driver-cuda nvidia-kernel-open-dkms"):
        print(f"\nAPT ({title}) $ {command}\n{host.check_output(command)}")


def invocation(host: Any) -> str:
    return host.check_output(f"systemctl show {UNIT} --property=InvocationID --value").strip()


# --- the converged host ---------------------------------------------------------------------

def test_driver_packages_installed_at_the_pin(host: Any) -> None:
    assert dpkg_versions(host) == dict.fromkeys(DRIVER_PACKAGES, f"{VERSION}-1")
    assert host.package(f"linux-headers-{host.check_output('uname -r')}").is_installed


def test_the_headers_metapackage_follows_the_kernel_metapackage(host: Any) -> None:
    """linux-image-amd64 is installed (prepare), so linux-headers-amd64 is too: a kernel update then
    brings its headers and DKMS can build nvidia.ko for it."""
    assert host.package("linux-image-amd64").is_installed
    assert host.package("linux-headers-amd64").is_installed


def test_the_device_node_unit_runs_before_the_server(host: Any) -> None:
    assert host.check_output("systemctl is-active nvidia-device-nodes.service") == "active"
    assert host.check_output("systemctl is-enabled nvidia-device-nodes.service") == "enabled"
    assert "nvidia-device-nodes: /dev/nvidiactl, 8 GPU node(s) (minors: 0 1 2 3 4 5 6 7)" in host.check_output(
        "journalctl -u nvidia-device-nodes.service --no-pager -o cat")
    requires = host.check_output(f"systemctl show {UNIT} -p Requires --value").split()
    assert "nvidia-device-nodes.service" in requires


def test_the_jit_toolchain_is_installed_at_its_pins(host: Any) -> None:
    versions = {name: host.package(name).version for name in ("cuda-nvcc-13-0", "cuda-cudart-dev-13-0", "g++",
                                                              "python3-dev")}
    assert versions["cuda-nvcc-13-0"] == "13.0.88-1" and versions["cuda-cudart-dev-13-0"] == "13.0.96-1"
    assert host.check_output("/usr/local/cuda-13.0/bin/nvcc --version").splitlines()[3] == \
        "Cuda compilation tools, release 13.0, V13.0.88"
    venv = "/opt/sglang/0.5.23/venv/bin/python"
    prebuilt = host.check_output(f"{venv} -c 'import importlib.metadata as m; "
                                 "print(m.version(\"flashinfer-cubin\"), m.version(\"flashinfer-jit-cache\"))'")
    assert prebuilt == "0.7.2 0.7.2+cu130"
    # The shim requires a kernel package per GPU architecture (the sandbox's stand-in: sm100a and sm120f); the host
    # has its own only, installed without the shim's dependencies, at the shim's exact version.
    kernels = host.check_output(f"{venv} -c 'import importlib.metadata as m; "
                                "print(sorted(m.requires(\"flashinfer-jit-cache\")), "
                                "m.version(\"flashinfer-jit-cache-sm120f\"))'")
    assert kernels == ("['flashinfer-jit-cache-sm100a==0.7.2+cu130', 'flashinfer-jit-cache-sm120f==0.7.2+cu130'] "
                       "0.7.2+cu130"), kernels
    assert host.run(f"{venv} -c 'import importlib.metadata as m; m.version(\"flashinfer-jit-cache-sm100a\")'").rc != 0
    constraints = host.file("/opt/sglang/0.5.23/sglang-constraints.txt").content_string
    assert re.search(r"^flashinfer-jit-cache-sm120f==0\.7\.2\+cu130$", constraints, re.MULTILINE), constraints


def test_every_driver_package_is_held(host: Any) -> None:
    assert sorted(host.check_output("apt-mark showhold").split()) == DRIVER_PACKAGES


def test_apt_prefers_the_pinned_version_over_newer_ones(host: Any) -> None:
    policy = host.check_output("apt-cache policy nvidia-driver-cuda")
    assert f"Installed: {VERSION}-1" in policy and f"Candidate: {VERSION}-1" in policy
    assert re.search(rf"\*\*\* {re.escape(VERSION)}-1 1001", policy), policy
    assert f"{NEWER}-1 500" in policy and f"{BRANCH_NEWER}-1 500" in policy  # newer ones exist, not chosen
    show_apt(host, "converged")


def test_upgrades_do_not_move_the_driver(host: Any) -> None:
    for command in ("apt-get -s upgrade", "apt-get -s dist-upgrade", "apt-get -s install nvidia-driver-cuda"):
        out = host.check_output(command)
        assert not re.search(r"^Inst (nvidia|libnvidia|libcuda|firmware-nvidia)", out, re.MULTILINE), out


def test_repository_is_a_signed_deb822_source(host: Any) -> None:
    source = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources").content_string
    assert "URIs: http://127.0.0.1:8089/compute/cuda/repos/debian12/x86_64/" in source
    assert "Suites: /" in source and "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc" in source
    key = host.file("/etc/apt/keyrings/nvidia-cuda.asc")
    assert key.mode == 0o644 and "BEGIN PGP PUBLIC KEY BLOCK" in key.content_string
    update = host.run("apt-get update")
    assert update.rc == 0 and "NO_PUBKEY" not in update.stderr and "not signed" not in update.stderr, update.stderr
    pin = host.file("/etc/apt/preferences.d/nvidia-driver.pref").content_string
    assert f"Pin: version {VERSION}-*" in pin and "Pin-Priority: 1001" in pin
    unattended = host.file("/etc/apt/apt.conf.d/51nvidia-driver-no-upgrade").content_string
    assert "Unattended-Upgrade::Package-Blacklist" in unattended and '"nvidia-";' in unattended


def test_nouveau_blacklisted_and_persistence_daemon_enabled(host: Any) -> None:
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    daemon = host.service("nvidia-persistenced")
    assert daemon.is_running and daemon.is_enabled
    assert "--persistence-mode" in host.check_output("systemctl cat nvidia-persistenced")
    # Started at boot by the device-node unit too: Ubuntu's unit has no [Install] (tests/fixtures/nvidia-persistenced).
    wants = host.check_output("systemctl show nvidia-device-nodes.service -p Wants --value").split()
    assert "nvidia-persistenced.service" in wants, wants


def test_fake_nvidia_smi_left_in_place(host: Any) -> None:
    assert host.run("dpkg -S /usr/bin/nvidia-smi").rc != 0  # no dummy package owns it
    assert "Fake nvidia-smi" in host.file("/usr/bin/nvidia-smi").content_string


def test_stack_installed_by_uv_from_the_wheelhouse(host: Any) -> None:
    venv = host.check_output("systemctl show sglang-kimi.service -p ExecStart --value").split()[1].split("=", 1)[1]
    venv = venv.rsplit("/bin/", 1)[0]
    assert host.check_output(f"{venv}/bin/python -c 'import sglang; print(sglang.__version__)'") == "0.5.23+sim"
    assert re.search(r"^uv = 0\.13\.9$", host.file(f"{venv}/pyvenv.cfg").content_string, re.MULTILINE)
    assert host.check_output("/opt/sglang/uv/bin/uv --version").split()[1] == "0.13.9"
    constraints = host.file(f"{os.path.dirname(venv)}/sglang-constraints.txt").content_string
    for pin in ("torch==2.14.1", "flashinfer-python==0.7.2", "sglang-kernel==0.4.10"):
        assert re.search(rf"^{re.escape(pin)}$", constraints, re.MULTILINE), pin
    assert host.file("/opt/sglang/wheelhouse").is_directory


def test_weights_state_is_private_and_token_absent(host: Any) -> None:
    state = host.file("/var/lib/sglang-deploy/weights")
    assert state.mode == 0o700 and state.user == "root"
    assert host.file("/var/lib/sglang-deploy/weights/_models_kimi-k2.5.sha256.json").exists  # the hash cache
    assert not host.file("/var/lib/sglang-deploy/hf-token").exists


# --- drills through the CLI -------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "expected"), [
    (["-e", "nvidia_driver_reboot_policy=sometimes"], ["nvidia_driver_reboot_policy", "auto, always, never"]),
    (["-e", f"nvidia_driver_version={BRANCH_NEWER}"], [f"nvidia_driver_version {BRANCH_NEWER} is not of "
                                                       "nvidia_driver_branch 580"]),
    (["-e", "nvidia_driver_branch=570", "-e", "nvidia_driver_version=570.195.03"],
     ["nvidia_driver_branch must be a driver branch of 580 or newer"]),
    (["-e", "sglang_weights_mode=download"], ["sglang_weights_model_repo", "40-hex-digit commit"]),
    (["-e", "sglang_stack_uv_version=0.99.0"], ["has no uv 0.99.0 wheel", "pip download uv==0.99.0"]),
    # The wheelhouse holds the sandbox's kernel package (sm120f) only, as an air-gapped site's holds its own GPUs'.
    (["-e", '{"sglang_stack_flashinfer_kernels": ["sm120f", "sm100a"]}'],
     ["lacks FlashInfer's prebuilt kernels (flashinfer-jit-cache-sm100a missing", "sglang_stack_flashinfer_kernels"]),
    (["-e", '{"sglang_stack_flashinfer_kernels": ["blackwell"]}'],
     ["sglang_stack_flashinfer_kernels takes FlashInfer's architecture tags", "got ['blackwell']"]),
], ids=["reboot-policy", "version-of-other-branch", "branch-too-old", "download-without-revision",
        "uv-not-in-wheelhouse", "kernel-package-not-in-wheelhouse", "kernel-tag-unknown"])
def test_bad_input_refused_before_any_change(host: Any, extra: list[str], expected: list[str]) -> None:
    before, running = digests(host), invocation(host)
    rc, out, _seconds = play(*extra)
    assert rc != 0
    for text in expected:
        assert text in out, why(out)
    # A variable its role's spec or a one-value rule refuses (check.yml) stops the run before any plan; a role's
    # settings check (between values, or against the wheelhouse) refuses the host in deploy.yml's refusal, once the
    # whole rollout plan is printed, naming the host as refused in it.
    refusal = out.find(f"{HOST}: the SGLang configuration is refused, nothing was changed")
    plan = out.find(f"REFUSED, so nothing changes on any host: {HOST} (")
    if "is not one of the choices" in out or "is not allowed; allowed:" in out:
        assert refusal >= 0 and plan < 0, why(out)
    else:
        assert 0 <= plan < refusal, why(out)
    assert recap(out, HOST)["changed"] == 0
    assert digests(host) == before and invocation(host) == running


# Issue 49: the host itself is never the package's. What a refused run must leave exactly as it was: the owner and
# mode of / and of the system directories the refused values named, the account files, the unit, the server.
STATE = ("stat -c '%n %U:%G %a %s' / /etc /etc/passwd /etc/group /etc/shadow /var/lib/sglang /etc/sglang; "
         "sha256sum /etc/passwd /etc/group /etc/shadow")


def host_state(host: Any, *users: str) -> str:
    entries = "; ".join(f"getent passwd {user} || echo 'no {user}'" for user in users)
    return host.check_output(f"{STATE}; {entries}") + digests(host) + invocation(host)


def test_the_root_directory_and_the_login_user_are_refused_with_nothing_changed(host: Any) -> None:
    """-e sglang_home=/ and -e sglang_user=<the account Ansible logs in with> are refused by the variable check,
    before any host is contacted: the bytes, owners and modes of /, the account files and the unit are as before."""
    login = host.check_output("id -un").strip()  # the docker connection's login user: the one testinfra uses too
    before = host_state(host, login)
    for extra, expected in ((["-e", "sglang_home=/"], "sglang_home: / cannot be the package's"),
                            # (-e ansible_user=<another name> is the matrix's case: converge.yml's first play
                            # connects to the host with it before the check.)
                            (["-e", f"sglang_user={login}"], f"sglang_user: {login!r} ")):
        rc, out, _seconds = play(*extra)
        assert rc != 0 and expected in out, why(out)
        assert f"{HOST}: the SGLang configuration is refused, nothing was changed" in out, why(out)
        assert recap(out, HOST)["changed"] == 0
        assert host_state(host, login) == before


def test_an_existing_account_the_deploy_did_not_create_is_refused_on_the_host(host: Any) -> None:
    """An account that exists on the host (a person's, with a shell and a home of its own) named as sglang_user:
    deploy.yml reads it (getent) and refuses the host in its plan, before anything changes; the account keeps its
    shell and home. sglang_stack_adopt_existing_user is the opt-in (unit-tested: it would convert the account)."""
    user = "drill-alice"
    host.check_output(f"useradd --create-home --shell /bin/bash {user}")
    try:
        before = host_state(host, user, "sglang")
        rc, out, _seconds = play("-e", f"sglang_user={user}")
        assert rc != 0, why(out)
        assert f"sglang_user: the account '{user}' already exists on this host" in out, why(out)
        assert "sglang_stack_adopt_existing_user: true" in out
        refusal = out.find(f"{HOST}: the SGLang configuration is refused, nothing was changed")
        plan = out.find(f"REFUSED, so nothing changes on any host: {HOST} (")
        assert 0 <= plan < refusal, why(out)
        assert recap(out, HOST)["changed"] == 0
        assert host_state(host, user, "sglang") == before
        assert host.user(user).shell == "/bin/bash" and host.user(user).home == f"/home/{user}"
    finally:
        host.check_output(f"userdel --remove {user}")


def test_secure_boot_with_unsigned_module_refused(host: Any) -> None:
    fake = ("#!/bin/sh\ncase \"$1\" in\n--sb-state) echo 'SecureBoot enabled';;\n"
            "--test-key) echo \"$2 is not enrolled\";;\nesac\n")
    encoded = base64.b64encode(fake.encode()).decode()
    host.check_output(f"echo {encoded} | base64 -d > /usr/local/bin/mokutil && chmod 755 /usr/local/bin/mokutil")
    try:
        before = digests(host)
        rc, out, _seconds = play("--tags", "nvidia_driver_preflight", "--skip-tags", "always")
        assert rc != 0
        assert "Secure Boot is enabled" in out and "mokutil --sb-state: SecureBoot enabled" in out, why(out)
        assert "the NVIDIA driver is refused, nothing was changed" in out and recap(out, HOST)["changed"] == 0
        assert digests(host) == before
        rc, out, _seconds = play("--tags", "nvidia_driver_preflight", "--skip-tags", "always",
                                 "-e", "nvidia_driver_module_signed=true")  # signed another way
        assert rc == 0 and recap(out, HOST)["changed"] == 0, why(out)
    finally:
        host.check_output("rm -f /usr/local/bin/mokutil")


def test_signing_key_with_another_fingerprint_refused(host: Any) -> None:
    rc, out, _seconds = play("--tags", "nvidia_driver_repo", "--skip-tags", "always",
                             "-e", "nvidia_driver_repo_key_fingerprint=" + "0" * 40)
    assert rc != 0
    assert "not nvidia_driver_repo_key_fingerprint 0000000000000000000000000000000000000000" in out, why(out)
    assert not host.file("/etc/apt/keyrings/nvidia-cuda.asc").exists  # removed, apt never trusted it
    rc, out, _seconds = play("--tags", "nvidia_driver_repo", "--skip-tags", "always")  # downloaded again, trusted
    assert rc == 0, why(out)
    assert host.file("/etc/apt/keyrings/nvidia-cuda.asc").exists


def test_post_install_check_fails_when_nvidia_smi_reports_7_gpus(host: Any) -> None:
    host.check_output(f"mkdir -p /etc/sglang-sim && echo '{json.dumps({'gpus': [{}] * 7})}' > {SMI_CONFIG}")
    try:
        # The driver role's own check (deploy.yml's host preflight, tagged always, refuses it too).
        rc, out, _seconds = play("--tags", "nvidia_driver_verify", "--skip-tags", "always")
        assert rc != 0
        assert "nvidia-smi reports 7 GPUs, nvidia_driver_gpu_count expects 8" in out, why(out)
    finally:
        host.check_output(f"rm -f {SMI_CONFIG}")
    rc, out, _seconds = play("--tags", "nvidia_driver_verify", "--skip-tags", "always")
    assert rc == 0, why(out)
    assert "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition, compute capability 12.0" in out


def test_truncated_shard_stops_the_play_before_the_service(host: Any) -> None:
    host.check_output(f"cp -p {SHARD} /root/shard.bak && truncate -s -100 {SHARD}")
    try:
        before, running = digests(host), invocation(host)
        rc, out, _seconds = play("--tags", "weights,service", "-e", "hicache_ratio=3.0")  # would restart the server
        assert rc != 0
        assert f"{SHARD}: short, 4116 bytes but its header declares 4216" in out, why(out)
        # The play stopped at the weights: nothing of the service ran after the failed verification (the
        # validation play, which also checks the service settings, comes before it).
        after_weights = out[out.rindex("TASK [sglang_weights"):]
        assert "TASK [sglang_service" not in after_weights
        assert digests(host) == before and invocation(host) == running
    finally:
        host.check_output(f"mv /root/shard.bak {SHARD}")
    rc, out, _seconds = play("--tags", "weights")
    assert rc == 0, why(out)


def test_a_host_without_its_gpus_flashinfer_kernels_is_refused_by_the_probe_and_mended_by_the_install(
        host: Any) -> None:
    """The sm120f kernel package removed from the virtualenv: the probe names it before anything restarts (the
    fake nvidia-smi reports compute capability 12.0), and the next run of the install puts it back."""
    venv = "/opt/sglang/0.5.23/venv/bin/python"
    version = f"{venv} -c 'import importlib.metadata as m; print(m.version(\"flashinfer-jit-cache-sm120f\"))'"
    host.check_output(f"/opt/sglang/uv/bin/uv pip uninstall --python {venv} flashinfer-jit-cache-sm120f")
    running = invocation(host)
    try:
        rc, out, _seconds = run_playbook("playbooks/probe.yml")
        assert rc != 0, why(out)
        assert "no kernel package of flashinfer-jit-cache 0.7.2+cu130 serves compute capability 12.0 (sm120f with " \
               "CUDA 13.0)" in out, why(out)
        assert invocation(host) == running
    finally:
        rc, out, _seconds = play()
    assert rc == 0, why(out)
    assert host.check_output(version) == "0.7.2+cu130"
    rc, out, _seconds = run_playbook("playbooks/probe.yml")
    assert rc == 0 and "flashinfer-jit-cache-sm120f 0.7.2+cu130 serves compute capability 12.0" in out, why(out)


def test_driver_upgrade_and_downgrade_with_the_reboot_handler(host: Any) -> None:
    # --check --diff first: shows the new pin and the packages it would install, changes nothing.
    before = digests(host)
    rc, out, _seconds = play(*DRIVER_ONLY, "--check", "--diff", "-e", f"nvidia_driver_version={NEWER}")
    assert rc == 0, why(out)
    assert f"+Pin: version {NEWER}-*" in out and f"Would install nvidia-driver-cuda={NEWER}-*" in out
    assert digests(host) == before and dpkg_versions(host) == dict.fromkeys(DRIVER_PACKAGES, f"{VERSION}-1")
    rc, out, _seconds = play(*DRIVER_ONLY, "-e", f"nvidia_driver_version={NEWER}")
    # apt moved every package together and kept them held; the reboot handler ran and skipped the
    # reboot (a container); the check then fails: the running driver is still the old one.
    assert dpkg_versions(host) == dict.fromkeys(DRIVER_PACKAGES, f"{NEWER}-1")
    assert sorted(host.check_output("apt-mark showhold").split()) == DRIVER_PACKAGES
    assert "RUNNING HANDLER [nvidia_driver : Reboot for the driver" in out
    assert "reboot skipped because nvidia_driver_container is true" in out, why(out)
    assert rc != 0 and f"the running driver is {VERSION} (nvidia-smi (nvidia_driver_container)) but {NEWER}" in out
    show_apt(host, f"after the pin change to {NEWER}")
    # The "reboot": the fake nvidia-smi now reports the new driver. Nothing left to change.
    host.check_output(f"mkdir -p /etc/sglang-sim && echo '{json.dumps({'driver_version': NEWER})}' > {SMI_CONFIG}")
    rc, out, _seconds = play(*DRIVER_ONLY, "-e", f"nvidia_driver_version={NEWER}")
    assert rc == 0 and recap(out, HOST)["changed"] == 0, changed_tasks(out)
    # Back to the inventory's version (a downgrade), with the "reboot" done up front.
    host.check_output(f"rm -f {SMI_CONFIG}")
    rc, out, _seconds = play(*DRIVER_ONLY)
    assert rc == 0, why(out)
    assert "RUNNING HANDLER [nvidia_driver : Reboot for the driver" in out
    assert dpkg_versions(host) == dict.fromkeys(DRIVER_PACKAGES, f"{VERSION}-1")
    assert sorted(host.check_output("apt-mark showhold").split()) == DRIVER_PACKAGES
