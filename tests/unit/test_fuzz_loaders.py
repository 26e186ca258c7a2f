"""Property tests of everything that reads text from outside: the config, theme and keymap files, the GPUTUI_*
variables, Kubernetes quantities, label selectors and Prometheus answers. Any input gives a value or the one
clean error of its reader (ValueError or its subclasses, a one-line FileProblem), never another exception."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputui.backends.prom_answers import plain_columns, series_by_label, values_by_label, values_digest
from gputui.base.safe_text import is_clean
from gputui.base.yaml_file import parse_each
from gputui.settings import _ENV, Settings, SettingsError, load_settings
from gputui.vocabulary.gpu_resources import parse_quantity, quantity
from gputui.vocabulary.label_selectors import Requirement, SelectorError, equality_selector, parse_selector

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])

# ----- YAML documents: random text, and random structures written as YAML (anchors and aliases included) --------

SCALARS = st.one_of(
    st.text(max_size=12), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.sampled_from(["#ff0000", "red", "ctrl+x", "2024-13-45", ".nan", "~", "yes",
                                               "1e999", "0x1F", "!!binary zz", "*a", "&a", "<<: *a"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
THEME_KEYS = st.sampled_from(["name", "dark", "primary", "secondary", "accent", "warning", "error", "success",
                              "foreground", "background", "surface", "panel", "boost", "variables", "bogus"])
KEYMAP_KEYS = st.sampled_from(["name", "description", "extends", "keys", "bogus"])
CONFIG_KEYS = st.sampled_from(sorted({*Settings.__dataclass_fields__, "colour"}))


def documents(keys) -> st.SearchStrategy[str]:
    """YAML text: a mapping of known keys to any values, written by PyYAML (with its own anchors when values
    repeat), plus a mutation: a random text spliced in, an alias bomb, deep nesting, or nothing."""
    mapping = st.dictionaries(keys, VALUES, max_size=6).map(
        lambda d: yaml.safe_dump(d, allow_unicode=True, default_flow_style=False))
    tails = st.sampled_from([
        "", "\n: :\n", "\nx: &a [1, *a]\n", "\n\t- tab\n", "\n" + "[" * 100 + "]" * 100 + "\n",
        "\nlol: &l [a, a, a, a, a, a, a, a, a, a]\nl2: &m [*l, *l, *l, *l, *l, *l, *l, *l, *l, *l]\n"
        "l3: &n [*m, *m, *m, *m, *m, *m, *m, *m, *m, *m]\nl4: [*n, *n, *n, *n, *n, *n, *n, *n, *n, *n]\n",
        "\nname: !!python/object:os.system x\n", "\nkeys: {quit: [[q]]}\n", "\nprimary: !!binary aGk=\n",
        "\nvariables: {?: x}\n", "\n? [a]\n: b\n", "\x00", "\ufeffname: x\n", "\n" + "a: " * 50 + "b\n",
    ])
    return st.one_of(
        st.text(max_size=200),
        st.tuples(mapping, tails).map("".join),
        st.tuples(mapping, st.text(max_size=30), mapping).map("".join),
    )


def _write(tmp_path_factory, name: str, text: str) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


@FUZZ
@given(text=documents(THEME_KEYS))
@example(text="name: x\nprimary: &p '#000000'\naccent: *p\n")
@example(text='name: x\nprimary: red\nvariables: {"a\\nb": red}\n"c\\x1b[2Jd": 1\n')  # found: a two-line problem
def test_any_theme_file_is_a_theme_or_one_clean_problem(tmp_path_factory, text):
    from textual.theme import Theme

    from gputui.ui.theming import parse_theme

    path = _write(tmp_path_factory, "fuzz.yaml", text)
    try:
        theme = parse_theme(path)
    except ValueError:  # (its text may quote the file: a problem is made one line where files are read, below)
        pass
    else:
        assert isinstance(theme, Theme)
    good, problems = parse_each([path], parse_theme, lambda t: t.name)
    assert len(good) + len(problems) == 1
    assert all("\n" not in str(p) and is_clean(str(p)) for p in problems)


@FUZZ
@given(text=documents(KEYMAP_KEYS))
def test_any_keymap_file_is_a_keymap_or_one_clean_problem(tmp_path_factory, text):
    from gputui.ui.keys.keymaps import Keymap, load_keymaps, parse_keymap

    home = tmp_path_factory.mktemp("home")
    folder = home / "gputui" / "keymaps"
    folder.mkdir(parents=True)
    path = folder / "fuzz.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        keymap = parse_keymap(path)
    except ValueError:
        pass
    else:
        assert isinstance(keymap, Keymap)
    with _environ(XDG_CONFIG_HOME=str(home)):  # and with every keymap: extends, clashes
        keymaps, problems = load_keymaps()
    assert isinstance(keymaps, dict) and all("\n" not in str(p) and is_clean(str(p)) for p in problems)


@FUZZ
@given(text=documents(CONFIG_KEYS))
@example(text="1: 2\n")
@example(text="audit_log: {a: 1}\n")
@example(text="refresh: 2001-13-45\n")
def test_any_config_file_is_settings_or_one_settings_error(tmp_path_factory, text):
    path = _write(tmp_path_factory, "config.yaml", text)
    try:
        s = load_settings({}, env={}, config_path=path)
    except SettingsError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(s, Settings) and s.refresh > 0


ENV_VALUES = st.one_of(st.text(max_size=20), st.sampled_from(
    ["nan", "inf", "-inf", "1e999", "0", "-1", "1_0", "٣", " 2 ", "yes", "http://[::1", "https://p:9090",
     "a,b", ",", "Hostname", "x) or vector(1", "\x1b[2J", "prod-*"]))


@FUZZ
@given(env=st.dictionaries(st.sampled_from(sorted(_ENV)), ENV_VALUES, max_size=4))
def test_any_environment_is_settings_or_one_error_naming_the_variable(tmp_path_factory, env):
    try:
        s = load_settings({}, env=env, config_path=tmp_path_factory.mktemp("cfg") / "none.yaml")
    except SettingsError as exc:
        assert "\n" not in str(exc)
        assert any(str(exc).startswith(var) for var in env) or " must be " in str(exc)
    else:
        assert isinstance(s, Settings)


@contextmanager
def _environ(**values: str):
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ----- Kubernetes quantities ----------------------------------------------------------------------------------

QUANTITY_TEXT = st.one_of(
    st.text(max_size=24),
    st.from_regex(r"[+-]?[0-9]{0,30}(\.[0-9]{0,12})?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]{1,6})?",
                  fullmatch=True),
)


@FUZZ
@given(text=QUANTITY_TEXT)
@example(text="1e99999999")
@example(text="9" * 70)
@example(text="80Gi")
@example(text="\u0a67")  # GURMUKHI DIGIT ONE, found by CI: int() reads Unicode digits, parse_quantity does not
@example(text="1_000")
def test_any_text_is_a_quantity_or_a_value_error(text):
    try:
        value = parse_quantity(text)
    except ValueError:
        assert quantity(text) == 0
    else:
        assert isinstance(value, Fraction) and abs(value) <= 2**63
        assert quantity(text) == (int(value) if value.denominator == 1 else 0)


@FUZZ
@given(value=st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.lists(st.integers()), st.binary()))
def test_quantity_of_anything_is_a_whole_number(value):
    assert isinstance(quantity(value), int)


@FUZZ
@given(n=st.integers(0, 10**6), suffix=st.sampled_from(["", "k", "M", "Ki", "Mi", "Gi", "e3", "000m"]))
def test_quantities_read_as_kubernetes_writes_them(n, suffix):
    scale = {"": 1, "k": 10**3, "M": 10**6, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "e3": 10**3, "000m": 1}[suffix]
    assert quantity(f"{n}{suffix}") == n * scale
    assert parse_quantity("500m") == Fraction(1, 2) and quantity("500m") == 0  # half a GPU is no count of GPUs


# ----- label selectors ----------------------------------------------------------------------------------------

KEYS = st.sampled_from(["app", "tier", "app.kubernetes.io/name", "example.com/x-y", "a_b.c", "in", "notin"])
LABEL_VALUES = st.sampled_from(["", "v1", "a-b", "A.b_c", "x" * 63])


def requirements() -> st.SearchStrategy[Requirement]:
    return st.one_of(
        st.builds(lambda k, v: Requirement(k, "In", (v,)), KEYS, LABEL_VALUES),
        st.builds(lambda k, v: Requirement(k, "NotIn", (v,)), KEYS, LABEL_VALUES),
        st.builds(lambda k, vs: Requirement(k, "In", tuple(dict.fromkeys(vs))), KEYS,
                  st.lists(LABEL_VALUES.filter(bool), min_size=2, max_size=3)),
        st.builds(lambda k, vs: Requirement(k, "NotIn", tuple(dict.fromkeys(vs))), KEYS,
                  st.lists(LABEL_VALUES.filter(bool), min_size=2, max_size=3)),
        st.builds(lambda k: Requirement(k, "Exists"), KEYS),
        st.builds(lambda k: Requirement(k, "DoesNotExist"), KEYS),
        st.builds(lambda k, n: Requirement(k, "Gt", (str(n),)), KEYS, st.integers(-10**6, 10**6)),
        st.builds(lambda k, n: Requirement(k, "Lt", (str(n),)), KEYS, st.integers(-10**6, 10**6)),
    )


SELECTOR_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="ab=!(), in notin<>-./1", max_size=30),
)


@FUZZ
@given(text=SELECTOR_TEXT, labels=st.dictionaries(st.sampled_from(["a", "b", "app", "in"]),
                                                   st.sampled_from(["", "1", "x", "-5"]), max_size=3))
@example(text="a in (b,,c)", labels={})
@example(text="!", labels={})
def test_any_text_is_a_selector_or_a_selector_error(text, labels):
    try:
        reqs = parse_selector(text)
    except SelectorError as exc:
        assert "\n" not in str(exc)
        return
    for req in reqs:
        assert isinstance(req.matches(labels), bool)
    try:
        equality_selector(text)
    except SelectorError:
        assert any(r.operator != "In" or len(r.values) != 1 for r in reqs) or len({r.key for r in reqs}) < len(reqs)


@FUZZ
@given(reqs=st.lists(requirements(), min_size=1, max_size=4))
def test_a_selector_written_as_kubernetes_writes_it_reads_back_the_same(reqs):
    assert parse_selector(",".join(str(r) for r in reqs)) == tuple(reqs)
    assert parse_selector(" , ".join(f" {r} " for r in reqs)) == tuple(reqs)  # spaces between tokens are free


# ----- Prometheus answers -------------------------------------------------------------------------------------

def answers() -> st.SearchStrategy[bytes]:
    """Answers of a store, mostly plain ones with a few bytes changed, and anything at all."""
    label = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8)
    value = st.one_of(st.sampled_from(["1", "0.5", "NaN", "+Inf", "-Inf", "x", "", "1e999", "9" * 400]),
                      st.floats().map(repr))
    series = st.builds(lambda host, v: {"metric": {"Hostname": host, "namespace": host, "pod": host},
                                        "value": [1700000000.1, v]}, label, value)
    plain = st.lists(series, max_size=4).map(lambda s: json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": s}}, separators=(",", ":")).encode())

    def mutate(body: bytes, at: int, junk: bytes) -> bytes:
        at = at % (len(body) + 1)
        return body[:at] + junk + body[at + len(junk):]

    return st.one_of(
        st.binary(max_size=200),
        plain,
        st.builds(mutate, plain, st.integers(0, 400), st.binary(min_size=1, max_size=4)),
        st.sampled_from([b'{"status":"success","data":{"resultType":"vector","result":[', b"[" * 5000,
                         b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":[1]},'
                         b'"value":[0,"1"]}]}}']),
    )


def decoded_series(body: bytes):
    """What the JSON decoder hands series_by_label: the answer's result list, or None when it is none."""
    try:
        data = json.loads(body)
        result = data["data"]["result"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return result if isinstance(result, list) else None


@FUZZ
@given(body=answers())
@example(body=b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":["x"]},"value":[0,"1"]}]}}')
@example(body=b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"x"},"value":[0,' + b"9" * 400 + b"]}]}}")
def test_any_bytes_from_the_store_are_read_or_left_to_the_decoder(body):
    digest = values_digest(body)
    assert digest is None or isinstance(digest, bytes)
    found = values_by_label(body, ["Hostname", "hostname"])
    assert found is None or all(isinstance(k, str) and isinstance(v, float) for k, v in found.items())
    columns = plain_columns(body, '"namespace":"([^"\\\\]+)","pod":"([^"\\\\]+)"')
    assert columns is None or len(columns[0]) == len(columns[1])
    series = decoded_series(body)
    if series is not None:
        by_host = series_by_label(series, ["Hostname", "hostname"])
        assert all(isinstance(k, str) and isinstance(v, float) for k, v in by_host.items())


def test_a_deeply_nested_answer_is_a_clean_backend_error():
    """json's RecursionError on a deeply nested answer got out of PromSource._series."""
    from gputui.backends.base import BackendError
    from gputui.backends.prom import PromSource

    with pytest.raises(BackendError):
        PromSource._series(b"[" * 100_000)


def test_a_session_answer_with_a_list_for_a_label_is_skipped():
    """counts_by_pod keyed a count by label values that may be lists (unhashable: TypeError)."""
    from gputui.backends.session_metrics import counts_by_pod

    assert counts_by_pod([{"metric": {"namespace": ["a"], "pod": "p"}, "value": [0, "1"]}]) == {}


def test_the_answer_with_a_list_for_a_host_is_left_out_not_a_crash():
    assert series_by_label([{"metric": {"Hostname": ["x"]}, "value": [0, "1"]},
                            {"metric": {"Hostname": "y"}, "value": [0, "2"]}], ["Hostname"]) == {"y": 2.0}
