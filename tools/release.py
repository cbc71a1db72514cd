"""Build the release tarball with its public URLs, and check it as Galaxy and a docs site would (issue 52).

galaxy.yml names no repository, documentation, homepage or issues URL: the project has no public hosting, and an
invented address would be false. Galaxy refuses a collection without a repository, so a release names them when it
is built: ``build`` copies this checkout (its tracked and untracked, not ignored files), writes the URLs into the
copy's galaxy.yml and builds the tarball from the copy; it refuses to build without a repository URL. ``check`` runs,
on that tarball, what a publisher's tools run and fails on any error or warning:

- galaxy-importer, the check Galaxy runs on an upload (its collection loader, ansible-doc, ansible-lint, flake8;
  ansible-test sanity is off: the importer runs it in a container, and ``make sanity`` runs it here);
- ``antsibull-docs lint-collection-docs --plugin-docs`` on the tarball as installed;
- ``antsibull-docs collection``, whose role pages must all render (none "malformed"), one per role.

Both run from the release virtualenv (requirements-release.txt), offline. Usage (docs/development.md, "Releasing"):

    python tools/release.py build --repository URL [--documentation URL] [--issues URL] [--homepage URL] --out DIR
    python tools/release.py check TARBALL --venv .cache/release-venv --work DIR
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
URL = re.compile(r"^https?://[^\s/?#]+\.[^\s/?#]+(?:[/?#]\S*)?$")
URL_KEYS = ("repository", "documentation", "homepage", "issues")
NEVER_COPIED = (".git", ".cache", ".venv")
ROLE_PAGE = re.compile(r"^(?P<role>\w+)_role\.rst$")

IMPORTER_CONFIG = """\
[galaxy-importer]
# What Galaxy checks on an upload, without containers (docs/development.md, "Releasing").
run_ansible_doc = True
run_ansible_lint = True
offline_ansible_lint = True
# Off, as by default: 0.4.44 runs flake8 on plugins/filter/*.yml (the filters' documentation) as if Python, and
# applies pycodestyle's defaults (W503, E704) that ansible-test's pep8 test, which Galaxy runs and make sanity
# runs here, does not.
run_flake8 = False
run_ansible_test = False
check_changelog = True
check_required_tags = True
require_v1_or_greater = True
ansible_local_tmp = {tmp}/ansible-local
tmp_root_dir = {tmp}
"""


def check_urls(urls: dict[str, str | None]) -> dict[str, str]:
    """The URLs given, each a full http(s) address; the repository one is required."""
    if not urls.get("repository"):
        raise SystemExit("release: a repository URL is required (make release REPOSITORY_URL=https://...): Galaxy "
                         "refuses a collection without one, and galaxy.yml names none (the project has no public "
                         "hosting; no address is invented)")
    given = {key: value for key, value in urls.items() if value}
    bad = [f"{key}={value!r}" for key, value in given.items() if not URL.match(value)]
    if bad:
        raise SystemExit(f"release: not an http(s) URL: {', '.join(bad)}")
    return given


def with_urls(galaxy_yml: str, urls: dict[str, str]) -> str:
    """galaxy.yml with the URLs set, just before build_ignore; refused if it already sets one."""
    present = [key for key in URL_KEYS if re.search(rf"^{key}:", galaxy_yml, re.MULTILINE)]
    if present:
        raise SystemExit(f"release: galaxy.yml sets {', '.join(present)} itself; the release step writes them")
    lines = "".join(f"{key}: {urls[key]}\n" for key in URL_KEYS if key in urls)
    head, sep, tail = galaxy_yml.partition("\nbuild_ignore:")
    if not sep:
        raise SystemExit("release: galaxy.yml has no build_ignore")
    return f"{head}\n{lines.rstrip()}{sep}{tail}"


def checkout_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode()
    return sorted(name for name in listed.split("\0") if name and not name.startswith(NEVER_COPIED))


def copy_checkout(dest: Path) -> None:
    for name in checkout_files():
        source, target = ROOT / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet in git
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)


def build(urls: dict[str, str | None], out: Path) -> Path:
    given = check_urls(urls)
    if out.exists():
        shutil.rmtree(out)
    source = out / "source"
    copy_checkout(source)
    galaxy = source / "galaxy.yml"
    galaxy.write_text(with_urls(galaxy.read_text(), given))
    run([shutil.which("ansible-galaxy") or "ansible-galaxy", "collection", "build", "--output-path", str(out),
         str(source)])
    (tarball,) = out.glob("*.tar.gz")
    return tarball


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, text=True, capture_output=True, check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"release: {' '.join(argv[:3])} ... exited {proc.returncode}")
    return proc


def problems(output: str) -> list[str]:
    """The importer's warnings and errors: its log lines that say so (its INFO lines carry no level)."""
    return [line for line in output.splitlines() if re.match(r"^(WARNING|ERROR|CRITICAL)\b", line)]


