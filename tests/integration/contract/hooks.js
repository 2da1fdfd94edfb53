// SPDX-License-Identifier: LGPL-2.1-or-later
// Dredd hooks for tests/integration/test_contract.py. Dredd makes one transaction of
// every documented response (method, path, status, media type) of docs/openapi.yaml;
// the test writes, for each, the request that really produces that answer from the live
// daemon (real session ids, request ids, files; a key of the right tenant or none; a
// body that is refused) into the JSON file SANDBOXD_CONTRACT_CASES, or why it is not run.
// These hooks apply them. Case keys: "METHOD PATH STATUS MEDIA-TYPE" (no media type for
// a response without content).
"use strict";

const fs = require("fs");
const http = require("http");
const hooks = require("hooks");

const cases = JSON.parse(fs.readFileSync(process.env.SANDBOXD_CONTRACT_CASES, "utf8"));
const seen = {};

function key(t) {
  const parts = t.name.split(" > ");
  const status = parts[2] || "";
  const media = parts[3] || "";
  return [t.request.method, parts[0], status, media].join(" ").trim();
}

// one request of a case's "before" or "after" list, straight to sandboxd
function send(req) {
  return new Promise((resolve, reject) => {
    const r = http.request(
      { host: cases._server.host, port: cases._server.port, method: req.method, path: req.path,
        headers: req.headers || {} },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      });
    r.on("error", reject);
    r.end(req.body || undefined);
  });
}

async function sendAll(list) {
  for (const req of list || []) {
    await send(req);
  }
}

hooks.beforeEach((t, done) => {
  const k = key(t);
  const c = cases[k];
  seen[k] = c ? (c.skip ? "skip" : "run") : "missing";
  if (!c) {
    t.fail = "no case for " + k + " in " + process.env.SANDBOXD_CONTRACT_CASES;
    return done();
  }
  if (c.skip) {
    t.skip = true;
    return done();
  }
  // the documented status of this transaction: Dredd gives every use of one $ref'd
  // response (an Entry for 200 and for 201) the status of its last use
  t.expected.statusCode = String(c.status);
  t.fullPath = c.path;
  t.request.uri = c.path;
  t.request.headers = Object.assign({}, c.headers);
  t.request.body = c.body || "";
  if (t.request.body) {
    t.request.headers["Content-Length"] = String(Buffer.byteLength(t.request.body));
  } else {
    delete t.request.headers["Content-Length"];
  }
  sendAll(c.before).then(() => done(), (e) => { t.fail = "before: " + e; done(); });
});

// An NDJSON answer is a stream of JSON lines, each an Event: validated as the array of its
// lines against an array schema whose items are the documented schema of one line.
hooks.beforeEachValidation((t, done) => {
  const media = (t.name.split(" > ")[3] || "");
  const c = cases[key(t)];
  if (c && c.schema) {
    t.expected.bodySchema = c.schema;
  }
  if (media === "application/x-ndjson" && typeof t.real.body === "string") {
    const lines = t.real.body.split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    try {
      t.real.body = JSON.stringify(lines.map((l) => JSON.parse(l)));
    } catch (e) {
      t.fail = "an NDJSON line is not JSON: " + e;
      return done();
    }
    const item = typeof t.expected.bodySchema === "string" ? JSON.parse(t.expected.bodySchema)
                                                             : t.expected.bodySchema;
    const wrapped = { $schema: item.$schema, type: "array", minItems: 1, items: Object.assign({}, item) };
    delete wrapped.items.$schema;
    t.expected.bodySchema = wrapped;
  }
  done();
});

hooks.afterEach((t, done) => {
  const k = key(t);
  if (t.test && seen[k] === "run") {
    seen[k] = t.test.status === "pass" ? "pass" : "fail: " + (t.test.message || t.test.status);
  }
  const c = cases[k];
  if (!c || c.skip) return done();
  sendAll(c.after).then(() => done(), () => done());
});

hooks.afterAll((transactions, done) => {
  fs.writeFileSync(process.env.SANDBOXD_CONTRACT_SEEN, JSON.stringify(seen));
  done();
});
