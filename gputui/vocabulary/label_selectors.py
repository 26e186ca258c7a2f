"""Label selection as the API does it: equality (`matchLabels`, a Service's selector, a drain's `-l`) and set-based
requirements (`matchExpressions`). The one place every layer's matching comes from."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str], *, empty_matches: bool) -> bool:
    """Equality label selection, the one matcher every layer uses. What an empty selector means differs by
    object, so each caller says: a Service or a workload's selector with no labels selects nothing; a
    drain's `-l` with no labels (kubectl's default) selects every pod."""
    if not selector:
        return empty_matches
    return all(labels.get(k) == v for k, v in selector.items())


@dataclass(frozen=True, slots=True)
class Requirement:
    """One of a label selector's matchExpressions, as the API evaluates it (apimachinery's labels package)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist (and Gt, Lt from the string form)
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        if self.operator in ("Gt", "Lt"):  # the string form's `a>1`, `a<1`: whole numbers compared
            if value is None or not _INT64.fullmatch(value):
                return False
            return int(value) > int(self.values[0]) if self.operator == "Gt" else int(value) < int(self.values[0])
        return True  # the API refuses any other operator; were one to come, the budget is counted, not ignored

    def __str__(self) -> str:
        """The requirement in the selector's string form (`a=b`, `a notin (b,c)`, `!a`, `a>1`)."""
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        if self.operator in ("Gt", "Lt"):
            return f"{self.key}{'>' if self.operator == 'Gt' else '<'}{self.values[0]}"
        if len(self.values) == 1:
            return f"{self.key}{'=' if self.operator == 'In' else '!='}{self.values[0]}"
        return f"{self.key} {self.operator.lower()} ({','.join(self.values)})"


# The string form of a label selector, as apimachinery's labels.Parse reads it (`kubectl get -l`):
#   a=b  a==b  a!=b  a in (b,c)  a notin (b,c)  a  !a  a>1  a<1, requirements joined by ','.
_KEY_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_KEY_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_INT64 = re.compile(r"[+-]?[0-9]{1,19}")
# The lexer's tokens: operators by longest match, else an identifier (anything up to a space or a symbol).
_TOKEN = re.compile(r"[ \t\r\n]*(?:(==|!=|=|!|\(|\)|,|>|<)|([^ \t\r\n!=(),<>]+))")
_SPACE = re.compile(r"[ \t\r\n]*")
MAX_SELECTOR = 4096


