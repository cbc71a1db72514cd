# Copyright: sglang-deploy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quoting for systemd: ExecStart words and EnvironmentFile lines. The templates call these through
the config filters and build no quoting of their own. ``exec_words`` and ``exec_argv`` read an ExecStart back
as systemd does, to compare a unit with the argv of the process it started."""

from __future__ import annotations

import re

_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def systemd_quote(word: str) -> str:
    """One ExecStart word: `%` -> `%%` (specifiers), `$` -> `$$` (variable expansion), C-style
    escapes for backslash, quotes and control characters, double quotes around anything that is
    not a plain word (spaces, empty, quotes, a lone `;`)."""
    text = str(word).replace("%", "%%").replace("$", "$$")
    if _SAFE_WORD.match(text) and text != ";":
        return text
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\t", "\\t").replace("\r", "\\r"))
    return f'"{escaped}"'


def systemd_exec_line(prefix: list[str], args: list[list[str]] | None = None) -> str:
    """An ExecStart value: the interpreter words, then one flag (with its values) per continued
    line, so a changed flag is a one-line diff. The first word must be an absolute path."""
    if not prefix or not str(prefix[0]).startswith("/"):
        raise ValueError(f"ExecStart must start with an absolute path, got {prefix[:1]!r}")
    lines = [" ".join(systemd_quote(word) for word in prefix)]
    lines += ["    " + " ".join(systemd_quote(word) for word in group) for group in args or [] if group]
    return " \\\n".join(lines)


def env_file_lines(env: dict[str, str]) -> str:
    """EnvironmentFile content: `NAME="value"` per line. Values are double-quoted with backslash
    escapes; systemd applies no specifier or variable expansion in EnvironmentFile=."""
    lines = []
    for name, value in env.items():
        if not ENV_NAME_RE.match(str(name)):
            raise ValueError(f"bad environment variable name {name!r}")
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
        lines.append(f'{name}="{escaped}"')
    return "\n".join(lines)


def first_control_character(text: str) -> int | None:
    """Where the first control character (Unicode category Cc: C0, DEL, C1) of `text` is, or None.
    A newline would end a unit or environment-file line; others make systemd refuse the unit."""
    return next((index for index, char in enumerate(text) if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F), None)


def unit_text(text: str) -> str:
    """Free text on one unit line (Description=): `%` -> `%%` (specifiers); a control character raises
    ValueError."""
    index = first_control_character(text)
    if index is not None:
        raise ValueError(f"{text!r} contains the control character {text[index]!r}")
    return text.replace("%", "%%")


# ExecStart= words as systemd's extract_first_word() splits them (src/basic/extract-word.c: whitespace separates,
# quotes group, C escapes), then %% -> % (unit_full_printf) and $$ -> $ (replace_env_argv).
_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "s": " "}
# What systemd would fill in at start, which a reader of the file cannot: a %-specifier other than %%, and a
# $NAME or ${NAME} expansion (not $$).
_UNKNOWABLE = re.compile(r"%[^%]|(?<!\$)\$(?:\{|[A-Za-z_])")


def exec_words(value: str) -> list[str]:
    """The argv systemd runs for an ExecStart= value (without its prefixes), for values without specifiers or
    variables (see exec_argv)."""
    words, i, n = [], 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quote = "", None
        while i < n and (quote or value[i] not in " \t"):
            char = value[i]
            if char == "\\" and i + 1 < n:
                word, i = word + _C_ESCAPES.get(value[i + 1], "\\" + value[i + 1]), i + 2
            elif quote and char == quote:
                quote, i = None, i + 1
            elif not quote and char in "\"'":
                quote, i = char, i + 1
            else:
                word, i = word + char, i + 1
        words.append(word.replace("%%", "%").replace("$$", "$"))
    return words


def exec_argv(unit: str) -> list[str] | None:
    """The argv the unit's ExecStart= runs, continuation lines joined; None when the unit has no single
    ExecStart= or systemd would fill in part of it at start (a specifier, an environment variable)."""
    values, pending, section = [], "", ""
    # Lines end at \n (a raw \r or NUL would end one too; systemd_quote escapes \r, and no argv word holds a NUL),
    # and lose only systemd's whitespace, " \t\r"; a form feed stays in its word.
    for raw in unit.split("\n"):
        line = pending + raw.strip(" \t\r") if pending else raw.strip(" \t\r")
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and line.startswith("ExecStart="):
            values.append(line.split("=", 1)[1].lstrip("-@:+!|"))
    if len(values) != 1 or _UNKNOWABLE.search(values[0].replace("%%", "").replace("$$", "")):
        return None
    return exec_words(values[0])
