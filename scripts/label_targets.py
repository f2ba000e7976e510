#!/usr/bin/env python3
"""label_targets.py BUILD_DIR LABEL: prints the names of the executables in BUILD_DIR that the CTest tests
labelled LABEL run, one per line. Read from the generated CTestTestfile.cmake files because `ctest -N`
cannot name an executable that is not built yet (scripts/test.sh builds only these for the sanitizer runs).
"""
import pathlib
import re
import sys

root, label = str(pathlib.Path(sys.argv[1]).resolve()), sys.argv[2]
NAME = r'(?:\[=\[)?([^\s\]]+)(?:\]=\])?'
names = set()
for f in pathlib.Path(root).rglob("CTestTestfile.cmake"):
    text = f.read_text()
    labelled = set()
    for m in re.finditer(r'set_tests_properties\(' + NAME + r' PROPERTIES(.*)', text):
        labels = re.search(r'LABELS "([^"]*)"', m.group(2))
        if labels and label in labels.group(1).split(";"):
            labelled.add(m.group(1))
    for m in re.finditer(r'add_test\(' + NAME + r' (.*)\)\s*$', text, re.M):
        if m.group(1) in labelled:
            names.update(pathlib.Path(w).name for w in re.findall(re.escape(root) + r'/[^ "\\]*', m.group(2)))
print("\n".join(sorted(names)))
