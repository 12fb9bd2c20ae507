"""A Scrapyd client with only the standard library, as scrapyd-client speaks to Scrapyd: urlencoded
forms, multipart uploads, basic auth. It checks every endpoint of crawlq's Scrapyd API against
Scrapyd's documented response shapes, and that bad input gets {"status": "error", "message": ...}
with nothing written. Run by internal/scrapyd's TestScrapyProjectThroughScrapydAPI, which sets:
SCRAPYD_URL, SCRAPYD_USER, SCRAPYD_PASS, EGG (a built egg of testdata/scrapyproject, already
deployed as project "catalog" version "v1"), SITE_URL (the demo site) and MAX_UPLOAD (bytes)."""
import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid

BASE = os.environ["SCRAPYD_URL"]
AUTH = "Basic " + base64.b64encode(("%s:%s" % (os.environ["SCRAPYD_USER"], os.environ["SCRAPYD_PASS"])).encode()).decode()
EGG = open(os.environ["EGG"], "rb").read()
SITE = os.environ["SITE_URL"]
MAX_UPLOAD = int(os.environ["MAX_UPLOAD"])
checks = 0


def request(method, path, fields=None, files=None, auth=AUTH):
    """Sends a request; returns (HTTP status, decoded JSON)."""
    url = BASE + path
    data = None
    headers = {}
    if auth:
        headers["Authorization"] = auth
    if files:
        boundary = uuid.uuid4().hex
        parts = []
        for k, vs in (fields or {}).items():
            for v in vs if isinstance(vs, list) else [vs]:
                parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (boundary, k, v)).encode())
        for k, (name, blob) in files.items():
            parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                          "Content-Type: application/octet-stream\r\n\r\n" % (boundary, k, name)).encode() + blob + b"\r\n")
        parts.append(("--%s--\r\n" % boundary).encode())
        data = b"".join(parts)
        headers["Content-Type"] = "multipart/form-data; boundary=" + boundary
    elif method == "GET" and fields:
        url += "?" + urllib.parse.urlencode(fields, doseq=True)
    elif fields is not None:
        data = urllib.parse.urlencode(fields, doseq=True).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def check(cond, what, got=None):
    global checks
    checks += 1
    if not cond:
        print("FAIL: %s: got %r" % (what, got))
        sys.exit(1)


def ok(method, path, fields=None, files=None, keys=()):
    code, body = request(method, path, fields, files)
    check(code == 200 and body.get("status") == "ok", "%s %s is ok" % (method, path), (code, body))
    check(isinstance(body.get("node_name"), str), "%s has node_name" % path, body)
    for k in keys:
        check(k in body, "%s has %s" % (path, k), body)
    return body


def error(method, path, fields=None, files=None, auth=AUTH, contains="", code=200):
    got, body = request(method, path, fields, files, auth=auth)
    check(got == code, "%s %s answers HTTP %d" % (method, path, code), (got, body))
    check(body.get("status") == "error" and isinstance(body.get("message"), str) and body["message"],
          "%s %s is Scrapyd's error shape" % (method, path), body)
    check(contains.lower() in body["message"].lower(), "%s %s says %r" % (method, path, contains), body)
    return body


def state():
    """What error cases must leave alone: projects, versions, spiders and jobs."""
    projects = ok("GET", "/listprojects.json")["projects"]
    versions = {p: ok("GET", "/listversions.json", {"project": p})["versions"] for p in projects}
    jobs = ok("GET", "/listjobs.json")
    ids = sorted(j["id"] for k in ("pending", "running", "finished") for j in jobs[k])
    return projects, versions, ids


# daemonstatus.json
d = ok("GET", "/daemonstatus.json", keys=("pending", "running", "finished"))
check(all(isinstance(d[k], int) for k in ("pending", "running", "finished")), "daemonstatus counts are integers", d)
check(d["finished"] >= 3, "daemonstatus counts the finished runs", d)

