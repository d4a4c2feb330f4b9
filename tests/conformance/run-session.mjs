// Conformance run: drives continual-acp through a full session with the official ACP TypeScript SDK
// (2.x "app" API) while every frame in both directions is validated against the SDK's JSON schema.
//
//   node run-session.mjs PLAN.json
//
// PLAN.json (written by tests/conformance/test_conformance.py, which also scripts the model):
//   {"agent": [cmd, ...args], "cwd": "/abs", "cell": {"prompt", "code", "expect"},
//    "ask": {"prompt", "code", "expect"}, "reject": {"prompt", "marker"}, "hold": {"prompt"},
//    "cancel": {"prompt", "started"}, "slash": "/history", "remember": {"prompt"}}
// Prints one JSON report on stdout: {ok, steps: [{name, ok, ms, detail}], findings, frames, cancelMs}.
// Progress and the agent's stderr go to stderr.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as acp from "@agentclientprotocol/sdk";
import { FrameValidator } from "./frame-validator.mjs";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const validator = new FrameValidator();
const steps = [];
const sdkErrors = [];
let cancelMs = null;

// The SDK only logs (console.error) a notification it fails to parse; count those as failures too.
const originalError = console.error;
console.error = (...args) => {
  sdkErrors.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ").slice(0, 400));
  originalError(...args);
};

const REQUEST_TIMEOUT_MS = 30_000;
const CANCEL_LIMIT_MS = 2_000;

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
  clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false, _meta: { terminal_output: true } },
  clientInfo: { name: "continual-acp-conformance", version: "1.0.0" },
};

const text = (t) => [{ type: "text", text: t }];
const textOf = (updates, kind) =>
  updates.filter((u) => u.sessionUpdate === kind && u.content?.type === "text").map((u) => u.content.text).join("");
const toolCallIds = (updates) => updates.filter((u) => u.sessionUpdate === "tool_call").map((u) => u.toolCallId);
const finalStatus = (updates, id) =>
  updates.filter((u) => u.toolCallId === id && u.status).map((u) => u.status).at(-1);
const mentions = (updates, id, needle) =>
  updates.filter((u) => u.toolCallId === id).some((u) => JSON.stringify(u).includes(needle));
const responseIndex = (id) => frames.findIndex((f) => f.direction === "agent->client" && f.msg?.id === id && !f.msg?.method);

