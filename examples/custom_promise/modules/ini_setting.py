#!/usr/bin/python3
"""A promise module (JSON protocol) that sets keys in one section of an
INI file, keeping the rest of the file as it is.

    ini_setting:
      "/etc/app.ini"
        section => "server",
        settings => @(server);   # a data container: { "port": "8080" }

It speaks the promise module protocol itself, in a few lines: a header,
then one JSON request a message; every promise is validated before it is
evaluated; with action_policy "warn" (a dry run, or a promise that may only
warn) it says what it would change and changes nothing.
"""
import json
import os
import sys

STANDARD = {"handle", "comment", "action_policy", "ifelapsed", "expireafter"}


def answer(message):
    sys.stdout.write(json.dumps(message) + "\n\n")
    sys.stdout.flush()


def problems(promiser, attributes):
    found = []
    if not promiser.startswith("/"):
        found.append("'%s' is not an absolute path" % promiser)
    if not isinstance(attributes.get("section"), str):
        found.append("'section' must be a string")
    settings = attributes.get("settings")
    if not isinstance(settings, dict) or not all(isinstance(v, str) for v in settings.values()):
        found.append("'settings' must be a data container of strings")
    for name in attributes:
        if name not in STANDARD | {"section", "settings"}:
            found.append("unknown attribute '%s'" % name)
    return found


def updated(lines, section, settings):
    """The file's lines with the settings made, and the settings that were
    not there ("key = value")."""
    out, changes, inside, seen = [], [], False, set()

    def add_missing():
        for key, value in settings.items():
            if key not in seen:
                out.append("%s = %s" % (key, value))
                changes.append("%s = %s" % (key, value))
                seen.add(key)

    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            if inside:
                add_missing()
            inside = stripped[1:-1].strip() == section
        elif inside and "=" in stripped and not stripped.startswith(("#", ";")):
            key = stripped.split("=", 1)[0].strip()
            if key in settings:
                seen.add(key)
                wanted = "%s = %s" % (key, settings[key])
                if stripped != wanted:
                    changes.append(wanted)
                    line = wanted
        out.append(line)
    if inside:
        add_missing()
    elif len(seen) < len(settings):
        out.append("[%s]" % section)
        add_missing()
    return out, changes


def evaluate(promiser, attributes):
    section, settings = attributes["section"], attributes["settings"]
    lines = []
    if os.path.exists(promiser):
        with open(promiser) as f:
            lines = f.read().splitlines()
    new, changes = updated(lines, section, settings)
    changed_class = "".join(c if c.isalnum() else "_" for c in os.path.basename(promiser)) + "_changed"
    if not changes:
        return "kept", [], []
    if attributes.get("action_policy") == "warn":
        logs = [{"level": "warning", "message": "Should set '%s' in [%s] of '%s', but only warning promised" % (c, section, promiser)} for c in changes]
        return "not_kept", logs, []
    os.makedirs(os.path.dirname(promiser), exist_ok=True)
    with open(promiser + ".new", "w") as f:
        f.write("\n".join(new) + "\n")
    os.replace(promiser + ".new", promiser)
    logs = [{"level": "info", "message": "Set '%s' in [%s] of '%s'" % (c, section, promiser)} for c in changes]
    return "repaired", logs, [changed_class]


sys.stdin.readline()
sys.stdin.readline()
sys.stdout.write("ini_setting 1.0.0 v1 json_based action_policy\n\n")
sys.stdout.flush()
for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    operation, promiser = request["operation"], request.get("promiser")
    attributes = request.get("attributes", {})
    if operation == "validate_promise":
        found = problems(promiser, attributes)
        where = "(%s:%s)" % (request["filename"], request["line_number"])
        answer({"operation": operation, "result": "invalid" if found else "valid",
                "log": [{"level": "error", "message": "ini_setting: %s %s" % (p, where)} for p in found]})
    elif operation == "evaluate_promise":
        result, logs, classes = evaluate(promiser, attributes)
        answer({"operation": operation, "result": result, "log": logs, "result_classes": classes})
    else:
        answer({"operation": operation, "result": "success"})
        break
