"""The PromQL the package ships (the alert rules of a small fleet, the dashboard's queries) and a reader of the
metric names in an expression: shared by the monitoring tests and the simulator's."""

from __future__ import annotations

import re

import yaml
from ansible_collections.sglang.deploy.plugins.filter import monitoring as monitoring_filter
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_dashboard

# PromQL words that are not metric names: operators, aggregations, functions, grouping and label names.
WORDS = {"by", "on", "and", "or", "unless", "bool", "without", "ignoring", "group_left", "group_right", "max", "min",
         "sum", "count", "avg", "abs", "rate", "increase", "label_values", "offset"}


def names(expr: str) -> set[str]:
    """The metric names of a PromQL expression."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)       # string literals
    text = re.sub(r"\{[^}]*\}", "{}", text)                # label matchers
    text = re.sub(r"\b(by|on|without|ignoring)\s*\([^)]*\)", " ", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", "", text)                 # range selectors
    text = re.sub(r",\s*\w+\)", ")", text)                 # label_values(metric, label)
    found = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text)) - WORDS
    return {name for name in found if not re.fullmatch(r"\d+(ms|s|m|h|d|w|y)", name)}


def all_queries() -> list[str]:
    rules = yaml.safe_load(monitoring_filter.alert_rules(
        [{"host": "a", "target": "a:30000", "unit": "sglang-kimi.service", "version": "0.5.23", "load_budget": 1080,
          "hicache": "on", "hicache_ratio": 2.0},
         {"host": "b", "target": "b:30000", "unit": "sglang-kimi.service", "version": "0.5.23", "load_budget": 1080,
          "hicache": "off", "hicache_ratio": None}],
        ["r:29000"], {"sglang_workers": ["a", "b"]}, 1))
    exprs = [rule["expr"] for rule in rules["groups"][0]["rules"]]
    return exprs + sglang_dashboard.queries(sglang_dashboard.dashboard())
