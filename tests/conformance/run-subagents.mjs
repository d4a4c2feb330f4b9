// Conformance run for subagents: the official ACP TypeScript SDK (2.x app API) drives continual-acp
// while every frame in both directions is validated against the SDK's JSON schema. A parent prompt
// spawns a child from a cell; the client must see the child's card in the parent's thread follow it to
// `completed` with the child's answer and `_meta["continual-acp"].subagent`, and `session/list` must
// name the child's parent.
//
//   node run-subagents.mjs PLAN.json
//
// PLAN.json (written by tests/conformance/test_conformance_subagents.py, which scripts the model):
//   {"agent": [cmd, ...args], "cwd": "/abs", "prompt": "...", "child": "name", "answer": "..."}
// Prints one JSON report on stdout: {ok, steps, findings, sdkErrors, frames}.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk";
import { FrameValidator } from "./frame-validator.mjs";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const validator = new FrameValidator();
const steps = [];
const sdkErrors = [];

const originalError = console.error;
console.error = (...args) => {
  sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ").slice(0, 400));
  originalError(...args);
};

const REQUEST_TIMEOUT_MS = 30_000;

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function step(name, fn) {
  const t0 = performance.now();
  try {
    const detail = await fn();
    steps.push({ name, ok: true, ms: Math.round(performance.now() - t0), detail: detail ?? null });
    process.stderr.write(`[conformance] ok   ${name}\n`);
  } catch (e) {
    steps.push({ name, ok: false, ms: Math.round(performance.now() - t0), detail: String(e?.stack ?? e) });
    process.stderr.write(`[conformance] FAIL ${name}: ${e?.message ?? e}\n`);
    throw e;
  }
}

// Frame log shared by both directions, so ordering (e.g. commands after the session/new response) is checkable.
const frames = [];

/** Spawns the agent and returns SDK streams that validate and log every line on the way through. */
const children = [];

function tappedAgent() {
  const [cmd, ...args] = plan.agent;
  const child = spawn(cmd, args, { cwd: plan.cwd, stdio: ["pipe", "pipe", "inherit"] });
  children.push(child);
  const encoder = new TextEncoder();
  const record = (direction, line) => {
    if (!line.trim()) return;
    validator.check(direction, line);
    let msg = null;
    try {
      msg = JSON.parse(line);
    } catch {}
    frames.push({ direction, msg });
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
      child.stdout.on("data", (text) => {
        inBuf += text;
        let nl;
        while ((nl = inBuf.indexOf("\n")) >= 0) {
          const line = inBuf.slice(0, nl);
          inBuf = inBuf.slice(nl + 1);
          record("agent->client", line);
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
  return { child, stream: acp.ndJsonStream(output, input), exited };
}

/** Session updates as they arrive, with waiters, plus permission requests. */
class Recorder {
  constructor() {
    this.updates = [];
    this.permissions = [];
    this.waiters = [];
    this.permissionChoice = "allow_once";
    this.permissionWaiters = [];
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

function buildClient(recorder) {
  return acp
    .client({ name: "continual-acp-conformance" })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      recorder.permissions.push(params);
      for (const w of recorder.permissionWaiters.splice(0)) {
        if (recorder.permissions.length > w.count) w.resolve();
        else recorder.permissionWaiters.push(w);
      }
      // "hold": leave the request open until the test cancels the turn, as a user who walked away would.
      if (recorder.permissionChoice === "hold") {
        return new Promise((resolve) => {
          recorder.releasePermission = () => resolve({ outcome: { outcome: "cancelled" } });
        });
      }
      const option = params.options.find((o) => o.kind === recorder.permissionChoice);
      check(option, `no ${recorder.permissionChoice} option offered: ${JSON.stringify(params.options)}`);
      return { outcome: { outcome: "selected", optionId: option.optionId } };
    })
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => ({ content: readFileSync(params.path, "utf8") }))
    .onRequest(acp.methods.client.fs.writeTextFile, () => ({}))
    .onNotification(acp.methods.client.session.update, ({ params }) => recorder.push(params));
}

const INIT = {
  protocolVersion: acp.PROTOCOL_VERSION,
  clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  clientInfo: { name: "continual-acp-conformance", version: "1.0.0" },
};

const isCard = (u) => typeof u.toolCallId === "string" && u.toolCallId.startsWith("subagent-");

let ok = true;
const recorder = new Recorder();
const { child, stream, exited } = tappedAgent();
try {
  await buildClient(recorder).connectWith(stream, async (ctx) => {
    const request = (method, params, ms = REQUEST_TIMEOUT_MS) => withTimeout(ctx.request(method, params), ms, method);
    let sessionId;
    await step("initialize and session/new", async () => {
      await request(acp.methods.agent.initialize, INIT);
      sessionId = (await request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] })).sessionId;
    });
    await step("the parent's prompt spawns a child and collects its answer", async () => {
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: plan.prompt }] }, 90_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    });
    let childId;
    await step("a subagent card in the parent's thread follows the child to completed with its answer", async () => {
      const done = await recorder.waitFor(
        (p) => p.sessionId === sessionId && isCard(p.update) && p.update.status === "completed",
        30_000,
        "completed subagent card",
      );
      const card = recorder.updates.filter((p) => p.sessionId === sessionId && isCard(p.update)).map((p) => p.update);
      check(card[0].sessionUpdate === "tool_call", `first card update is ${card[0].sessionUpdate}`);
      const meta = done.update._meta?.["continual-acp"]?.subagent;
      check(meta && meta.name === plan.child && meta.state === "finished" && meta.parentSessionId === sessionId, `meta ${JSON.stringify(meta)}`);
      check(JSON.stringify(done.update.content).includes(plan.answer), "the card does not end with the child's answer");
      childId = meta.sessionId;
      return { states: card.map((u) => u._meta?.["continual-acp"]?.subagent?.state) };
    });
    await step("session/list names the child's parent in _meta", async () => {
      const listed = await request(acp.methods.agent.session.list, { cwd: plan.cwd });
      const entry = listed.sessions.find((s) => s.sessionId === childId);
      check(entry, "the child session is not listed");
      check(entry._meta?.["continual-acp"]?.parentSessionId === sessionId, `child _meta ${JSON.stringify(entry._meta)}`);
    });
  });
} catch (e) {
  ok = false;
  if (!steps.some((s) => !s.ok)) steps.push({ name: "run", ok: false, ms: 0, detail: String(e?.stack ?? e) });
}
child.stdin.end();
const exit = await withTimeout(exited, 30_000, "agent exit after stdin EOF").catch((e) => ({ error: String(e) }));
const report = {
  ok: ok && validator.findings.length === 0 && sdkErrors.length === 0 && exit.code === 0,
  steps,
  findings: validator.findings,
  sdkErrors,
  frames: validator.counts,
  exit,
};
process.stdout.write(JSON.stringify(report) + "\n");
for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
process.exit(0);
