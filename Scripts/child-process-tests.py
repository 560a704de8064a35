#!/usr/bin/env python3
"""Prints a `swift test --filter/--skip` pattern matching the tests tagged `.childProcess`.

Swift Testing 6.3.1 has no `--filter tag:` yet, so the pattern names the tests: `/name(` for
each function whose `@Test(...)` attribute carries `.tags(.childProcess)`. With `--count`, prints
how many there are instead. Why they run apart: Tests/PromisesTests/ChildProcessTag.swift.
"""
import pathlib
import re
import sys

names = []
for path in sorted(pathlib.Path("Tests").rglob("*.swift")):
    text = path.read_text()
    for match in re.finditer(r"@Test\((?:[^()]|\([^()]*\))*\.tags\(\.childProcess\)[^)]*\)\s*func\s+(\w+)", text):
        names.append(match.group(1))
if not names:
    sys.exit("no test is tagged .childProcess")
if "--count" in sys.argv:
    print(len(names))
else:
    print("|".join(f"/{re.escape(name)}\\(" for name in names))
