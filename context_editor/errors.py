"""Errors with a code, a location and a fix, in the spirit of spaCy's `E###` errors.

Every error a user can cause says what is wrong, where (file and line when there is one) and
how to fix it. The CLI prints `str(error)` and exits non-zero; nothing is half-written.
"""

from __future__ import annotations


class ContextEditorError(Exception):
    """Base class: `code` is stable and documented, the message is for humans."""

    code = "CE000"

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 fix: str | None = None, code: str | None = None):
        self.message, self.file, self.line, self.fix = message, file, line, fix
        if code:
            self.code = code
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        text = f"{where}[{self.code}] {self.message}"
        return f"{text}\n  fix: {self.fix}" if self.fix else text


class MissingExtraError(ContextEditorError):
    """An optional dependency is not installed: the fix names the extra that brings it."""

    code = "CE003"

    def __init__(self, package: str, extra: str, needed_for: str):
        self.package, self.extra = package, extra
        super().__init__(f"{needed_for} needs {package}, which is not installed",
                         fix=f'pip install "context-editor[{extra}]"')


class DomainError(ContextEditorError):
    """The domain file is invalid (lint finds these; loading refuses them)."""

    code = "CE100"

    def __init__(self, problems: list["DomainProblem"], file: str | None):
        self.problems = problems
        first = problems[0]
        more = f" (and {len(problems) - 1} more problem(s); run `context-editor lint`)" if len(problems) > 1 else ""
        super().__init__(first.message + more, file=file, line=first.line, fix=first.fix, code=first.code)


class DomainProblem:
    """One lint finding: where, what, how to fix. A warning does not stop a domain from loading
    (`lint --strict` counts it as an error)."""

    __slots__ = ("line", "path", "message", "fix", "code", "severity")

    def __init__(self, message: str, *, line: int | None, path: str = "", fix: str = "", code: str = "CE100",
                 severity: str = "error"):
        self.message, self.line, self.path, self.fix, self.code = message, line, path, fix, code
        self.severity = severity

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def format(self, file: str) -> str:
        loc = f"{file}:{self.line}" if self.line else file
        where = f" (at {self.path})" if self.path else ""
        fix = f"\n  fix: {self.fix}" if self.fix else ""
        label = "warning " if self.severity == "warning" else ""
        return f"{loc}: {label}[{self.code}] {self.message}{where}{fix}"


class ConversationError(ContextEditorError):
    """A conversation file or message is malformed."""

    code = "CE200"


class UnknownActionError(ContextEditorError):
    code = "CE300"


class UnknownFieldError(ContextEditorError):
    code = "CE301"


class BudgetError(ContextEditorError):
    """The required part of a context does not fit in the token budget."""

    code = "CE400"


class StoreError(ContextEditorError):
    code = "CE500"


class SessionNotFoundError(StoreError):
    code = "CE501"


class SessionDomainError(StoreError):
    """A session belongs to one domain, and moves to a new version of it only when told to."""

    code = "CE505"
