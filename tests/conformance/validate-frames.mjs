// Validates a recorded conversation: reads a JSON array of [direction, frame] pairs on stdin
// ("client->agent" | "agent->client") and prints {"findings": [...], "unstableFrames": [...]} on stdout.
// Used by the pytest suite to show that the validator rejects frames that break the schema.
import { FrameValidator } from "./frame-validator.mjs";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const validator = new FrameValidator();
for (const [direction, frame] of JSON.parse(input)) validator.checkMessage(direction, frame);
process.stdout.write(JSON.stringify({ findings: validator.findings, unstableFrames: validator.unstableFrames }) + "\n");
