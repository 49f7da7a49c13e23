"""Version ranges as Kafka's message specs write them: "0+", "3-5", "7", "none"."""

from __future__ import annotations

import attrs

__all__ = ["VersionRange"]

# Kafka versions are int16 on the wire; "N+" means "N up to whatever comes later".
_OPEN_END = 0x7FFF


@attrs.frozen
class VersionRange:
    """An inclusive range of versions; empty when ``low > high``."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> VersionRange:
        if text is None:
            return NONE
        text = text.strip()
        if text in ("", "none"):
            return NONE
        if text.endswith("+"):
            return cls(int(text[:-1]), _OPEN_END)
        if "-" in text:
            low, high = text.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __bool__(self) -> bool:
        return self.low <= self.high

    def intersect(self, other: VersionRange) -> VersionRange:
        return VersionRange(max(self.low, other.low), min(self.high, other.high))

    def __str__(self) -> str:
        if not self:
            return "none"
        if self.high == _OPEN_END:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NONE = VersionRange(0, -1)
