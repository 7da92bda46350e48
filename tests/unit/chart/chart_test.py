#!/usr/bin/env python3
"""The Helm chart's test (charts/vgpu/), without a cluster and without helm.

One check per run, named on the command line (ctest registers each as Chart.<check>):

  Lint                      yamllint on Chart.yaml, values.yaml and files/*.yaml; the schema is JSON
  ValuesMatchSchema         values.yaml obeys values.schema.json (and bad values do not)
  TemplateValuesExist       every .Values path a template uses is in values.yaml
  TemplatesBalanced         {{ }} pairs and if/range/with/define ... end blocks match
  DeviceConfigParses        the device config the defaults render equals files/device-config.yaml,
                            and vgpu's own parser (loadDeviceConfig + the backends) accepts it
  EveryBackendConfigParses  the same with each backend enabled alone, and all together
  ManagedResourcesMatchBackends
                            the kube-scheduler extender's managedResources are the backends'
                            default resource names; only the advertised count is checked by
                            the kube-scheduler (ignoredByScheduler: false)
  FlagsExist                every daemon flag the templates pass is one the daemon defines
  DockerfilesMatchChart     the images put libvgpu.so and the backends where the chart expects
  MetricsDocumented         docs/metrics.md lists exactly the metrics the daemons define, and the
                            Grafana dashboard queries only those (promtool parses every query)
  Render                    the chart rendered as `helm template` does (render/main.go) for several
                            sets of values: every document YAML, the ConfigMap's device config
                            parsed by vgpu, the extender, webhook, TLS and mounts as intended,
                            each daemon's ClusterRole exactly the calls its code makes

The device-config rendering below mirrors the "vgpu.deviceConfig" template in
templates/_helpers.tpl (file, then values laid over it key by key).
"""
import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL: " + message)


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def template_files(chart):
    folder = os.path.join(chart, "templates")
    return sorted(os.path.join(folder, n) for n in os.listdir(folder)
                  if n.endswith((".yaml", ".tpl", ".txt")))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------------------------------
# Lint


def check_lint(args):
    files = [os.path.join(args.chart, "Chart.yaml"), os.path.join(args.chart, "values.yaml")]
    files_dir = os.path.join(args.chart, "files")
    files += sorted(os.path.join(files_dir, n) for n in os.listdir(files_dir) if n.endswith(".yaml"))
    if args.yamllint:
        config = os.path.join(os.path.dirname(os.path.abspath(__file__)), "yamllint.yaml")
        r = subprocess.run([args.yamllint, "--strict", "-c", config] + files,
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("yamllint:\n" + r.stdout + r.stderr)
    else:
        print("note: yamllint not found; only parsing the YAML")
    for path in files:
        try:
            load_yaml(path)
        except yaml.YAMLError as e:
            fail("%s: %s" % (path, e))
    chart = load_yaml(os.path.join(args.chart, "Chart.yaml"))
    for key in ("apiVersion", "name", "version", "appVersion"):
        if key not in chart:
            fail("Chart.yaml has no " + key)
    if chart.get("apiVersion") != "v2":
        fail("Chart.yaml apiVersion must be v2 (Helm 3)")
    try:
        with open(os.path.join(args.chart, "values.schema.json"), encoding="utf-8") as f:
            json.load(f)
    except ValueError as e:
        fail("values.schema.json is not JSON: %s" % e)


# ---------------------------------------------------------------------------------------
# A JSON Schema (draft-07) validator for the keywords values.schema.json uses.

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}
KNOWN_KEYWORDS = {"$schema", "title", "description", "type", "properties", "additionalProperties",
                  "required", "enum", "minimum", "maximum", "exclusiveMinimum", "pattern",
                  "minLength", "items", "propertyNames"}


def validate(value, schema, where, errors):
    unknown = set(schema) - KNOWN_KEYWORDS
    if unknown:
        errors.append("%s: the schema uses keywords this test does not know: %s" % (where, sorted(unknown)))
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            errors.append("%s: expected %s, got %r" % (where, "/".join(types), value))
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %s" % (where, value, schema["enum"]))
    if TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append("%s: %r < minimum %r" % (where, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append("%s: %r > maximum %r" % (where, value, schema["maximum"]))
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            errors.append("%s: %r must be > %r" % (where, value, schema["exclusiveMinimum"]))
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append("%s: %r does not match %s" % (where, value, schema["pattern"]))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append("%s: %r is shorter than %d" % (where, value, schema["minLength"]))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], "%s[%d]" % (where, i), errors)
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append("%s: %s is required" % (where, key))
        props = schema.get("properties", {})
        for key, item in value.items():
            if "propertyNames" in schema:
                validate(key, schema["propertyNames"], "%s (key %s)" % (where, key), errors)
            if key in props:
                validate(item, props[key], where + "." + key, errors)
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    errors.append("%s: unknown key %s" % (where, key))
                elif isinstance(extra, dict):
                    validate(item, extra, where + "." + key, errors)


