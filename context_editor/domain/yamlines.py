"""YAML loading that remembers where every key and item came from.

Domain files are authored by people, so every error must point at a line. PyYAML's composer
keeps marks on nodes; we construct plain Python data from the node tree and a parallel map
from a JSON-pointer-like path ("fields/budget_max/type") to its 1-based line. Duplicate keys,
which YAML silently collapses, are reported instead of lost.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..errors import DomainProblem


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


def _build(node: yaml.Node, path: str, lines: dict[str, int], problems: list[DomainProblem]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _constructor.construct_object(key_node, deep=True)
            key = str(key) if not isinstance(key, str) else key
            child = f"{path}/{key}" if path else key
            if key in out:
                problems.append(DomainProblem(
                    f"duplicate key '{key}' (YAML would silently keep only the last one)",
                    line=key_node.start_mark.line + 1, path=child,
                    fix=f"remove or rename one of the '{key}' entries", code="CE101"))
            lines[child] = key_node.start_mark.line + 1
            out[key] = _build(value_node, child, lines, problems)
            lines[child] = key_node.start_mark.line + 1  # the key's line beats its value's
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, f"{path}/{i}" if path else str(i), lines, problems)
                for i, item in enumerate(node.value)]
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
        return LinedYaml(None, {}, [DomainProblem(
            f"YAML syntax error: {problem}{noticed}", line=line,
            fix="check indentation and quoting on this line (quote strings containing ': ' or '#')",
            code="CE102")])
    lines: dict[str, int] = {}
    problems: list[DomainProblem] = []
    data = _build(node, "", lines, problems) if node is not None else None
    return LinedYaml(data, lines, problems)
