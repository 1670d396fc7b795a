// The client against a live `convmem serve` this test starts (a temp SQLite store and key registry):
// every operation of the OpenAPI document is called, typed errors come back per problem type, and a
// write whose answer is lost is sent again and stored once.
//
// The service runs as `$CONVMEM_PYTHON -m convmem serve` (default: python3 on the PATH, with convmem installed).

import assert from "node:assert/strict";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { Api, Client, ConvmemError, ERRORS, OPERATIONS, PROBLEMS, ServiceError, UnreachableError } from "../src/index.js";

const PYTHON = process.env.CONVMEM_PYTHON ?? "python3";
const ADMIN = `admin-${Math.random().toString(36).slice(2)}`;
const called = new Set<string>();
const onCall = (operation: string) => called.add(operation);

let server: ChildProcess;
let base = "";
let key = "";
let tmp = "";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "convmem-ts-"));
  const keys = join(tmp, "keys.db");
  const made = execFileSync(PYTHON, ["-m", "convmem", "keys", "create", "--tenant", "acme", "--keys", keys], { encoding: "utf8" });
  key = made.match(/cmk_\S+/)?.[0] ?? "";
  assert.ok(key, `no key in: ${made}`);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const args = ["-m", "convmem", "serve", "--store", join(tmp, "data.db"), "--keys", keys, "--port", String(port)];
  server = spawn(PYTHON, [...args, "--no-access-log", "--log-level", "warning", "--no-ui"], {
    env: { ...process.env, CONVMEM_ADMIN_KEY: ADMIN },
    stdio: ["ignore", "inherit", "inherit"],
  });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) break;
    } catch {
      // not up yet
    }
    assert.ok(i < 300 && server.exitCode === null, "convmem serve did not come up");
    await new Promise((r) => setTimeout(r, 100));
  }
});

