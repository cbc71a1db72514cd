"""Masking the configured secrets in what reaches Ansible's output (module_utils _mask, used by sglang_ready)."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.module_utils._mask import MASK, mask, spellings
from hypothesis import assume, given
from hypothesis import strategies as st

KEYS = ["eng-CLIENT-5b7e1d0c", "eng-ADMIN-93c0a4f2"]


def test_sglangs_own_startup_line_and_argparse_error_come_out_masked() -> None:
    lines = (
        "[2026-12-06 10:01:02] server_args=ServerArgs(model_path='/models/tiny', api_key='eng-CLIENT-5b7e1d0c', "
        "admin_api_key='eng-ADMIN-93c0a4f2', port=30000)\n"
        "server_args={'api_key': 'eng-CLIENT-5b7e1d0c', 'admin_api_key': 'eng-ADMIN-93c0a4f2'}\n"
        "launch_server.py: error: unrecognized arguments: --api_key eng-CLIENT-5b7e1d0c --admin_api_key "
        "eng-ADMIN-93c0a4f2")
    out = mask(lines, KEYS)
    assert not any(key in out for key in KEYS)
    assert "api_key='********', admin_api_key='********', port=30000" in out
    assert out.endswith("unrecognized arguments: --api_key ******** --admin_api_key ********")


def test_results_are_masked_everywhere_keys_included_and_other_values_kept() -> None:
    result = {"msg": "failed: Bearer eng-ADMIN-93c0a4f2", "phases": [{"phase": "x", "at_s": 1.0}],
              "eng-CLIENT-5b7e1d0c": ("a", 2), "ready": False, "n": None}
    assert mask(result, KEYS) == {"msg": f"failed: Bearer {MASK}", "phases": [{"phase": "x", "at_s": 1.0}],
                                  MASK: ("a", 2), "ready": False, "n": None}


def test_escaped_forms_are_masked_too() -> None:
    key = 'q"uo\\te\'d'
    assert set(spellings([key])) >= {key, 'q\\"uo\\\\te\'d', "q\"uo\\\\te\\'d"}
    for text in (f"api_key='{key}'", f'{{"api_key": "{key}"}}'.replace(key, 'q\\"uo\\\\te\'d'),
                 "api_key=" + repr(key)):
        assert "uo" not in mask(text, [key]), text


def test_no_secret_configured_changes_nothing() -> None:
    assert mask({"msg": "anything"}, ["", None]) == {"msg": "anything"}
    assert spellings(["", None]) == []


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40),
       st.text(max_size=200), st.text(max_size=200))
def test_a_key_never_survives_in_any_surrounding_text(key: str, before: str, after: str) -> None:
    assume("*" not in key)  # a key of asterisks could be rebuilt from the mask and its neighbours
    text = before + key + after + repr(key) + key
    assert key not in mask(text, [key])
