import os
import signal

import tensorflow as tf

from run.engines import StrategyEngine
from run.stop_signal import StopSignal


def test_sigterm_is_noted_until_restored():
    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignal(StrategyEngine(tf.distribute.get_strategy(), "default"))
    try:
        assert not stop.agreed() and stop.seconds_since() == 0.0
        os.kill(os.getpid(), signal.SIGTERM)  # handled between bytecodes: the process lives on
        assert stop.agreed() and stop.seconds_since() >= 0.0
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGTERM) is before
