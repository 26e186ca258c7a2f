"""RFC 7386 JSON merge patch and RFC 6902 JSON patch, applied as the apiserver applies them (the demo's
route objects are patched with exactly the bodies gputui sends a real cluster)."""

from __future__ import annotations

import copy
from typing import Any

from gputui.backends.demo.errors import DemoApiError

# kube-apiserver's whole answer when a JSON patch's test op fails: 422 Invalid, no causes.
REJECTED = "the server rejected our request due to an error in our request"

def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)  # a list or a scalar replaces whatever was there
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise DemoApiError(400, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]] if path else []


def _index(container: list, token: str, path: str, op: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise DemoApiError(422, f"{op} operation does not apply: doc is missing path: {path}: invalid index")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise DemoApiError(422, f"{op} operation does not apply: doc is missing path: {path}: index out of range")
    return i


def json_patch(doc: Any, ops: list) -> Any:
    """add, remove, replace and test (what gputui sends); the whole patch or nothing."""
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise DemoApiError(400, "each JSON patch operation needs op and path")
        kind, path = op["op"], op["path"]
        if kind not in ("add", "remove", "replace", "test"):
            raise DemoApiError(400, f'the demo cluster does not implement JSON patch op "{kind}"')
        if kind != "remove" and "value" not in op:
            raise DemoApiError(400, f"{kind} operation: missing value")
        tokens = _pointer(path)
        if not tokens:
            if kind == "test":
                if not _json_equal(doc, op["value"]):
                    raise DemoApiError(422, REJECTED)
                continue
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for token in tokens[:-1]:
            if isinstance(parent, dict) and token in parent:
                parent = parent[token]
            elif isinstance(parent, list):
                parent = parent[_index(parent, token, path, kind, False)]
            else:
                raise DemoApiError(422, f"{kind} operation does not apply: doc is missing path: {path}: missing value")
        last = tokens[-1]
        if isinstance(parent, dict):
            present = last in parent
            if kind == "add":
                parent[last] = copy.deepcopy(op["value"])
            elif not present:
                raise DemoApiError(422, f"{kind} operation does not apply: doc is missing key: {path}: missing value")
            elif kind == "remove":
                del parent[last]
            elif kind == "replace":
                parent[last] = copy.deepcopy(op["value"])
            elif not _json_equal(parent[last], op["value"]):
                raise DemoApiError(422, REJECTED)
        elif isinstance(parent, list):
            i = _index(parent, last, path, kind, kind == "add")
            if kind == "add":
                parent.insert(i, copy.deepcopy(op["value"]))
            elif kind == "remove":
                del parent[i]
            elif kind == "replace":
                parent[i] = copy.deepcopy(op["value"])
            elif not _json_equal(parent[i], op["value"]):
                raise DemoApiError(422, REJECTED)
        else:
            raise DemoApiError(422, f"{kind} operation does not apply: doc is missing path: {path}: missing value")
    return doc
