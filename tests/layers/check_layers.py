#!/usr/bin/env python3
"""Holds the layers to the build's own target graph.

Every folder under src/ and apps/ declares its CMake target; a file may include a header only from
its own folder's target or from a target that target links (directly or not). The graph comes from
CMake's file API (the build folder's .cmake/api reply), so the rule is the CMakeLists' own, and a
file that includes upward fails here. Also:
  - the graph of the project's targets has no cycle;
  - no function is longer than 80 lines (the style's "fits on a screen");
  - docs/architecture.md's dependency picture is the one the graph gives (--write-docs updates it).

usage: check_layers.py BUILD_DIR [--write-docs]
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE_DIRS = ("src", "apps")
SOURCE_EXT = (".cc", ".hh", ".h", ".c")
MAX_FUNCTION_LINES = 80
DOC = os.path.join(ROOT, "docs", "architecture.md")
DOC_BEGIN, DOC_END = "<!-- layers:begin (tests/layers/check_layers.py --write-docs) -->", "<!-- layers:end -->"


def load_targets(build):
    reply = os.path.join(build, ".cmake", "api", "v1", "reply")
    index = sorted(glob.glob(os.path.join(reply, "index-*.json")))
    if not index:
        sys.exit(f"check_layers: no CMake file-API reply under {reply}; configure the build first (make build)")
    with open(index[-1]) as f:
        model = json.load(open(os.path.join(reply, json.load(f)["reply"]["codemodel-v2"]["jsonFile"])))
    targets = {}
    for t in model["configurations"][0]["targets"]:
        with open(os.path.join(reply, t["jsonFile"])) as f:
            j = json.load(f)
        folder = j["paths"]["source"]
        if not folder.startswith(CODE_DIRS):
            continue  # tests and probes may use any layer
        deps = [d["id"].split("::")[0] for d in j.get("dependencies", [])]
        targets[j["name"]] = {"folder": folder, "deps": deps}
    for t in targets.values():  # only the project's code targets
        t["deps"] = [d for d in t["deps"] if d in targets]
    return targets


def closure(targets, name, seen=None):
    seen = set() if seen is None else seen
    for d in targets[name]["deps"]:
        if d not in seen:
            seen.add(d)
            closure(targets, d, seen)
    return seen


def find_cycle(targets):
    state = {}

    def visit(n, path):
        state[n] = "open"
        for d in targets[n]["deps"]:
            if state.get(d) == "open":
                return path + [n, d]
            if d not in state:
                found = visit(d, path + [n])
                if found:
                    return found
        state[n] = "done"
        return None

    for n in sorted(targets):
        if n not in state:
            found = visit(n, [])
            if found:
                return found
    return None


def folder_targets(targets):
    by_folder = {}
    for name, t in targets.items():
        by_folder.setdefault(t["folder"], set()).add(name)
    # The public C header of libvrdma sits in a folder of its own, with the layer that exports it.
    by_folder.setdefault("src/vrdma/include", set()).add("vrdma_proto")
    return by_folder


def owner(by_folder, path):
    """The targets of the deepest folder that declares one and holds `path`."""
    best = None
    for folder in by_folder:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def code_files():
    for top in CODE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, f), ROOT)


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def resolve(include):
    for base in ("src", "src/vrdma/include"):
        if os.path.exists(os.path.join(ROOT, base, include)):
            return os.path.join(base, include)
    return None  # generated (registry/built_transports.hh) or beside the file


def upward_includes(targets):
    by_folder = folder_targets(targets)
    allowed = {}
    for folder, names in by_folder.items():
        ok = set(names)
        for n in names:
            ok |= closure(targets, n)
        allowed[folder] = ok
    problems = []
    for path in code_files():
        mine = owner(by_folder, path)
        if mine is None:
            problems.append(f"{path}: in no folder that declares a CMake target")
            continue
        with open(os.path.join(ROOT, path), errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target_path = resolve(m.group(1))
                if target_path is None:
                    continue
                theirs = owner(by_folder, target_path)
                if theirs is None or by_folder[theirs] & allowed[mine]:
                    continue
                problems.append(f"{path}:{lineno}: includes {m.group(1)} of {'/'.join(sorted(by_folder[theirs]))}, "
                                f"which {'/'.join(sorted(by_folder[mine]))} does not link: an upward or sideways include")
    return problems


DECLARATION = re.compile(r"^( {0}| {2})(?!(if|for|while|switch|else|do|return|case|namespace|struct|class|enum|union|"
                         r"extern|using|template|public|private|protected)\b)[A-Za-z_~][^;={}]*\(")


def function_spans(lines):
    """(first line, line count, text) of each function defined at the left margin or one level in
    (a class's members), the project's style: its declaration at that indent, its body closed by a
    brace at the same indent."""
    i = 0
    while i < len(lines):
        m = DECLARATION.match(lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        opening = next((k for k in range(i, min(i + 6, len(lines))) if lines[k].rstrip().endswith(("{", ";", "}"))),
                       None)
        if opening is None or not lines[opening].rstrip().endswith("{"):  # a declaration, or `f() { ... }`
            i = (opening if opening is not None else i) + 1
            continue
        close = next((k for k in range(opening, len(lines)) if lines[k] in (indent + "}", indent + "};")), None)
        if close is None:
            return
        yield i, close - i + 1, lines[i].strip()
        i = close + 1


def long_functions():
    """Functions (and class members) longer than the limit."""
    problems = []
    for path in code_files():
        lines = open(os.path.join(ROOT, path), errors="replace").read().split("\n")
        for start, length, text in function_spans(lines):
            if length > MAX_FUNCTION_LINES:
                problems.append(f"{path}:{start + 1}: a function of {length} lines (at most {MAX_FUNCTION_LINES}): "
                                f"{text[:70]}")
    return problems


def picture(targets):
    """Each library and program with what it links directly (the transitive reduction)."""
    out = ["| target | folder | links directly |", "|---|---|---|"]
    for name in sorted(targets, key=lambda n: (len(closure(targets, n)), n)):
        deps = set(targets[name]["deps"])
        direct = {d for d in deps if not any(d in closure(targets, o) for o in deps if o != d)}
        out.append(f"| {name} | {targets[name]['folder']} | {', '.join(sorted(direct)) or '(none)'} |")
    return "\n".join(out)


def docs_problem(targets, write):
    text = open(DOC).read()
    if DOC_BEGIN not in text or DOC_END not in text:
        return [f"docs/architecture.md: no dependency picture between {DOC_BEGIN} and {DOC_END}"]
    head, rest = text.split(DOC_BEGIN, 1)
    _, tail = rest.split(DOC_END, 1)
    want = f"{head}{DOC_BEGIN}\n{picture(targets)}\n{DOC_END}{tail}"
    if want == text:
        return []
    if write:
        open(DOC, "w").write(want)
        return []
    return ["docs/architecture.md: the dependency picture is not the build's; run "
            "tests/layers/check_layers.py build --write-docs"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    targets = load_targets(sys.argv[1])
    problems = []
    cycle = find_cycle(targets)
    if cycle:
        problems.append("the targets link in a cycle: " + " -> ".join(cycle))
    problems += upward_includes(targets)
    problems += long_functions()
    problems += docs_problem(targets, "--write-docs" in sys.argv)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"layers: {len(targets)} targets, no upward include, no cycle, no function over {MAX_FUNCTION_LINES} lines")


if __name__ == "__main__":
    main()
