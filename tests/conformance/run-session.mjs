// Conformance run: drives continual-acp through a full session with the official ACP TypeScript SDK
// (2.x "app" API) while every frame in both directions is validated against the SDK's JSON schema.
//
//   node run-session.mjs PLAN.json
//
// PLAN.json (written by tests/conformance/test_conformance.py, which also scripts the model):
//   {"agent": [cmd, ...args], "cwd": "/abs", "mcpServers": [...], "cell": {"prompt", "code", "expect"},
//    "mcp": {"prompt", "expect": [...], "asks": [...]},
//    "ask": {"prompt", "code", "expect"}, "reject": {"prompt", "marker"}, "hold": {"prompt"},
//    "cancel": {"prompt", "started"}, "slash": "/history", "remember": {"prompt"},
//    "reload": {"prompt", "expect": [...]},   (after session/load, in a new agent process)
//    "variants": {"first": VARIANT, "second": VARIANT}, "refine": {"prompt"}, "compact": {"summary"},
//    "notice": {"prompt", "title", "description", "reply"},
//    "timeline": {"prompts": [{prompt, code}] x3, "probe": {prompt, before, after}, "steer": {prompt, text, reply}}}
// VARIANT says which client each connection plays (the second loads the first's session):
//   "opted-in": opts in to `_harness/quiescence` (clientCapabilities._meta["continual-acp"]) and
//               advertises `session.notices` and `session.compaction`;
//   "plain":    none of them (the session_info_update mirror, agent-message and `/compact` fallbacks).
// Both run the same extension steps (a `/refine`, `/compact`, a notice) and check what their variant
// must and must not receive.
// Prints one JSON report on stdout: {ok, steps: [{name, ok, ms, detail}], findings, frames, cancelMs}.
// Progress and the agent's stderr go to stderr.
import * as acp from "@agentclientprotocol/sdk";
import {
  ConformanceRun,
  Recorder,
  check,
  finalStatus,
  initParams,
  mentions,
  requester,
  text,
  textOf,
  toolCallIds,
  withTimeout,
} from "./conformance-kit.mjs";

const run = new ConformanceRun();
const { plan, frames } = run;
const step = run.step.bind(run);
let cancelMs = null;

const CANCEL_LIMIT_MS = 2_000;

const BASE_CAPS = { fs: { readTextFile: true, writeTextFile: true }, terminal: false };
const VARIANTS = {
  "opted-in": {
    quiescence: true,
    notices: true,
    compaction: true,
    init: initParams({
      ...BASE_CAPS,
      session: { notices: {}, compaction: {} },
      _meta: { terminal_output: true, "continual-acp": { quiescence: true } },
    }),
  },
  plain: {
    quiescence: false,
    notices: false,
    compaction: false,
    init: initParams({ ...BASE_CAPS, _meta: { terminal_output: true } }),
  },
};
const variantOf = (which) => {
  const v = VARIANTS[plan.variants?.[which] ?? "plain"];
  check(v, `unknown variant ${plan.variants?.[which]} for the ${which} connection`);
  return { name: plan.variants?.[which] ?? "plain", ...v };
};
const QUIESCENCE = "_harness/quiescence";

/** Agent->client frames since `mark` that are `_harness/quiescence` notifications for `sessionId`. */
const quiescenceNotifications = (mark, sessionId) =>
  frames
    .slice(mark)
    .filter((f) => f.direction === "agent->client" && f.msg?.method === QUIESCENCE && f.msg.params?.sessionId === sessionId)
    .map((f) => f.msg.params);
/** The `_meta["continual-acp"].quiescence` of each session_info_update mirror since `mark`. */
const quiescenceMirrors = (mark, sessionId) =>
  frames
    .slice(mark)
    .filter(
      (f) =>
        f.msg?.method === "session/update" &&
        f.msg.params.sessionId === sessionId &&
        f.msg.params.update.sessionUpdate === "session_info_update",
    )
    .map((f) => f.msg.params.update._meta?.["continual-acp"]?.quiescence)
    .filter(Boolean);

