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
import * as acp from "@agentclientprotocol/sdk";
import { ConformanceRun, Recorder, check, initParams, requester, text, withTimeout } from "./conformance-kit.mjs";

const run = new ConformanceRun();
const { plan } = run;
const step = run.step.bind(run);

const INIT = initParams({ fs: { readTextFile: false, writeTextFile: false }, terminal: false });

const isCard = (u) => typeof u.toolCallId === "string" && u.toolCallId.startsWith("subagent-");

let ok = true;
const recorder = new Recorder();
const { child, stream, exited } = run.tappedAgent();
try {
  await run.client(recorder).connectWith(stream, async (ctx) => {
    const request = requester(ctx);
    let sessionId;
    await step("initialize and session/new", async () => {
      await request(acp.methods.agent.initialize, INIT);
      sessionId = (await request(acp.methods.agent.session.new, { cwd: plan.cwd, mcpServers: [] })).sessionId;
    });
    await step("the parent's prompt spawns a child and collects its answer", async () => {
      const res = await request(acp.methods.agent.session.prompt, { sessionId, prompt: text(plan.prompt) }, 90_000);
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
  run.failed(e);
}
await run.closeAgent(child, exited, ok);
