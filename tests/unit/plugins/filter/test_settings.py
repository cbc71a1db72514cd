"""The install roles' settings checks (plugins/filter/settings.py): each role's <role>_settings_errors, good and bad
inputs for every check, with the exact messages (the roles' READMEs, docs and molecule drills quote them)."""

from __future__ import annotations

import functools
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.filter.settings import (
    NVIDIA_DRIVER_SETTINGS,
    SGLANG_STACK_SETTINGS,
    SGLANG_WEIGHTS_SETTINGS,
    nvidia_driver_settings_errors,
    sglang_stack_settings_errors,
    sglang_weights_settings_errors,
)
from helpers import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

CONSTRAINTS = ROOT / "roles/sglang_stack/files/constraints"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@functools.cache
def _defaults_text(role: str) -> str:
    return (ROOT / f"roles/{role}/defaults/main.yml").read_text()


def defaults(role: str) -> dict[str, Any]:
    """A role's defaults, parsed anew (a caller may change them), from the file read once."""
    return yaml.safe_load(_defaults_text(role))


def role_vars(role: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / f"roles/{role}/vars/main.yml").read_text())


# --- nvidia_driver ---------------------------------------------------------------------------------------------

def driver(**changes: Any) -> dict[str, Any]:
    role_defaults = defaults("nvidia_driver")
    values = {name: role_defaults.get(name) for name in NVIDIA_DRIVER_SETTINGS}
    return {**values, **changes}


def test_the_driver_defaults_are_accepted() -> None:
    assert nvidia_driver_settings_errors(driver()) == []
    assert nvidia_driver_settings_errors(driver(nvidia_driver_gpu_count=8, nvidia_driver_gpu_compute_capability=12.0,
                                                nvidia_driver_branch=590, nvidia_driver_version="590.44",
                                                nvidia_driver_repo_key_fingerprint="",
                                                nvidia_driver_repo_base_url="file:/srv/cuda",
                                                nvidia_driver_packages=["nvidia-open"])) == []


@pytest.mark.parametrize("branch", ["570", "58", "5800", "abc", "", None, 579])
def test_a_branch_older_than_580_or_not_three_digits_is_refused(branch: Any) -> None:
    shown = "" if branch is None else branch
    assert (f"nvidia_driver_branch must be a driver branch of 580 or newer (CUDA 13, which SGLang needs, requires "
            f"580+), got '{shown}'") in nvidia_driver_settings_errors(driver(nvidia_driver_branch=branch))


@pytest.mark.parametrize("version", ["580", "580.95.05.1", "v580.95", "580.95-1", None])
def test_a_driver_version_that_is_not_exact_is_refused(version: Any) -> None:
    shown = "" if version is None else version
    assert (f"nvidia_driver_version must be an exact driver version such as 580.95.05, got '{shown}'"
            in nvidia_driver_settings_errors(driver(nvidia_driver_version=version)))


def test_a_driver_version_of_another_branch_is_refused() -> None:
    assert nvidia_driver_settings_errors(driver(nvidia_driver_branch="580", nvidia_driver_version="590.44.01")) == [
        "nvidia_driver_version 590.44.01 is not of nvidia_driver_branch 580; change both together"]


@pytest.mark.parametrize(("count", "refused"), [(0, True), (-1, True), ("0", True), ("many", True), (1, False),
                                                ("2", False), ("1.5", False), (None, False)])
def test_the_gpu_count_is_one_or_more_or_null(count: Any, refused: bool) -> None:
    message = f"nvidia_driver_gpu_count must be 1 or more (or null to skip the check), got {count}"
    assert nvidia_driver_settings_errors(driver(nvidia_driver_gpu_count=count)) == ([message] if refused else [])


@pytest.mark.parametrize(("capability", "refused"), [("12.0", False), (9.0, False), (None, False), ("12", True),
                                                     ("sm120", True), ("12.0a", True)])
