"""YAML loading that remembers where every key and item came from.

Domain files are authored by people, so every error must point at a line. PyYAML's composer
keeps marks on nodes; we construct plain Python data from the node tree and a parallel map
from a JSON-pointer-like path ("fields/budget_max/type") to its 1-based line. Duplicate keys,
which YAML silently collapses, are reported instead of lost. YAML 1.1 reads unquoted `yes`,
`no`, `on` and `off` as booleans (and `true`/`false` keys): such a scalar is kept as the text
written (`yes: [是的]` in an enum is the value "yes", not "True") and a warning says to quote it;
where a boolean is meant, the schema then asks for true/false.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import DomainProblem, Errors


class LinedYaml:
    """Data loaded from YAML plus `line(path)` for any key or item in it."""

    def __init__(self, data: Any, lines: dict[str, int], problems: list[DomainProblem]):
        self.data, self.lines, self.problems = data, lines, problems

    def line(self, path: str | list[Any]) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        parts = path.split("/") if isinstance(path, str) else [str(p) for p in path]
        while parts:
            key = "/".join(parts)
            if key in self.lines:
                return self.lines[key]
            parts = parts[:-1]
        return self.lines.get("", 1)


_constructor = yaml.SafeLoader(stream="")
_BOOL_TAG = "tag:yaml.org,2002:bool"


def _yaml11_bool(node: yaml.Node, path: str, as_key: bool, problems: list[DomainProblem]) -> bool:
    """Warn about an unquoted scalar YAML 1.1 would turn into a boolean; True if it is one (the
    caller then keeps its text)."""
    if not (isinstance(node, yaml.ScalarNode) and node.tag == _BOOL_TAG and node.style is None):
        return False
    if not as_key and node.value.lower() in ("true", "false"):
        return False  # `critical: true` means a boolean
    role = "key" if as_key else "value"
    problems.append(Errors.YAML_BOOLEAN.problem(line=node.start_mark.line + 1, path=path, severity="warning",
                                                role=role, value=node.value))
    return True


def _build(node: yaml.Node, path: str, lines: dict[str, int], problems: list[DomainProblem]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if _yaml11_bool(key_node, f"{path}/{key_node.value}" if path else str(key_node.value), True, problems):
                key = key_node.value
            else:
                key = _constructor.construct_object(key_node, deep=True)
                key = str(key) if not isinstance(key, str) else key
            child = f"{path}/{key}" if path else key
            if key in out:
                problems.append(Errors.DUPLICATE_KEY.problem(line=key_node.start_mark.line + 1, path=child, key=key))
            lines[child] = key_node.start_mark.line + 1
            out[key] = _build(value_node, child, lines, problems)
            lines[child] = key_node.start_mark.line + 1  # the key's line beats its value's
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, f"{path}/{i}" if path else str(i), lines, problems)
                for i, item in enumerate(node.value)]
    if _yaml11_bool(node, path, False, problems):
        return node.value
    return _constructor.construct_object(node, deep=True)


def load_lined_yaml(text: str, file: str) -> LinedYaml:
    """Parse YAML text; a syntax error becomes one DomainProblem with its line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        # The context mark is where the unclosed construct began (the real mistake, usually);
        # the problem mark is where the parser noticed.
        problem_mark = getattr(exc, "problem_mark", None)
        context_mark = getattr(exc, "context_mark", None)
        mark = context_mark or problem_mark
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        noticed = f" ({context} that starts here; noticed on line {problem_mark.line + 1})" if context and problem_mark else ""
        return LinedYaml(None, {}, [Errors.YAML_SYNTAX.problem(line=line, detail=f"{problem}{noticed}")])
    lines: dict[str, int] = {}
    problems: list[DomainProblem] = []
    data = _build(node, "", lines, problems) if node is not None else None
    return LinedYaml(data, lines, problems)
