"""Guava's SmoothBursty limiter, as Pulsar's cursors use it (``RateLimiter.create(rate)``,
``tryAcquire()``, ``setRate``): :class:`mledger.core._rate_limiter.SmoothBurstyLimiter`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from mledger.core import SmoothBurstyLimiter

S = 1_000_000_000  # one second in clock nanoseconds

# Recorded from Guava 31.1 (Debian libguava-java) with a fake stopwatch: a class in package
# com.google.common.util.concurrent calls RateLimiter.create(rate, stopwatch), then per op at
# its time in microseconds tryAcquire() ("a:T", 1 = granted) or setRate(r) ("r:T:R", "r").
# Line: rate, creation time (us), ops = results. Pulsar 3.0-4.1 ship Guava 32-33, whose
# RateLimiter / SmoothRateLimiter are unchanged.
GUAVA_TRACES = """\
2.0 1815593 a:2815594 a:2816594 a:3816595 a:3816596 a:3816597 a:3816597 a:4816598 a:4817597 r:4817598:1.0 r:5832380:2.0 = 11111011rr
1.0 923860 a:3423860 r:4423861:1.0 a:4823861 a:4823862 a:4824862 a:4824863 a:5824863 r:6824863:1.0 a:6824863 a:7824864 a:8824864 = 1r11001r111
0.5 1320062 a:1720062 r:2720061:2.0 a:2721060 r:2721060:2.0 a:5221060 = 1r0r1
0.5 399894 a:1399894 r:1400894:0.5 a:1400894 a:3054601 = 1r01
1.0 1304741 a:1838344 a:1839343 a:1840342 a:2798251 a:2799250 a:2800250 a:3800251 a:3800251 a:6300251 = 100100101
1.0 950200 a:950200 a:951199 a:1951198 a:1951199 a:1951199 a:1951199 a:2951199 a:2951200 a:2951201 a:3951200 = 1010001001
3.0 1455751 a:2455752 a:2455753 a:2455753 r:3455754:0.5 a:4455755 a:5455756 a:6455755 a:9300067 a:10300066 a:11300067 a:12300067 = 111r1101011
1.0 1329957 a:1330957 a:2330956 a:3330957 a:3330958 a:3331957 a:3731957 a:4731957 a:5731956 = 11100011
0.25 1310250 a:1310251 r:2476786:0.5 a:3655680 r:6378984:1.0 a:7378985 a:7379985 a:7379986 a:9879986 a:9879987 = 1r0r11011
1.0 1727713 a:1728712 a:4228712 a:4229712 a:6729712 a:9229712 a:10229712 a:10230712 a:10231711 a:10231711 = 111111100
0.5 1368756 a:2368757 a:2368758 a:2368759 a:2368760 a:3368759 a:4368758 a:5368759 a:5768759 a:5769759 a:6769759 = 1000101000
1.0 1118037 a:1119036 a:3619036 a:4619037 a:6685072 a:6686072 a:7086072 a:7087071 = 1111100
0.25 1902561 a:2302561 a:2303561 a:4803561 a:5803562 a:5803563 r:6803563:1.0 a:7803563 a:7803564 r:7804563:0.5 a:8804563 = 10000r11r1
0.25 1936549 a:1937549 a:2937548 a:5437548 a:6437548 a:6438547 a:6438547 a:6438547 a:7438546 = 10010000
2.0 219960 a:219961 a:619961 a:3119961 a:4119961 a:6340206 a:8840206 a:8841206 a:11406908 a:12406907 = 101111111
1.0 1264850 a:1265850 a:1265851 a:1266850 a:2266850 a:4766850 a:4767850 a:4767850 = 1001110
0.5 1431061 a:1431062 a:2431061 a:2432061 r:2432062:0.5 a:4932062 a:4933061 a:4934061 = 100r100
1.0 593692 r:993184:0.5 a:993185 a:1993185 a:2993184 r:3993183:0.5 a:3994183 a:4994182 a:4995182 a:7495182 a:7495183 a:8495183 a:10995183 = r101r0101001
1.0 1687832 a:1687833 a:2687833 a:5187833 a:5188832 a:5188833 a:6188834 = 111101
1.0 1339476 a:1340476 a:1740476 a:2740476 a:2740477 a:2741477 r:4399797:0.5 a:4400797 r:6900797:1.0 r:7900797:2.0 a:8300797 a:10800797 = 10100r1rr11
0.25 511093 a:511094 a:512093 = 10
3.0 1520593 a:4452577 a:4453577 a:6953577 a:6953577 a:7353577 r:7466419:1.0 r:7866419:1.0 a:7867418 a:8867417 a:8868417 a:8869416 = 11111rr1100
1.0 321842 a:1321841 a:2321841 a:2321842 a:2321843 a:4133733 a:5133734 a:5133735 a:7910776 a:8910777 a:9910776 a:9911776 a:10911775 = 111011011111
1.0 1487457 a:3875167 a:4275167 a:5275168 a:7775168 r:8775167:0.5 a:10434473 a:11252196 a:13752196 a:16231622 = 1111r1011
1.0 1591627 a:1591627 a:4091627 a:4091627 a:4091628 a:6591628 a:6991628 r:6991629:0.5 a:6991630 a:7991630 = 111011r01
1.0 1025525 a:2025526 a:3025525 a:4025526 a:4329480 a:5329479 a:5329480 a:5329480 a:5329480 a:6329480 a:6330479 = 1111100010
2.0 1434595 a:1435595 a:1835595 a:2835596 a:3235596 = 1011
0.5 1066632 a:1067631 a:1068630 a:3568630 a:4568631 a:5568631 = 10101
1.0 1384645 a:2384646 a:2384646 a:3384646 a:3784646 a:3785646 a:4785645 a:5785645 a:6785645 a:6786644 a:6787643 = 1110011100
0.5 558910 a:558910 a:558910 a:559909 a:1692038 a:2692039 a:3039574 r:3439574:1.0 a:3440574 a:4440575 a:5440575 = 100010r001
1.0 1985152 a:2385152 a:2785152 a:2785153 a:2786152 a:3786153 r:4786154:2.0 = 10001r
1.0 937126 a:937127 a:938126 a:939125 a:939125 a:939126 a:940125 a:1940125 a:2940125 = 10000011
1.0 1364663 a:3864663 a:4864662 a:5295262 a:7795262 a:7796262 a:10296262 a:10297262 a:10298262 a:10299262 = 111111100
1.0 512962 a:1512962 a:1512963 a:1912963 a:2912964 a:2913964 a:5413964 a:5813964 a:7217812 a:7617812 = 110101111
1.0 505123 a:506122 a:506123 a:507122 a:508121 a:1508121 a:1508121 r:2508122:0.5 a:2508123 a:3508122 a:3509122 a:3509122 = 100010r1000
1.0 1513365 a:2513365 a:2513366 a:4239007 a:5239007 a:6239008 a:7239008 a:7731289 a:8731288 a:9731288 a:9731288 a:10731288 a:11731287 = 111111111011
1.0 1850940 a:1851940 a:1852940 a:1852940 a:4352940 a:4752940 a:4752941 a:5752940 a:7520430 a:8520430 a:8520431 a:8520432 = 10011011110
0.5 1994338 a:2394338 a:2394338 a:3394339 a:4394339 a:7297958 a:7297958 a:7697958 a:8697959 a:9097959 = 100110010
3.0 1174048 a:1175048 a:1175049 a:1575049 a:1576048 r:2576048:1.0 = 1010r
0.25 644167 a:645167 a:3145167 a:4145166 = 100
0.5 1854806 a:4354806 a:4355805 a:4356804 = 100
1.0 377267 a:1377266 a:1377266 a:3877266 = 101
0.5 364741 a:364742 a:1364743 a:1365743 a:1366743 a:2366744 a:3216121 a:3436389 a:4436388 a:4510999 a:7010999 r:7010999:1.0 = 1000100101r
0.5 1341893 a:1342893 a:1742893 a:2742892 a:3142892 a:3142893 a:3143892 a:3144891 a:5908967 a:6908966 a:6909966 = 1000000101
1.0 269310 a:270309 a:2770309 a:2770309 a:2771308 a:3171308 a:3171308 a:3172308 a:5672308 a:6672309 = 111000011
1.0 763361 a:2177034 a:3177034 a:4177033 a:4178032 a:4179032 a:4180032 = 111100
1.0 385056 a:1385057 a:2284541 a:3284542 a:3285541 a:5785541 a:5785541 a:6185541 a:6186540 a:7186540 a:7187540 = 1110110010
1.0 120054 a:121053 a:121053 a:1121054 a:2121053 = 1011
0.5 1403457 a:2403457 a:2403457 = 10
0.5 1248627 a:1249627 a:2249628 a:4749628 a:5749627 = 1010
1.0 1170463 a:1170464 a:1171464 a:1171465 a:2171465 a:3171465 a:4171466 a:4172465 = 1001110
1.0 1892745 a:2892744 r:3292744:2.0 a:3692744 r:4092744:1.0 a:5092743 a:5492743 a:5493742 a:7106084 = 1r1r1101
1.0 65071 a:66071 a:66071 a:1789744 a:1789745 a:2789745 a:2789745 a:5289745 a:6289744 a:6290743 a:6291743 a:6292743 = 10101011100
0.25 1449355 a:2449354 a:3449353 a:4449353 a:4450352 a:5450353 a:6450352 a:8950352 = 1000100
3.0 522825 a:523824 a:523825 a:923825 a:3423825 a:3423825 r:4423826:2.0 a:6923826 = 10111r1
2.0 1302720 a:1303720 a:2303721 a:2703721 a:3103721 a:4103721 a:4103721 a:4103721 a:6603721 a:7603721 a:10103721 r:11103720:2.0 a:11503720 = 1111110111r1
1.0 169876 a:1169875 a:1169875 a:1569875 a:1570874 a:1571874 r:2571875:2.0 a:3571875 a:6071875 a:6471875 = 10100r111
1.0 1859050 r:2859049:0.5 a:2860049 a:3860049 a:3860050 a:4860050 = r1100
2.0 525318 a:525318 a:1525317 a:4025317 a:5025318 a:5025319 a:6374314 a:6375314 a:6375314 a:6775314 a:7775313 a:8775312 = 11111111011
1.0 445201 a:1445200 a:2445200 a:2445201 a:3445202 a:4445202 a:4446202 r:6716026:1.0 a:7716027 a:7716027 a:7717026 a:8117026 = 111110r1100
1.0 0 a:510511 a:999999 a:1000000 = 110
"""


def _replay(line: str) -> str:
    spec, expected = line.split(" = ")
    rate, created, *ops = spec.split()
    limiter = SmoothBurstyLimiter(float(rate), int(created) * 1000)
    out = ""
    for op in ops:
        kind, t, *rest = op.split(":")
        if kind == "a":
            out += "1" if limiter.try_acquire(int(t) * 1000) else "0"
        else:
            limiter.set_rate(float(rest[0]), int(t) * 1000)
            out += "r"
    return out


@pytest.mark.parametrize("line", GUAVA_TRACES.splitlines())
def test_each_call_answers_as_guava_did(line: str) -> None:
    assert _replay(line) == line.split(" = ")[1]


def test_back_to_back_after_an_idle_second() -> None:
    """research §1.1, executed against Guava: after 10 s idle, 10.000 and 10.001 are both
    granted (the stored permit, then a fresh one pushing N to 11.000); 10.5 and 10.999999 are
    refused and change nothing; 11.000 is granted."""
    limiter = SmoothBurstyLimiter(1.0, 0)
    times = [10.0, 10.001, 10.5, 10.999999, 11.0, 11.6, 12.0]
    assert [limiter.try_acquire(round(t * S)) for t in times] == [True, True, False, False, True, False, True]
    assert limiter.next_free_ns == 13 * S


def test_a_partial_idle_shortens_the_next_wait() -> None:
    """Grant at 0.4 s (N = 1.0), at 1.4 s (N = 2.0, not 2.4: the grid of N), 1.400001 refused,
    2.0 granted."""
    limiter = SmoothBurstyLimiter(1.0, 0)
    assert [limiter.try_acquire(round(t * S)) for t in (0.4, 1.4, 1.400001, 2.0)] == [True, True, False, True]


def test_the_first_request_is_granted_and_a_refusal_changes_nothing() -> None:
    limiter = SmoothBurstyLimiter(1.0, 5 * S)
    assert limiter.next_free_ns == 5 * S and limiter.try_acquire(5 * S)
    before = (limiter.next_free_ns, limiter.stored_permits)
    assert not limiter.try_acquire(5 * S + 1)
    assert (limiter.next_free_ns, limiter.stored_permits) == before


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3_000_000), min_size=1, max_size=40))
def test_rate_one_reduces_to_grant_iff_t_reaches_n_then_n_is_max_of_t_and_n_plus_a_second(gaps: list[int]) -> None:
    """For rate 1 the stored permits are 0 after every grant, so the state is N alone:
    grant iff t >= N, then N = max(t, N + 1 s) (research §1.1's closed form), less at most
    one microsecond: Java's ``(long) ((1 - spend) * I)`` truncates (a grant at 0.510511 s
    after creation sets N to 0.999999 s in Guava too, GUAVA_TRACES' last line)."""
    limiter = SmoothBurstyLimiter(1.0, 0)
    n = t = 0
    for gap in gaps:
        t += gap
        expected = t >= n
        assert limiter.try_acquire(t * 1000) is expected
        if expected:
            closed_form = max(t, n + 1_000_000)
            n = limiter.next_free_ns // 1000
            assert closed_form - 1 <= n <= closed_form
        assert limiter.next_free_ns == n * 1000


def test_set_rate_rescales_the_stored_permits() -> None:
    """setRate resyncs then rescales: 2 s idle at rate 1 store one permit, which rate 2 makes
    two (maxPermits 1 -> 2): three grants at the same instant, the fourth waits 0.5 s."""
    limiter = SmoothBurstyLimiter(1.0, 0)
    limiter.set_rate(2.0, 2 * S)
    assert [limiter.try_acquire(2 * S) for _ in range(3)] == [True, True, True]
    assert not limiter.try_acquire(2 * S) and limiter.next_free_ns == 2 * S + S // 2
    with pytest.raises(ValueError, match="rate"):
        limiter.set_rate(0.0, 3 * S)
