// Validates every JSON-RPC frame of an ACP conversation against the JSON schema that the
// official TypeScript SDK ships (@agentclientprotocol/sdk/schema/v1/schema.json).
//
// The SDK itself parses leniently (drops bad optional fields, only logs bad notifications, never
// checks results), so a conformance run needs an independent, strict look at the raw frames.
// Each schema $def that carries "x-method" describes one method's params or result; responses are
// matched to their request by id, per direction.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import Ajv2020 from "ajv/dist/2020.js";

const require = createRequire(import.meta.url);

export const SCHEMA_PATH = require.resolve("@agentclientprotocol/sdk/schema/v1/schema.json");
// Methods the stable schema does not have (session/fork) are checked against the unstable one the
// same package ships; `unstableFrames` counts them (a client that advertises nothing must see none).
export const UNSTABLE_SCHEMA_PATH = require.resolve("@agentclientprotocol/sdk/schema/v1/schema.unstable.json");

// Integer formats emitted by the Rust schema generator; ajv does not know them by default.
const INTEGER_RANGES = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint16: [0, 2 ** 16 - 1],
  uint32: [0, 2 ** 32 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
};

function kindOf(defName) {
  if (defName.endsWith("Request")) return "request";
  if (defName.endsWith("Response")) return "response";
  if (defName.endsWith("Notification")) return "notification";
  return null;
}

export class FrameValidator {
  constructor(schemaPath = SCHEMA_PATH, unstablePath = UNSTABLE_SCHEMA_PATH) {
    const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
    const unstable = JSON.parse(readFileSync(unstablePath, "utf8"));
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    for (const [name, [lo, hi]] of Object.entries(INTEGER_RANGES)) {
      ajv.addFormat(name, { type: "number", validate: (x) => Number.isInteger(x) && x >= lo && x <= hi });
    }
    ajv.addFormat("double", { type: "number", validate: (x) => Number.isFinite(x) });
    ajv.addFormat("uri", { type: "string", validate: (x) => /^[A-Za-z][A-Za-z0-9+.-]*:/.test(x) });
    ajv.addSchema(schema, "acp");
    ajv.addSchema(unstable, "acp-unstable");
    this.byMethod = new Map(); // "method|kind" -> {validate, side, unstable}
    for (const [id, source, isUnstable] of [["acp", schema, false], ["acp-unstable", unstable, true]]) {
      for (const [name, def] of Object.entries(source.$defs)) {
        const method = def["x-method"];
        const kind = kindOf(name);
        if (!method || !kind || this.byMethod.has(`${method}|${kind}`)) continue;
        this.byMethod.set(`${method}|${kind}`, {
          validate: ajv.getSchema(`${id}#/$defs/${name}`),
          side: def["x-side"],
          unstable: isUnstable,
        });
      }
    }
    // A stable request whose params carry a field only the unstable schema defines (`systemPrompt`
    // on session/new or session/load) is checked against the unstable definition as well, and
    // counted among the unstable frames with the fields that made it one.
    this.unstableParams = new Map(); // method -> {validate, fields: Set of unstable-only names}
    for (const [name, def] of Object.entries(unstable.$defs)) {
      const method = def["x-method"];
      if (!method || kindOf(name) !== "request" || this.byMethod.get(`${method}|request`)?.unstable !== false) continue;
      // Both schemas name a method's definitions alike (NewSessionRequest).
      const known = new Set(Object.keys(schema.$defs[name]?.properties ?? {}));
      const fields = new Set(Object.keys(def.properties ?? {}).filter((k) => !known.has(k)));
      if (fields.size) this.unstableParams.set(method, { validate: ajv.getSchema(`acp-unstable#/$defs/${name}`), fields });
    }
    this.unstableFrames = [];
    this.errorValidate = ajv.getSchema("acp#/$defs/Error");
    // Requests in flight, per sending direction: id -> method.
    this.pending = { "client->agent": new Map(), "agent->client": new Map() };
    this.findings = [];
    this.counts = { "client->agent": 0, "agent->client": 0 };
  }

  report(direction, what, detail, frame) {
    this.findings.push({ direction, what, detail, frame: JSON.stringify(frame ?? null).slice(0, 400) });
  }

  check(direction, line) {
    this.counts[direction] += 1;
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (e) {
      this.report(direction, "parse", `not JSON: ${e.message}`, line.slice(0, 200));
      return;
    }
    this.checkMessage(direction, msg);
  }

  checkMessage(direction, msg) {
    const other = direction === "client->agent" ? "agent->client" : "client->agent";
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) {
      this.report(direction, "envelope", "a frame must be one JSON object (ACP uses no batches)", msg);
      return;
    }
    if (msg.jsonrpc !== "2.0") this.report(direction, "envelope", 'jsonrpc must be "2.0"', msg);
    if (typeof msg.method === "string") {
      const kind = "id" in msg ? "request" : "notification";
      if (kind === "request") this.pending[direction].set(msg.id, msg.method);
      // Extension methods are ours to define: only the envelope is checked.
      if (msg.method.startsWith("_")) return;
      const entry =
        msg.method === "$/cancel_request"
          ? this.byMethod.get("$/cancel_request|notification")
          : this.byMethod.get(`${msg.method}|${kind}`);
      if (!entry) {
        this.report(direction, msg.method, `no ${kind} of this name in the schema`, msg);
        return;
      }
      if (entry.unstable) this.unstableFrames.push({ direction, method: msg.method });
      // x-side names who handles the method: the client handles what the agent sends, and vice versa.
      const handler = direction === "client->agent" ? "agent" : "client";
      if (entry.side !== "protocol" && entry.side !== handler) {
        this.report(direction, msg.method, `sent in the wrong direction (handled by ${entry.side})`, msg);
      }
      this.validate(entry.validate, msg.params ?? {}, direction, `${msg.method} params`, msg);
      const extra = kind === "request" ? this.unstableParams.get(msg.method) : undefined;
      const fields = extra ? Object.keys(msg.params ?? {}).filter((k) => extra.fields.has(k)) : [];
      if (fields.length) {
        this.unstableFrames.push({ direction, method: msg.method, fields });
        this.validate(extra.validate, msg.params, direction, `${msg.method} params (unstable ${fields})`, msg);
      }
      return;
    }
    if (!("id" in msg)) {
      this.report(direction, "envelope", "neither a request, a notification nor a response", msg);
      return;
    }
    const method = this.pending[other].get(msg.id);
    this.pending[other].delete(msg.id);
    if (method === undefined) {
      this.report(direction, "response", `answers unknown request id ${JSON.stringify(msg.id)}`, msg);
      return;
    }
    if ("error" in msg) {
      this.validate(this.errorValidate, msg.error, direction, `${method} error`, msg);
      return;
    }
    if (!("result" in msg)) {
      this.report(direction, "envelope", "response without result or error", msg);
      return;
    }
    if (method.startsWith("_")) return;
    const entry = this.byMethod.get(`${method}|response`);
    if (!entry) {
      this.report(direction, method, "no response schema for this method", msg);
      return;
    }
    if (entry.unstable) this.unstableFrames.push({ direction, method: `${method} result` });
    this.validate(entry.validate, msg.result, direction, `${method} result`, msg);
  }

  validate(fn, value, direction, what, frame) {
    if (!fn(value)) {
      const errors = fn.errors.slice(0, 5).map((e) => `${e.instancePath || "/"} ${e.message}`);
      this.report(direction, what, errors.join("; "), frame);
    }
  }
}