def check_values_match_schema(args):
    with open(os.path.join(args.chart, "values.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    values = load_yaml(os.path.join(args.chart, "values.yaml"))
    errors = []
    validate(values, schema, "values", errors)
    for e in errors:
        fail(e)
    # The schema must also refuse what it is there to refuse.
    bad_cases = [
        ("a typo in a key", ["scheduler", "schedulerNmae"], "x"),
        ("an unknown failurePolicy", ["scheduler", "admissionWebhook", "failurePolicy"], "Sometimes"),
        ("splitCount 0", ["devices", "nvidia", "splitCount"], 0),
        ("a string for a number", ["devices", "nvidia", "memoryScaling"], "1.5"),
        ("an unknown node policy", ["scheduler", "defaultSchedulerPolicy", "nodeSchedulerPolicy"], "pack"),
        ("an unknown device config key", ["devices", "nvidia", "splitcount"], 4),
        ("a bad resource name", ["devices", "nvidia", "resources", "count"], "nvidia.com/ gpu"),
        ("a bad heartbeat duration", ["scheduler", "heartbeatTimeout"], "90"),
    ]
    for description, path, value in bad_cases:
        broken = copy.deepcopy(values)
        node = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        errs = []
        validate(broken, schema, "values", errs)
        if not errs:
            fail("values.schema.json accepts %s (%s = %r)" % (description, ".".join(path), value))


# ---------------------------------------------------------------------------------------
# Templates

VALUES_PATH = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def check_template_values_exist(args):
    values = load_yaml(os.path.join(args.chart, "values.yaml"))
    used = 0
    for path in template_files(args.chart):
        for lineno, line in enumerate(read(path).splitlines(), 1):
            for m in VALUES_PATH.finditer(line):
                used += 1
                node = values
                walked = []
                for key in m.group(1).strip(".").split("."):
                    walked.append(key)
                    if not isinstance(node, dict) or key not in node:
                        fail("%s:%d: .Values.%s is not in values.yaml (no %s)"
                             % (os.path.relpath(path, args.chart), lineno, m.group(1).strip("."),
                                ".".join(walked)))
                        break
                    node = node[key]
    if used < 50:
        fail("only %d .Values references found: is the pattern still right?" % used)


ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.S)


def check_templates_balanced(args):
    for path in template_files(args.chart):
        text = read(path)
        name = os.path.relpath(path, args.chart)
        if text.count("{{") != text.count("}}"):
            fail("%s: %d '{{' but %d '}}'" % (name, text.count("{{"), text.count("}}")))
            continue
        stack = []
        for m in ACTION.finditer(text):
            body = m.group(1)
            if body.startswith("/*"):
                if not body.endswith("*/"):
                    fail("%s: unterminated comment" % name)
                continue
            word = body.split(None, 1)[0] if body else ""
            line = text.count("\n", 0, m.start()) + 1
            if word in ("if", "range", "with", "define", "block"):
                stack.append((word, line))
            elif word == "end":
                if not stack:
                    fail("%s:%d: {{ end }} without an open block" % (name, line))
                else:
                    stack.pop()
            elif word == "else" and not stack:
                fail("%s:%d: {{ else }} outside a block" % (name, line))
        for word, line in stack:
            fail("%s:%d: {{ %s }} is never closed" % (name, line, word))


# ---------------------------------------------------------------------------------------
# The device config


def render_device_config(chart, values):
    """What the "vgpu.deviceConfig" template renders (as data)."""
    if values["deviceConfig"].get("override"):
        return yaml.safe_load(values["deviceConfig"]["override"])
    config = load_yaml(os.path.join(chart, "files", "device-config.yaml"))
    scheduler = config.setdefault("scheduler", {})
    policy = values["scheduler"]["defaultSchedulerPolicy"]
    scheduler["nodePolicy"] = policy["nodeSchedulerPolicy"]
    scheduler["devicePolicy"] = policy["gpuSchedulerPolicy"]
    scheduler["heartbeatTimeout"] = values["scheduler"]["heartbeatTimeout"]
    backends = config.setdefault("backends", {})
    for name, device in values["devices"].items():
        section = backends.setdefault(name, {})
        for key, value in device.items():
            if isinstance(value, dict):
                section.setdefault(key, {}).update(value)
            elif value is not None:
                section[key] = value
    if values["deviceConfig"].get("nodes"):
        config["nodes"] = values["deviceConfig"]["nodes"]
    return config


def parse_with_vgpu(args, config, label):
    with tempfile.NamedTemporaryFile("w", suffix="-device-config.yaml", delete=False) as f:
        yaml.safe_dump(config, f, sort_keys=True)  # as Helm's toYaml writes it: keys sorted
        path = f.name
    try:
        r = subprocess.run([args.check_tool, "parse", path, args.backend_dir], capture_output=True, text=True)
        if r.returncode != 0:
            fail("%s: vgpu refuses the rendered device config:\n%s%s\n--- the file ---\n%s"
                 % (label, r.stdout, r.stderr, read(path)))
        return r.stdout
    finally:
        os.unlink(path)


def check_device_config_parses(args):
    values = load_yaml(os.path.join(args.chart, "values.yaml"))
    shipped_path = os.path.join(args.chart, "files", "device-config.yaml")
    shipped = load_yaml(shipped_path)
    rendered = render_device_config(args.chart, values)
    if rendered != shipped:
        fail("files/device-config.yaml is not what the default values render: keep them equal\n"
             "rendered: %s\nfile:     %s" % (json.dumps(rendered, sort_keys=True), json.dumps(shipped, sort_keys=True)))
    # The plain file as shipped, comments and order included.
    r = subprocess.run([args.check_tool, "parse", shipped_path, args.backend_dir], capture_output=True, text=True)
    if r.returncode != 0:
        fail("vgpu refuses files/device-config.yaml:\n" + r.stdout + r.stderr)
    out = parse_with_vgpu(args, rendered, "default values")
    enabled = sorted(n for n, d in values["devices"].items() if d.get("enabled"))
    loaded = sorted(line.split()[1] for line in (out or "").splitlines() if line.startswith("loaded "))
    if out is not None and loaded != enabled:
        fail("enabled backends %s but the scheduler-side load gave %s" % (enabled, loaded))
    # Per-node overrides pass through.
    with_nodes = copy.deepcopy(values)
    with_nodes["deviceConfig"]["nodes"] = [{"name": "gpu-node-1", "backends": {"nvidia": {"splitCount": 20}}}]
    parse_with_vgpu(args, render_device_config(args.chart, with_nodes), "deviceConfig.nodes set")
    # Scheduler values reach the config.
    spread = copy.deepcopy(values)
    spread["scheduler"]["defaultSchedulerPolicy"]["nodeSchedulerPolicy"] = "spread"
    spread["scheduler"]["heartbeatTimeout"] = "2m"
    if render_device_config(args.chart, spread)["scheduler"] != {"nodePolicy": "spread", "devicePolicy": "spread",
                                                                 "heartbeatTimeout": "2m"}:
        fail("scheduler values do not reach device-config.yaml's scheduler section")
    parse_with_vgpu(args, render_device_config(args.chart, spread), "spread, 2m")


def check_every_backend_config_parses(args):
    values = load_yaml(os.path.join(args.chart, "values.yaml"))
    names = list(values["devices"])
    for only in names + ["(all)"]:
        v = copy.deepcopy(values)
        for name in names:
            v["devices"][name]["enabled"] = only in (name, "(all)")
        parse_with_vgpu(args, render_device_config(args.chart, v), "only %s enabled" % only)
    # A setting turned off or to 0 in values must win over the file (Helm's mergeOverwrite
    # would skip it; the template sets keys one by one).
    v = copy.deepcopy(values)
    v["devices"]["nvidia"]["enabled"] = False
    v["devices"]["sim"]["enabled"] = True
    rendered = render_device_config(args.chart, v)
    if rendered["backends"]["nvidia"]["enabled"] is not False:
        fail("devices.nvidia.enabled=false does not reach the device config")
    helper = read(os.path.join(args.chart, "templates", "_helpers.tpl"))
    if "mergeOverwrite" in helper.split('define "vgpu.deviceConfig"')[1].split("{{- end -}}\n{{- end -}}")[0]:
        fail("vgpu.deviceConfig uses mergeOverwrite, which drops false and 0 from the values")


# ---------------------------------------------------------------------------------------
# The kube-scheduler configuration


def managed_resources(values):
    """What the "vgpu.managedResources" template renders."""
    out = []
    for name in sorted(values["devices"]):
        device = values["devices"][name]
        if not device.get("enabled"):
            continue
        for role in sorted(device.get("resources", {})):
            if device["resources"][role]:
                out.append({"name": device["resources"][role], "ignoredByScheduler": role != "count"})
    return out


def check_managed_resources_match_backends(args):
    values = load_yaml(os.path.join(args.chart, "values.yaml"))
    names = sorted(values["devices"])
    r = subprocess.run([args.check_tool, "resources", args.backend_dir] + names, capture_output=True, text=True)
    if r.returncode != 0:
        fail("cannot load the backends to read their default resource names:\n" + r.stdout + r.stderr)
        return
    defaults = {}
    for line in r.stdout.splitlines():
        backend, resource, kind = line.split()
        defaults.setdefault(backend, {})[resource] = kind == "advertised"
    everything = copy.deepcopy(values)
    for name in names:
        everything["devices"][name]["enabled"] = True
    managed = managed_resources(everything)
    seen = set()
    for entry in managed:
        if entry["name"] in seen:
            fail("managedResources names %s twice" % entry["name"])
        seen.add(entry["name"])
    for name in names:
        chart_names = {r: role for role, r in values["devices"][name]["resources"].items() if r}
        backend_names = defaults.get(name, {})
        if set(chart_names) != set(backend_names):
            fail("devices.%s.resources %s differ from the backend's default names %s"
                 % (name, sorted(chart_names), sorted(backend_names)))
        for resource, advertised in backend_names.items():
            entry = next((m for m in managed if m["name"] == resource), None)
            if entry is None:
                fail("%s (backend %s) is not in the extender's managedResources" % (resource, name))
            elif entry["ignoredByScheduler"] == advertised:
                fail("%s: ignoredByScheduler must be %s: the node agent %s it to the kubelet"
                     % (resource, not advertised, "advertises" if advertised else "never advertises"))
    # The template does what managed_resources() mirrors.
    helper = read(os.path.join(args.chart, "templates", "_helpers.tpl"))
    for needle in ("range $role, $resource := $device.resources", 'ignoredByScheduler: {{ ne $role "count" }}',
                   "if $device.enabled"):
        if needle not in helper:
            fail('_helpers.tpl "vgpu.managedResources" no longer has `%s`; update this test with it' % needle)
    config = read(os.path.join(args.chart, "templates", "scheduler-config.yaml"))
    for needle in ('include "vgpu.managedResources"', "nodeCacheCapable: {{ .Values.scheduler.extender.nodeCacheCapable }}",
                   "bindVerb: bind", "preemptVerb: preempt",
                   "filterVerb: filter", "schedulerName: {{ .Values.scheduler.schedulerName }}"):
        if needle not in config:
            fail("scheduler-config.yaml lacks `%s`" % needle)


# ---------------------------------------------------------------------------------------
# Flags and images

FLAG = re.compile(r"^\s*- --([a-z][a-z0-9-]*)(=|$)", re.M)


def check_flags_exist(args):
    source = os.path.dirname(os.path.dirname(os.path.abspath(args.chart)))
    # The node front ends define the flags they share in agent/core/daemon_support.h.
    pairs = [("scheduler-deployment.yaml", "vgpu-scheduler", ["extender/scheduler/main.cpp"]),
             ("device-plugin-daemonset.yaml", "vgpu-device-plugin",
              ["agent/deviceplugin/options.cpp", "agent/core/daemon_support.h"]),
             ("dra-plugin-daemonset.yaml", "vgpu-dra-plugin",
              ["agent/dra/dra_options.cpp", "agent/core/daemon_support.h"]),
             ("uninstall-hook.yaml", "stop-agents", ["agent/uninstall/main.cpp"])]
    for template, container, codes in pairs:
        text = read(os.path.join(args.chart, "templates", template))
        block = text.split("- name: " + container, 1)[1].split("\n        - name: ", 1)[0]
        flags = [m.group(1) for m in FLAG.finditer(block)]
        if not flags:
            fail("%s: no flags found for %s" % (template, container))
        code = " and ".join(codes)
        if not all(os.path.exists(os.path.join(source, c)) for c in codes):
            print("note: %s not present; flags of %s not checked" % (code, container))
            continue
        defined = "".join(read(os.path.join(source, c)) for c in codes)
        for flag in flags:
            if '"%s"' % flag not in defined and '"%s,' % flag not in defined:
                fail("%s passes --%s to %s, which %s does not define" % (template, flag, container, code))


def check_dockerfiles_match_chart(args):
    source = os.path.dirname(os.path.dirname(os.path.abspath(args.chart)))
    docker = os.path.join(source, "docker")
    plugin = read(os.path.join(docker, "device-plugin.Dockerfile"))
    scheduler = read(os.path.join(docker, "scheduler.Dockerfile"))
    daemonset = read(os.path.join(args.chart, "templates", "device-plugin-daemonset.yaml"))
    if "/usr/local/lib/vgpu/libvgpu.so" not in daemonset:
        fail("the DaemonSet's init container no longer copies /usr/local/lib/vgpu/libvgpu.so")
    for text, name, needles in (
            (plugin, "device-plugin.Dockerfile",
             ["/usr/local/lib/vgpu/libvgpu.so", "/usr/local/lib/vgpu/backends", "/usr/local/bin/vgpu-device-plugin",
              "scripts/install-deps.sh", "scripts/build.sh"]),
            (scheduler, "scheduler.Dockerfile",
             ["/usr/local/lib/vgpu/backends", "/usr/local/bin/vgpu-scheduler", "scripts/install-deps.sh",
              "scripts/build.sh", "USER 65532"])):
        for needle in needles:
            if needle not in text:
                fail("docker/%s does not mention %s, which the chart relies on" % (name, needle))


# ---------------------------------------------------------------------------------------
# Rendering (render/main.go, as `helm template` does)

RENDER_VARIANTS = [
    # (description, kube version, values laid over values.yaml, should render)
    ("defaults", "v1.29.0", {}, True),
    ("every backend, per-node overrides, spread, Kubernetes 1.24 (v1beta3, no match conditions)", "v1.24.3", {
        "devices": {"cambricon": {"enabled": True}, "hygon": {"enabled": True}, "ascend": {"enabled": True},
                    "amd": {"enabled": True},
                    "sim": {"enabled": True}},
        "deviceConfig": {"nodes": [{"name": "gpu-node-7", "backends": {"nvidia": {"splitCount": 20}}}]},
        "scheduler": {"defaultSchedulerPolicy": {"nodeSchedulerPolicy": "spread"}, "replicas": 2},
        "devicePlugin": {"extraHostPaths": ["/usr/local/neuware", "/opt/hyhal"], "readPodResources": False},
    }, True),
    ("sim only, own certificate, NodePort, registry, labels", "v1.30.1", {
        "global": {"imageRegistry": "registry.example.com", "labels": {"team": "ml"},
                   "annotations": {"owner": "ml-platform"}},
        "devices": {"nvidia": {"enabled": False}, "sim": {"enabled": True}},
        "scheduler": {"tls": {"existingSecret": "my-tls", "caBundle": "Q0EK"},
                      "service": {"type": "NodePort"},
                      "extender": {"prioritizeWeight": 3, "nodeCacheCapable": False, "verbsPort": 9999},
                      "kubeScheduler": {"percentageOfNodesToScore": 0},
                      "metrics": {"serviceMonitor": {"enabled": True}},
                      "admissionWebhook": {"failurePolicy": "Fail", "excludeNamespaces": [], "envPolicy": "strip",
                                           "trustedUsers": ["system:serviceaccount:migrate:hami-migrator"],
                                           "securityFailurePolicy": "Ignore"}},
        "devicePlugin": {"privileged": False, "metrics": {"serviceMonitor": {"enabled": True}}},
        "hamiCompat": {"enabled": True},
        "metrics": {"hamiNames": True},
    }, True),
    ("a whole device config given", "v1.29.0", {
        "devices": {"nvidia": {"enabled": False}, "sim": {"enabled": True}},
        "deviceConfig": {"override": "version: 1\nbackends:\n  sim:\n    enabled: true\n"
                                     "    options:\n      devicesFile: /etc/vgpu/sim-devices.yaml\n"},
    }, True),
    ("no backend enabled", "v1.29.0", {"devices": {"nvidia": {"enabled": False}}}, False),
    # Issue 37 item 4: a tmpfs per container folder needs CAP_SYS_ADMIN and Bidirectional propagation.
    ("regionTmpfs required without privileged", "v1.29.0",
     {"devicePlugin": {"privileged": False, "regionTmpfs": "required"}},
     "devicePlugin.regionTmpfs=required needs devicePlugin.privileged=true"),
    ("regionTmpfs required, privileged", "v1.29.0", {"devicePlugin": {"regionTmpfs": "required"}}, True),
    ("DRA regionTmpfs required without privileged", "v1.34.0",
     {"devices": {"nvidia": {"frontEnd": "dra"}}, "dra": {"enabled": True, "privileged": False, "regionTmpfs": "required"}},
     "dra.regionTmpfs=required needs dra.privileged=true"),
    # Issue 38: both daemons share the node's handout journal in the one state folder.
    ("DRA state folder apart from the device plugin's", "v1.34.0",
     {"devices": {"nvidia": {"frontEnd": "dra"}}, "dra": {"enabled": True, "stateDir": "/var/lib/vgpu-dra"}},
     "dra.stateDir must be devicePlugin.stateDir"),
    ("DRA unprivileged, no Bidirectional", "v1.34.0",
     {"devices": {"nvidia": {"frontEnd": "dra"}}, "dra": {"enabled": True, "privileged": False}}, True),
    ("DRA front end for nvidia and sim, nvidia.com/gpu served through DRA, Kubernetes 1.37", "v1.37.0", {
        "devices": {"nvidia": {"frontEnd": "dra"}, "sim": {"enabled": True}},
        "deviceConfig": {"nodes": [{"name": "legacy-node", "backends": {"nvidia": {"frontEnd": "devicePlugin"}}}]},
        "dra": {"enabled": True, "extendedResourceNames": {"nvidia": "nvidia.com/gpu"}},
    }, True),
]


# (apiGroup, resource, verb) each daemon's apiserver calls need, no more, no less; a new call
# in the code changes this table and the chart's ClusterRole together. vgpu-scheduler: node
# and pod informers (list, watch), the ResourceQuota informer (list, watch), a pod read when the cache lags at bind (get), the
# annotation that wakes a refused pod once capacity frees (patch), the Binding (which carries
# the assignment annotations), Events and their counts (create, patch). vgpu-device-plugin:
# the informer on its node's pods, the pod and Node annotation patches, Events.
DAEMON_RBAC = {
    "vgpu-scheduler-extender": {("", "nodes", "list"), ("", "nodes", "watch"), ("", "pods", "get"),
                                ("", "pods", "list"), ("", "pods", "watch"), ("", "pods", "patch"),
                                ("", "resourcequotas", "list"), ("", "resourcequotas", "watch"),
                                ("", "pods/binding", "create"), ("", "events", "create"),
                                ("", "events", "patch")},
    "vgpu-device-plugin": {("", "pods", "list"), ("", "pods", "watch"), ("", "pods", "patch"),
                           ("", "nodes", "patch"), ("", "events", "create")},
}
# vgpu-dra-plugin (only with dra.enabled): its node's ResourceSlices by name, the claims the
# kubelet asks it to prepare, its Node's uid (the slices' owner), Warning events on the Node.
DRA_RBAC = {("resource.k8s.io", "resourceslices", "get"), ("resource.k8s.io", "resourceslices", "create"),
            ("resource.k8s.io", "resourceslices", "patch"), ("resource.k8s.io", "resourceslices", "delete"),
            ("resource.k8s.io", "resourceclaims", "get"), ("", "nodes", "get"), ("", "events", "create")}


def watchdog_evicts(values):
    """Whether the node agent's watchdog may evict: action evict-pod, or kill-process escalating
    to eviction after escalateAfter kills (docs/node-agent.md, "Watchdog")."""
    wd = values["devicePlugin"]["watchdog"]
    return wd["action"] == "evict-pod" or (wd["action"] == "kill-process" and wd.get("escalateAfter", 0) > 0)


def granted(role):
    """The (apiGroup, resource, verb) triples a ClusterRole grants."""
    return {(group, resource, verb) for rule in role.get("rules", []) for group in rule.get("apiGroups", [])
            for resource in rule.get("resources", []) for verb in rule.get("verbs", [])}


def check_dra_rendered(description, values, docs, need):
    """The DRA front end: one DeviceClass per enabled backend selecting its driver, the
    extended-resource mapping where asked, the DaemonSet's kubelet folders, its RBAC."""
    if not values["dra"]["enabled"]:
        if any(kind == "DeviceClass" or name == "vgpu-dra-plugin" for kind, name in docs):
            fail("%s: DRA objects rendered although dra.enabled is false" % description)
        return
    domain = values["dra"]["driverDomain"]
    enabled = sorted(b for b, section in values["devices"].items() if section.get("enabled"))
    classes = sorted(name for kind, name in docs if kind == "DeviceClass")
    if classes != sorted("%s.%s" % (b, domain) for b in enabled):
        fail("%s: DeviceClasses %s for enabled backends %s" % (description, classes, enabled))
    for b in enabled:
        spec = docs.get(("DeviceClass", "%s.%s" % (b, domain)), {}).get("spec", {})
        want = 'device.driver == "%s.%s"' % (b, domain)
        if [s.get("cel", {}).get("expression") for s in spec.get("selectors", [])] != [want]:
            fail("%s: DeviceClass of %s selects %s, expected %s" % (description, b, spec.get("selectors"), want))
        if spec.get("extendedResourceName") != values["dra"]["extendedResourceNames"].get(b):
            fail("%s: DeviceClass of %s maps extended resource %s" % (description, b, spec.get("extendedResourceName")))
    ds = need("DaemonSet", "vgpu-dra-plugin").get("spec", {}).get("template", {}).get("spec", {})
    paths = {v["hostPath"]["path"] for v in ds.get("volumes", []) if "hostPath" in v}
    kubelet = values["dra"]["kubeletDir"]
    for path in (kubelet + "/plugins_registry", kubelet + "/plugins", values["dra"]["cdiDir"], values["dra"]["stateDir"]):
        if path not in paths:
            fail("%s: vgpu-dra-plugin does not mount the host's %s" % (description, path))
    # Each claim's tmpfs (dra.regionTmpfs) reaches the host only with Bidirectional propagation,
    # which Kubernetes allows for privileged containers alone.
    plugin = ds.get("containers", [{}])[0]
    state = {m["mountPath"]: m for m in plugin.get("volumeMounts", [])}.get(values["dra"]["stateDir"], {})
    want = "Bidirectional" if values["dra"]["privileged"] else None
    if state.get("mountPropagation") != want:
        fail("%s: vgpu-dra-plugin's state dir mountPropagation is %s, expected %s (privileged: %s)"
             % (description, state.get("mountPropagation"), want, values["dra"]["privileged"]))
    if "--region-tmpfs=%s" % values["dra"]["regionTmpfs"] not in plugin.get("args", []):
        fail("%s: vgpu-dra-plugin is not given --region-tmpfs=%s" % (description, values["dra"]["regionTmpfs"]))
    have = granted(need("ClusterRole", "vgpu-dra-plugin"))
    if have != DRA_RBAC:
        fail("%s: ClusterRole vgpu-dra-plugin grants %s more and %s less than the daemon's calls" % (
            description, sorted(have - DRA_RBAC), sorted(DRA_RBAC - have)))
def check_defaults_make_policies_visible(values, description):
    """Issue 27 item 10: defaults that work. At weight 1 binpack/spread had no visible effect
    against kube-scheduler's own scoring (one step of ours = 10 points); weight 10 did."""
    ext = values["scheduler"]["extender"]
    if ext["prioritizeWeight"] < 10:
        fail("%s: prioritizeWeight %d: binpack/spread would not show against kube-scheduler's scoring"
             % (description, ext["prioritizeWeight"]))
    if ext["nodeCacheCapable"] is not True:
        fail("%s: nodeCacheCapable must default to true (whole Node objects: HTTP 413 beyond ~300 nodes)"
             % description)
    if values["scheduler"]["kubeScheduler"]["percentageOfNodesToScore"] != 100:
        fail("%s: percentageOfNodesToScore must default to 100 (the extender sees every node)" % description)


def merged_values(chart, overlay):
    values = load_yaml(os.path.join(chart, "values.yaml"))

    def merge(a, b):
        for k, v in b.items():
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                merge(a[k], v)
            else:
                a[k] = v
    merge(values, overlay)
    return values


def rendered_documents(folder):
    docs = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(read(os.path.join(folder, name))):
            if doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def check_render(args):
    if not args.renderer:
        fail("Render needs --renderer (chart-render)")
        return
    for description, kube, overlay, should_render in RENDER_VARIANTS:
        with tempfile.TemporaryDirectory() as tmp:
            overlay_path = os.path.join(tmp, "overlay.yaml")
            with open(overlay_path, "w", encoding="utf-8") as f:
                yaml.safe_dump(overlay, f)
            out = os.path.join(tmp, "out")
            os.mkdir(out)
            r = subprocess.run([args.renderer, "-chart", args.chart, "-values", overlay_path, "-kube-version", kube,
                                "-out", out], capture_output=True, text=True)
            if should_render is not True:
                why = should_render or "no backend is enabled"  # False, or the refusal's text
                if r.returncode == 0:
                    fail("%s: the chart renders, but must refuse" % description)
                elif why not in r.stderr:
                    fail("%s: refused without saying why:\n%s" % (description, r.stderr))
                continue
            if r.returncode != 0:
                fail("%s: the chart does not render:\n%s%s" % (description, r.stdout, r.stderr))
                continue
            values = merged_values(args.chart, overlay)
            if not overlay:
                check_defaults_make_policies_visible(values, description)
            check_rendered(args, description, kube, values, rendered_documents(out))


def check_security_webhook(args, description, kube, values, docs, need, with_conditions):
    """Issue 26 items 3 and 4: every pod's CREATE and UPDATE (and ephemeral containers as they
    are added) reach the security webhook, with no opt-out label; it trusts the chart's own
    service accounts; its match condition names the reserved annotations the code reserves."""
    hooks = {w.get("name"): w for w in need("MutatingWebhookConfiguration", "vgpu-webhook").get("webhooks", [])}
    hook = hooks.get("security.pods.vgpu.io")
    if hook is None:
        fail("%s: no security webhook (security.pods.vgpu.io); have %s" % (description, sorted(hooks)))
        return
    rules = {(r, op) for rule in hook.get("rules", []) for r in rule.get("resources", [])
             for op in rule.get("operations", [])}
    for want in (("pods", "CREATE"), ("pods", "UPDATE"), ("pods/ephemeralcontainers", "UPDATE")):
        if want not in rules:
            fail("%s: the security webhook does not see %s of %s (rules %s)" % (description, want[1], want[0], rules))
    if "objectSelector" in hook or "vgpu.io/webhook" in json.dumps(hook.get("namespaceSelector", {})):
        fail("%s: the security webhook honours an opt-out label: %s" % (description, hook))
    placement = hooks.get("pods.vgpu.io", {})
    # Issue 28 item 1: HAMi's opt-out label keeps pods and namespaces from the placement step.
    for selector in ("namespaceSelector", "objectSelector"):
        expressions = placement.get(selector, {}).get("matchExpressions", [])
        for label in ("vgpu.io/webhook", "hami.io/webhook"):
            if {"key": label, "operator": "NotIn", "values": ["ignore"]} not in expressions:
                fail("%s: the placement webhook's %s does not exclude %s=ignore: %s"
                     % (description, selector, label, expressions))
    if hook.get("clientConfig") != placement.get("clientConfig"):
        fail("%s: the two webhooks call different endpoints" % description)
    aw = values["scheduler"]["admissionWebhook"]
    want_policy = aw["securityFailurePolicy"] or ("Fail" if with_conditions else "Ignore")
    if hook.get("failurePolicy") != want_policy:
        fail("%s: security failurePolicy %s, expected %s" % (description, hook.get("failurePolicy"), want_policy))
    namespace = need("ServiceAccount", "vgpu-scheduler").get("metadata", {}).get("namespace")
    trusted = ["system:serviceaccount:%s:vgpu-scheduler" % namespace,
               "system:serviceaccount:%s:vgpu-device-plugin" % namespace] + aw["trustedUsers"]
    args_of = {c.get("name"): c.get("args", []) for c in
               need("Deployment", "vgpu-scheduler").get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])}
    for flag in ("--webhook-env-policy=%s" % aw["envPolicy"], "--trusted-users=%s" % ",".join(trusted)):
        if flag not in args_of.get("vgpu-scheduler", []):
            fail("%s: vgpu-scheduler is not started with %s (args %s)" % (description, flag, args_of.get("vgpu-scheduler")))
    # Issue 28 item 7: hamiCompat.enabled turns on --hami-compat, and only it does.
    if ("--hami-compat" in args_of.get("vgpu-scheduler", [])) != bool(values["hamiCompat"]["enabled"]):
        fail("%s: hamiCompat.enabled is %s but vgpu-scheduler's args are %s"
             % (description, values["hamiCompat"]["enabled"], args_of.get("vgpu-scheduler")))
    conditions = {c.get("name"): c.get("expression", "") for c in hook.get("matchConditions", [])}
    if bool(conditions) != bool(with_conditions):
        fail("%s: security matchConditions %s on Kubernetes %s" % (description, conditions, kube))
    if not conditions:
        return
    r = subprocess.run([args.check_tool, "reserved-annotations"], capture_output=True, text=True)
    reserved = r.stdout.split()
    if r.returncode != 0 or not reserved:
        fail("chart_config_check reserved-annotations failed: %s" % r.stderr)
    escape = conditions.get("may-escape", "")
    # An absent field is a CEL error, and an error a failed call (kube-apiserver 1.37 refused
    # vgpu-scheduler's own patches: "no such key: subResource"): optional fields need has().
    for field in ("request.subResource", "object.spec.serviceAccountName"):
        for expression in conditions.values():
            if field in expression and "has(%s)" % field not in expression:
                fail("%s: a security condition reads %s without has(): %s" % (description, field, expression))
    named = re.findall(r"'(vgpu\.io/[^']*)'", escape)
    if sorted(named) != sorted(reserved):
        fail("%s: the security webhook's condition names %s, the code reserves %s" % (description, named, reserved))
    for user in trusted:
        if "'%s'" % user not in escape:
            fail("%s: the security webhook's condition does not trust %s" % (description, user))
    own = conditions.get("not-vgpu-own-pods", "")
    if "'%s'" % namespace not in own or "'vgpu-scheduler'" not in own or "'vgpu-device-plugin'" not in own:
        fail("%s: the security webhook could wait for vgpu-scheduler's own pods: %s" % (description, own))


