"""The MAP timing reference of a classification method's predictions: on each input set the
MAP network predicts right after the method, on the same inputs (Laplace Redux's LA/MAP and
DE/MAP prediction-time ratios are measured side by side)."""

from __future__ import annotations

from bench.jobs.classification_runner import predictions_beside_map


class Calls:
    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def predict(self, inputs):
        self.log.append((self.name, inputs))
        return f"{self.name}({inputs})"


def test_the_map_predicts_each_set_right_after_the_method():
    log = []
    predictives, seconds, map_seconds = predictions_beside_map(
        Calls("method", log), {"mnist": "a", "kmnist": "b"}, Calls("map", log))
    assert log == [("method", "a"), ("map", "a"), ("method", "b"), ("map", "b")]
    assert predictives == {"mnist": "method(a)", "kmnist": "method(b)"}
    assert set(seconds) == {"mnist", "kmnist"} and map_seconds >= 0


def test_without_a_map_network_there_is_no_reference_time():
    log = []
    _, _, map_seconds = predictions_beside_map(Calls("method", log), {"mnist": "a"}, None)
    assert map_seconds is None and log == [("method", "a")]