async function firstConnection(recorder) {
  const { child, stream, exited } = tappedAgent();
  let sessionId;
  let configOptions;
  await buildClient(recorder).connectWith(stream, async (ctx) => {
    const request = (method, params, ms = REQUEST_TIMEOUT_MS) => withTimeout(ctx.request(method, params), ms, method);

    await step("initialize", async () => {
      const init = await request(acp.methods.agent.initialize, INIT);
      check(init.protocolVersion === 1, `protocolVersion ${init.protocolVersion}`);
      check(init.agentCapabilities?.loadSession === true, "loadSession not advertised");
      check(init.agentCapabilities?.sessionCapabilities?.list, "session list not advertised");
      return { agentInfo: init.agentInfo };
    });

    await step("session/new and commands advertised after the response", async () => {
      const created = await request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] });
      sessionId = created.sessionId;
      configOptions = created.configOptions ?? [];
      const ids = configOptions.map((o) => o.id);
      for (const id of ["mode", "model", "refine_review"]) check(ids.includes(id), `config option ${id} missing: ${ids}`);
      const cmds = await recorder.waitFor(
        (p) => p.sessionId === sessionId && p.update.sessionUpdate === "available_commands_update",
        10_000,
        "available_commands_update",
      );
      const names = cmds.update.availableCommands.map((c) => c.name);
      for (const n of ["history", "harness", "rollback", "undo", "kernel", "compact"]) check(names.includes(n), `/${n} not advertised`);
      const newResponse = frames.findIndex((f) => f.direction === "agent->client" && f.msg?.result?.sessionId === sessionId);
      const firstCommands = frames.findIndex(
        (f) => f.msg?.params?.sessionId === sessionId && f.msg?.params?.update?.sessionUpdate === "available_commands_update",
      );
      check(newResponse >= 0 && firstCommands > newResponse, "available_commands_update was sent before the session/new response");
      return { sessionId, commands: names };
    });

    await step("prompt runs a cell shown as a live tool call", async () => {
      const mark = recorder.updates.length;
      const frameMark = frames.length;
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.cell.prompt) }, 60_000);
      // Every update of the turn precedes the prompt response on the wire.
      const responseAt = frames.findIndex(
        (f, i) => i >= frameMark && f.direction === "agent->client" && f.msg?.result?.stopReason !== undefined,
      );
      const turnKinds = ["tool_call", "tool_call_update", "agent_message_chunk", "agent_thought_chunk", "plan"];
      const lastUpdateAt = frames.findLastIndex(
        (f) =>
          f.msg?.method === "session/update" &&
          f.msg.params.sessionId === sessionId &&
          turnKinds.includes(f.msg.params.update.sessionUpdate),
      );
      check(responseAt > frameMark && lastUpdateAt < responseAt, "a session/update of the turn came after the prompt response");
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      const ups = recorder.since(mark, sessionId);
      const [id] = toolCallIds(ups);
      check(id, "no tool_call for the cell");
      const start = ups.find((u) => u.sessionUpdate === "tool_call");
      check(start.kind === "execute", `tool_call kind ${start.kind}`);
      check(JSON.stringify(start).includes(plan.cell.code.split("\n")[0]), "the cell's code is not visible in the tool call");
      check(finalStatus(ups, id) === "completed", `cell status ${finalStatus(ups, id)}`);
      check(mentions(ups, id, plan.cell.expect), `cell output ${plan.cell.expect} not streamed`);
      check(textOf(ups, "agent_message_chunk").length > 0, "no agent_message_chunk");
      return { title: start.title, updates: ups.length };
    });

    await step("set_config_option mode=ask returns the full list", async () => {
      const res = await request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "mode", value: "ask" });
      const ids = res.configOptions.map((o) => o.id);
      check(ids.length === configOptions.length, `got ${ids} back, expected all of ${configOptions.map((o) => o.id)}`);
      const mode = res.configOptions.find((o) => o.id === "mode");
      check(mode.currentValue === "ask", `mode is ${mode.currentValue}`);
      return { ids };
    });

    await step("ask mode asks permission before the cell", async () => {
      const mark = recorder.updates.length;
      const asked = recorder.permissions.length;
      recorder.permissionChoice = "allow_once";
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.ask.prompt) }, 60_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      const requests = recorder.permissions.slice(asked);
      check(requests.length === 1, `${requests.length} permission requests`);
      const kinds = requests[0].options.map((o) => o.kind);
      for (const k of ["allow_once", "allow_always", "reject_once"]) check(kinds.includes(k), `option ${k} missing: ${kinds}`);
      const ups = recorder.since(mark, sessionId);
      const [id] = toolCallIds(ups);
      check(id === requests[0].toolCall.toolCallId, "permission asked for a different tool call");
      check(finalStatus(ups, id) === "completed", `cell status ${finalStatus(ups, id)}`);
      check(mentions(ups, id, plan.ask.expect), `cell output ${plan.ask.expect} not streamed`);
      return { options: kinds };
    });

    await step("ask mode: a rejected cell does not run", async () => {
      const mark = recorder.updates.length;
      const asked = recorder.permissions.length;
      recorder.permissionChoice = "reject_once";
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.reject.prompt) }, 60_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      check(recorder.permissions.length === asked + 1, "no permission request for the rejected cell");
      const ups = recorder.since(mark, sessionId);
      const [id] = toolCallIds(ups);
      check(!ups.some((u) => JSON.stringify(u).includes(plan.reject.marker)), "the rejected cell ran (its output streamed)");
      return { cellStatus: id ? finalStatus(ups, id) : "no tool call shown" };
    });

    await step("cancel while a permission request is pending answers cancelled within 2 s", async () => {
      recorder.permissionChoice = "hold";
      const asked = recorder.permissions.length;
      const pending = request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.hold.prompt) }, 60_000);
      await withTimeout(recorder.permissionAsked(asked), 30_000, "the permission request");
      const t0 = performance.now();
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      // The protocol asks the client to answer pending permission requests with "cancelled" too.
      recorder.releasePermission();
      const res = await pending;
      const ms = Math.round(performance.now() - t0);
      check(res.stopReason === "cancelled", `stopReason ${res.stopReason}`);
      check(ms <= CANCEL_LIMIT_MS, `cancel took ${ms} ms`);
      recorder.permissionChoice = "allow_once";
      return { ms };
    });

    await step("set_mode back to auto", async () => {
      await request(acp.methods.agent.session.setMode, { sessionId, modeId: "auto" });
    });

    await step("cancel mid-cell answers cancelled within 2 s", async () => {
      const mark = recorder.updates.length;
      const pending = request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.cancel.prompt) }, 60_000);
      await recorder.waitFor(
        (p) => recorder.updates.indexOf(p) >= mark && p.sessionId === sessionId && JSON.stringify(p.update).includes(plan.cancel.started),
        30_000,
        "the long cell's first output",
      );
      const t0 = performance.now();
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      const res = await pending;
      cancelMs = Math.round(performance.now() - t0);
      check(res.stopReason === "cancelled", `stopReason ${res.stopReason}`);
      check(cancelMs <= CANCEL_LIMIT_MS, `cancel took ${cancelMs} ms`);
      const ups = recorder.since(mark, sessionId);
      const [id] = toolCallIds(ups);
      const status = finalStatus(ups, id);
      check(status !== "in_progress" && status !== "pending", `cancelled cell left ${status}`);
      return { cancelMs, cellStatus: status };
    });

    await step("slash command replies with text", async () => {
      const mark = recorder.updates.length;
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.slash) });
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      const reply = textOf(recorder.since(mark, sessionId), "agent_message_chunk");
      check(reply.trim().length > 0, "no reply text");
      return { reply: reply.slice(0, 300) };
    });

    await step("a harness edit from a cell is shown as an edit card and /undo rolls it back", async () => {
      let mark = recorder.updates.length;
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.remember.prompt) }, 60_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      const ups = recorder.since(mark, sessionId);
      const card = ups.find((u) => u.sessionUpdate === "tool_call" && u.kind === "edit");
      check(card, "no edit card for the harness refinement");
      check((card.content ?? []).some((c) => c.type === "diff"), "the edit card has no diff");
      const id = card.rawOutput?.refinementId ?? (card.title.match(/r-[\w-]+/) ?? [])[0];
      mark = recorder.updates.length;
      const undo = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text("/undo") });
      check(undo.stopReason === "end_turn", `stopReason ${undo.stopReason}`);
      const reply = textOf(recorder.since(mark, sessionId), "agent_message_chunk");
      check(reply.includes("Rolled back") && (!id || reply.includes(id)), `unexpected /undo reply: ${reply}`);
      return { card: card.title, reply: reply.slice(0, 200) };
    });

    await step("session/list finds the session", async () => {
      const res = await request(acp.methods.agent.session.list, { cwd: plan.cwd });
      const mine = res.sessions.find((s) => s.sessionId === sessionId);
      check(mine, `session ${sessionId} not listed`);
      check(mine.cwd === plan.cwd, `listed cwd ${mine.cwd}`);
      return { listed: res.sessions.length };
    });

    await step("session/close", async () => {
      await request(acp.methods.agent.session.close, { sessionId });
    });
  });
  // Closing stdin is how an editor says goodbye: the agent must shut down and exit 0.
  child.stdin.end();
  return { sessionId, exited };
}