def check_rendered(args, description, kube, values, docs):
    def need(kind, name):
        doc = docs.get((kind, name))
        if doc is None:
            fail("%s: no %s %s rendered (have %s)" % (description, kind, name, sorted(docs)))
        return doc or {}

    config_map = need("ConfigMap", "vgpu-device-config")
    device_config = yaml.safe_load(config_map.get("data", {}).get("device-config.yaml", "{}"))
    parse_with_vgpu(args, device_config, description + ": the rendered ConfigMap")
    if not values["deviceConfig"]["override"] and device_config != render_device_config(args.chart, values):
        fail("%s: the ConfigMap's device config differs from chart_test's rendering of it" % description)
    if values["devices"]["sim"]["enabled"] and "sim-devices.yaml" not in config_map.get("data", {}):
        fail("%s: sim is enabled but the ConfigMap has no sim-devices.yaml" % description)

    scheduler_config = yaml.safe_load(need("ConfigMap", "vgpu-scheduler-config").get("data", {}).get("config.yaml", "{}"))
    want_version = "kubescheduler.config.k8s.io/" + ("v1" if kube >= "v1.25" else "v1beta3")
    if scheduler_config.get("apiVersion") != want_version:
        fail("%s: KubeSchedulerConfiguration %s, expected %s" % (description, scheduler_config.get("apiVersion"),
                                                                 want_version))
    # kube-scheduler decodes its configuration strictly: an unknown field stops it.
    known = {
        "": {"apiVersion", "kind", "leaderElection", "profiles", "extenders", "clientConnection",
             "parallelism", "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds"},
        "leaderElection": {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
                           "resourceName", "resourceNamespace"},
        "extender": {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
                     "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
                     "ignorable"},
        "tlsConfig": {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"},
        "managedResource": {"name", "ignoredByScheduler"},
    }

    def unknown_fields(obj, kind, where):
        for key in set(obj or {}) - known[kind]:
            fail("%s: %s has a field kube-scheduler does not know: %s" % (description, where, key))
    unknown_fields(scheduler_config, "", "KubeSchedulerConfiguration")
    unknown_fields(scheduler_config.get("leaderElection"), "leaderElection", "leaderElection")
    for ext in scheduler_config.get("extenders", []):
        unknown_fields(ext, "extender", "the extender")
        unknown_fields(ext.get("tlsConfig"), "tlsConfig", "tlsConfig")
        for m in ext.get("managedResources") or []:
            unknown_fields(m, "managedResource", "a managed resource")
        if ext.get("prioritizeVerb") and not ext.get("weight", 0) > 0:
            fail("%s: an extender with prioritizeVerb needs weight > 0" % description)
        # Issue 27 item 4: the verbs on loopback in the pod, never the webhook's network port.
        if ext.get("urlPrefix") != "http://127.0.0.1:%d" % values["scheduler"]["extender"]["verbsPort"]:
            fail("%s: urlPrefix %s is not vgpu-scheduler's loopback verbs port in the pod"
                 % (description, ext.get("urlPrefix")))
    extenders = scheduler_config.get("extenders", [])
    if len(extenders) != 1:
        fail("%s: expected one extender" % description)
    else:
        ext = extenders[0]
        for key, want in (("bindVerb", "bind"), ("filterVerb", "filter"), ("preemptVerb", "preempt"),
                          ("nodeCacheCapable", values["scheduler"]["extender"]["nodeCacheCapable"]),
                          ("weight", values["scheduler"]["extender"]["prioritizeWeight"]), ("enableHTTPS", False)):
            if ext.get(key) != want:
                fail("%s: extender %s is %r, expected %r" % (description, key, ext.get(key), want))
        if sorted(ext.get("managedResources", []), key=lambda m: m["name"]) != \
                sorted(managed_resources(values), key=lambda m: m["name"]):
            fail("%s: managedResources %s, expected %s" % (description, ext.get("managedResources"),
                                                           managed_resources(values)))
    percentage = values["scheduler"]["kubeScheduler"]["percentageOfNodesToScore"]
    if scheduler_config.get("percentageOfNodesToScore") != (percentage or None):
        fail("%s: percentageOfNodesToScore %s, expected %s" % (description, scheduler_config.get(
            "percentageOfNodesToScore"), percentage or "kube-scheduler's default (absent)"))
    profiles = scheduler_config.get("profiles", [])
    if [p.get("schedulerName") for p in profiles] != [values["scheduler"]["schedulerName"]]:
        fail("%s: profiles %s" % (description, profiles))

    webhook = need("MutatingWebhookConfiguration", "vgpu-webhook").get("webhooks", [{}])[0]
    if not webhook.get("clientConfig", {}).get("caBundle"):
        fail("%s: the webhook has no caBundle" % description)
    if webhook.get("admissionReviewVersions") != ["v1"] or webhook.get("sideEffects") != "None":
        fail("%s: the webhook must ask for AdmissionReview v1 and declare sideEffects None" % description)
    with_conditions = kube >= "v1.28" and values["scheduler"]["admissionWebhook"]["matchConditions"]
    want_policy = values["scheduler"]["admissionWebhook"]["failurePolicy"] or ("Fail" if with_conditions else "Ignore")
    if webhook.get("failurePolicy") != want_policy:
        fail("%s: failurePolicy %s, expected %s" % (description, webhook.get("failurePolicy"), want_policy))
    if ("matchConditions" in webhook) != bool(with_conditions):
        fail("%s: matchConditions %s on Kubernetes %s" % (description, "present" if "matchConditions" in webhook
                                                           else "absent", kube))
    if values["scheduler"]["tls"]["existingSecret"]:
        if ("Secret", "vgpu-scheduler-tls") in docs:
            fail("%s: a Secret is generated although existingSecret is set" % description)
    else:
        secret = need("Secret", "vgpu-scheduler-tls").get("data", {})
        if sorted(secret) != ["ca.crt", "tls.crt", "tls.key"] or webhook.get("clientConfig", {}).get(
                "caBundle") != secret.get("ca.crt"):
            fail("%s: the generated Secret and the webhook's caBundle do not match" % description)

    deployment = need("Deployment", "vgpu-scheduler")
    check_security_webhook(args, description, kube, values, docs, need, with_conditions)
    pod = deployment.get("spec", {}).get("template", {})
    if pod.get("metadata", {}).get("labels", {}).get("vgpu.io/webhook") != "ignore":
        fail("%s: the scheduler's pods are not excluded from their own webhook" % description)
    containers = {c.get("name"): c for c in pod.get("spec", {}).get("containers", [])}
    args = containers.get("vgpu-scheduler", {}).get("args", [])
    ext_values = values["scheduler"]["extender"]
    for want in ("--listen=0.0.0.0:%d" % ext_values["port"], "--extender-listen=127.0.0.1:%d" % ext_values["verbsPort"]):
        if want not in args:
            fail("%s: vgpu-scheduler is not started with %s (args %s)" % (description, want, args))
    exposed = [p.get("containerPort") for c in containers.values() for p in c.get("ports", [])]
    service_ports = [p.get("targetPort") for p in need("Service", "vgpu-scheduler").get("spec", {}).get("ports", [])]
    if ext_values["verbsPort"] in exposed or ext_values["verbsPort"] in service_ports:
        fail("%s: the extender verbs' port %d is exposed (container ports %s, Service %s)"
             % (description, ext_values["verbsPort"], exposed, service_ports))
    secret_name = values["scheduler"]["tls"]["existingSecret"] or "vgpu-scheduler-tls"
    if not any(v.get("secret", {}).get("secretName") == secret_name for v in pod.get("spec", {}).get("volumes", [])):
        fail("%s: the scheduler does not mount Secret %s" % (description, secret_name))

    daemonset = need("DaemonSet", "vgpu-device-plugin")
    ds_pod = daemonset.get("spec", {}).get("template", {}).get("spec", {})
    if ds_pod.get("nodeSelector") != values["devicePlugin"]["nodeSelector"]:
        fail("%s: the node agent's nodeSelector is %s" % (description, ds_pod.get("nodeSelector")))
    paths = {v["hostPath"]["path"] for v in ds_pod.get("volumes", []) if "hostPath" in v}
    kubelet = values["devicePlugin"]["kubeletDir"]
    for path in [kubelet + "/device-plugins", values["devicePlugin"]["stateDir"]] + \
            ([kubelet + "/pod-resources"] if values["devicePlugin"]["readPodResources"] else []) + \
            ([values["devicePlugin"]["cdiDir"]] if values["devices"]["nvidia"]["enabled"] else []) + \
            values["devicePlugin"]["extraHostPaths"]:
        if path not in paths:
            fail("%s: the node agent does not mount the host's %s" % (description, path))
    agent = ds_pod.get("containers", [{}])[0]
    mounts = {m["mountPath"]: m for m in agent.get("volumeMounts", [])}
    if values["devicePlugin"]["stateDir"] not in mounts:
        fail("%s: the state dir is not mounted at its host path (the kubelet mounts it by that path)" % description)
    else:
        # The agent's tmpfs on each container's folder reaches the host only with Bidirectional
        # propagation, which Kubernetes allows for privileged containers alone.
        propagation = mounts[values["devicePlugin"]["stateDir"]].get("mountPropagation")
        want = "Bidirectional" if values["devicePlugin"]["privileged"] else None
        if propagation != want:
            fail("%s: the state dir's mountPropagation is %s, expected %s (privileged: %s)"
                 % (description, propagation, want, values["devicePlugin"]["privileged"]))
    if "--region-tmpfs=%s" % values["devicePlugin"]["regionTmpfs"] not in agent.get("args", []):
        fail("%s: the agent is not given --region-tmpfs=%s" % (description, values["devicePlugin"]["regionTmpfs"]))
    metrics_port = values["devicePlugin"]["metrics"]["port"]
    if "--metrics-address=0.0.0.0:%d" % metrics_port not in agent.get("args", []):
        fail("%s: the agent does not serve metrics on %d" % (description, metrics_port))
    # metrics.hamiNames: HAMi's metric names on both daemons, or on neither (issue 28).
    for daemon, daemon_args in (("vgpu-scheduler", args), ("the node agent", agent.get("args", []))):
        if ("--hami-metrics" in daemon_args) != values["metrics"]["hamiNames"]:
            fail("%s: metrics.hamiNames is %s but %s's args are %s" % (description, values["metrics"]["hamiNames"],
                                                                      daemon, daemon_args))
    if values["devices"]["nvidia"]["enabled"]:
        init = (ds_pod.get("initContainers") or [{}])[0]
        if init.get("name") != "install-libvgpu":
            fail("%s: nvidia is enabled but libvgpu.so is not installed on the node" % description)
        elif values["devices"]["nvidia"]["options"]["libvgpuContainerPath"] not in init["command"][-1]:
            fail("%s: the preload file does not name libvgpuContainerPath" % description)
    for kind, name in docs:
        if kind in ("ClusterRole", "Role"):
            for rule in docs[(kind, name)].get("rules", []):
                if "*" in rule.get("verbs", []) or "*" in rule.get("resources", []):
                    fail("%s: %s %s grants a wildcard" % (description, kind, name))
    check_dra_rendered(description, values, docs, need)
    for name, want in DAEMON_RBAC.items():
        if name == "vgpu-device-plugin" and watchdog_evicts(values):
            want = want | {("", "pods/eviction", "create")}
        role = need("ClusterRole", name)
        if any(rule.get("resourceNames") for rule in role.get("rules", [])):
            fail("%s: ClusterRole %s narrows a rule to resourceNames, which the daemon's calls do not" % (description, name))
        have = granted(role)
        if have != want:
            fail("%s: ClusterRole %s grants %s more and %s less than the daemon's calls" % (
                description, name, sorted(have - want), sorted(want - have)))


# ---------------------------------------------------------------------------------------
# Metrics docs and dashboard

METRIC_SOURCES = ["agent/deviceplugin/agent_metrics.cpp", "agent/dra/dra_agent.cpp", "agent/core/device_metrics.cpp",
                  "agent/core/region_metrics.cpp", "extender/scheduler/scheduler_metrics.h"]
# HAMi's names (--hami-metrics), documented in docs/metrics.md's HAMi table.
HAMI_METRIC_SOURCES = ["agent/core/hami_metrics.cpp", "extender/scheduler/hami_metrics.cpp"]


def check_metrics_documented(args):
    source = os.path.dirname(os.path.dirname(os.path.abspath(args.chart)))
    defined = set()
    for rel in METRIC_SOURCES:
        path = os.path.join(source, rel)
        if not os.path.exists(path):
            print("note: %s not present" % rel)
            continue
        defined |= set(re.findall(r'"(vgpu_[a-z0-9_]+)"', read(path)))
    if not defined:
        fail("no metric definitions found in %s" % METRIC_SOURCES)
        return
    metrics_doc = read(os.path.join(source, "docs", "metrics.md"))
    documented = set(re.findall(r"^\| `(vgpu_[a-z0-9_]+)`", metrics_doc, re.M))
    for name in sorted(defined - documented):
        fail("metric %s is not in docs/metrics.md's tables" % name)
    for name in sorted(documented - defined):
        fail("docs/metrics.md documents %s, which no daemon defines" % name)
    hami = set()
    for rel in HAMI_METRIC_SOURCES:
        hami |= set(re.findall(r'"(hami_[a-z0-9_]+)"', read(os.path.join(source, rel))))
    # Rows of the HAMi table: | `hami_...` | ... | what vgpu exports, or "not produced" |
    hami_rows = dict(re.findall(r"^\| `(hami_[a-z0-9_]+)` \|.*\| ([^|]*) \|$", metrics_doc, re.M))
    for name in sorted(hami - set(hami_rows)):
        fail("HAMi metric %s is exported but not in docs/metrics.md's HAMi table" % name)
    for name, produced in sorted(hami_rows.items()):
        if (name in hami) == produced.startswith("not produced"):
            fail("docs/metrics.md says %s is %s, but the daemons %s it" % (
                name, produced.strip(), "export" if name in hami else "do not export"))
    dashboard = json.loads(read(os.path.join(source, "docs", "grafana-dashboard.json")))
    exprs = []

    def walk(panels):
        for panel in panels:
            walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                exprs.append((panel.get("title", "?"), target["expr"]))
    walk(dashboard["panels"])
    if not exprs:
        fail("the dashboard has no queries")
    for title, expr in exprs:
        for name in re.findall(r"\b(vgpu_[a-z0-9_]+)", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if base not in defined:
                fail("dashboard panel %r queries %s, which no daemon defines" % (title, name))
    promtool = args.promtool
    if not promtool:
        print("note: promtool not found; dashboard queries not parsed")
        return
    rules = {"groups": [{"name": "dashboard", "rules": []}]}
    for i, (title, expr) in enumerate(exprs):
        concrete = re.sub(r"\$\{?(node|namespace|pod|scheduler_job|agent_job)\}?", ".*", expr)
        rules["groups"][0]["rules"].append({"record": "dashboard:query%d" % i, "expr": concrete})
    with tempfile.NamedTemporaryFile("w", suffix=".rules.yaml", delete=False) as f:
        yaml.safe_dump(rules, f)
        path = f.name
    try:
        r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
        if r.returncode != 0:
            fail("promtool refuses dashboard queries:\n" + r.stdout + r.stderr)
    finally:
        os.unlink(path)


def check_dashboard(args):
    """docs/grafana-dashboard.json: panel ids unique, panels inside the 24 columns and not
    on top of each other, and each info family the daemons define (vgpu_*_info: the MIG
    devices and instances) shown by a panel."""
    source = os.path.dirname(os.path.dirname(os.path.abspath(args.chart)))
    try:
        dashboard = json.loads(read(os.path.join(source, "docs", "grafana-dashboard.json")))
    except ValueError as e:
        fail("docs/grafana-dashboard.json is not valid JSON: %s" % e)
        return
    panels = []

    def walk(items):
        for panel in items:
            panels.append(panel)
            walk(panel.get("panels", []))
    walk(dashboard.get("panels", []))
    ids = [p.get("id") for p in panels]
    for dup in sorted({i for i in ids if ids.count(i) > 1}, key=str):
        fail("dashboard panel id %r is used more than once" % dup)
    cells = {}
    for p in panels:
        g = p.get("gridPos", {})
        x, y, w, h = (g.get(k) for k in ("x", "y", "w", "h"))
        if None in (x, y, w, h) or x < 0 or y < 0 or w <= 0 or h <= 0 or x + w > 24:
            fail("dashboard panel %r has gridPos %s, outside the 24 columns" % (p.get("title"), g))
            continue
        for cx in range(x, x + w):
            for cy in range(y, y + h):
                if (cx, cy) in cells:
                    fail("dashboard panels %r and %r overlap at column %d, row %d" % (
                        cells[(cx, cy)], p.get("title"), cx, cy))
                    break
                cells[(cx, cy)] = p.get("title")
            else:
                continue
            break
    queried = set()
    for p in panels:
        for t in p.get("targets", []):
            queried |= set(re.findall(r"\b(vgpu_[a-z0-9_]+)", t.get("expr", "")))
    for rel in METRIC_SOURCES:
        path = os.path.join(source, rel)
        if not os.path.exists(path):
            continue
        for name in sorted(set(re.findall(r'"(vgpu_[a-z0-9_]+_info)"', read(path)))):
            if name not in queried:
                fail("%s (defined in %s) is shown by no dashboard panel" % (name, rel))


CHECKS = {
    "Lint": check_lint,
    "ValuesMatchSchema": check_values_match_schema,
    "TemplateValuesExist": check_template_values_exist,
    "TemplatesBalanced": check_templates_balanced,
    "DeviceConfigParses": check_device_config_parses,
    "EveryBackendConfigParses": check_every_backend_config_parses,
    "ManagedResourcesMatchBackends": check_managed_resources_match_backends,
    "FlagsExist": check_flags_exist,
    "DockerfilesMatchChart": check_dockerfiles_match_chart,
    "Render": check_render,
    "MetricsDocumented": check_metrics_documented,
    "Dashboard": check_dashboard,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chart", required=True)
    parser.add_argument("--check-tool", required=True, help="chart_config_check")
    parser.add_argument("--backend-dir", required=True)
    parser.add_argument("--yamllint")
    parser.add_argument("--renderer", help="chart-render, for Render")
    parser.add_argument("--promtool", help="promtool, for MetricsDocumented")
    parser.add_argument("checks", nargs="+", choices=sorted(CHECKS))
    args = parser.parse_args()
    for name in args.checks:
        CHECKS[name](args)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES))
        return 1
    print("ok: " + ", ".join(args.checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