after(() => {
  server?.kill();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const options = () => ({ apiKey: key, userId: "alice", onCall, retry: { base: 10, maxDelay: 50 } });

describe("the client", () => {
  test("has a method for every operation of the OpenAPI document", () => {
    const methods = new Set(Object.getOwnPropertyNames(Api.prototype));
    assert.deepEqual(Object.keys(OPERATIONS).filter((op) => !methods.has(op)), []);
  });

  test("a session: messages, context, responses, usage, turns, export, import, fork, clear, delete", async () => {
    const client = await Client.create(base, { ...options(), model: "gpt-4o", max_tokens: 4_000, max_output_tokens: 500 });
    await client.add({ role: "system", content: "Be brief." });
    await client.addMany([
      { role: "user", content: "Weather in Lisbon?", id: "u1" },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "forecast", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: "sunny" },
    ]);
    await client.addResponse({
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1,
      model: "gpt-4o",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "Sunny in Lisbon." } }],
      usage: { prompt_tokens: 40, completion_tokens: 5, total_tokens: 45 },
    });
    await client.recordUsage({ prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 }, "gpt-4o");
    const context = await client.context("And tomorrow?");
    assert.equal(context.messages[0]?.role, "system");
    assert.equal(context.messages.at(-1)?.content, "And tomorrow?");
    assert.ok(context.account.budget === 4_000);
    const stored = await client.messages();
    assert.deepEqual(stored.map((m) => m.message.role), ["system", "user", "assistant", "tool", "assistant"]);
    const again = await client.add({ role: "user", content: "Weather in Lisbon?", id: "u1" }); // its id is its key
    assert.equal(again.id, "u1");
    assert.equal((await client.messages()).length, 5);
    assert.ok((await client.stats()).id === client.sessionId);
    const turn = await client.turn(stored[1]!.seq);
    assert.ok(turn.context.messages.length >= 1);
    assert.deepEqual(await client.summaries(), []);
    await client.api.updateSession(client.sessionId, { title: "Lisbon trip" }, { user_id: "alice" });
    assert.deepEqual((await client.searchSessions("lisbon")).map((s) => s.id), [client.sessionId]);
    assert.ok((await client.listSessions()).some((s) => s.id === client.sessionId));
    const fork = await client.fork(stored[1]!.seq);
    assert.equal((await fork.messages()).length, 2);
    const copy = await client.importSession(await client.export(), "copy-1");
    assert.equal((await copy.messages()).length, 5);
    await client.add({ role: "assistant", content: null, tool_calls: [{ id: "c2", type: "function", function: { name: "forecast", arguments: "{}" } }] });
    assert.deepEqual((await client.repair()).map((m) => m.role), ["tool"]);
    await client.add({ role: "assistant", content: null, tool_calls: [{ id: "c3", type: "function", function: { name: "forecast", arguments: "{}" } }] });
    assert.equal((await client.rollbackIncomplete()).length, 1);
    await client.clear();
    assert.ok((await client.messages("active")).length === 0);
    for (const session of [client, fork, copy]) await session.delete();
    await assert.rejects(client.stats(), ERRORS.SessionNotFoundError);
  });

  test("facts, blocks and recall", async () => {
    const client = await Client.create(base, { ...options(), model: "gpt-4o", max_tokens: 4_000 });
    const fact = await client.facts.add("Alice lives in Lisbon", { subject: "alice.home" });
    const moved = await client.facts.update(fact.id, "Alice lives in Porto");
    assert.deepEqual((await client.facts.facts()).map((f) => f.text), ["Alice lives in Porto"]);
    await client.facts.invalidate(moved.id, "moved away");
    assert.equal((await client.facts.history()).length, 2);
    const block = await client.blocks.put("persona", "Likes trains", 0);
    await client.blocks.edit("persona", "append", block.version, { text: " and boats" });
    assert.equal((await client.blocks.get("persona")).value, "Likes trains\n and boats");
    assert.deepEqual((await client.blocks.listBlocks()).map((b) => b.name), ["persona"]);
    assert.ok(Array.isArray(await client.recall("trains")));
    const modes = await client.api.recallModes({ user_id: client.userId });
    assert.ok(modes.modes.includes(modes.default));
    await client.delete();
  });

  test("forget erases a user's session, twice is a no-op, and the erasure is audited", async () => {
    const client = await Client.create(base, { ...options(), model: "gpt-4o", max_tokens: 4_000 });
    await client.add({ role: "user", content: "my card number is 4111" });
    const receipt = await client.api.forget({ session_id: client.sessionId }, { user_id: client.userId });
    assert.deepEqual(receipt.sessions.length, 1);
    assert.ok(Object.values(receipt.removed).some((n) => n > 0));
    const again = await client.api.forget({ session_id: client.sessionId }, { user_id: client.userId });
    assert.ok(Object.values(again.removed).every((n) => n === 0));
    const trail = await client.api.listErasures({ user_id: client.userId });
    assert.ok(trail.length >= 1 && !JSON.stringify(trail).includes("4111"));
    await assert.rejects(client.stats(), ERRORS.SessionNotFoundError);
  });

  test("admin: tenants and keys", async () => {
    const admin = new Api(base, { apiKey: ADMIN, onCall });
    await admin.createTenant({ name: "beta" });
    assert.ok((await admin.listTenants()).includes("beta"));
    const made = await admin.createKey("beta", { label: "ci" });
    assert.deepEqual((await admin.listKeys("beta")).map((k) => k.key_id), [made.key_id]);
    assert.ok((await admin.revokeKey(made.key_id)).revoked_at);
  });

  test("every problem type is its own error class, with the problem's members", async () => {
    assert.equal(new Set(Object.values(PROBLEMS).map((p) => p.name)).size, Object.keys(PROBLEMS).length);
    const client = await Client.create(base, { ...options(), model: "gpt-4o", max_tokens: 4_000 });
    const refused = await client.add({ role: "tool", content: "42", id: "t1" }).catch((e: unknown) => e);
    assert.ok(refused instanceof ERRORS.InvalidMessageError && refused instanceof ConvmemError);
    assert.equal(refused.status, 422);
    assert.equal(refused.problem.field, "tool_call_id");
    assert.deepEqual(refused.messageIds, ["t1"]);
    assert.equal((await client.messages()).length, 0); // nothing stored
    await assert.rejects(Client.open("no-such-session", base, options()), ERRORS.SessionNotFoundError);
    const wrong = await new Api(base, { apiKey: "cmk_wrong_key" }).listSessions({}).catch((e: unknown) => e);
    assert.ok(wrong instanceof ServiceError && wrong.status === 401);
    assert.ok(!String(wrong.message).includes("cmk_"), "the key never shows in an error");
    await client.delete();
  });

  test("a write whose answer is lost is sent again and stored once; a session is created once", async () => {
    let drops = 0;
    let armed = true; // the next POST lands, and its answer is lost
    const lossy: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (init?.method === "POST" && armed) {
        armed = false;
        drops++;
        throw new TypeError("socket hang up (the answer was lost)");
      }
      return response;
    };
    const client = await Client.create(base, { ...options(), fetch: lossy, model: "gpt-4o", max_tokens: 4_000 });
    assert.equal(drops, 1);
    armed = true;
    await client.addMany([{ role: "user", content: "no id of its own" }, { role: "assistant", content: "ok" }]);
    assert.equal(drops, 2);
    assert.deepEqual((await client.messages()).map((m) => m.message.content), ["no id of its own", "ok"]);
    assert.equal((await client.listSessions()).filter((s) => s.id === client.sessionId).length, 1);
    const down = new Api("http://127.0.0.1:9", { apiKey: key, retry: { attempts: 2, base: 1, maxDelay: 1 } });
    await assert.rejects(down.listSessions({}), UnreachableError);
    await client.delete();
  });

  test("the run called every operation of the document", () => {
    assert.deepEqual(Object.keys(OPERATIONS).filter((op) => !called.has(op)).sort(), []);
  });
});
