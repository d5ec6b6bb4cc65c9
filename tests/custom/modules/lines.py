#!/usr/bin/python3
"""A promise module (JSON protocol) for the tests: promises that a file
holds some lines, adding the missing ones at its end.

    file_lines:
      "/path/to/file"
        lines => { "a", "b" },      # a string, an slist or a data array
        create => "false";          # default "true"

It speaks the protocol itself (no library): header, then one request a
message, validate before evaluate, `action_policy => "warn"` checks only.
"""
import json
import os
import sys

KNOWN = {"lines", "create", "handle", "comment", "action_policy", "ifelapsed", "expireafter"}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n\n")
    sys.stdout.flush()


def log(level, message):
    # Separate log lines come before the JSON answer and print at once.
    sys.stdout.write("log_%s=%s\n" % (level, message.replace("\n", "\\n")))


def canonify(s):
    return "".join(c if c.isalnum() or c == "_" else "_" for c in s)


def wanted_lines(attributes):
    value = attributes.get("lines")
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def validate(promiser, attributes):
    errors = []
    if not promiser.startswith("/"):
        errors.append("File path '%s' must be absolute" % promiser)
    for name in attributes:
        if name not in KNOWN:
            errors.append("Unknown attribute '%s' for file_lines promises" % name)
    if wanted_lines(attributes) is None:
        errors.append("Attribute 'lines' must be a string or a list of strings")
    if attributes.get("create", "true") not in ("true", "false"):
        errors.append("Attribute 'create' must be 'true' or 'false'")
    return errors


def evaluate(promiser, attributes):
    warn_only = attributes.get("action_policy") in ("warn", "nop")
    base = canonify(os.path.basename(promiser))
    lines = wanted_lines(attributes)
    exists = os.path.exists(promiser)
    if not exists and attributes.get("create", "true") == "false":
        log("error", "File '%s' does not exist and may not be created" % promiser)
        return "not_kept", [base + "_missing"]
    have = []
    if exists:
        with open(promiser) as f:
            have = f.read().splitlines()
    missing = [l for l in lines if l not in have]
    if not missing and exists:
        log("verbose", "File '%s' holds every line" % promiser)
        return "kept", [base + "_lines_kept"]
    if warn_only:
        for l in missing:
            log("warning", "Should add line '%s' to '%s', but only warning promised" % (l, promiser))
        if not exists:
            log("warning", "Should create '%s', but only warning promised" % promiser)
        return "not_kept", [base + "_lines_would_change"]
    with open(promiser, "a") as f:
        for l in missing:
            f.write(l + "\n")
    if not exists:
        log("info", "Created file '%s'" % promiser)
    for l in missing:
        log("info", "Added line '%s' to '%s'" % (l, promiser))
    return "repaired", [base + "_lines_added"]


def main():
    sys.stdin.readline()  # cf-agent 3.21.0 v1
    sys.stdin.readline()
    sys.stdout.write("file_lines 1.0.0 v1 json_based action_policy\n\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        operation = request["operation"]
        promiser = request.get("promiser", "")
        attributes = request.get("attributes", {})
        answer = {"operation": operation, "promiser": promiser}
        if operation == "validate_promise":
            errors = validate(promiser, attributes)
            answer["log"] = [
                {"level": "error", "message": "%s (%s:%s)" % (e, request["filename"], request["line_number"])}
                for e in errors
            ]
            answer["result"] = "invalid" if errors else "valid"
        elif operation == "evaluate_promise":
            answer["result"], answer["result_classes"] = evaluate(promiser, attributes)
        elif operation == "terminate":
            answer["result"] = "success"
            send(answer)
            return
        else:
            log("critical", "Unknown operation '%s'" % operation)
            answer["result"] = "error"
        send(answer)


main()
