"""tools/release.py: the release names its URLs (a repository one required, each an http(s) address), writes them
into galaxy.yml's copy, builds the tarball from that copy, and counts the importer's warnings and errors. The checks
themselves (galaxy-importer, antsibull-docs) run in make release-check, which needs their virtualenv."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, load_script

release = load_script(ROOT / "tools" / "release.py")
GALAXY = (ROOT / "galaxy.yml").read_text()


@pytest.mark.parametrize("urls", [{}, {"repository": ""}, {"repository": None, "issues": "https://x.example/i"}])
def test_no_repository_url_refuses(urls: dict[str, str | None]) -> None:
    with pytest.raises(SystemExit, match="a repository URL is required"):
        release.check_urls(urls)


@pytest.mark.parametrize("bad", ["git@example.org:x/y.git", "example.org/x", "https://", "https://x y.example",
                                 "ftp://example.org/x", "https://localhost"])
def test_an_address_that_is_not_an_http_url_refuses(bad: str) -> None:
    with pytest.raises(SystemExit, match="not an http"):
        release.check_urls({"repository": "https://git.example.org/x", "documentation": bad})


def test_the_urls_go_into_the_copy_of_galaxy_yml_and_nothing_else_changes() -> None:
    urls = {"repository": "https://git.example.org/x", "issues": "https://git.example.org/x/issues"}
    written = release.with_urls(GALAXY, release.check_urls(urls))
    data, original = yaml.safe_load(written), yaml.safe_load(GALAXY)
    assert {key: data.pop(key) for key in urls} == urls
    assert data == original
    assert not any(key in original for key in release.URL_KEYS)  # the checkout's galaxy.yml invents none


def test_a_galaxy_yml_that_sets_a_url_itself_refuses() -> None:
    with pytest.raises(SystemExit, match="sets repository itself"):
        release.with_urls("repository: https://a.example/b\n" + GALAXY, {"repository": "https://git.example.org/x"})


def test_the_importers_warnings_and_errors_are_counted_and_its_info_is_not() -> None:
    log = ("Importing with galaxy-importer 0.4.44\nWARNING: changelogs/fragments/x.yml:2:1: syntax-check[specific]\n"
           "ERROR: Invalid collection metadata. 'repository' is required\nImporter processing completed successfully\n")
    assert release.problems(log) == log.splitlines()[1:3]


def test_without_a_repository_nothing_is_built(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="repository URL is required"):
        release.build({"repository": None}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_built_tarball_carries_the_urls(tmp_path: Path) -> None:
    urls = {"repository": "https://git.example.org/sglang/sglang-deploy", "documentation": None,
            "homepage": None, "issues": "https://git.example.org/sglang/sglang-deploy/issues"}
    tarball = release.build(urls, tmp_path / "out")
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
        manifest = json.load(archive.extractfile("MANIFEST.json"))  # type: ignore[arg-type]
    info = manifest["collection_info"]
    assert {key: info[key] for key in release.URL_KEYS} == urls
    assert "galaxy.yml" not in names and not any(name.startswith((".git", ".cache")) for name in names)
    assert "roles/sglang_service/tasks/main.yml" in names
