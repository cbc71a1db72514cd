"""Property-based tests of everything that turns a user's string into a unit line, an environment line
or an argv word: for any generated value, either the variable check or the resolve step refuses it with
a message that starts with the variable's name, or

- the unit written from it passes ``systemd-analyze verify`` and holds exactly the expected directives;
- its ExecStart, unquoted as systemd does (specifiers, ``$$``, C escapes, quotes), is exactly the argv;
- that argv parses with the pinned catalog's parser (the simulator's argparse double, helpers.catalog_parser)
  to the value;
- its Description reads back as the text, and its environment file line as the value.

Examples are derandomized: CI runs the same ones every time (the count is in ``EXAMPLES``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sglang.deploy.plugins.lookup.variable_problems import ROLES, _specs
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_catalog, sglang_config, sglang_inputs
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_quote import (
    env_file_lines,
    exec_argv,
    systemd_exec_line,
    unit_text,
)
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_types import is_unset
from helpers import BASE, CATALOGS, catalog_parser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = 60
SPECS = _specs(ROLES)
CATALOG = sglang_catalog.load_catalog("0.5.23", str(CATALOGS))
PREFIX = ["/usr/bin/python3", "-m", "sglang.launch_server"]
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
ANALYZE = shutil.which("systemd-analyze")

# Any text: every Unicode category, control characters included, plus the characters systemd treats
# specially, so the generator finds them often.
SPECIAL = st.sampled_from(list('%$\\"\' \n\t\r\x00;#[]=-') + ["--api-key=x", "%n", "$HOME", "\\n"])
TEXT = st.lists(st.one_of(st.text(max_size=6), SPECIAL), max_size=8).map("".join)


# --- systemd's side: ExecStart= words as extract_first_word() splits them (src/basic/extract-word.c, with
# specifiers and $$), environment files as parse_env_file_internal() reads a double-quoted value (src/basic/
# env-file.c, state DOUBLE_QUOTE_VALUE_ESCAPE: a backslash before one of "\`$ is dropped, before anything
# else kept, before a newline the line continues) ------------------------------------------------------

def _cunescape(text: str, i: int) -> tuple[str, int]:
    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "s": " "}
    return table.get(text[i + 1], "\\" + text[i + 1]), i + 2


def systemd_words(value: str) -> list[str]:
    """ExecStart= words: whitespace separates, quotes group, C escapes, then %% -> % and $$ -> $."""
    words, i, n = [], 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quote = "", None
        while i < n and (quote or value[i] not in " \t"):
            char = value[i]
            if char == "\\":
                escaped, i = _cunescape(value, i)
                word += escaped
            elif quote and char == quote:
                quote, i = None, i + 1
            elif not quote and char in "\"'":
                quote, i = char, i + 1
            else:
                word, i = word + char, i + 1
        words.append(specifiers(word).replace("$$", "$"))
    return words


def env_value(line: str) -> tuple[str, str]:
    """NAME="value" of an EnvironmentFile=, with the escapes systemd's env-file parser honours."""
    name, rest = line.split("=", 1)
    assert rest[0] == '"' and rest[-1] == '"'
    body, value, i = rest[1:-1], "", 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in '"\\`$':
            value, i = value + body[i + 1], i + 2
        else:
            value, i = value + body[i], i + 1
    return name, value


def specifiers(value: str) -> str:
    """What systemd makes of %-specifiers: %% is a %, any other % starts a specifier (here: a marker)."""
    return re.sub(r"%(.)", lambda m: "%" if m.group(1) == "%" else "\ufffd<specifier>", value)


def unit_directives(text: str) -> list[tuple[str, str]]:
    """(key, value) of every directive, continuation lines joined as systemd's config parser joins them. Lines end
    at \\n (and at a raw \\r or NUL, which the quoting never leaves); a form feed is part of its line."""
    joined = text.replace("\\\n", " ")
    return [tuple(line.split("=", 1)) for line in joined.split("\n")  # type: ignore[misc]
            if line and not line.startswith(("#", "["))]


# --- the package's side -------------------------------------------------------------------------

def resolved_unless_refused(var: str, value: Any) -> dict[str, Any] | None:
    """The example inventory's configuration with `var` set to `value`; None when the variable check or
    the resolve step refuses it, and then every refusal must name `var`."""
    errors = sglang_inputs.check({var: value}, [var], SPECS)
    config = None if errors else sglang_config.resolve(dict(BASE, **{var: value}), str(CATALOGS))
    errors = errors or config["errors"]
    assert all(error.startswith(var) for error in errors), errors
    return None if errors else config


def write_unit(tmp: Path, description: str, argv: list[str]) -> Path:
    unit = tmp / "property.service"
    unit.write_text("[Unit]\nDescription=" + unit_text(description) + "\n\n[Service]\nType=simple\n"
                    "ExecStart=" + systemd_exec_line(PREFIX, [[word] for word in argv]) + "\n")
    return unit


def assert_unit(tmp: Path, description: str, argv: list[str]) -> None:
    unit = write_unit(tmp, description, argv)
    directives = unit_directives(unit.read_text())
    assert [key for key, _value in directives] == ["Description", "Type", "ExecStart"]
    assert specifiers(directives[0][1]) == description
    assert systemd_words(directives[2][1]) == PREFIX + argv
    # The restart decision's own reader (what it compares with a running server's argv) reads it the same.
    assert exec_argv(unit.read_text()) == PREFIX + argv
    if ANALYZE:
        run = subprocess.run([ANALYZE, "verify", str(unit)], capture_output=True, text=True, check=False)
        assert run.returncode == 0 and not run.stderr.strip(), run.stderr


