"""`--set key=value`: change any field of a run's configs (`ModelConfig`, `TrainConfig`, `DataConfig`) from the
command line, parsed by the field's declared type and checked by the config itself.

A key is a field name (`lr`, `d_model`, `seq_len`: the three configs share no name) or `model.` / `train.` /
`data.` and the name. Values: ints and floats as Python writes them, bools as `true` / `false`, `none` for an
optional field, tuples comma-separated (`betas=0.9,0.95`, `extensions=.txt,.md`), dicts as JSON
(`mixer_options={"ccq": true}`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from typing import Any

_PREFIXES = {"model": 0, "train": 1, "data": 2}  # positions in the configs tuple
_TRUE, _FALSE, _NONE = ("true", "yes", "1"), ("false", "no", "0"), ("none", "null")


def apply_settings(configs: tuple, settings: list[str]) -> tuple:
    """`configs` (model, train, data: frozen dataclasses) with `settings` (`"key=value"` strings) applied, all of a
    config's at once (so `steps=10 warmup_steps=2` is checked together; a key given twice takes the last value).

    Raises `ValueError` naming the setting: an unknown key (with the closest names), a value not of the field's
    type, or one the config rejects.

    Example: `apply_settings((model, train, data), ["lr=1e-3", "d_model=256"])`.
    """
    changes: dict[int, dict[str, Any]] = {}
    given: dict[int, list[str]] = {}
    for setting in settings:
        index, name, value = parse_setting(configs, setting)
        changes.setdefault(index, {})[name] = value
        given.setdefault(index, []).append(setting)
    configs = list(configs)
    for index, fields in changes.items():
        try:
            configs[index] = dataclasses.replace(configs[index], **fields)
        except (TypeError, ValueError) as e:
            raise ValueError(f"--set {' '.join(given[index])}: {e}") from None
    return tuple(configs)


def parse_setting(configs: tuple, setting: str) -> tuple[int, str, Any]:
    """`(which config, field name, typed value)` of one `"key=value"` setting."""
    key, sep, text = setting.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"--set {setting}: expected key=value")
    fields = {i: {f.name: f for f in dataclasses.fields(c)} for i, c in enumerate(configs)}
    prefix, dot, rest = key.partition(".")
    if dot and prefix in _PREFIXES:
        index, name = _PREFIXES[prefix], rest
        found = name in fields[index]
    else:
        name = key
        index = next((i for i, f in fields.items() if name in f), None)
        found = index is not None
    if not found:
        known = sorted({n for f in fields.values() for n in f})
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        owners = ", ".join(f"{type(c).__name__} ({', '.join(sorted(fields[i]))})" for i, c in enumerate(configs))
        raise ValueError(f"--set {setting}: unknown key {key!r}{hint} (the fields of {owners})")
    hints = typing.get_type_hints(type(configs[index]))
    try:
        value = parse_value(text.strip(), hints[name])
    except ValueError as e:
        raise ValueError(f"--set {setting}: {e}") from None
    return index, name, value


def parse_value(text: str, kind: Any) -> Any:
    """`text` as a value of the type `kind` (int, float, str, bool, `X | None`, `tuple[...]`, dict)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if text.lower() in _NONE and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return parse_value(text, inner)
    if origin is tuple:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(parse_value(t, args[0]) for t in items)
        if len(items) != len(args):
            raise ValueError(f"expected {len(args)} comma-separated values, got {text!r}")
        return tuple(parse_value(t, a) for t, a in zip(items, args))
    if kind is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"expected true or false, got {text!r}")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"expected an int, got {text!r}") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    if kind is dict or origin is dict:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise ValueError(f'expected a JSON object such as {{"ccq": true}}, got {text!r}')
        return value
    return text