/** What each variant of client must (and must not) receive: quiescence, notices, compaction. */
async function extensionSteps(request, recorder, sessionId, variant) {
  const v = variant.name;

  await step(`${v}: /refine settles; ${variant.quiescence ? "_harness/quiescence and" : "only"} the session_info_update mirror`, async () => {
    const frameMark = frames.length;
    const heard = recorder.extensions.length;
    const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.refine.prompt) }, 60_000);
    check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    const settled = await request("_harness/await_quiescence", { sessionId, timeoutMs: 30_000 }, 40_000);
    check(settled.quiescent === true, `await_quiescence ${JSON.stringify(settled)}`);
    const sent = quiescenceNotifications(frameMark, sessionId);
    if (variant.quiescence) {
      check(sent.length > 0, "an opted-in client got no _harness/quiescence");
      check(sent.at(-1).quiescent === true, `last _harness/quiescence ${JSON.stringify(sent.at(-1))}`);
      const handled = recorder.extensions.slice(heard).filter((n) => n.method === QUIESCENCE);
      check(handled.length === sent.length, `the SDK client handled ${handled.length} of ${sent.length} notifications`);
    } else {
      check(sent.length === 0, `a client that did not opt in got ${sent.length} _harness/quiescence`);
    }
    const mirrors = quiescenceMirrors(frameMark, sessionId);
    check(mirrors.some((m) => m.quiescent === false), `no busy mirror: ${JSON.stringify(mirrors)}`);
    check(mirrors.at(-1)?.quiescent === true, `last mirror ${JSON.stringify(mirrors.at(-1))}`);
    check(Array.isArray(mirrors.at(-1).background) && mirrors.at(-1).background.length === 0, "settled mirror lists background work");
    return { notifications: sent.length, mirrors: mirrors.length };
  });

  await step(`${v}: /compact ${variant.compaction ? "sends compaction updates" : "answers with its message and no compaction update"}`, async () => {
    const mark = recorder.updates.length;
    const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text("/compact") }, 60_000);
    check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    const ups = recorder.since(mark, sessionId);
    const shown = ups.filter((u) => u.sessionUpdate.startsWith("compaction_"));
    const reply = textOf(ups, "agent_message_chunk");
    if (variant.compaction) {
      const kinds = shown.map((u) => u.sessionUpdate);
      check(
        JSON.stringify(kinds) === JSON.stringify(["compaction_update", "compaction_summary_chunk", "compaction_update"]),
        `compaction updates ${kinds}`,
      );
      check(shown[0].status === "in_progress" && shown[2].status === "completed", `statuses ${shown.map((u) => u.status)}`);
      check(new Set(shown.map((u) => u.compactionId)).size === 1, "more than one compactionId");
      check(shown[1].content?.text?.includes(plan.compact.summary), "the summary chunk lacks the summary");
    } else {
      check(shown.length === 0, `a client without session.compaction got ${shown.map((u) => u.sessionUpdate)}`);
      check(reply.trim().startsWith("Context compacted."), `/compact reply: ${reply.slice(0, 200)}`);
    }
    return { updates: shown.length, reply: reply.trim().slice(0, 120) };
  });

  await step(`${v}: ${variant.notices ? "a notice" : "an agent message, no notice,"} when the endpoint refuses tools`, async () => {
    const mark = recorder.updates.length;
    const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.notice.prompt) }, 60_000);
    check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    const ups = recorder.since(mark, sessionId);
    const notices = ups.filter((u) => u.sessionUpdate === "notice");
    const said = textOf(ups, "agent_message_chunk");
    check(said.includes(plan.notice.reply), `the answer is missing: ${said.slice(0, 300)}`);
    if (variant.notices) {
      check(notices.length === 1, `${notices.length} notices`);
      check(notices[0].title === plan.notice.title && notices[0].severity === "info", `notice ${JSON.stringify(notices[0])}`);
      check(!said.includes(plan.notice.description), "a client with notices also got the notice as a message");
    } else {
      check(notices.length === 0, `a client without session.notices got ${notices.length} notices`);
      check(said.includes(`${plan.notice.title}: ${plan.notice.description}`), `no fallback message: ${said.slice(0, 300)}`);
    }
    return { notices: notices.length };
  });
}

