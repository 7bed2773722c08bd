import triton

from linattn.ops.utils.grid import cdiv, next_power_of_2


def test_host_sizes_match_tritons():
    assert [next_power_of_2(n) for n in range(-8, 4100)] == [triton.next_power_of_2(n) for n in range(-8, 4100)]
    assert all(cdiv(a, b) == triton.cdiv(a, b) for a in range(700) for b in range(1, 70))
