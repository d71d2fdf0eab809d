"""Sizes on the pages are written as Babel writes a decimal, and bytes as Babel writes the unit, in
the reader's language."""

from __future__ import annotations

import pytest
from babel.numbers import format_decimal
from babel.units import format_unit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.pages import records


@pytest.mark.parametrize("language", ["de", "en"])
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    size=st.one_of(
        st.integers(0, 10**16),
        # The rounding edges: x.x5 of every unit, and a step below and above.
        st.builds(
            lambda tenths, unit, step: (tenths * 100 + 50) * 1000**unit // 1000 + step,
            st.integers(0, 9999),
            st.integers(1, 4),
            st.integers(-1, 1),
        ),
    )
)
def test_a_size_reads_as_babel_writes_it(app, language, size):
    with app.test_request_context(f"/records/x?lang={language}"):
        text = records.size_text(size)
        if size < 1000:
            # "29 Byte", "29 bytes", "1 byte": the language's own unit and plural.
            assert text == format_unit(size, "digital-byte", length="long", locale=language)
            return
        number, unit = text.split(" ")
        value, expected_unit = float(size), "Byte"
        for next_unit in ("kB", "MB", "GB", "TB"):
            if value < 1000:
                break
            value, expected_unit = value / 1000, next_unit
        assert unit == expected_unit
        assert number == format_decimal(value, format="0.0", locale=language)
