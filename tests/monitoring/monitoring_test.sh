#!/usr/bin/env bash
# The alert rules and the dashboard in docs/monitoring/: promtool checks the
# rules and runs their unit tests (alerts_test.yml: each alert fires when it
# should and stays quiet on a healthy sagad); the dashboard is valid JSON
# whose every query names sagad metrics (that they are exported is checked
# against a live sagad by tests/api/conformance_test.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
docs=$(cd "$here/../../docs/monitoring" && pwd)
promtool check rules "$docs/sagad-alerts.yml"
(cd "$here" && promtool test rules alerts_test.yml)
/usr/bin/python3 - "$docs/sagad-dashboard.json" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
assert exprs, "no queries"
for e in exprs:
    assert re.search(r"\bsagad_[a-z_]+", e), "a query without a sagad metric: " + e
print("dashboard: %d panels, %d queries" % (len(dash["panels"]), len(exprs)))
PY
