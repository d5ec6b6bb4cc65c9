#!/usr/bin/python3
"""A promise module (JSON protocol) for the tests that keeps every promise
and says, as a notice, each request exactly as it got it, and how many
requests this one process has answered (to show that one process serves
a module's promises for the whole run)."""
import json
import sys

header = sys.stdin.readline().rstrip("\n")
sys.stdin.readline()
sys.stdout.write("recorder 1.0.0 v1 json_based action_policy\n\n")
sys.stdout.flush()
count = 0
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line:
        continue
    count += 1
    request = json.loads(line)
    operation = request["operation"]
    sys.stdout.write("log_notice=request %d (agent header '%s'): %s\n" % (count, header, line))
    answer = {"operation": operation}
    if operation == "validate_promise":
        answer["result"] = "valid"
    elif operation == "evaluate_promise":
        answer["result"] = "kept"
    else:
        answer["result"] = "success"
    sys.stdout.write(json.dumps(answer) + "\n\n")
    sys.stdout.flush()
    if operation == "terminate":
        break
