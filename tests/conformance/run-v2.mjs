// Conformance run for the ACP v2 draft: the official SDK's v2 client (`@agentclientprotocol/sdk/
// experimental/v2`) drives continual-acp started with CONTINUAL_ACP_PROTOCOL=2, while every frame in
// both directions is validated against the v2 draft schema the same package ships. The prompt must be
// acknowledged with its message id before any output, the work framed by `state_update` (running,
// requires_action while a cell waits for permission, idle with the stop reason), and the background
// list must name the refinement that follows the first turn until a snapshot reports it gone, and a
// prompt sent while a turn runs is the steering draft's steer (answered at once, joined to that turn).
//
//   node run-v2.mjs PLAN.json
//
// PLAN.json (written by tests/conformance/test_conformance_v2.py, which scripts the model):
//   {"agent": [cmd, ...args], "cwd": "/abs", "first": "...", "second": "...", "third": "...",
//    "steer": "...", "steered": "/abs/file written once the mid-turn prompt is acknowledged"}
// Prints one JSON report on stdout: {ok, steps, findings, sdkErrors, frames}.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as acp2 from "@agentclientprotocol/sdk/experimental/v2";
import { ConformanceRun, check, withTimeout } from "./conformance-kit.mjs";
import { FrameValidator } from "./frame-validator.mjs";

const require = createRequire(import.meta.url);
const run = new ConformanceRun();
run.validator = new FrameValidator(
  require.resolve("@agentclientprotocol/sdk/schema/v2/schema.json"),
  require.resolve("@agentclientprotocol/sdk/schema/v2/schema.unstable.json"),
);
const { plan } = run;
const step = run.step.bind(run);
const permissions = [];

/** Updates until the next `stop` (an idle snapshot), or until `done(update)` when given. */
async function readUntil(session, seen, done = (m) => m.kind === "stop") {
  for (;;) {
    const message = await withTimeout(session.nextUpdate(), 30_000, "the next session/update");
    seen.push(message);
    if (done(message)) return message;
  }
}
const states = (seen) => seen.filter((m) => m.update.sessionUpdate === "state_update").map((m) => m.update);

let ok = true;
const { child, stream, exited } = run.tappedAgent();
try {
  const app = acp2
    .client({ name: "continual-acp-conformance-v2", version: "0" })
    .onRequest(acp2.CLIENT_METHODS.session_request_permission, ({ params }) => {
      permissions.push(params);
      const reject = params.options.find((o) => o.kind === "reject_once");
      check(reject, `no reject_once option: ${JSON.stringify(params.options)}`);
      return { outcome: { outcome: "selected", optionId: reject.optionId } };
    });
  await app.connectWith(stream, async (ctx) => {
    await step("initialize answers protocolVersion 2", async () => {
      const init = await withTimeout(
        ctx.request("initialize", { protocolVersion: 2, info: { name: "conformance", version: "0" }, capabilities: {} }),
        30_000,
        "initialize",
      );
      check(init.protocolVersion === 2, `protocolVersion ${init.protocolVersion}`);
      return { info: init.info };
    });
    await ctx.buildSession(plan.cwd).withSession(async (session) => {
      const first = [];
      await step("the prompt is acknowledged with its message id before any output, then idle end_turn", async () => {
        const ack = await withTimeout(session.prompt(plan.first), 30_000, "session/prompt");
        check(typeof ack.messageId === "string" && ack.messageId, `ack ${JSON.stringify(ack)}`);
        const stop = await readUntil(session, first);
        check(stop.stopReason === "end_turn", `stopReason ${stop.stopReason}`);
        const echo = first.find((m) => m.update.sessionUpdate === "user_message");
        check(echo && echo.update.messageId === ack.messageId, "no user_message echo under the acknowledged id");
        const answered = run.frames.findIndex((f) => f.direction === "agent->client" && f.msg?.result?.messageId === ack.messageId);
        const spoke = run.frames.findIndex((f) => f.msg?.params?.update?.sessionUpdate === "agent_message_chunk");
        check(answered >= 0 && spoke > answered, `answer at frame ${answered}, first output at ${spoke}`);
        check(states(first)[0].state === "running", `first state ${states(first)[0].state}`);
        return { states: states(first).map((s) => s.state) };
      });
      await step("the refinement after the turn is listed in the background until it settles", async () => {
        const listed = () => [...states(first)].some((s) => (s.background ?? []).some((b) => b.type === "_refinement"));
        if (!listed() || session.background?.length) {
          await readUntil(session, first, () => listed() && session.background !== undefined && session.background.length === 0);
        }
        check(session.background?.length === 0, `background ${JSON.stringify(session.background)}`);
        return { backgrounds: states(first).map((s) => (s.background ?? []).map((b) => b.type)) };
      });
      await step("a cell waiting for permission is requires_action, then running, then idle", async () => {
        await withTimeout(session.setConfigOption({ configId: "mode", type: "id", value: "ask" }), 30_000, "set mode");
        const second = [];
        await withTimeout(session.prompt(plan.second), 30_000, "session/prompt");
        const stop = await readUntil(session, second, (m) => m.kind === "stop" && m.stopReason);
        check(stop.stopReason === "end_turn", `stopReason ${stop.stopReason}`);
        // Idle snapshots still queued from the background settling come first; the prompt's own follow.
        const all = states(second).map((s) => s.state);
        const seq = all.slice(all.indexOf("running"));
        check(all.slice(0, all.indexOf("running")).every((s) => s === "idle"), `states ${all}`);
        check(JSON.stringify(seq) === JSON.stringify(["running", "requires_action", "running", "idle"]), `states ${all}`);
        check(permissions.length === 1 && permissions[0].subject?.type === "tool_call", "the permission request has no tool_call subject");
        return { states: seq };
      });
      await step("a prompt sent mid-turn steers it: acknowledged at once under its own id, echoed in order, one end_turn", async () => {
        await withTimeout(session.setConfigOption({ configId: "mode", type: "id", value: "auto" }), 30_000, "set mode");
        const third = [];
        const ack = await withTimeout(session.prompt(plan.third), 30_000, "session/prompt");
        // The model's answer has begun (and is held by the scripted model): the turn is running.
        await readUntil(session, third, (m) => m.update.sessionUpdate === "agent_message_chunk");
        const steer = await withTimeout(session.prompt(plan.steer), 30_000, "the mid-turn session/prompt");
        check(typeof steer.messageId === "string" && steer.messageId !== ack.messageId, `steer ack ${JSON.stringify(steer)}`);
        writeFileSync(plan.steered, steer.messageId); // the test releases the held answer now
        const stop = await readUntil(session, third, (m) => m.kind === "stop" && m.stopReason);
        check(stop.stopReason === "end_turn", `stopReason ${stop.stopReason}`);
        // The prompt is echoed whole (`user_message`); the steer where it entered the turn, as the
        // chunk of its message that the turn shows (`user_message_chunk`, under the acknowledged id).
        const echoed = third.filter((m) => m.update.sessionUpdate?.startsWith("user_message")).map((m) => m.update.messageId);
        check(JSON.stringify(echoed) === JSON.stringify([ack.messageId, steer.messageId]), `echoed ${JSON.stringify(echoed)} of ${JSON.stringify(third.map((m) => [m.kind, m.update.sessionUpdate, m.update.messageId]))}`);
        const stops = third.filter((m) => m.kind === "stop" && m.stopReason);
        check(stops.length === 1, `stops ${JSON.stringify(stops.map((m) => m.stopReason))}`);
        return { echoed };
      });
    });
  });
} catch (e) {
  ok = false;
  run.failed(e);
}
await run.closeAgent(child, exited, ok);
