"""Text formatting shared by the tables: sizes, numbers, and text/markdown table rendering."""

from __future__ import annotations

from typing import List, Optional, Sequence

TABLE_FORMATS = ("text", "markdown")


def human_size(size: int) -> str:
    """64, 4K, 1M, 2G for whole powers of 1024; plain bytes otherwise."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{suffix}"
    return str(size)


def size_with_unit(size: int) -> str:
    """64 B, 4 KiB, 1 MiB, 1536 B: for legends and text, where a size reads with its unit."""
    short = human_size(size)
    if short[-1] in "KMG":
        return f"{short[:-1]} {short[-1]}iB"
    return f"{short} B"


def number(value: Optional[float]) -> str:
    """About four significant digits without exponents in the usual range; '-' when absent."""
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 10:
        return f"{value:.2f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.3f}"
    return f"{value:.4g}"


def ratio(value: Optional[float], base: Optional[float]) -> str:
    if value is None or base is None or base == 0:
        return "-"
    return f"{value / base:.2f}x"


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]], style: str,
                 numeric_from: int = 0) -> str:
    """A table as aligned text or GitHub markdown; columns from numeric_from on align right."""
    if style == "markdown":
        def line(cells):
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
        rule = ["---:" if i >= numeric_from else "---" for i in range(len(header))]
        return "\n".join([line(header), "|" + "|".join(rule) + "|"] + [line(r) for r in rows])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def text_line(cells) -> str:
        parts: List[str] = []
        for i, cell in enumerate(cells):
            parts.append(cell.rjust(widths[i]) if i >= numeric_from else cell.ljust(widths[i]))
        return "  ".join(parts).rstrip()
    rule_line = "  ".join("-" * w for w in widths)
    return "\n".join([text_line(header), rule_line] + [text_line(r) for r in rows])