@pytest.fixture(scope="module")
def unit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("units")


@PROPERTY
@given(name=TEXT)
def test_served_model_name_is_refused_or_reaches_unit_and_parser_intact(unit_dir: Path, name: str) -> None:
    config = resolved_unless_refused("sglang_served_model_name", name)
    if config is None:
        return
    assert_unit(unit_dir, f"SGLang server kimi ({name or '/models/Kimi-K2.5'})", config["argv"])
    if not is_unset(name):  # blank, "none" or "null" is unset: no --served-model-name (sglang_types.is_unset)
        parsed = catalog_parser().build_parser(CATALOG).parse_args(config["argv"])
        assert parsed.served_model_name == name


@PROPERTY
@given(value=TEXT)
def test_extra_arg_value_is_refused_or_parses_to_itself(unit_dir: Path, value: str) -> None:
    config = resolved_unless_refused("sglang_extra_args", {"chat-template": value})
    if config is None:
        return
    assert_unit(unit_dir, "SGLang server kimi", config["argv"])
    assert catalog_parser().build_parser(CATALOG).parse_args(config["argv"]).chat_template == value


@PROPERTY
@given(words=st.lists(TEXT.map(lambda text: text.replace("\x00", "")), max_size=6))
def test_the_restart_decision_reads_any_execstart_the_role_writes_as_systemd_does(words: list[str]) -> None:
    """exec_argv (sglang_quote; the restart decision compares it with /proc/<MainPID>/cmdline) against this
    test's reading of systemd's rules, on any words systemd_exec_line quotes: a specifier or $ in a word is
    escaped, so the argv is always knowable. (No NUL: no argv word can hold one, and systemd ends a line there.)"""
    unit = ("[Unit]\nDescription=x\n\n[Service]\nType=simple\nExecStart="
            + systemd_exec_line(PREFIX, [[word] for word in words]) + "\nKillMode=mixed\n")
    directives = unit_directives(unit)
    assert exec_argv(unit) == systemd_words(directives[2][1]) == PREFIX + words


@PROPERTY
@given(value=TEXT)
def test_environment_value_is_refused_or_reads_back_as_itself(value: str) -> None:
    config = resolved_unless_refused("sglang_env", {"NCCL_DEBUG": value})
    if config is None:
        return
    lines = env_file_lines(config["env"]).splitlines()
    assert len(lines) == len(config["env"])
    assert dict(env_value(line) for line in lines)["NCCL_DEBUG"] == value


@PROPERTY
@given(path=TEXT)
def test_a_path_the_unit_reads_is_refused_or_plain(path: str) -> None:
    for var in sorted(sglang_inputs.UNIT_PATHS):
        value = [path] if SPECS_TYPES.get(var) == "list" else path
        errors = sglang_inputs.check({var: value}, [var], SPECS)
        if errors:
            assert all(error.startswith(var) for error in errors), errors
        else:
            assert path == "" or (path.startswith("/") and not any(c in path for c in ' \t\n%"\'\\'))


@PROPERTY
@given(number=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), TEXT))
def test_a_number_is_refused_with_its_name_never_a_python_error(number: Any) -> None:
    for var in ("hicache_ratio", "sglang_hicache_ratio", "sglang_host_memory_available_gb", "sglang_port",
                "sglang_service_drain_timeout", "sglang_ready_timeout", "sglang_tp_size"):
        errors = sglang_inputs.check({var: number}, [var], SPECS)
        assert all(error.startswith(var) for error in errors), errors


SPECS_TYPES = {name: option.get("type") for options in SPECS.values() for name, option in options.items()}


def test_systemd_words_reads_what_systemd_reads() -> None:
    """The test's own reader against a unit systemd itself accepted (tests of the tests)."""
    assert systemd_words('"a b" c\\"d %%n $$HOME') == ["a b", 'c"d', "%n", "$HOME"]
    assert env_value('A="x\\"y\\\\z\\$"') == ("A", 'x"y\\z$')


# --- the front check and Ansible's own entry-point validation never disagree ---------------------------------

OPTIONS = sorted({(name, role): option or {} for role, options in SPECS.items()
                  for name, option in (options or {}).items()}.items())
ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                      st.text(max_size=12), st.sampled_from(["on", "off", "yes", "12", "1.5", "a,b", "strict"]),
                      st.lists(st.text(max_size=6), max_size=3), st.dictionaries(st.text(max_size=4), st.integers()))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(index=st.integers(0, len(OPTIONS) - 1), value=ANY_VALUE)
def test_a_value_the_check_accepts_passes_ansibles_own_validation_as_the_same_value(index: int, value: Any) -> None:
    """What the front check (check.yml) lets through, the entry point's validate_argument_spec accepts too, with
    the same conversion: the check is Ansible's validator plus stricter rules, never a second opinion."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    (name, _role), option = OPTIONS[index]
    errors = sglang_inputs.check({name: value}, [name], SPECS)
    if any(error.startswith(name) for error in errors):
        return
    spec = {key: option[key] for key in ("type", "elements", "choices") if key in option}
    result = ArgumentSpecValidator({name: spec}).validate({name: value})
    assert not list(result.errors), (name, value, [str(e) for e in result.errors])
    typed, problems = sglang_inputs.ansible_checked(name, value, option)
    assert problems == [] and typed == result.validated_parameters.get(name, value)
