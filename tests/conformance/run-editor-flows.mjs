// Conformance run for what an editor asks of the server beyond a plain session, on ONE server
// process, with the official ACP TypeScript SDK (2.x app API) as the client and every frame in both
// directions validated against the SDK's JSON schema (the unstable one for `systemPrompt`):
//
//   1. `systemPrompt` override on session/new, then append on session/load, each shown by
//      `/kernel status` (what the model received is checked by the pytest module on its requests);
//   2. `editor.ask` from a cell answered by the SDK client's form handler, then declined;
//   3. anchored `_session/rewind` (`beforeMessage` with the replayed id and its fingerprint) to before
//      the declined question: the variable its cell defined is gone, the one before it stays;
//   4. harness reviews as `elicitation/create` forms (the client advertises `elicitation.form`): one
//      proposal accepted with the reviewer's rewrite, the other rejected with a reason; both read
//      back through `_harness/state` (the entry's text, the rejection's tombstone and its reason);
//   5. a raw line over CONTINUAL_ACP_MAX_MESSAGE_BYTES written to the server's stdin (the SDK cannot
//      send one) is answered with the request's own id, and the server goes on serving.
//
//   node run-editor-flows.mjs PLAN.json
//
// PLAN.json (written by tests/conformance/test_conformance_editor_flows.py, which scripts the model):
//   {"agent": [...], "cwd": "/abs",
//    "systemPrompt": {"override": {text, prompt, status}, "append": {text, prompt, status}},
//    "ask": {"accept": {prompt, question, answer, expect}, "decline": {prompt, question, expect}},
//    "rewind": {"probe": {prompt, expect}},
//    "review": {prompt, next, "accept": {id, text}, "reject": {id, reason}},
//    "oversized": {limit, bytes}}
// Prints one JSON report on stdout: {ok, steps, findings, sdkErrors, frames, unstableFrames, exit}.
import { createHash } from "node:crypto";
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

const INIT = initParams({ fs: { readTextFile: false, writeTextFile: false }, terminal: false, elicitation: { form: {} } });

const fingerprint = (words) => "sha256:" + createHash("sha256").update(words, "utf8").digest("hex");

