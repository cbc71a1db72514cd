"""ServerArgs: argv parsed with the pinned version's flag catalog, then SGLang's startup checks.

Parsing errors exit 2 with argparse's message (the catalog parser is argparse). The semantic
checks raise StartupError, printed as the uncaught Python traceback the real server prints
(exit 1).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from sglang._sim import argparser, configfile, sglang_catalog
from sglang._sim.logs import Frame
from sglang._sim.model import ModelError, ModelInfo, incorrect_path, load_model
from sglang.version import __version__

CATALOG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogs")
EAGLE = ("EAGLE", "EAGLE3")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH")
DEFAULTS = {"mem_fraction_static": 0.83, "max_running_requests": 48,
            "chunked_prefill_size": 8192, "page_size": 1, "max_prefill_tokens": 16384}
_SI = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}

Args = dict[str, Any]


class StartupError(Exception):
    """A startup failure: frames of the traceback and its last line."""

    def __init__(self, frames: Sequence[Frame], exception: str) -> None:
        super().__init__(exception)
        self.frames = list(frames)
        self.exception = exception


def base_version() -> str:
    return __version__.split("+", 1)[0]


def at_least(version: str) -> bool:
    key = sglang_catalog.version_key
    return key(base_version()) >= key(version)


def load_catalog() -> sglang_catalog.Catalog:
    return sglang_catalog.load_catalog(__version__, CATALOG_DIR)


def human_int(text: Any) -> int | None:
    """SGLang's human_readable_int: 262144, 25.6k, 1M, 1Ki (case-sensitive; decimals only with SI)."""
    if text is None or isinstance(text, int):
        return text
    match = re.fullmatch(r"(\d+)(\.\d+)?([kMGT]|[KMGT]i)?", str(text).strip())
    if not match:
        raise ValueError(text)
    whole, fraction, suffix = match.group(1), match.group(2) or "", match.group(3) or ""
    if suffix in _IEC:
        if fraction:
            raise ValueError(text)
        return int(whole) * _IEC[suffix]
    value = float(whole + fraction) * _SI[suffix]
    if value != int(value):
        raise ValueError(text)
    return int(value)


def _with_config_file(argv: Sequence[str], catalog: sglang_catalog.Catalog) -> list[str]:
    try:
        return configfile.merge(list(argv), catalog)
    except (configfile.ConfigFileError, ValueError) as error:
        frames: list[Frame] = [
            *_post_init("", "")[:3],
            ("srt/server_args.py", 6098, "prepare_server_args", "argv = config_merger.merge_config_with_args(argv)"),
            ("srt/server_args_config_parser.py", 61, "parse_config", "raise ValueError("),
        ]
        raise StartupError(frames, f"ValueError: {error}") from None


def merged_argv(argv: Sequence[str], catalog: sglang_catalog.Catalog) -> list[str]:
    """The arguments with ``--config``'s merged in, as prepare_server_args builds them (StartupError if bad)."""
    return _with_config_file(argv, catalog)


def parse(argv: Sequence[str], catalog: sglang_catalog.Catalog) -> Args:
    """Parse like SGLang (exit 2 on error), fill the catalog defaults, normalise numbers.

    ``--config file.yaml`` is merged first; a bad config file raises StartupError.
    """
    parser = argparser.build_parser(catalog)
    values = vars(parser.parse_args(_with_config_file(argv, catalog)))
    for option in catalog["options"]:
        if option["action"] in ("help", "version"):
            continue
        if values.get(option["dest"]) is None and option.get("default") is not None:
            values[option["dest"]] = option["default"]
    for option in catalog["options"]:
        if option.get("type") == "human_readable_int" and option["dest"] in values:
            try:
                values[option["dest"]] = human_int(values[option["dest"]])
            except ValueError:
                flags = "/".join(option["flags"])
                parser.error(f"argument {flags}: invalid human_readable_int value: {values[option['dest']]!r}")
    return values


