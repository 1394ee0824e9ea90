#!/usr/bin/env python3
"""node-e2e-report.py DIR AGENT...: the node e2e suite's results side by side.

Reads DIR/AGENT/report/junit.xml (ginkgo's JUnit report) for each agent and
prints one line per spec that ran for any agent: its outcome per agent
(passed, FAILED, skipped, or - when it did not run), then the counts. Exits 0;
hack/vm/node-e2e.sh decides.
"""
import sys
import xml.etree.ElementTree as ET


def outcomes(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        print(f"# {path}: {err}", file=sys.stderr)
        return {}
    res = {}
    for tc in root.iter("testcase"):
        name = tc.get("name", "")
        if tc.find("failure") is not None or tc.find("error") is not None:
            res[name] = "FAILED"
        elif tc.find("skipped") is not None:
            res[name] = "skipped"
        else:
            res[name] = "passed"
    return res


def main():
    out, agents = sys.argv[1], sys.argv[2:]
    results = {a: outcomes(f"{out}/{a}/report/junit.xml") for a in agents}
    names = sorted({n for r in results.values() for n, o in r.items() if o != "skipped"})
    print("| spec | " + " | ".join(agents) + " |")
    print("|---|" + "---|" * len(agents))
    for n in names:
        if n.startswith("[SynchronizedBeforeSuite]") or n.startswith("[SynchronizedAfterSuite]"):
            label = n
        else:
            label = n.replace("|", "\\|")
        print(f"| {label} | " + " | ".join(results[a].get(n, "-") for a in agents) + " |")
    for a in agents:
        r = results[a]
        counts = {k: sum(1 for o in r.values() if o == k) for k in ("passed", "FAILED", "skipped")}
        print(f"# {a}: {counts['passed']} passed, {counts['FAILED']} failed, {counts['skipped']} skipped")
    if len(agents) == 2:
        a, b = agents
        worse = [n for n in names if results[a].get(n) == "passed" and results[b].get(n) == "FAILED"]
        print(f"# passed with {a}, failed with {b}: {len(worse)}")
        for n in worse:
            print(f"#   {n}")


if __name__ == "__main__":
    main()
