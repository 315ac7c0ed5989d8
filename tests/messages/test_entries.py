"""Entry helpers of ``pitrio.messages.entries``."""

from __future__ import annotations

import datetime
import re

from pitrio.messages.entries import iso_now, iso_stamp


def test_iso_now_is_pi_s_timestamp_form_in_utc() -> None:
    """``2026-01-02T03:04:05.678Z``: milliseconds, a ``Z``, the current UTC time."""
    before = datetime.datetime.now(datetime.UTC)
    stamp = iso_now()
    after = datetime.datetime.now(datetime.UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= parsed <= after


def test_a_stamp_cuts_to_milliseconds_and_pads_every_field() -> None:
    """The microseconds are cut, not rounded (999,999 us is .999, never the next second),
    and every field is padded, as ``strftime`` with ``%03d`` milliseconds wrote them."""

    def at(*fields: int) -> datetime.datetime:
        return datetime.datetime(*fields, tzinfo=datetime.UTC)

    assert iso_stamp(at(2026, 1, 2, 3, 4, 5, 999_999)) == "2026-01-02T03:04:05.999Z"
    assert iso_stamp(at(2026, 12, 31, 23, 59, 59, 0)) == "2026-12-31T23:59:59.000Z"
    assert iso_stamp(at(2027, 7, 9, 0, 0, 0, 1_500)) == "2027-07-09T00:00:00.001Z"
    for moment in (at(2026, 3, 4, 5, 6, 7, 89_000), at(1999, 10, 11, 12, 13, 14, 15)):
        assert iso_stamp(moment) == (
            moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        )
