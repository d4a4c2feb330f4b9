// What every conformance run shares: the plan, the tapped agent process (every frame in both
// directions goes through the FrameValidator and into one ordered log), the SDK client with its
// permission and fs handlers, the update recorder, named steps, and the JSON report on stdout.
//
//   const run = new ConformanceRun();          // reads PLAN.json from argv[2]
//   const { child, stream, exited } = run.tappedAgent();
//   await run.client(recorder).connectWith(stream, async (ctx) => { await run.step("...", ...) });
//   run.finish({ ok, extra });                 // prints the report, kills leftovers, exits 0
//
// The scripts (run-session.mjs, run-subagents.mjs) hold only their own steps.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk";
import { FrameValidator } from "./frame-validator.mjs";

export const REQUEST_TIMEOUT_MS = 30_000;

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** The initialize params of a client with these capabilities. */
export function initParams(clientCapabilities) {
  return {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities,
    clientInfo: { name: "continual-acp-conformance", version: "1.0.0" },
  };
}

export const text = (t) => [{ type: "text", text: t }];
export const textOf = (updates, kind) =>
  updates.filter((u) => u.sessionUpdate === kind && u.content?.type === "text").map((u) => u.content.text).join("");
export const toolCallIds = (updates) => updates.filter((u) => u.sessionUpdate === "tool_call").map((u) => u.toolCallId);
export const finalStatus = (updates, id) =>
  updates.filter((u) => u.toolCallId === id && u.status).map((u) => u.status).at(-1);
export const mentions = (updates, id, needle) =>
  updates.filter((u) => u.toolCallId === id).some((u) => JSON.stringify(u).includes(needle));

/** Session updates as they arrive, with waiters, plus permission requests. */
export class Recorder {
  constructor() {
    this.updates = [];
    this.permissions = [];
    this.waiters = [];
    this.permissionChoice = "allow_once";
    this.permissionWaiters = [];
    // Extension notifications the client registered a handler for (`client(recorder, {extensions})`).
    this.extensions = [];
    // `elicitation/create` requests, and how to answer one: `formAnswer(params)` returns the
    // response ({action, content?}); unset, every form is declined.
    this.forms = [];
    this.formAnswer = null;
  }
  push(params) {
    this.updates.push(params);
    this.waiters = this.waiters.filter((w) => !w.test(params) || (w.resolve(params), false));
  }
  waitFor(test, ms, what) {
    const found = this.updates.find(test);
    if (found) return Promise.resolve(found);
    return withTimeout(new Promise((resolve) => this.waiters.push({ test, resolve })), ms, what);
  }
  /** Resolves once more than `count` permission requests have arrived. */
  permissionAsked(count) {
    if (this.permissions.length > count) return Promise.resolve();
    return new Promise((resolve) => this.permissionWaiters.push({ count, resolve }));
  }
  since(mark, sessionId) {
    return this.updates.slice(mark).filter((p) => p.sessionId === sessionId).map((p) => p.update);
  }
}

/** `ctx.request` bounded by a timeout that names the method. */
export function requester(ctx) {
  return (method, params, ms = REQUEST_TIMEOUT_MS) => withTimeout(ctx.request(method, params), ms, method);
}

export class ConformanceRun {
  constructor(planPath = process.argv[2]) {
    this.plan = JSON.parse(readFileSync(planPath, "utf8"));
    this.validator = new FrameValidator();
    this.steps = [];
    this.sdkErrors = [];
    // Frame log shared by both directions, so ordering (e.g. commands after the session/new response) is checkable.
    this.frames = [];
    this.children = [];
    // The SDK only logs (console.error) a notification it fails to parse; count those as failures too.
    const originalError = console.error;
    console.error = (...args) => {
      this.sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ").slice(0, 400));
      originalError(...args);
    };
  }

  async step(name, fn) {
    const t0 = performance.now();
    try {
      const detail = await fn();
      this.steps.push({ name, ok: true, ms: Math.round(performance.now() - t0), detail: detail ?? null });
      process.stderr.write(`[conformance] ok   ${name}\n`);
    } catch (e) {
      this.steps.push({ name, ok: false, ms: Math.round(performance.now() - t0), detail: String(e?.stack ?? e) });
      process.stderr.write(`[conformance] FAIL ${name}: ${e?.message ?? e}\n`);
      throw e;
    }
  }

  /** Records an error thrown outside any step (a step records its own). */
  failed(e) {
    if (!this.steps.some((s) => !s.ok)) this.steps.push({ name: "run", ok: false, ms: 0, detail: String(e?.stack ?? e) });
  }