def _post_init(method: str, code: str) -> list[Frame]:
    return [
        ("<frozen runpy>", 198, "_run_module_as_main", ""),
        ("<frozen runpy>", 88, "_run_code", ""),
        ("launch_server.py", 32, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
        ("srt/server_args.py", 6104, "prepare_server_args",
         "return ServerArgs.from_cli_args(raw_args)"),
        ("srt/server_args.py", 5590, "from_cli_args",
         "return cls(**{attr: getattr(args, attr) for attr in attrs})"),
        ("<string>", 436, "__init__", ""),
        ("srt/server_args.py", 812, "__post_init__", f"self.{method}()"),
    ] + ([("srt/server_args.py", 1650, method, code)] if code else [])


def _hf_config_frames() -> list[Frame]:
    return [
        *_post_init("_handle_model_specific_adjustments", "hf_config = self.get_hf_config()"),
        ("srt/utils/hf_transformers_utils.py", 287, "get_config", "config = AutoConfig.from_pretrained("),
        ("../transformers/models/auto/configuration_auto.py", 1332, "from_pretrained",
         "config_dict, unused_kwargs = PretrainedConfig.get_config_dict(pretrained_model_name_or_path, **kwargs)"),
        ("../transformers/configuration_utils.py", 662, "get_config_dict",
         "config_dict, kwargs = cls._get_config_dict(pretrained_model_name_or_path, **kwargs)"),
    ]


def _check_model(args: Args) -> ModelInfo:
    try:
        return load_model(args.get("model_path"))
    except ModelError as error:
        raise StartupError(_hf_config_frames(), str(error)) from None


def _check_speculative(args: Args) -> None:
    algorithm = args.get("speculative_algorithm")
    if algorithm is None:
        return
    if str(algorithm).upper() not in SPEC_ALGORITHMS:
        raise StartupError(_post_init("_handle_speculative_decoding",
                                      "SpeculativeAlgorithm.from_string(self.speculative_algorithm)"),
                           f"ValueError: Unknown speculative algorithm name: {algorithm}")
    if args.get("speculative_num_steps") is None and (
            args.get("speculative_eagle_topk") is not None
            or args.get("speculative_num_draft_tokens") is not None):
        raise StartupError(_post_init("_handle_speculative_decoding", "assert ("),
                           "AssertionError")
    if str(algorithm).upper() == "EAGLE3":
        draft = args.get("speculative_draft_model_path")
        if not draft:
            raise StartupError(
                _post_init("_handle_speculative_decoding",
                           "raise ValueError("),
                "ValueError: EAGLE3 speculative decoding requires setting "
                "--speculative-draft-model-path.")
        if not os.path.isdir(os.path.expanduser(str(draft))):
            raise StartupError(_hf_config_frames(), str(incorrect_path(str(draft))))


def _check_parallel(args: Args) -> None:
    nnodes, tp_size = int(args.get("nnodes") or 1), int(args.get("tp_size") or 1)
    if tp_size % nnodes:
        raise StartupError(_post_init("_handle_multi_node", "assert ("),
                           f"AssertionError: tp_size ({tp_size}) must be divisible by nnodes ({nnodes})")
    if not 0 <= int(args.get("node_rank") or 0) < nnodes:
        raise StartupError(_post_init("_handle_multi_node", "assert ("),
                           "AssertionError: node_rank must be in [0, nnodes)")
    if nnodes > 1 and not args.get("dist_init_addr"):
        raise StartupError(_post_init("_handle_multi_node", "raise ValueError("),
                           "ValueError: --dist-init-addr is required when --nnodes > 1")


def _check_cache(args: Args) -> None:
    if args.get("enable_hierarchical_cache") and args.get("disable_radix_cache"):
        raise StartupError(
            _post_init("_handle_hicache", "raise ValueError("),
            "ValueError: The arguments enable-hierarchical-cache and disable-radix-cache are "
            "mutually exclusive and cannot be used at the same time. Please use only one of "
            "them.")


def finalize(args: Args, model: ModelInfo) -> Args:
    """Fill what ServerArgs.__post_init__ derives."""
    out = dict(args)
    for key, value in DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    out["tokenizer_path"] = out.get("tokenizer_path") or out.get("model_path")
    out["served_model_name"] = out.get("served_model_name") or out.get("model_path")
    out["context_length"] = out.get("context_length") or model.context_len
    if str(out.get("speculative_algorithm") or "").upper() in EAGLE and all(
            out.get(key) is None for key in ("speculative_num_steps", "speculative_eagle_topk",
                                             "speculative_num_draft_tokens")):
        out.update(speculative_num_steps=3, speculative_eagle_topk=1,
                   speculative_num_draft_tokens=4)
    return out


def _check_ssl(args: Args) -> None:
    """0.5.23 arg_groups/serving_hook.py handle_ssl_validation: the pair, then the files exist."""
    cert, key, ca = args.get("ssl_certfile"), args.get("ssl_keyfile"), args.get("ssl_ca_certs")
    problem = ""
    if key and not cert:
        problem = "--ssl-keyfile requires --ssl-certfile to be specified as well."
    elif cert and not key:
        problem = "--ssl-certfile requires --ssl-keyfile to be specified as well."
    elif ca and not cert:
        problem = "--ssl-ca-certs has no effect without --ssl-certfile and --ssl-keyfile."
    for path, what, flag in ((key, "SSL key file", "--ssl-keyfile"), (cert, "SSL certificate file", "--ssl-certfile"),
                             (ca, "SSL CA certificates file", "--ssl-ca-certs")):
        if not problem and path and not os.path.isfile(str(path)):
            problem = f"{what} not found: '{path}'. Please check the {flag} path."
    if problem:
        raise StartupError(_post_init("_handle_ssl_validation", "raise ValueError("), f"ValueError: {problem}")


def check(args: Args) -> ModelInfo:
    """The startup checks of ServerArgs, in their order; returns the model."""
    _check_ssl(args)
    _check_parallel(args)
    model = _check_model(args)
    _check_speculative(args)
    _check_cache(args)
    return model


# 0.5.9-0.5.14 log f"{server_args=}", the dataclass repr "ServerArgs(model_path='...', ...)"; 0.5.19 and later the
# resolved dict, "server_args={'model_path': '...', ...}" (0.5.23 srt/entrypoints/engine.py:173-174, :311,
# server_args.py:316-333), which /server_info also answers with (utils/common.py:3584-3593).
RESOLVED_DICT_SINCE = "0.5.19"
NOT_FIELDS = ("config",)  # --config is merged into argv by prepare_server_args, it is not a ServerArgs field
# Redacted when set (srt/sampling/watermarking/core.py:34-50).
WATERMARK_SECRETS = ("watermark_config", "watermark_key", "watermark_key_b")
REDACTED = "<redacted>"
# Settings the scheduler derives at run time without writing them back: the resolved args keep what was given
# (None by default; the real /get_server_info of 0.5.23 has "context_length": null, "max_running_requests": null).
UNRESOLVED = ("context_length", "max_running_requests")


def _field_names(args: Args, catalog: sglang_catalog.Catalog) -> list[str]:
    names = [option["dest"] for option in catalog["options"]
             if option["action"] not in ("help", "version") and option["dest"] in args]
    return list(dict.fromkeys(name for name in names if name not in NOT_FIELDS))


def _shown(args: Args, given: Args, name: str) -> Any:
    if name in WATERMARK_SECRETS and args[name] is not None:
        return REDACTED
    return given.get(name) if name in UNRESOLVED else args[name]


def resolved_dict(args: Args, catalog: sglang_catalog.Catalog, given: Args | None = None) -> dict[str, Any]:
    """ServerArgs.resolved_dict() with the watermark secrets redacted, as the server logs and serves it; given:
    the arguments as parsed, before finalize() derived what SGLang leaves unresolved (UNRESOLVED)."""
    return {name: _shown(args, args if given is None else given, name) for name in _field_names(args, catalog)}


def server_args_repr(args: Args, catalog: sglang_catalog.Catalog, given: Args | None = None) -> str:
    """What follows "server_args=" in the version's startup log."""
    resolved = resolved_dict(args, catalog, given)
    if at_least(RESOLVED_DICT_SINCE):
        return repr(resolved)
    return "ServerArgs({})".format(", ".join(f"{name}={value!r}" for name, value in resolved.items()))


def launch_command(argv: Sequence[str]) -> str:
    """ServerArgs.launch_command: the arguments as given, the watermark config redacted (server_args.py:717,
    srt/sampling/watermarking/core.py:110-134)."""
    out: list[str] = []
    for argument in argv:
        if out and out[-1] == "--watermark-config":
            out.append(REDACTED)
        elif argument.startswith("--watermark-config="):
            out.append("--watermark-config=" + REDACTED)
        else:
            out.append(argument)
    return " ".join(out)