def test_the_compute_capability_looks_like_12_0_or_is_null(capability: Any, refused: bool) -> None:
    message = f"nvidia_driver_gpu_compute_capability must look like 12.0 (or be null), got '{capability}'"
    errors = nvidia_driver_settings_errors(driver(nvidia_driver_gpu_compute_capability=capability))
    assert errors == ([message] if refused else [])


@pytest.mark.parametrize(("fingerprint", "refused"), [
    ("", False), ("EB693B3035CD5710E231E123A4B469963BF863CC", False),
    ("EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC", False), ("eb693b3035cd5710e231e123a4b469963bf863cc", False),
    ("EB693B3035CD5710E231E123A4B469963BF863CC" + "0" * 24, False),
    ("3BF863CC", True), ("EB693B3035CD5710E231E123A4B469963BF863CG", True),
    ("EB693B3035CD5710E231E123A4B469963BF863CC0", True)])
def test_the_key_fingerprint_is_full_or_empty(fingerprint: str, refused: bool) -> None:
    message = (f"nvidia_driver_repo_key_fingerprint must be a full key fingerprint (40 hex digits; spaces allowed) "
               f"or empty, got '{fingerprint}'")
    errors = nvidia_driver_settings_errors(driver(nvidia_driver_repo_key_fingerprint=fingerprint))
    assert errors == ([message] if refused else [])


@pytest.mark.parametrize(("url", "refused"), [("https://mirror/cuda", False), ("http://mirror", False),
                                              ("file:/srv/cuda", False), ("file:///srv", False),
                                              ("ftp://mirror", True), ("mirror/cuda", True), ("", True)])
def test_the_repository_is_an_http_or_file_url(url: str, refused: bool) -> None:
    message = f"nvidia_driver_repo_base_url must be an http(s):// or file:/ URL, got '{url}'"
    assert nvidia_driver_settings_errors(driver(nvidia_driver_repo_base_url=url)) == ([message] if refused else [])


def test_the_packages_are_names_without_versions() -> None:
    errors = nvidia_driver_settings_errors(driver(nvidia_driver_packages=[
        "nvidia-open", "cuda-drivers=580.95.05-1", "nvidia-utils >= 580", "libnvidia-compute<590"]))
    assert errors == ["nvidia_driver_packages lists package names only (the version is nvidia_driver_version), got "
                      "['cuda-drivers=580.95.05-1', 'nvidia-utils >= 580', 'libnvidia-compute<590']"]


def test_every_driver_refusal_at_once_in_order() -> None:
    errors = nvidia_driver_settings_errors(driver(
        nvidia_driver_branch="57", nvidia_driver_version="x", nvidia_driver_gpu_count=0,
        nvidia_driver_gpu_compute_capability="12", nvidia_driver_repo_key_fingerprint="abc",
        nvidia_driver_repo_base_url="x", nvidia_driver_packages=["a=1"]))
    assert [error.split(" ", maxsplit=1)[0] for error in errors] == [
        "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_version", "nvidia_driver_gpu_count",
        "nvidia_driver_gpu_compute_capability", "nvidia_driver_repo_key_fingerprint", "nvidia_driver_repo_base_url",
        "nvidia_driver_packages"]


# --- sglang_stack ----------------------------------------------------------------------------------------------

def stack(**changes: Any) -> dict[str, Any]:
    role_defaults = defaults("sglang_stack")
    values = {name: role_defaults.get(name) for name in SGLANG_STACK_SETTINGS}
    values.update(sglang_version="0.5.23", flashinfer_jit_version="0.7.2+cu130",
                  flashinfer_packages=["flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-jit-cache-sm120f"])
    return {**values, **changes}


def stack_errors(**changes: Any) -> list[str]:
    return sglang_stack_settings_errors(stack(**changes), str(CONSTRAINTS))


