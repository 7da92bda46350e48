#!/usr/bin/env python3
"""Prints how many tests ran, passed, failed and were skipped per area after a ctest run.

usage: test_summary.py BUILD_DIR JUNIT_XML

The area of a test is its first ctest label (tests/CMakeLists.txt gives every test the name
of its folder, e.g. k8s, hooks, e2e, realk8s). Parts left out by an explicit VGPU_WITHOUT_*
switch are listed too, so a short count is never a surprise. Exit status 1 when a test
failed or did not run. Tests with an opt-in label (OPT_IN: scripts/test.sh leaves them out
with -LE) are counted apart, never as "notrun".
"""
import collections
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

# Labels of tests that run only when asked for (ctest -L scale, ctest -L soak): the scale
# benchmark and the chaos soaks.
OPT_IN = ("scale", "soak")


def labels_by_test(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for test in json.loads(out).get("tests", []):
        labels = []
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels = prop.get("value") or []
        result[test["name"]] = labels or ["other"]
    return result


def outcomes(junit):
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None or case.find("error") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        elif status in ("disabled", "notrun"):
            status = "notrun"
        else:
            status = "passed" if status in ("run", "passed") else status
        result[case.get("name")] = status
    return result


def switched_off(build):
    off = []
    try:
        with open(f"{build}/CMakeCache.txt", encoding="utf-8") as cache:
            for line in cache:
                name, _, value = line.strip().partition("=")
                if name.startswith("VGPU_WITHOUT_") and value.upper() in ("ON", "TRUE", "1", "YES"):
                    off.append(name.split(":")[0])
    except OSError:
        pass
    return off


def main():
    build, junit = sys.argv[1], sys.argv[2]
    labels = labels_by_test(build)
    results = outcomes(junit)
    table = collections.defaultdict(collections.Counter)
    opted = collections.Counter()
    for name, test_labels in labels.items():
        optin = [label for label in test_labels if label in OPT_IN]
        if optin and name not in results:
            opted[optin[0]] += 1
            continue
        table[test_labels[0]][results.get(name, "notrun")] += 1
    columns = ("passed", "failed", "skipped", "notrun")
    print(f"{'area':<14}{'tests':>7}" + "".join(f"{c:>9}" for c in columns))
    total = collections.Counter()
    for area in sorted(table):
        counts = table[area]
        total.update(counts)
        print(f"{area:<14}{sum(counts.values()):>7}" + "".join(f"{counts[c]:>9}" for c in columns))
    print(f"{'all':<14}{sum(total.values()):>7}" + "".join(f"{total[c]:>9}" for c in columns))
    for name in switched_off(build):
        print(f"left out by {name}=ON")
    for label, count in sorted(opted.items()):
        print(f"left out: {count} test(s) labelled {label} (run them with ctest -L {label})")
    return 1 if total["failed"] or total["notrun"] else 0


if __name__ == "__main__":
    sys.exit(main())
