"""Read rdmabench JSON Lines files (docs/output-format.md, schema 1) into Record objects."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List

from .errors import ReportError

SUPPORTED_SCHEMA = 1
REQUIRED_FIELDS = ("op", "mode", "size", "results")
# The per-host verdict lines a cluster run appends after its pairs' records (docs/output-format.md):
# not measurements, so the measurement readers leave them to load_host_verdicts.
HOST_VERDICT = "cluster_host"


@dataclass(frozen=True)
class Record:
    """One measured (op, mode, size, repeat) line, remembering where it came from for messages."""

    path: str
    line: int
    data: dict

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def label(self) -> str:
        # The schema always has a label; falling back to the file name keeps hand-made files usable.
        return str(self.data.get("label") or Path(self.path).stem)

    @property
    def op(self) -> str:
        return str(self.data["op"])

    @property
    def mode(self) -> str:
        return str(self.data["mode"])

    @property
    def size(self) -> int:
        return int(self.data["size"])

    @property
    def repeat(self) -> int:
        return int(self.data.get("repeat", 0))

    @property
    def results(self) -> dict:
        return self.data.get("results") or {}

    @property
    def lat_us(self) -> dict:
        return self.results.get("lat_us") or {}

    @property
    def histogram_bins(self) -> list:
        return (self.data.get("histogram") or {}).get("bins") or []


def _json_object(path: str, number: int, text: str) -> dict:
    try:
        data = json.loads(text.strip())
    except json.JSONDecodeError as err:
        raise ReportError(
            f"{path}:{number}: not valid JSON ({err.msg} at column {err.colno}); "
            "fix or delete that line (each line must be one rdmabench --json record)"
        ) from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}:{number}: expected a JSON object, got {type(data).__name__}; "
                          "each line must be one rdmabench --json record")
    return data


def _parse_line(path: str, number: int, text: str) -> Record:
    data = _json_object(path, number, text)
    schema = data.get("schema", SUPPORTED_SCHEMA)
    if schema != SUPPORTED_SCHEMA:
        raise ReportError(f"{path}:{number}: schema {schema!r} is not supported (this tool reads "
                          f"schema {SUPPORTED_SCHEMA}); use a matching rdmabench-report version")
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        raise ReportError(f"{path}:{number}: record lacks {', '.join(missing)}; "
                          "is this rdmabench --json output?")
    size = data["size"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ReportError(f"{path}:{number}: size {size!r} is not a byte count; "
                          "fix or delete that line")
    if not isinstance(data["results"], dict):
        raise ReportError(f"{path}:{number}: results is not an object; fix or delete that line")
    return Record(path=path, line=number, data=data)


def load_file(path: str) -> List[Record]:
    """All records of one file; blank lines are skipped, anything else must parse."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file; check the path "
                          "(rdmabench writes results with --json FILE)") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: is a directory; pass the .jsonl file rdmabench wrote") from None
    except PermissionError:
        raise ReportError(f"{path}: permission denied; make the file readable") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not a UTF-8 text file; pass the .jsonl file "
                          "rdmabench wrote with --json") from None
    records = [_parse_line(path, number, text) for number, text in enumerate(lines, start=1)
               if text.strip() and _json_object(path, number, text).get("kind") != HOST_VERDICT]
    if not records:
        raise ReportError(f"{path}: holds no records; run rdmabench with --json {path} first")
    return records


def load_host_verdicts(paths: Iterable[str]) -> List[dict]:
    """The per-host verdict lines of cluster runs (kind "cluster_host"), in file and line order."""
    verdicts: List[dict] = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    data = _json_object(path, number, text)
                    if data.get("kind") == HOST_VERDICT:
                        verdicts.append(data)
    return verdicts


def load_files(paths: Iterable[str]) -> List[Record]:
    """Records of several files, in file order then line order."""
    records: List[Record] = []
    for path in paths:
        records.extend(load_file(path))
    return records