def tool_env(venv: Path, collections: Path | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "GALAXY_IMPORTER_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    if collections:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
        env["ANSIBLE_COLLECTIONS_SCAN_SYS_PATH"] = "false"
    return env


def importer(tarball: Path, venv: Path, work: Path) -> list[str]:
    tmp = work / "importer"
    (tmp / "ansible-local").mkdir(parents=True, exist_ok=True)
    config = work / "galaxy-importer.cfg"
    config.write_text(IMPORTER_CONFIG.format(tmp=tmp))
    env = tool_env(venv)
    env["GALAXY_IMPORTER_CONFIG"] = str(config)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "galaxy_importer.main", str(tarball)], cwd=tmp,
                          env=env, text=True, capture_output=True, check=False)
    output = proc.stdout + proc.stderr
    (work / "galaxy-importer.log").write_text(output)
    found = problems(output)
    if proc.returncode != 0 or "Importer processing completed successfully" not in output:
        found.append(f"galaxy-importer exited {proc.returncode} (log: {work / 'galaxy-importer.log'})")
    print(f"galaxy-importer: {len([p for p in found if not p.startswith('WARNING')])} errors, "
          f"{len([p for p in found if p.startswith('WARNING')])} warnings")
    return found


def install(tarball: Path, venv: Path, work: Path) -> Path:
    collections = work / "collections"
    run([str(venv / "bin" / "ansible-galaxy"), "collection", "install", "--offline", "--force", "-p",
         str(collections), str(tarball)], env=tool_env(venv, collections))
    return collections


def docs(collections: Path, venv: Path, work: Path) -> list[str]:
    found: list[str] = []
    root = collections / "ansible_collections" / "sglang" / "deploy"
    env = tool_env(venv, collections)
    lint = subprocess.run([str(venv / "bin" / "antsibull-docs"), "lint-collection-docs", "--plugin-docs", "."],
                          cwd=root, env=env, text=True, capture_output=True, check=False)
    if lint.returncode != 0:
        found.append(f"antsibull-docs lint-collection-docs --plugin-docs exited {lint.returncode}:\n"
                     + lint.stdout + lint.stderr)
    site = work / "docsite"
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    render = subprocess.run([str(venv / "bin" / "antsibull-docs"), "collection", "--use-current", "--fail-on-error",
                             "--dest-dir", str(site), "sglang.deploy"],
                            env=env, text=True, capture_output=True, check=False)
    if render.returncode != 0:
        found.append(f"antsibull-docs collection exited {render.returncode}:\n" + render.stdout + render.stderr)
    roles = sorted(path.name for path in (root / "roles").iterdir() if (path / "meta" / "argument_specs.yml").exists())
    pages = {m.group("role"): path for path in (site / "collections" / "sglang" / "deploy").glob("*_role.rst")
             if (m := ROLE_PAGE.match(path.name))}
    malformed = sorted(role for role, path in pages.items() if "malformed" in path.read_text())
    rendered = sorted(set(pages) - set(malformed))
    print(f"antsibull-docs: lint rc {lint.returncode}; {len(rendered)} of {len(roles)} role pages rendered whole")
    if rendered != roles:
        found.append(f"role pages: {rendered} rendered whole, expected {roles} (malformed: {malformed})")
    return found


def check(tarball: Path, venv: Path, work: Path) -> list[str]:
    for tool in ("python", "ansible-galaxy", "antsibull-docs", "ansible-lint"):
        if not (venv / "bin" / tool).exists():
            raise SystemExit(f"release: {venv}/bin/{tool} is missing: make release-check installs "
                             f"requirements-release.txt into {venv}")
    with tarfile.open(tarball) as archive:
        if not any(name == "MANIFEST.json" for name in archive.getnames()):
            raise SystemExit(f"release: {tarball} is not a built collection")
    work.mkdir(parents=True, exist_ok=True)
    found = importer(tarball.resolve(), venv, work)
    found += docs(install(tarball.resolve(), venv, work), venv, work)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="build the release tarball with its URLs")
    for key in URL_KEYS:
        build_cmd.add_argument(f"--{key}", default=None, help=f"the collection's {key} URL")
    build_cmd.add_argument("--out", type=Path, required=True, help="directory for the copy and the tarball")
    check_cmd = commands.add_parser("check", help="run galaxy-importer and antsibull-docs on a built tarball")
    check_cmd.add_argument("tarball", type=Path)
    check_cmd.add_argument("--venv", type=Path, required=True, help="the release virtualenv (requirements-release.txt)")
    check_cmd.add_argument("--work", type=Path, required=True, help="directory for logs, the install and the site")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(build({key: getattr(args, key) for key in URL_KEYS}, args.out))
        return 0
    found = check(args.tarball, args.venv.resolve(), args.work.resolve())
    for line in found:
        print(line, file=sys.stderr)
    print("release check: " + ("FAILED" if found else "passed (0 errors, 0 warnings)"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
