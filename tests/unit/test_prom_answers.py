"""An answer that says what the last one said is not read again (prom_answers.LastAnswers): told by a digest of
its bytes without the evaluation time every series of an instant query carries."""

from __future__ import annotations

import json

from gputui.backends.prom_answers import LastAnswers, values_digest


def answer(at: float, values: dict[str, str]) -> bytes:
    result = [{"metric": {"namespace": "llm", "pod": pod}, "value": [at, v]} for pod, v in values.items()]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}},
                      separators=(",", ":")).encode()


def test_the_digest_leaves_out_the_evaluation_time_only():
    one = answer(1700000000.123, {"a": "1", "b": "2"})
    assert values_digest(one) == values_digest(answer(1700000002.5, {"a": "1", "b": "2"}))
    assert values_digest(one) != values_digest(answer(1700000002.5, {"a": "1", "b": "3"}))  # a value moved
    assert values_digest(one) != values_digest(answer(1700000002.5, {"a": "1"}))  # a series went
    assert values_digest(answer(1.0, {})) == values_digest(answer(2.0, {}))  # nothing, twice
    # A value that spells the evaluation time is still a value (the time is taken out with its "value":[ only).
    assert values_digest(answer(5.0, {"a": "5.0"})) != values_digest(answer(5.0, {"a": "6.0"}))
    # Not an instant query's plain answer (an error, another shape): no digest, so always read.
    assert values_digest(b'{"status":"error","error":"bad"}') is None
    assert values_digest(b"") is None


def test_a_repeated_answer_hands_back_what_it_was_read_as_and_a_new_one_is_read():
    last = LastAnswers()
    reads: list[bytes] = []

    def parse(body: bytes) -> dict:
        reads.append(body)
        return {"read": len(reads)}

    first = last.read("q", answer(1.0, {"a": "1"}), parse)
    assert last.read("q", answer(3.0, {"a": "1"}), parse) is first and len(reads) == 1
    moved = last.read("q", answer(5.0, {"a": "2"}), parse)
    assert moved == {"read": 2} and moved is not first
    assert last.read("other", answer(5.0, {"a": "2"}), parse) == {"read": 3}  # per query
    odd = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
    last.read("q", odd, parse)
    last.read("q", odd, parse)
    assert len(reads) == 5  # no digest: read every time
    assert last.read("q", answer(7.0, {"a": "2"}), parse) == {"read": 6}  # the odd answer replaced what was kept


def test_what_was_made_of_the_same_answers_is_made_once():
    last = LastAnswers()
    a, b = {"x": 1}, {"y": 2}
    made: list[int] = []

    def make() -> list[int]:
        made.append(1)
        return [len(made)]

    first = last.made("m", (a, b), make, {"n1"})
    assert last.made("m", (a, b), make, {"n1"}) is first
    assert last.made("m", (a, dict(b)), make, {"n1"}) is not first  # an equal answer, but another object: made
    again = last.made("m", (a, b), make, {"n1"})
    assert last.made("m", (a, b), make, {"n1", "n2"}) is not again  # `also` moved (the nodes)
    assert len(made) == 4
