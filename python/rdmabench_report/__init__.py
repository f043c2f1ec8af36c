"""rdmabench-report: plots, comparisons and summaries of rdmabench --json output.

The input contract is docs/output-format.md (schema 1).
"""

__version__ = "0.1.0"