let ok = true;
const recorder = new Recorder();
const { child, stream, exited, rawRequest } = run.tappedAgent();
try {
  await run.client(recorder).connectWith(stream, async (ctx) => {
    const request = requester(ctx);
    const say = async (sessionId, words, ms = 60_000) => {
      const mark = recorder.updates.length;
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(words) }, ms);
      check(res.stopReason === "end_turn", `${words}: stopReason ${res.stopReason}`);
      return recorder.since(mark, sessionId);
    };
    /** The one cell of a prompt: its final status, and whether its output shows `expect`. */
    const cellOf = (ups, expect) => {
      const [cell] = toolCallIds(ups);
      check(cell, "no tool_call for the cell");
      check(finalStatus(ups, cell) === "completed", `cell status ${finalStatus(ups, cell)}`);
      check(mentions(ups, cell, expect), `cell output lacks ${expect}: ${JSON.stringify(ups.filter((u) => u.toolCallId === cell)).slice(-600)}`);
    };
    const kernelStatus = async (sessionId) => textOf(await say(sessionId, "/kernel status"), "agent_message_chunk");

    await step("initialize advertises systemPrompt with override", async () => {
      const init = await request(acp.methods.agent.initialize, INIT);
      const caps = init.agentCapabilities?.sessionCapabilities?.systemPrompt;
      // A client may send `systemPrompt` only when this is advertised, `override` only with its mode.
      check(caps && caps.mode?.override, `sessionCapabilities.systemPrompt ${JSON.stringify(caps)}`);
    });

    const sp = plan.systemPrompt;
    let sessionId;
    await step("systemPrompt override on session/new is in force (/kernel status)", async () => {
      const created = await request(acp.methods.agent.session.new, {
        cwd: plan.cwd,
        mcpServers: [],
        systemPrompt: { mode: "override", content: text(sp.override.text) },
      });
      sessionId = created.sessionId;
      await say(sessionId, sp.override.prompt);
      const status = await kernelStatus(sessionId);
      check(status.includes(sp.override.status), `/kernel status: ${status.slice(0, 600)}`);
      return { sessionId };
    });

    await step("systemPrompt append on session/load replaces it (/kernel status)", async () => {
      await request(acp.methods.agent.session.load, {
        sessionId,
        cwd: plan.cwd,
        mcpServers: [],
        systemPrompt: { mode: "append", content: text(sp.append.text) },
      });
      await say(sessionId, sp.append.prompt);
      const status = await kernelStatus(sessionId);
      check(status.includes(sp.append.status), `/kernel status: ${status.slice(0, 600)}`);
    });

    const ask = plan.ask;
    await step("editor.ask from a cell is answered by the client's form", async () => {
      const asked = recorder.forms.length;
      recorder.formAnswer = () => ({ action: "accept", content: { answer: ask.accept.answer } });
      cellOf(await say(sessionId, ask.accept.prompt), ask.accept.expect);
      const forms = recorder.forms.slice(asked);
      check(forms.length === 1, `${forms.length} forms`);
      const [form] = forms;
      check(form.mode === "form" && form.sessionId === sessionId && form.message === ask.accept.question, `form ${JSON.stringify(form)}`);
      const choices = form.requestedSchema.properties.answer.oneOf.map((o) => o.const);
      check(choices.includes(ask.accept.answer), `choices ${choices}`);
      return { choices };
    });

    await step("editor.ask declined by the client's form says declined in the cell", async () => {
      const asked = recorder.forms.length;
      recorder.formAnswer = () => ({ action: "decline" });
      cellOf(await say(sessionId, ask.decline.prompt), ask.decline.expect);
      check(recorder.forms.length === asked + 1, `${recorder.forms.length - asked} forms`);
      check(recorder.forms.at(-1).message === ask.decline.question, `form ${JSON.stringify(recorder.forms.at(-1))}`);
      recorder.formAnswer = null;
    });

    await step("anchored _session/rewind before the declined question removes its variable", async () => {
      // The client's message ids are the ones the replay gives (an editor that loaded the session).
      const frameMark = frames.length;
      await request(acp.methods.agent.session.load, { sessionId, cwd: plan.cwd, mcpServers: [] }, 60_000);
      const replayed = frames
        .slice(frameMark)
        .filter((f) => f.msg?.method === "session/update" && f.msg.params.sessionId === sessionId)
        .map((f) => f.msg.params.update)
        .filter((u) => u.sessionUpdate === "user_message_chunk" && u.content?.text === ask.decline.prompt);
      check(replayed.length === 1 && replayed[0].messageId, `replayed ${JSON.stringify(replayed)}`);
      const res = await request("_session/rewind", {
        sessionId,
        beforeMessage: { messageId: replayed[0].messageId, messageFingerprint: fingerprint(ask.decline.prompt) },
      });
      check(JSON.stringify(res) === JSON.stringify({ rewound: true }), `rewind ${JSON.stringify(res)}`);
      cellOf(await say(sessionId, plan.rewind.probe.prompt), plan.rewind.probe.expect);
      return { messageId: replayed[0].messageId };
    });

    const review = plan.review;
    await step("harness reviews as forms: accepted rewritten, rejected with a reason, read back by _harness/state", async () => {
      const created = await request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] });
      const sid = created.sessionId;
      const asked = recorder.forms.length;
      const permissions = recorder.permissions.length;
      recorder.formAnswer = (params) => {
        const fields = params.requestedSchema.properties;
        const title = fields.edit_0?.title ?? "";
        if (title.includes(review.accept.id)) {
          return { action: "accept", content: { edit_0: "accept", edit_0_text: review.accept.text, remember: false } };
        }
        return { action: "accept", content: { edit_0: "reject", reason: review.reject.reason, remember: false } };
      };
      const frameMark = frames.length;
      await say(sid, review.prompt);
      await say(sid, review.next); // waiting proposals are asked at the start of the next prompt
      recorder.formAnswer = null;
      const forms = recorder.forms.slice(asked);
      check(forms.length === 2, `${forms.length} review forms`);
      check(recorder.permissions.length === permissions, "a permission card was asked as well as the forms");
      for (const form of forms) {
        check(form.sessionId === sid && form.toolCallId, `form not tied to a card: ${JSON.stringify(form).slice(0, 300)}`);
        // The card is on the wire before the form that refers to it.
        const cardAt = frames.findIndex(
          (f, i) => i >= frameMark && f.msg?.method === "session/update" && f.msg.params.update.toolCallId === form.toolCallId,
        );
        const formAt = frames.findIndex(
          (f, i) => i >= frameMark && f.msg?.method === "elicitation/create" && f.msg.params.toolCallId === form.toolCallId,
        );
        check(cardAt >= 0 && cardAt < formAt, `card ${form.toolCallId} at ${cardAt}, its form at ${formAt}`);
      }
      const state = await request("_harness/state", { sessionId: sid, kind: "memory" });
      const entries = Object.fromEntries(state.entries.map((e) => [e.id, e.content]));
      check(JSON.stringify(entries) === JSON.stringify({ [review.accept.id]: review.accept.text }), `entries ${JSON.stringify(entries)}`);
      const stone = (state.tombstones ?? []).find((t) => JSON.stringify(t).includes(review.reject.reason));
      check(stone, `no tombstone with the reason: ${JSON.stringify(state.tombstones)}`);
      const status = await request("_harness/status", { sessionId: sid });
      check(status.awaitingReview === 0, `awaitingReview ${status.awaitingReview}`);
      return { entries, tombstone: stone };
    });

    await step("a raw line over the limit is answered with its request id; the server goes on", async () => {
      const id = "oversized-1";
      const pad = "x".repeat(plan.oversized.bytes);
      // The id comes before the padding, where the server reads a skipped line's head.
      const line = JSON.stringify({ jsonrpc: "2.0", id, method: acp.methods.agent.session.prompt, params: { sessionId, prompt: text(pad) } });
      check(line.length > plan.oversized.limit, `line of ${line.length} bytes is within the limit`);
      const answer = await withTimeout(rawRequest(line, id), 30_000, "the oversized line's answer");
      check(answer.id === id && answer.error?.code === -32600, `answer ${JSON.stringify(answer)}`);
      const said = `exceeds the ${plan.oversized.limit}-byte limit (CONTINUAL_ACP_MAX_MESSAGE_BYTES)`;
      check(answer.error.message.includes(said), `message ${answer.error.message}`);
      const status = await kernelStatus(sessionId);
      check(status.length > 0, "no /kernel status after the oversized line");
      return { error: answer.error };
    });

    await step("session/close both", async () => {
      const listed = await request(acp.methods.agent.session.list, { cwd: plan.cwd });
      for (const s of listed.sessions) await request(acp.methods.agent.session.close, { sessionId: s.sessionId });
      return { closed: listed.sessions.length };
    });
  });
} catch (e) {
  ok = false;
  run.failed(e);
}
await run.closeAgent(child, exited, ok);