/** Replayed user prompts of a session/load of `sessionId` (the frames before its answer). */
async function loadReplay(request, sessionId) {
  const frameMark = frames.length;
  await request(acp.methods.agent.session.load, { sessionId, cwd: plan.cwd, mcpServers: [] }, 60_000);
  const answered = frames.findIndex((f, i) => i >= frameMark && f.direction === "agent->client" && "result" in (f.msg ?? {}) && !f.msg.method);
  return frames
    .slice(frameMark, answered)
    .filter((f) => f.msg?.method === "session/update" && f.msg.params.sessionId === sessionId)
    .map((f) => f.msg.params.update)
    .filter((u) => u.sessionUpdate === "user_message_chunk")
    .map((u) => u.content.text);
}

/** Rewind, fork and steering through the SDK client, on a session of their own. */
async function timelineSteps(request, recorder) {
  const t = plan.timeline;
  let sessionId;
  let forkId;
  const probe = async (sid) => {
    const mark = recorder.updates.length;
    const res = await request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: text(t.probe.prompt) }, 60_000);
    check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    const ups = recorder.since(mark, sid);
    const [cell] = toolCallIds(ups);
    return JSON.stringify(ups.filter((u) => u.toolCallId === cell));
  };
  await step("timeline: three prompts each set a variable", async () => {
    const created = await request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] });
    sessionId = created.sessionId;
    for (const p of t.prompts) {
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(p.prompt) }, 60_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    }
    return { sessionId };
  });
  await step("timeline: session/fork after the third prompt answers a new id", async () => {
    const res = await request("session/fork", { sessionId, cwd: plan.cwd, mcpServers: [] }, 60_000);
    forkId = res.sessionId;
    check(forkId && forkId !== sessionId, `fork id ${forkId}`);
    check(res._meta?.["continual-acp"]?.forkedFrom === sessionId, `fork _meta ${JSON.stringify(res._meta)}`);
    return { kernel: res._meta["continual-acp"].kernel };
  });
  await step("timeline: _session/rewind to the second prompt removes the third prompt's variable", async () => {
    const res = await request("_session/rewind", { sessionId, turns: 1 }, 60_000);
    check(res.rewound === true && res.turn === 3, `rewind ${JSON.stringify(res)}`);
    check(res.kernel.removed.includes(t.probe.gone), `removed ${res.kernel.removed}`);
    const shown = await probe(sessionId);
    check(shown.includes(t.probe.before), `after the rewind the kernel shows ${shown}`);
    return { removed: res.kernel.removed };
  });
  await step("timeline: loading the fork replays the third prompt and its kernel has the variable back", async () => {
    const replayed = await loadReplay(request, forkId);
    check(replayed.includes(t.prompts[2].prompt), `fork replay ${JSON.stringify(replayed)}`);
    const shown = await probe(forkId);
    check(shown.includes(t.probe.after), `the fork's kernel shows ${shown}`);
    return { replayed };
  });
  await step("timeline: _session/steer enters the running turn at its next request; a reload replays it in order", async () => {
    await request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "mode", value: "ask" });
    recorder.permissionChoice = "hold";
    const asked = recorder.permissions.length;
    const pending = request(acp.methods.agent.session.prompt, { sessionId, prompt: text(t.steer.prompt) }, 60_000);
    await withTimeout(recorder.permissionAsked(asked), 30_000, "the permission request");
    // The turn waits for this answer: the steering is sent before it, so it is there at the next request.
    const steered = request("_session/steer", { sessionId, prompt: text(t.steer.text) }, 60_000);
    recorder.permissionChoice = "allow_once";
    recorder.releasePermission("allow_once");
    const entered = await steered;
    const res = await pending;
    check(entered.entered === true, `steer answer ${JSON.stringify(entered)}`);
    check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
    await request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "mode", value: "auto" });
    const replayed = await loadReplay(request, sessionId);
    const at = replayed.indexOf(t.steer.prompt);
    check(at >= 0 && replayed[at + 1] === t.steer.text, `replayed prompts ${JSON.stringify(replayed)}`);
    return { replayed };
  });
}

