"""The probe filter: one line of the pre-restart probe's report per check."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.filter.probe import probe_line


def test_a_check_is_one_line_ok_or_fail() -> None:
    assert probe_line({"ok": True, "check": "cuda", "detail": "libcudart.so.13 loads"}) == \
        "  ok   cuda: libcudart.so.13 loads"
    assert probe_line({"ok": False, "check": "toolchain", "detail": "no nvcc"}) == "  FAIL toolchain: no nvcc"
    assert probe_line(None) == "  FAIL None: None"