class SelectorError(ValueError):
    """A label selector Kubernetes would refuse, worded in one line."""


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a label key (an optional DNS-subdomain prefix of at most 253 and '/', then a name of at
    most 63 characters), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _KEY_PREFIX.fullmatch(prefix)):
        return f"{key!r} has a bad prefix (a DNS subdomain before '/')"
    if len(name) > 63 or not _KEY_NAME.fullmatch(name):
        return f"{key!r} is not a label key (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _VALUE.fullmatch(value):
        return f"{value!r} is not a label value (at most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric)"
    return None


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, literal) pairs: kind "op" for an operator or punctuation, "id" for an identifier."""
    out: list[tuple[str, str]] = []
    at = 0
    while True:
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]  # (matches the empty string at least)
        if at >= len(text):
            return out
        m = _TOKEN.match(text, at)
        assert m is not None  # a non-space character is always an operator or starts an identifier
        out.append(("op", m.group(1)) if m.group(1) else ("id", m.group(2)))
        at = m.end()


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """A label selector's string form -> its requirements (`a=b` and `a==b` are In (b), `a!=b` NotIn (b)), or
    SelectorError saying what Kubernetes would refuse. '' selects everything (no requirement)."""
    if not isinstance(text, str):
        raise SelectorError("a label selector is text")
    if len(text) > MAX_SELECTOR:
        raise SelectorError(f"longer than {MAX_SELECTOR} characters")
    tokens = _tokens(text)
    end = ("end", "end of selector")
    pos = 0

    def peek() -> tuple[str, str]:
        return tokens[pos] if pos < len(tokens) else end

    def take() -> tuple[str, str]:
        nonlocal pos
        token = peek()
        pos += 1
        return token

    def key(token: tuple[str, str]) -> str:
        if token[0] != "id":
            raise SelectorError(f"expected a label key, found {token[1]!r}")
        problem = label_key_problem(token[1])
        if problem:
            raise SelectorError(problem)
        return token[1]

    def value(literal: str) -> str:
        problem = label_value_problem(literal)
        if problem:
            raise SelectorError(problem)
        return literal

    def exact() -> str:
        if peek() in (end, ("op", ",")):  # `a=` is the empty value
            return ""
        kind, literal = take()
        if kind != "id":
            raise SelectorError(f"expected a value, found {literal!r}")
        return literal

    def value_set() -> list[str]:
        if take() != ("op", "("):
            raise SelectorError("expected '(' after in or notin")
        if peek() == ("op", ")"):  # `a in ()`: the empty value
            take()
            return [""]
        values: list[str] = []
        while True:  # as apimachinery's parseIdentifiersList, empty values included: (a,) (,a) (a,,b)
            kind, literal = take()
            if kind == "id":
                values.append(value(literal))
                if peek() == ("op", ","):
                    continue
                if peek() != ("op", ")"):
                    raise SelectorError(f"expected ',' or ')', found {peek()[1]!r}")
                break
            if (kind, literal) != ("op", ","):
                raise SelectorError(f"expected a value or ',', found {literal!r}")
            if not values:
                values.append("")
            if peek() == ("op", ")"):
                values.append("")
                break
            if peek() == ("op", ","):
                take()
                values.append("")
        take()  # the ')'
        return list(dict.fromkeys(values))

    out: list[Requirement] = []
    while peek() != end:
        token = take()
        if token == ("op", "!"):
            out.append(Requirement(key(take()), "DoesNotExist"))
        else:
            name = key(token)
            kind, op = peek()
            if (kind, op) in (end, ("op", ",")):
                out.append(Requirement(name, "Exists"))
            elif op in ("=", "==", "!=") and kind == "op":
                take()
                out.append(Requirement(name, "NotIn" if op == "!=" else "In", (value(exact()),)))
            elif op in ("in", "notin") and kind == "id":
                take()
                out.append(Requirement(name, "In" if op == "in" else "NotIn", tuple(value_set())))
            elif op in (">", "<") and kind == "op":
                take()
                bound = exact()
                if not _INT64.fullmatch(bound) or not -2**63 <= int(bound) < 2**63:
                    raise SelectorError(f"{name} {op} needs a whole number, found {bound!r}")
                out.append(Requirement(name, "Gt" if op == ">" else "Lt", (str(int(bound)),)))
            else:
                raise SelectorError(f"expected =, ==, !=, in, notin, > or < after {name!r}, found {op!r}")
        after = take()
        if after == ("op", ","):
            if peek()[0] != "id" and peek() != ("op", "!"):
                raise SelectorError(f"expected a requirement after ',', found {peek()[1]!r}")
        elif after != end:
            raise SelectorError(f"expected ',' between requirements, found {after[1]!r}")
    return tuple(out)


def equality_selector(text: str) -> dict[str, str]:
    """A selector of `key=value` requirements only (what a drain's -l matches, as a mapping), or SelectorError:
    a valid selector using !=, in, notin, exists or > is refused by name, never half applied."""
    out: dict[str, str] = {}
    for req in parse_selector(text):
        if req.operator != "In" or len(req.values) != 1:
            raise SelectorError(f"only key=value requirements are supported here, not '{req}'")
        if req.key in out and out[req.key] != req.values[0]:
            raise SelectorError(f"{req.key} is given twice with different values: no pod would match")
        out[req.key] = req.values[0]
    return out