def wheelhouse(directory: Path, *names: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")
    return str(directory)


FULL = ("uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl", "sglang-0.5.23-py3-none-any.whl",
        "flashinfer_cubin-0.7.2-py3-none-any.whl", "flashinfer_jit_cache-0.7.2+cu130-cp39-abi3-linux_x86_64.whl",
        "flashinfer_jit_cache_sm120f-0.7.2+cu130-py3-none-any.whl")


def test_the_stack_defaults_are_accepted_online() -> None:
    assert defaults("sglang_stack")["sglang_stack_uv_version"] == "0.13.9"
    assert stack_errors() == []


def test_a_version_without_a_constraints_file_is_refused_with_the_versions_that_have_one() -> None:
    versions = sorted(path.name[len("sglang-"):-len(".txt")] for path in CONSTRAINTS.glob("sglang-*.txt"))
    assert "0.5.23" in versions
    assert stack_errors(sglang_version="0.4.0") == [
        f"sglang_version 0.4.0 has no constraints file in roles/sglang_stack/files/constraints/ (the GPU stack its "
        f"wheel pins); versions with one: {', '.join(versions)}"]


def test_the_constraint_versions_are_the_files_of_the_directory(tmp_path: Path) -> None:
    wheelhouse(tmp_path, "sglang-1.0.txt", "sglang-0.9.txt", "README.md", ".sglang-2.0.txt")
    (tmp_path / "sglang-3.0.txt").mkdir()
    errors = sglang_stack_settings_errors(stack(sglang_version="2.0"), str(tmp_path))
    assert errors[0].endswith("versions with one: 0.9, 1.0")
    assert sglang_stack_settings_errors(stack(sglang_version="1.0"), str(tmp_path)) == []


@pytest.mark.parametrize("uv", ["0.13", "latest", "0.13.9.1", ">=0.13.9", None])
def test_uv_takes_an_exact_version(uv: Any) -> None:
    shown = "" if uv is None else uv
    assert f"sglang_stack_uv_version must be an exact version such as 0.13.9, got '{shown}'" in stack_errors(
        sglang_stack_uv_version=uv)


def test_a_wheelhouse_that_is_no_directory_on_the_controller_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    for path in (tmp_path / "missing", tmp_path / "file"):
        assert stack_errors(sglang_stack_wheelhouse=str(path)) == [
            f"sglang_stack_wheelhouse {path} is not a directory on the controller"]


def test_a_full_wheelhouse_is_accepted(tmp_path: Path) -> None:
    assert stack_errors(sglang_stack_wheelhouse=wheelhouse(tmp_path, *FULL)) == []


def test_a_wheelhouse_without_the_uv_or_sglang_wheel_is_refused(tmp_path: Path) -> None:
    path = wheelhouse(tmp_path, "uv-0.13.10-py3-none-any.whl", "sglang-0.5.2-py3-none-any.whl",
                      "sglang-0.5.23.tar.gz", *FULL[2:])
    assert stack_errors(sglang_stack_wheelhouse=path) == [
        f"the wheelhouse {path} (sglang_stack_wheelhouse) has no uv 0.13.9 wheel: add it with "
        f"`pip download uv==0.13.9 -d {path}`",
        f"the wheelhouse {path} (sglang_stack_wheelhouse) has no sglang 0.5.23 wheel: fill it with "
        f"`pip download sglang==0.5.23 -c <constraints> -d {path}`"]


def test_an_sglang_wheel_with_a_local_version_counts(tmp_path: Path) -> None:
    path = wheelhouse(tmp_path, FULL[0], "sglang-0.5.23+cu130-py3-none-any.whl", *FULL[2:])
    assert stack_errors(sglang_stack_wheelhouse=path) == []


def test_a_wheelhouse_without_flashinfers_prebuilt_kernels_names_the_missing_ones(tmp_path: Path) -> None:
    path = wheelhouse(tmp_path, *FULL[:3])
    index = "https://flashinfer.ai/whl"
    assert stack_errors(sglang_stack_wheelhouse=path, sglang_stack_flashinfer_index_url=index) == [
        f"the wheelhouse {path} (sglang_stack_wheelhouse) lacks FlashInfer's prebuilt kernels (flashinfer-jit-cache, "
        "flashinfer-jit-cache-sm120f missing; the kernel packages are those of sglang_stack_flashinfer_kernels, at "
        "the version of the jit-cache shim in roles/sglang_stack/files/constraints/sglang-0.5.23.txt, from "
        "https://flashinfer.ai/whl and its /cu<CUDA> index: docs/air-gapped.md); add them, or set "
        "sglang_stack_flashinfer_prebuilt: false to let FlashInfer compile kernels on first use"]
    assert stack_errors(sglang_stack_wheelhouse=path, sglang_stack_flashinfer_prebuilt=False,
                        flashinfer_packages=[]) == []


def test_hidden_files_and_directories_are_no_wheels(tmp_path: Path) -> None:
    path = wheelhouse(tmp_path, ".uv-0.13.9-py3-none-any.whl", *FULL[1:])
    (tmp_path / "uv-0.13.9-py3-none-any.whl").mkdir()
    assert [error.split(":", maxsplit=1)[0] for error in stack_errors(sglang_stack_wheelhouse=path)] == [
        f"the wheelhouse {path} (sglang_stack_wheelhouse) has no uv 0.13.9 wheel"]


def test_online_the_flashinfer_packages_and_the_wheelhouse_are_not_read() -> None:
    class Once(dict):  # a mapping that fails when a value the check must not need is read
        def __getitem__(self, key: str) -> Any:
            assert key != "flashinfer_packages", "read online"
            return super().__getitem__(key)

    assert sglang_stack_settings_errors(Once(stack(sglang_stack_wheelhouse="")), str(CONSTRAINTS)) == []


@pytest.mark.parametrize(("kernels", "refused"), [(["sm120f"], False), (["sm120f", "sm100a", "sm90a", "sm89"], False),
                                                  ([], True), (["blackwell"], True), (["sm120f", "SM100A"], True),
                                                  ("sm120f", True)])
def test_prebuilt_kernels_take_flashinfers_architecture_tags(kernels: Any, refused: bool) -> None:
    message = (f"sglang_stack_flashinfer_kernels takes FlashInfer's architecture tags, one per GPU architecture of "
               f"the hosts (sm120f: compute capability 12.0 with CUDA 12.9 or newer; sm100a, sm90a, sm89, ...), at "
               f"least one while sglang_stack_flashinfer_prebuilt is true; got {kernels}")
    assert stack_errors(sglang_stack_flashinfer_kernels=kernels) == ([message] if refused else [])
    assert stack_errors(sglang_stack_flashinfer_kernels=kernels, sglang_stack_flashinfer_prebuilt=False) == []


def test_prebuilt_kernels_need_a_release_that_pins_the_jit_cache() -> None:
    message = ("roles/sglang_stack/files/constraints/sglang-0.5.23.txt pins no flashinfer-jit-cache, whose version "
               "the kernel packages take; set sglang_stack_flashinfer_prebuilt: false for this release")
    assert stack_errors(flashinfer_jit_version="") == [message]
    assert stack_errors(flashinfer_jit_version="", sglang_stack_flashinfer_prebuilt=False) == []
    # A version without a constraints file is refused for that alone.
    assert len(stack_errors(flashinfer_jit_version="", sglang_version="0.4.0")) == 1


@pytest.mark.parametrize(("directory", "refused"), [("/opt/sglang/python", False), ("/homes/python", False),
                                                    ("/rootfs/python", False), ("opt/python", True),
                                                    ("/root", True), ("/root/.local/share/uv", True),
                                                    ("/home/sglang/python", True), ("", True)])
def test_the_interpreter_directory_is_absolute_and_outside_root_and_home(directory: str, refused: bool) -> None:
    message = (f"sglang_stack_python_install_dir must be an absolute path outside /root and /home (the service user "
               f"runs the interpreter uv puts there), got '{directory}'")
    assert stack_errors(sglang_stack_python_install_dir=directory) == ([message] if refused else [])


def test_extra_constraints_are_name_equals_version_lines() -> None:
    assert stack_errors(sglang_stack_extra_constraints=["torch==2.9.1", "triton == 3.5.0", "a.b_c-d==1.0rc1"]) == []
    assert stack_errors(sglang_stack_extra_constraints=["torch==2.9.1", "triton>=3.5", "numpy", "a==1 2"]) == [
        "sglang_stack_extra_constraints takes name==version lines only, got ['triton>=3.5', 'numpy', 'a==1 2']"]


@pytest.mark.parametrize(("excludes", "refused"), [(["sgl-deep-ep"], False), (["a", "b.c_d"], False),
                                                   (["-x"], True), (["x-"], True), (["deep ep"], True),
                                                   (["sglang"], True), (["SGLang"], True), (["S_G-Lang"], False),
                                                   (["s.g_lang"], False), (["sg--lang"], False)])
def test_excludes_are_package_names_other_than_sglang(excludes: list[str], refused: bool) -> None:
    message = (f"sglang_stack_excludes takes package names (letters, digits, '.', '_', '-') other than sglang itself, "
               f"got {excludes}")
    assert stack_errors(sglang_stack_excludes=excludes) == ([message] if refused else [])


def test_excludes_spelled_as_pep_503_normalises_sglang_are_refused() -> None:
    for name in ("Sglang", "sglang.", "SGLANG"):
        assert stack_errors(sglang_stack_excludes=[name]), name


@pytest.mark.parametrize(("timeout", "poll", "refused"), [(3600, 5, False), (60, 1, False), ("60", "1", False),
                                                          (59, 5, True), (3600, 0, True), ("soon", 5, True)])
def test_the_install_waits_at_least_a_minute_and_polls_every_second_or_more(timeout: Any, poll: Any,
                                                                            refused: bool) -> None:
    message = (f"sglang_stack_install_timeout must be at least 60 s and sglang_stack_install_poll at least 1 s, got "
               f"{timeout} and {poll}")
    errors = stack_errors(sglang_stack_install_timeout=timeout, sglang_stack_install_poll=poll)
    assert errors == ([message] if refused else [])


# A version is text the check puts into a regular expression and a wheelhouse a directory it lists: whatever their
# characters, a wheel counts when its name starts with uv-<version>- (sglang-<version>- or +), and the directory's
# name is taken as it is (not as a glob pattern).
TEXT = st.text(alphabet=string.ascii_letters + string.digits + ".+*?[](){}|^$\\-_ ", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(version=TEXT, other=TEXT, directory=TEXT.filter(lambda name: name not in (".", "..")))
def test_wheels_are_found_by_their_exact_version_in_any_directory(version: str, other: str, directory: str) -> None:
    uv, sglang = f"uv-{version}-py3-none-any.whl", f"sglang-{version}-py3-none-any.whl"
    with tempfile.TemporaryDirectory() as top:
        path = wheelhouse(Path(top) / directory, uv, sglang, *FULL[2:])
        for asked in (version, other):
            errors = stack_errors(sglang_version=asked, sglang_stack_uv_version=asked, sglang_stack_wheelhouse=path)
            assert any(error.startswith(f"the wheelhouse {path} (sglang_stack_wheelhouse) has no uv ")
                       for error in errors) is not uv.startswith(f"uv-{asked}-"), (asked, errors)
            assert any(error.startswith(f"the wheelhouse {path} (sglang_stack_wheelhouse) has no sglang ")
                       for error in errors) is not sglang.startswith((f"sglang-{asked}-", f"sglang-{asked}+")), errors


# --- sglang_weights --------------------------------------------------------------------------------------------

def weights(**changes: Any) -> dict[str, Any]:
    role_defaults = defaults("sglang_weights")
    values = {name: role_defaults.get(name) for name in SGLANG_WEIGHTS_SETTINGS}
    values.update(sglang_model_path="/models/kimi", sglang_speculative_draft_model_path="")
    return {**values, **changes}


def test_the_weights_defaults_with_a_model_path_are_accepted() -> None:
    assert defaults("sglang_weights")["sglang_weights_mode"] != "download"
    assert sglang_weights_settings_errors(weights()) == []


@pytest.mark.parametrize("path", ["models/kimi", "", None, "~/models"])
def test_the_model_path_is_absolute(path: Any) -> None:
    shown = "" if path is None else path
    assert sglang_weights_settings_errors(weights(sglang_model_path=path)) == [
        f"sglang_model_path must be an absolute directory on the host, got '{shown}'"]


def test_a_draft_path_when_set_is_absolute() -> None:
    assert sglang_weights_settings_errors(weights(sglang_speculative_draft_model_path="/models/draft")) == []
    assert sglang_weights_settings_errors(weights(sglang_speculative_draft_model_path=None)) == []
    assert sglang_weights_settings_errors(weights(sglang_speculative_draft_model_path="draft")) == [
        "sglang_speculative_draft_model_path must be an absolute directory on the host, got 'draft'"]


@pytest.mark.parametrize(("repo", "revision"), [("", COMMIT), ("moonshotai/Kimi-K2.5", "main"),
                                                ("moonshotai/Kimi-K2.5", COMMIT.upper()),
                                                ("moonshotai/Kimi-K2.5", COMMIT[:-1]), ("moonshotai/Kimi-K2.5", None)])
def test_a_download_needs_the_repository_and_a_commit(repo: str, revision: Any) -> None:
    shown = "" if revision is None else revision
    errors = sglang_weights_settings_errors(weights(sglang_weights_mode="download", sglang_weights_model_repo=repo,
                                                    sglang_weights_model_revision=revision))
    assert errors == [
        "sglang_weights_mode is download: sglang_weights_model_repo (e.g. moonshotai/Kimi-K2.5) and "
        "sglang_weights_model_revision, a 40-hex-digit commit (a branch or tag would float between hosts), are "
        f"required; got repo '{repo}', revision '{shown}'"]


def test_a_download_with_a_draft_needs_the_drafts_repository_and_commit() -> None:
    download = {"sglang_weights_mode": "download", "sglang_weights_model_repo": "moonshotai/Kimi-K2.5",
                "sglang_weights_model_revision": COMMIT, "sglang_speculative_draft_model_path": "/models/draft"}
    assert sglang_weights_settings_errors(weights(**download, sglang_weights_draft_repo="lmsys/eagle",
                                                  sglang_weights_draft_revision=COMMIT)) == []
    assert sglang_weights_settings_errors(weights(**download, sglang_weights_draft_repo="lmsys/eagle",
                                                  sglang_weights_draft_revision="v1")) == [
        "sglang_weights_mode is download and a draft model is set (sglang_speculative_draft_model_path): "
        "sglang_weights_draft_repo and a 40-hex-digit sglang_weights_draft_revision are required; got repo "
        "'lmsys/eagle', revision 'v1'"]
    # Without a draft model or without a download, the draft's source is not asked for.
    assert sglang_weights_settings_errors(weights(**{**download, "sglang_speculative_draft_model_path": ""})) == []
    assert sglang_weights_settings_errors(weights(sglang_speculative_draft_model_path="/models/draft")) == []


def test_the_sources_are_not_read_unless_downloading() -> None:
    class Strict(dict):
        def __getitem__(self, key: str) -> Any:
            assert "repo" not in key and "revision" not in key, f"{key} read"
            return super().__getitem__(key)

    assert sglang_weights_settings_errors(Strict(weights(sglang_speculative_draft_model_path="/d"))) == []


def test_a_manifest_when_set_is_a_file_on_the_controller(tmp_path: Path) -> None:
    manifest = tmp_path / "kimi.sha256"
    manifest.write_text(f"{'0' * 64}  model.safetensors\n")
    assert sglang_weights_settings_errors(weights(sglang_weights_model_manifest=str(manifest),
                                                  sglang_weights_draft_manifest="")) == []
    assert sglang_weights_settings_errors(weights(sglang_weights_model_manifest=str(tmp_path),
                                                  sglang_weights_draft_manifest=str(tmp_path / "missing"))) == [
        f"sglang_weights_model_manifest {tmp_path} is not a file on the controller",
        f"sglang_weights_draft_manifest {tmp_path / 'missing'} is not a file on the controller"]


@pytest.mark.parametrize(("token_file", "state_dir"), [("token", "/var/lib/w"), ("/root/.hf/token", "state"),
                                                       ("", "")])
def test_the_token_file_and_the_state_directory_are_absolute(token_file: str, state_dir: str) -> None:
    assert sglang_weights_settings_errors(weights(sglang_weights_hf_token_file=token_file,
                                                  sglang_weights_state_dir=state_dir)) == [
        f"sglang_weights_hf_token_file and sglang_weights_state_dir must be absolute paths, got '{token_file}' and "
        f"'{state_dir}'"]


@pytest.mark.parametrize(("timeout", "poll", "refused"), [(7200, 10, False), (60, 1, False), (59, 10, True),
                                                          (7200, 0, True), ("x", "y", True)])
def test_the_download_waits_at_least_a_minute_and_polls_every_second_or_more(timeout: Any, poll: Any,
                                                                             refused: bool) -> None:
    message = (f"sglang_weights_download_timeout must be at least 60 s and sglang_weights_download_poll at least 1 s, "
               f"got {timeout} and {poll}")
    errors = sglang_weights_settings_errors(weights(sglang_weights_download_timeout=timeout,
                                                    sglang_weights_download_poll=poll))
    assert errors == ([message] if refused else [])


# --- the three filters and the roles ---------------------------------------------------------------------------

FILTERS = [(nvidia_driver_settings_errors, NVIDIA_DRIVER_SETTINGS, ()),
           (sglang_stack_settings_errors, SGLANG_STACK_SETTINGS, (str(CONSTRAINTS),)),
           (sglang_weights_settings_errors, SGLANG_WEIGHTS_SETTINGS, ())]


@pytest.mark.parametrize(("check", "names", "args"), FILTERS, ids=lambda value: getattr(value, "__name__", ""))
def test_a_mapping_without_every_variable_or_with_another_fails(check: Any, names: tuple[str, ...],
                                                                args: tuple[str, ...]) -> None:
    complete = dict.fromkeys(names, "")
    with pytest.raises(AnsibleFilterError, match="lacks"):
        check({key: value for key, value in complete.items() if key != names[0]}, *args)
    with pytest.raises(AnsibleFilterError, match="unknown keys \\['typo'\\]"):
        check({**complete, "typo": 1}, *args)
    with pytest.raises(AnsibleFilterError, match="expected a mapping"):
        check(["not", "a", "mapping"], *args)


@pytest.mark.parametrize("role", ["nvidia_driver", "sglang_stack", "sglang_weights"])
def test_each_role_passes_its_filter_exactly_the_variables_it_reads(role: str) -> None:
    """vars/main.yml: <role>_settings_errors is the filter of __<role>_settings, which names each variable the
    filter reads (by itself, so that it is templated only when read); no Jinja list of checks is left."""
    names = {"nvidia_driver": NVIDIA_DRIVER_SETTINGS, "sglang_stack": SGLANG_STACK_SETTINGS,
             "sglang_weights": SGLANG_WEIGHTS_SETTINGS}[role]
    variables = role_vars(role)
    assert f"__{role}_settings | sglang.deploy.{role}_settings_errors" in " ".join(
        variables[f"{role}_settings_errors"].split())
    mapping = variables[f"__{role}_settings"]
    assert list(mapping) == list(names)
    for name, template in mapping.items():
        derived = f"__sglang_stack_{name}" if name.startswith("flashinfer_") else name
        assert template == f"{{{{ {derived} }}}}", name
    assert not any(name.endswith("_settings_checks") for name in variables)
