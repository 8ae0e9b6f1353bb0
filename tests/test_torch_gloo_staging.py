"""With a gloo fallback, CUDA tensors' point-to-point calls go through host copies: gloo sees only host
tensors, a receive is copied back, and the Work handed to torch is already complete."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from pymscclpp.torch import backend  # noqa: E402
from pymscclpp.errors import InvalidUsageError  # noqa: E402


class _Gloo:
    """Records the tensors each call got; a receive fills its tensor with 7."""

    def __init__(self):
        self.seen = []

    def _work(self):
        class Work:
            waited = False

            def wait(self):
                Work.waited = True
                return True
        return Work()

    def send(self, tensors, dst, tag):
        self.seen.append(("send", [t.device.type for t in tensors], [t.clone() for t in tensors]))
        return self._work()

    def recv(self, tensors, src, tag):
        for t in tensors:
            t.fill_(7)
        self.seen.append(("recv", [t.device.type for t in tensors], None))
        return self._work()


def test_send_hands_gloo_a_host_copy_and_returns_a_completed_work():
    gloo, t = _Gloo(), torch.arange(4.0)
    work = backend._through_host(gloo, "send", [t], 1, 0)
    assert gloo.seen[0][1] == ["cpu"] and torch.equal(gloo.seen[0][2][0], t)
    assert work.is_completed()


def test_recv_copies_what_gloo_received_back_into_the_callers_tensor():
    gloo, t = _Gloo(), torch.zeros(4)
    work = backend._through_host(gloo, "recv", [t], 0, 0)
    assert torch.equal(t, torch.full((4,), 7.0)) and work.is_completed()


def test_recv_from_any_source_is_refused_with_the_reason():
    with pytest.raises(InvalidUsageError, match="recv from any source of a CUDA tensor"):
        backend._through_host(_Gloo(), "recv_anysource", [torch.zeros(1)], 0)
