from observe.device_memory import PeakMemory


def test_peak_on_this_cpu_machine_is_the_process_high_water_mark_against_host_memory():
    memory = PeakMemory()
    peak, share = memory.read()
    assert not memory.on_gpu and peak > 10 * 2**20
    assert 0 < share < 1
