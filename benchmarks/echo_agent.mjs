// The baseline agent for start-up figures: the official ACP TypeScript SDK's smallest agent (answers
// `initialize`, opens a session with a fresh id, echoes each prompt's text back and ends the turn).
//
//   node benchmarks/echo_agent.mjs
//
// The SDK is resolved from tests/conformance/node_modules (`npm ci` there installs it), the only
// place the repository installs it.
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const fromConformance = createRequire(new URL("../tests/conformance/package.json", import.meta.url));
const acp = await import(pathToFileURL(fromConformance.resolve("@agentclientprotocol/sdk")).href);

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
acp
  .agent({ name: "echo" })
  .onRequest(acp.methods.agent.initialize, ({ params }) => ({
    protocolVersion: params.protocolVersion,
    agentCapabilities: {},
    agentInfo: { name: "echo", version: "0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: randomUUID() }))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    for (const block of params.prompt) {
      await client.notify(acp.methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: block },
      });
    }
    return { stopReason: "end_turn" };
  })
  .connect(stream);