async function secondConnection(recorder, sessionId) {
  const { child, stream, exited } = tappedAgent();
  await buildClient(recorder).connectWith(stream, async (ctx) => {
    const request = (method, params, ms = REQUEST_TIMEOUT_MS) => withTimeout(ctx.request(method, params), ms, method);
    await step("initialize (new process)", async () => {
      await request(acp.methods.agent.initialize, INIT);
    });
    await step("session/load replays the transcript before answering", async () => {
      const mark = recorder.updates.length;
      const frameMark = frames.length;
      await request(acp.methods.agent.session.load, { sessionId, cwd: plan.cwd, mcpServers: [] }, 60_000);
      const loadResponse = frames.findIndex(
        (f, i) => i >= frameMark && f.direction === "agent->client" && "result" in (f.msg ?? {}) && !f.msg.method,
      );
      const replayed = frames
        .slice(frameMark, loadResponse)
        .filter((f) => f.msg?.method === "session/update" && f.msg.params.sessionId === sessionId)
        .map((f) => f.msg.params.update);
      check(textOf(replayed, "user_message_chunk").includes(plan.cell.prompt), "first prompt not replayed before the response");
      const [id] = toolCallIds(replayed);
      check(id, "no tool call replayed");
      check(mentions(replayed, id, plan.cell.expect), "replayed tool call lacks its output");
      check(textOf(replayed, "agent_message_chunk").length > 0, "agent messages not replayed");
      const after = recorder.since(mark, sessionId);
      return { replayed: replayed.length, updatesSeen: after.length };
    });
  });
  child.stdin.end();
  return { exited };
}

let ok = true;
const exits = [];
try {
  const recorder = new Recorder();
  const first = await firstConnection(recorder);
  exits.push(await withTimeout(first.exited, 30_000, "first agent exit after stdin EOF"));
  const second = await secondConnection(new Recorder(), first.sessionId);
  exits.push(await withTimeout(second.exited, 30_000, "second agent exit after stdin EOF"));
  await step("agent exits 0 on stdin EOF", async () => {
    check(exits.every((e) => e.code === 0), `exits ${JSON.stringify(exits)}`);
  });
} catch (e) {
  ok = false;
  if (!steps.some((s) => !s.ok)) steps.push({ name: "run", ok: false, ms: 0, detail: String(e?.stack ?? e) });
}

const report = {
  ok: ok && validator.findings.length === 0 && sdkErrors.length === 0,
  steps,
  findings: validator.findings,
  sdkErrors,
  frames: validator.counts,
  cancelMs,
  exits,
};
process.stdout.write(JSON.stringify(report) + "\n");
for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
process.exit(0);