  /** Spawns the agent and returns SDK streams that validate and log every line on the way through. */
  tappedAgent() {
    const [cmd, ...args] = this.plan.agent;
    const child = spawn(cmd, args, { cwd: this.plan.cwd, stdio: ["pipe", "pipe", "inherit"] });
    this.children.push(child);
    const encoder = new TextEncoder();
    // Answers to `rawRequest` lines, by JSON id: they go to the waiter, not to the SDK.
    const diverted = new Map();
    const record = (direction, line) => {
      if (!line.trim()) return null;
      this.validator.check(direction, line);
      let msg = null;
      try {
        msg = JSON.parse(line);
      } catch {}
      this.frames.push({ direction, msg });
      return msg;
    };
    child.stdout.setEncoding("utf8");
    let inBuf = "";
    // The SDK cancels its input when a connection closes; frames after that are still validated.
    let inputOpen = true;
    const input = new ReadableStream({
      cancel() {
        inputOpen = false;
      },
      start(controller) {
        child.stdout.on("data", (chunk) => {
          inBuf += chunk;
          let nl;
          while ((nl = inBuf.indexOf("\n")) >= 0) {
            const line = inBuf.slice(0, nl);
            inBuf = inBuf.slice(nl + 1);
            const msg = record("agent->client", line);
            const key = msg && !("method" in msg) && "id" in msg ? JSON.stringify(msg.id) : null;
            if (key !== null && diverted.has(key)) {
              diverted.get(key)(msg);
              diverted.delete(key);
              continue;
            }
            if (inputOpen) controller.enqueue(encoder.encode(line + "\n"));
          }
        });
        child.stdout.on("end", () => {
          if (inputOpen) controller.close();
          inputOpen = false;
        });
      },
    });
    const decoder = new TextDecoder();
    let outBuf = "";
    const output = new WritableStream({
      write(chunk) {
        outBuf += decoder.decode(chunk, { stream: true });
        let nl;
        while ((nl = outBuf.indexOf("\n")) >= 0) {
          record("client->agent", outBuf.slice(0, nl));
          outBuf = outBuf.slice(nl + 1);
        }
        return new Promise((resolve, reject) => child.stdin.write(chunk, (err) => (err ? reject(err) : resolve())));
      },
      close() {
        child.stdin.end();
      },
    });
    const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
    /** Writes `line` (one JSON-RPC request the SDK could not send, e.g. one over the server's line
     * limit) straight to the agent's stdin, logged and validated like any frame; resolves with the
     * agent's frame answering `id`, which is kept from the SDK (it never sent that request). Call it
     * only between SDK requests: the line must not land inside one the SDK is writing. */
    const rawRequest = (line, id) => {
      const answered = new Promise((resolve) => diverted.set(JSON.stringify(id), resolve));
      record("client->agent", line);
      child.stdin.write(line + "\n");
      return answered;
    };
    return { child, stream: acp.ndJsonStream(output, input), exited, rawRequest };
  }

  /** The SDK client: answers permission requests as `recorder.permissionChoice` says and forms as
   * `recorder.formAnswer` does, serves fs reads,
   * and handles the extension notifications named in `extensions` (recorded in `recorder.extensions`);
   * any other notification reaches the SDK unhandled, as it would in a client that never heard of it. */
  client(recorder, { extensions = [] } = {}) {
    let app = acp.client({ name: "continual-acp-conformance" });
    for (const method of extensions) {
      app = app.onNotification(
        method,
        (params) => params,
        ({ params }) => {
          recorder.extensions.push({ method, params });
        },
      );
    }
    return app
      .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
        recorder.permissions.push(params);
        for (const w of recorder.permissionWaiters.splice(0)) {
          if (recorder.permissions.length > w.count) w.resolve();
          else recorder.permissionWaiters.push(w);
        }
        // "hold": leave the request open until the test cancels the turn, as a user who walked away
        // would (`releasePermission()` answers "cancelled"), or answers late (`releasePermission(kind)`).
        if (recorder.permissionChoice === "hold") {
          return new Promise((resolve) => {
            recorder.releasePermission = (kind) => {
              const late = kind && params.options.find((o) => o.kind === kind);
              resolve(late ? { outcome: { outcome: "selected", optionId: late.optionId } } : { outcome: { outcome: "cancelled" } });
            };
          });
        }
        const option = params.options.find((o) => o.kind === recorder.permissionChoice);
        check(option, `no ${recorder.permissionChoice} option offered: ${JSON.stringify(params.options)}`);
        return { outcome: { outcome: "selected", optionId: option.optionId } };
      })
      .onRequest(acp.methods.client.elicitation.create, ({ params }) => {
        recorder.forms.push(params);
        return recorder.formAnswer ? recorder.formAnswer(params) : { action: "decline" };
      })
      .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => ({ content: readFileSync(params.path, "utf8") }))
      .onRequest(acp.methods.client.fs.writeTextFile, () => ({}))
      .onNotification(acp.methods.client.session.update, ({ params }) => recorder.push(params));
  }

  /** Ends the agent's input (how an editor quits), waits for its exit, then `finish`es: ok only if
   * the run was and the agent exited 0 (its exit is in the report). */
  async closeAgent(child, exited, ok) {
    child.stdin.end();
    const exit = await withTimeout(exited, 30_000, "agent exit after stdin EOF").catch((e) => ({ error: String(e) }));
    this.finish(ok && exit.code === 0, { exit });
  }

  /** Prints the report (ok only if `ok`, no schema finding and no SDK parse error), kills leftovers, exits 0. */
  finish(ok, extra = {}) {
    const report = {
      ok: ok && this.validator.findings.length === 0 && this.sdkErrors.length === 0,
      steps: this.steps,
      findings: this.validator.findings,
      sdkErrors: this.sdkErrors,
      frames: this.validator.counts,
      unstableFrames: this.validator.unstableFrames,
      ...extra,
    };
    process.stdout.write(JSON.stringify(report) + "\n");
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    process.exit(0);
  }
}