# listprojects.json, listversions.json, listspiders.json
p = ok("GET", "/listprojects.json", keys=("projects",))
check("catalog" in p["projects"] and "default" not in p["projects"], "listprojects hides crawlq's default", p)
p = ok("GET", "/listprojects.json", {"all": "1"}, keys=("projects",))
check("catalog" in p["projects"] and "default" in p["projects"], "listprojects?all=1 lists default", p)
v = ok("GET", "/listversions.json", {"project": "catalog"}, keys=("versions",))
check(v["versions"] == ["v1"], "listversions", v)
s = ok("GET", "/listspiders.json", {"project": "catalog"}, keys=("spiders",))
check(s["spiders"] == ["broken", "catalog", "exits"], "listspiders", s)
s = ok("GET", "/listspiders.json", {"project": "catalog", "_version": "v1"})
check(s["spiders"] == ["broken", "catalog", "exits"], "listspiders _version", s)
s = ok("GET", "/listspiders.json", {"project": "default"})
check("demo" in s["spiders"], "listspiders of the spec spiders", s)

# addversion.json (multipart), listversions, delversion.json
a = ok("POST", "/addversion.json", {"project": "catalog", "version": "v2"}, {"egg": ("project.egg", EGG)}, keys=("spiders",))
check(a["spiders"] == 3, "addversion counts spiders", a)
check(ok("GET", "/listversions.json", {"project": "catalog"})["versions"] == ["v1", "v2"], "listversions after addversion")
ok("POST", "/delversion.json", {"project": "catalog", "version": "v2"})
check(ok("GET", "/listversions.json", {"project": "catalog"})["versions"] == ["v1"], "listversions after delversion")

# addversion.json urlencoded, as ScrapydWeb's Deploy posts it (data={'egg': bytes})
a = ok("POST", "/addversion.json", {"project": "catalog", "version": "v2", "egg": EGG}, keys=("spiders",))
check(a["spiders"] == 3, "urlencoded addversion counts spiders", a)
ok("POST", "/delversion.json", {"project": "catalog", "version": "v2"})

# Versions in Scrapyd's order (sorted_versions: PEP 440), whatever the upload order; a git branch
# version (scrapyd-deploy --version GIT) is taken.
for ver in ("v10", "v9"):
    ok("POST", "/addversion.json", {"project": "catalog", "version": ver}, {"egg": ("project.egg", EGG)})
v = ok("GET", "/listversions.json", {"project": "catalog"})["versions"]
check(v == ["v1", "v9", "v10"], "listversions in PEP 440 order", v)
ok("POST", "/addversion.json", {"project": "catalog", "version": "r12-feature/login"}, {"egg": ("project.egg", EGG)})
v = ok("GET", "/listversions.json", {"project": "catalog"})["versions"]
check(v == ["r12-feature/login", "v1", "v10", "v9"], "listversions in string order once one is not PEP 440", v)
for ver in ("v10", "v9", "r12-feature/login"):
    ok("POST", "/delversion.json", {"project": "catalog", "version": ver})
check(ok("GET", "/listversions.json", {"project": "catalog"})["versions"] == ["v1"], "listversions after delversions")

# addversion + delproject of a project of its own
ok("POST", "/addversion.json", {"project": "scratch", "version": "1"}, {"egg": ("project.egg", EGG)})
check("scratch" in ok("GET", "/listprojects.json")["projects"], "new project listed")
ok("POST", "/delproject.json", {"project": "scratch"})
check("scratch" not in ok("GET", "/listprojects.json")["projects"], "deleted project gone")

# schedule.json (jobid, priority, settings, args), status.json, listjobs.json, cancel.json
jobid = "py-" + uuid.uuid4().hex[:12]
sch = ok("POST", "/schedule.json", {"project": "catalog", "spider": "catalog", "_version": "v1", "jobid": jobid,
                                     "priority": "5", "setting": ["DOWNLOAD_DELAY=2", "CATALOG_TAG=py"],
                                     "base_url": SITE, "label": "from-python"}, keys=("jobid",))
check(sch["jobid"] == jobid, "schedule returns the client's jobid", sch)
st = ok("GET", "/status.json", {"job": jobid, "project": "catalog"}, keys=("currstate",))
check(st["currstate"] in ("pending", "running"), "status of a new job", st)
lj = ok("GET", "/listjobs.json", {"project": "catalog"}, keys=("pending", "running", "finished"))
live = [j for j in lj["pending"] + lj["running"] if j["id"] == jobid]
check(len(live) == 1 and live[0]["project"] == "catalog" and live[0]["spider"] == "catalog", "listjobs lists the job", lj)
for j in lj["finished"]:
    for k in ("id", "project", "spider", "start_time", "end_time", "log_url", "items_url"):
        check(k in j, "finished job has %s" % k, j)
