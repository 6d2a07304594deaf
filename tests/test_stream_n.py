"""STREAM's default n computed in Python the way the kernel does (kernels/vhpc-stream.c)."""

from vhpc.benchmarks import quick


def test_stream_auto_n_by_hand():
    # 32 MiB LLC: 4 * 33554432 / 8 = 16777216 elements, rounded up to 16778000
    assert quick.stream_auto_n(32 << 20, 64 << 30) == 16_778_000
    # a tiny cache: the 2,000,000 floor
    assert quick.stream_auto_n(1 << 20, 64 << 30) == 2_000_000
    # 300 MiB available: 3 arrays in half of it → 300 MiB / 2 / 3 / 8 = 6553600
    assert quick.stream_auto_n(32 << 20, 300 << 20) == 6_553_600
    # unknown memory: no cap
    assert quick.stream_auto_n(32 << 20, 0) == 16_778_000


def test_stream_auto_n_on_this_host_covers_4x_its_llc():
    n = quick.stream_auto_n()
    llc = quick.llc_bytes()
    assert n * 8 >= 4 * llc or n * 8 * 3 <= quick.mem_available_bytes() // 2 + 24
