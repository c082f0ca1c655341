import re
import time

from observe.heartbeat import Heartbeat


def test_heartbeat_keeps_talking_while_no_step_comes_and_tracks_the_longest_gap():
    lines = []
    beat = Heartbeat(lines.append, interval_s=0.05)
    beat.start()
    beat.stepped(1)
    time.sleep(0.2)
    beat.stepped(2)
    beat.stop()
    assert len(lines) >= 2
    assert re.fullmatch(r"\[heartbeat\] step=1 seconds_since_step=\d+\.\d", lines[0])
    assert beat.longest_gap_s >= 0.2


def test_a_pause_is_not_counted_as_a_gap_and_other_workers_print_nothing(capfd):
    beat = Heartbeat(None, interval_s=0.01)
    beat.start()
    time.sleep(0.05)  # five intervals: a chief would have printed
    beat.pause()
    beat.stepped(1)
    beat.stop()
    assert beat.longest_gap_s < 0.05
    assert capfd.readouterr() == ("", "")