for j in lj["running"]:
    for k in ("id", "project", "spider", "start_time", "log_url", "items_url"):
        check(k in j, "running job has %s" % k, j)
c = ok("POST", "/cancel.json", {"project": "catalog", "job": jobid}, keys=("prevstate",))
check(c["prevstate"] in ("pending", "running"), "cancel returns prevstate", c)
st = ok("GET", "/status.json", {"job": "no-such-job-42"})
check("currstate" in st and st["currstate"] is None, "status of an unknown job", st)
c = ok("POST", "/cancel.json", {"project": "catalog", "job": "no-such-job-42"}, keys=("prevstate",))
check(c["prevstate"] is None, "cancel of an unknown job", c)
v = ok("GET", "/listversions.json", {"project": "nope"}, keys=("versions",))
check(v["versions"] == [], "listversions of an unknown project", v)

# Bad input: Scrapyd's error shape, nothing written.
before = state()
error("POST", "/schedule.json", {"project": "nope", "spider": "catalog"}, contains="unknown project")
error("POST", "/schedule.json", {"project": "catalog", "spider": "nope"}, contains="not found in project")
error("POST", "/schedule.json", {"project": "catalog", "spider": "catalog", "_version": "v9"}, contains="unknown version")
error("POST", "/schedule.json", {"project": "catalog"}, contains="missing spider")
error("POST", "/schedule.json", {"spider": "catalog"}, contains="missing project")
error("POST", "/schedule.json", {"project": "catalog", "spider": "catalog", "priority": "high"}, contains="priority")
error("POST", "/schedule.json", {"project": "catalog", "spider": "catalog", "setting": "NOEQUALS"}, contains="setting")
error("POST", "/schedule.json", {"project": "catalog", "spider": "catalog", "jobid": jobid}, contains="already used")
error("GET", "/schedule.json", {"project": "catalog", "spider": "catalog"}, contains="POST", code=405)
error("POST", "/addversion.json", {"version": "v3"}, {"egg": ("project.egg", EGG)}, contains="missing project")
error("POST", "/addversion.json", {"project": "catalog"}, {"egg": ("project.egg", EGG)}, contains="missing version")
error("POST", "/addversion.json", {"project": "catalog", "version": "v3"}, contains="missing egg")
error("POST", "/addversion.json", {"project": "catalog", "version": "v3"}, {"egg": ("project.egg", b"not a zip at all")}, contains="not a zip")
error("POST", "/addversion.json", {"project": "catalog", "version": "v3"}, {"egg": ("big.egg", b"x" * (MAX_UPLOAD + 1))},
      contains="larger than", code=413)
error("POST", "/addversion.json", {"project": "bad/name", "version": "v3"}, {"egg": ("project.egg", EGG)}, contains="project")
error("POST", "/delversion.json", {"project": "catalog", "version": "v9"}, contains="not found")
error("POST", "/delproject.json", {"project": "nope"}, contains="not found")
error("GET", "/listspiders.json", {"project": "nope"}, contains="unknown project")
error("GET", "/listspiders.json", {"project": "catalog", "_version": "v9"}, contains="unknown version")
error("POST", "/cancel.json", {"project": "catalog"}, contains="missing job")
bad = "Basic " + base64.b64encode(b"scrapy:wrong").decode()
error("POST", "/schedule.json", {"project": "catalog", "spider": "catalog"}, auth=bad, contains="unauthorized", code=401)
error("GET", "/listprojects.json", auth=None, contains="unauthorized", code=401)
error("POST", "/addversion.json", {"project": "intruder", "version": "1"}, {"egg": ("project.egg", EGG)}, auth=bad,
      contains="unauthorized", code=401)
error("GET", "/nosuch.json", contains="no such endpoint", code=404)
after = state()
check(before == after, "error cases wrote nothing", (before, after))

print("ALL CHECKS PASSED (%d)" % checks)