async function firstConnection(recorder) {
  const variant = variantOf("first");
  const { child, stream, exited } = run.tappedAgent();
  let sessionId;
  let configOptions;
  await run.client(recorder, { extensions: variant.quiescence ? [QUIESCENCE] : [] }).connectWith(stream, async (ctx) => {
    const request = requester(ctx);

    await step("initialize", async () => {
      const init = await request(acp.methods.agent.initialize, variant.init);
      check(init.protocolVersion === 1, `protocolVersion ${init.protocolVersion}`);
      check(init.agentCapabilities?.loadSession === true, "loadSession not advertised");
      check(init.agentCapabilities?.sessionCapabilities?.list, "session list not advertised");
      const mcpCaps = init.agentCapabilities?.mcpCapabilities;
      check(mcpCaps?.http === true, `mcpCapabilities ${JSON.stringify(mcpCaps)}: http not advertised`);
      return { agentInfo: init.agentInfo };
    });

    await step("session/new and commands advertised after the response", async () => {
      const created = await request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: plan.mcpServers });
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

    await step("a cell calls tools of the MCP servers given in session/new; a destructive one asks first", async () => {
      const mark = recorder.updates.length;
      const asked = recorder.permissions.length;
      recorder.permissionChoice = "allow_once";
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.mcp.prompt) }, 90_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      // auto mode: the cell itself is not asked about, only the tool its server marks destructive.
      const requests = recorder.permissions.slice(asked);
      check(requests.length === 1, `${requests.length} permission requests`);
      const ask = JSON.stringify(requests[0].toolCall);
      for (const needle of plan.mcp.asks) check(ask.includes(needle), `the permission request lacks ${needle}: ${ask}`);
      const ups = recorder.since(mark, sessionId);
      const cell = toolCallIds(ups).find((id) => id !== requests[0].toolCall.toolCallId);
      check(cell, "no tool_call for the cell");
      check(finalStatus(ups, cell) === "completed", `cell status ${finalStatus(ups, cell)}`);
      for (const needle of plan.mcp.expect) check(mentions(ups, cell, needle), `cell output ${needle} not streamed`);
      return { asked: requests[0].toolCall.title };
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

    await extensionSteps(request, recorder, sessionId, variant);

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
  const variant = variantOf("second");
  const { child, stream, exited } = run.tappedAgent();
  await run.client(recorder, { extensions: variant.quiescence ? [QUIESCENCE] : [] }).connectWith(stream, async (ctx) => {
    const request = requester(ctx);
    await step("initialize (new process)", async () => {
      await request(acp.methods.agent.initialize, variant.init);
    });
    await step("session/load replays the transcript before answering", async () => {
      const mark = recorder.updates.length;
      const frameMark = frames.length;
      await request(acp.methods.agent.session.load, { sessionId, cwd: plan.cwd, mcpServers: plan.mcpServers }, 60_000);
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
    await step("after session/load a cell calls tools of the MCP servers given in the load", async () => {
      const mark = recorder.updates.length;
      const asked = recorder.permissions.length;
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.reload.prompt) }, 90_000);
      check(res.stopReason === "end_turn", `stopReason ${res.stopReason}`);
      check(recorder.permissions.length === asked, "a tool not marked destructive was asked about");
      const ups = recorder.since(mark, sessionId);
      const [cell] = toolCallIds(ups);
      check(cell, "no tool_call for the cell");
      check(finalStatus(ups, cell) === "completed", `cell status ${finalStatus(ups, cell)}`);
      for (const needle of plan.reload.expect) check(mentions(ups, cell, needle), `cell output ${needle} not streamed`);
    });
    await extensionSteps(request, recorder, sessionId, variant);
    if (plan.timeline) await timelineSteps(request, recorder);
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
  run.failed(e);
}
run.finish(ok, { cancelMs, exits });
