// The generated TypeScript client against a live gateway, which the Python test harness
// starts (tests/integration/test_generated_clients.py) and names in QUIRE_GATEWAY (and
// QUIRE_TOKEN). Run: npm test (compiles with tsc, then node --test).
import assert from "node:assert/strict";
import { test } from "node:test";

import { createQuireClient, QuireError, unwrap } from "../src/index.js";

const baseUrl = process.env.QUIRE_GATEWAY;
if (!baseUrl) throw new Error("QUIRE_GATEWAY must name a running gateway");
const token = process.env.QUIRE_TOKEN;
const quire = createQuireClient({ baseUrl, token });
const run = process.env.QUIRE_RUN ?? String(Date.now());

const b64 = (text: string) => Buffer.from(text).toString("base64");
const text = (data: string) => Buffer.from(data, "base64").toString();
const raw = (bytes: Uint8Array) => ({
  body: bytes as unknown as string,
  bodySerializer: (body: unknown) => body as BodyInit,
  headers: { "Content-Type": "application/octet-stream" },
});

async function newLedger(password?: string): Promise<number> {
  const created = await unwrap(
    quire.POST("/v1/ledgers", {
      body: { ensemble_size: 3, write_quorum: 2, ack_quorum: 2, password },
    }),
  );
  assert.equal(created.state, "OPEN");
  return created.ledger_id;
}

test("a ledger: raw and batch adds, a page, NDJSON, close", async () => {
  const id = await newLedger();
  const one = await unwrap(
    quire.POST("/v1/ledgers/{ledger_id}/entries", {
      params: { path: { ledger_id: id } },
      ...raw(new TextEncoder().encode("raw entry")),
    }),
  );
  assert.equal((one as { entry_id: number }).entry_id, 0);
  const batch = await unwrap(
    quire.POST("/v1/ledgers/{ledger_id}/entries", {
      params: { path: { ledger_id: id } },
      body: { entries: [b64("second"), b64("third")] },
    }),
  );
  assert.deepEqual(batch, { first_entry_id: 1, last_entry_id: 2, last_add_confirmed: 2 });

  const page = await unwrap(
    quire.GET("/v1/ledgers/{ledger_id}/entries", {
      params: { path: { ledger_id: id }, query: { from: 0, to: 2 } },
    }),
  );
  assert.deepEqual(
    page.entries.map((e) => [e.entry_id, text(e.data)]),
    [[0, "raw entry"], [1, "second"], [2, "third"]],
  );

  const ndjson = await unwrap(
    quire.GET("/v1/ledgers/{ledger_id}/entries", {
      params: { path: { ledger_id: id }, query: { from: 1, to: 2 } },
      headers: { Accept: "application/x-ndjson" },
      parseAs: "text",
    }),
  );
  const lines = (ndjson as unknown as string).trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.entry_id, text(l.data)]), [[1, "second"], [2, "third"]]);

  const closed = await unwrap(
    quire.POST("/v1/ledgers/{ledger_id}/close", { params: { path: { ledger_id: id } } }),
  );
  assert.equal(closed.state, "CLOSED");
  assert.equal(closed.last_entry_id, 2);
});

test("a password-protected ledger refuses a call without its password", async () => {
  const id = await newLedger("s3cret");
  const header = { "X-Ledger-Password": "s3cret" };
  await unwrap(
    quire.POST("/v1/ledgers/{ledger_id}/entries", {
      params: { path: { ledger_id: id }, header },
      body: { entries: [b64("guarded")] },
    }),
  );
  const read = await unwrap(
    quire.GET("/v1/ledgers/{ledger_id}/entries", {
      params: { path: { ledger_id: id }, header, query: { from: 0, to: 0 } },
    }),
  );
  assert.equal(text(read.entries[0].data), "guarded");
  await assert.rejects(
    unwrap(
      quire.GET("/v1/ledgers/{ledger_id}/entries", {
        params: { path: { ledger_id: id }, query: { from: 0, to: 0 } },
      }),
    ),
    (err: unknown) => err instanceof QuireError && err.status === 401 && err.code === "unauthorized",
  );
});

test("a log: writer, idempotent append, read, tail", async () => {
  const name = `ts-log-${run}`;
  const log = await unwrap(quire.PUT("/v1/logs/{name}", { params: { path: { name } } }));
  assert.equal(log.name, name);
  const writer = await unwrap(quire.POST("/v1/logs/{name}/writer", { params: { path: { name } } }));
  assert.equal(writer.epoch, 1);
  const append = () =>
    unwrap(
      quire.POST("/v1/logs/{name}/records", {
        params: { path: { name }, header: { "Idempotency-Key": "ts-batch-1" } },
        body: { entries: [b64("alpha"), b64("beta")] },
      }),
    );
  const first = await append();
  assert.deepEqual(await append(), first, "a retry with the same key answers the same positions");

  const read = await unwrap(
    quire.GET("/v1/logs/{name}/records", { params: { path: { name }, query: { limit: 10 } } }),
  );
  assert.deepEqual(read.records.map((r) => text(r.data)), ["alpha", "beta"]);
  assert.equal(read.caught_up, true);

  const tail = quire.GET("/v1/logs/{name}/records", {
    params: { path: { name }, query: { from: read.next, wait_ms: 20000 } },
  });
  await unwrap(
    quire.POST("/v1/logs/{name}/records", {
      params: { path: { name } },
      ...raw(new TextEncoder().encode("gamma")),
    }),
  );
  const tailed = await unwrap(tail);
  assert.deepEqual(tailed.records.map((r) => text(r.data)), ["gamma"]);
});

test("the admin cluster object", async () => {
  const cluster = await unwrap(quire.GET("/v1/admin/cluster"));
  assert.equal(typeof cluster.replication_enabled, "boolean");
  assert.ok(cluster.bookies.writable >= 3);
});

test("an error answer is a typed error with its code", async () => {
  const { data, error, response } = await quire.GET("/v1/ledgers/{ledger_id}", {
    params: { path: { ledger_id: 9007199254740991 } },
  });
  assert.equal(data, undefined);
  assert.equal(response.status, 404);
  assert.equal(error?.error, "ledger_not_found");
  await assert.rejects(
    unwrap(quire.GET("/v1/ledgers/{ledger_id}", { params: { path: { ledger_id: 9007199254740991 } } })),
    { name: "QuireError", code: "ledger_not_found", status: 404 },
  );
});
